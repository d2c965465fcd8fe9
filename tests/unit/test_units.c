/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <stdint.h>

#include "kiwi/units.h"

Test(units, sizes)
{
	static const struct { const char *in; int64_t out; } ok[] = {
		{ "0", 0 }, { "4096", 4096 }, { "512k", 512 << 10 }, { "1.5M", 3 << 19 },
		{ "2G", 2LL << 30 }, { "2gib", 2LL << 30 }, { "1T", 1LL << 40 }, { "10b", 10 },
		{ "8388607T", 8388607LL << 40 }, { "max", INT64_MAX },
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		int64_t v = -1;
		kiwi_err e = { 0 };
		cr_assert_eq(kiwi_parse_size(ok[i].in, "--x", &v, &e), 0, "`%s`: %s", ok[i].in, e.msg);
		cr_assert_eq(v, ok[i].out, "`%s` gave %lld", ok[i].in, (long long)v);
	}
	static const char *const bad[] = {
		"", "-1", "k", "1x", "0x10", "1e3", "1.", ".5", "1.5", "1.5b", "8388608T", " 1", "1 k", "nan",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int64_t v;
		kiwi_err e = { 0 };
		cr_assert_eq(kiwi_parse_size(bad[i], "--x", &v, &e), -1, "`%s` was accepted", bad[i]);
		cr_assert(strstr(e.msg, "--x") != NULL, "the error names the flag: %s", e.msg);
	}
}

Test(units, durations)
{
	static const struct { const char *in; uint64_t ns; } ok[] = {
		{ "30", 30000000000ULL }, { "30s", 30000000000ULL }, { "500ms", 500000000ULL },
		{ "1.5s", 1500000000ULL }, { "2m", 120000000000ULL }, { "1h", 3600000000000ULL },
		{ "250us", 250000ULL },
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		uint64_t v = 0;
		kiwi_err e = { 0 };
		cr_assert_eq(kiwi_parse_duration(ok[i].in, "--t", &v, &e), 0, "`%s`: %s", ok[i].in, e.msg);
		cr_assert_eq(v, ok[i].ns, "`%s` gave %llu", ok[i].in, (unsigned long long)v);
	}
	static const char *const bad[] = { "", "s", "-1s", "5x", "1e3s", "0x5", "1.s", "5 s" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t v;
		kiwi_err e = { 0 };
		cr_assert_eq(kiwi_parse_duration(bad[i], "--t", &v, &e), -1, "`%s` was accepted", bad[i]);
	}
}
