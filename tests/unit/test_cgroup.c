/* SPDX-License-Identifier: Apache-2.0 */
/* The pure parts of the cgroup module: parsers and formatting, and the
 * shared size parser (units.h) as the cgroup limits use it. Everything that
 * touches a real cgroup runs in the VM lane (tests/bounds/). */
#include <criterion/criterion.h>
#include <string.h>

#include "kiwi/cgroup.h"
#include "kiwi/units.h"

struct size_case {
	const char *in;
	int64_t want;   /* -2: must fail */
};

static const struct size_case sizes[] = {
	{ "0", 0 },
	{ "4096", 4096 },
	{ "4096B", 4096 },
	{ "256k", 256 * 1024 },
	{ "256K", 256 * 1024 },
	{ "256KiB", 256 * 1024 },
	{ "512M", 512LL << 20 },
	{ "512MB", 512LL << 20 },
	{ "1.5G", 3LL << 29 },
	{ "1.5g", 3LL << 29 },
	{ "0.5k", 512 },
	{ "1.1k", 1126 },          /* 1126.4 bytes: rounded down */
	{ "2T", 2LL << 40 },
	{ "max", KIWI_CGROUP_MAX },   /* the same value cgroup.c writes as "max" */
	{ "", -2 },
	{ "M", -2 },
	{ "-1", -2 },
	{ "-1M", -2 },
	{ " 5", -2 },
	{ "5 ", -2 },
	{ ".5G", -2 },
	{ "12X", -2 },
	{ "12MM", -2 },
	{ "12Mi", -2 },
	{ "8388608T", -2 },        /* 2^63: does not fit */
	{ "99999999999999999999", -2 },
	{ "MAX", -2 },
	{ "maxx", -2 },
};

Test(cgroup, parse_size_table)
{
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		int64_t v = -7;
		kiwi_err e = { 0 };
		int rc = kiwi_parse_size(sizes[i].in, "--memory", &v, &e);
		if (sizes[i].want == -2) {
			cr_expect_eq(rc, -1, "`%s` should fail, gave %lld", sizes[i].in, (long long)v);
			cr_expect_not_null(strstr(e.msg, "--memory"), "message names the flag: %s", e.msg);
			cr_expect_not_null(strstr(e.msg, sizes[i].in), "message names the value: %s", e.msg);
		} else {
			cr_expect_eq(rc, 0, "`%s`: %s", sizes[i].in, e.msg);
			cr_expect_eq(v, sizes[i].want, "`%s` gave %lld, want %lld", sizes[i].in,
				     (long long)v, (long long)sizes[i].want);
		}
	}
}

Test(cgroup, parse_size_null)
{
	int64_t v;
	kiwi_err e = { 0 };
	cr_assert_eq(kiwi_parse_size(NULL, "--memory", &v, &e), -1);
}

struct cpus_case {
	const char *in;
	int64_t quota;   /* -2: must fail */
};

static const struct cpus_case cpus[] = {
	{ "1.5", 150000 },
	{ "0.5", 50000 },
	{ "1", 100000 },
	{ "2", 200000 },
	{ "0.01", 1000 },
	{ "0.12345", 12345 },
	{ "64", 6400000 },
	{ "max", KIWI_CGROUP_MAX },
	{ "0", -2 },
	{ "0.0", -2 },
	{ "0.009", -2 },           /* below the kernel's 1 ms quota */
	{ "0.123456", -2 },        /* finer than 1 us per period */
	{ "", -2 },
	{ "-1", -2 },
	{ ".5", -2 },
	{ "1,5", -2 },
	{ "1.5x", -2 },
	{ "abc", -2 },
	{ "65537", -2 },
	{ "99999999999", -2 },
};

Test(cgroup, parse_cpus_table)
{
	for (size_t i = 0; i < sizeof(cpus) / sizeof(cpus[0]); i++) {
		int64_t q = -7, p = -7;
		kiwi_err e = { 0 };
		int rc = kiwi_parse_cpus(cpus[i].in, &q, &p, &e);
		if (cpus[i].quota == -2) {
			cr_expect_eq(rc, -1, "`%s` should fail, gave %lld", cpus[i].in, (long long)q);
			cr_expect_not_null(strstr(e.msg, cpus[i].in), "message names the value: %s", e.msg);
		} else {
			cr_expect_eq(rc, 0, "`%s`: %s", cpus[i].in, e.msg);
			cr_expect_eq(q, cpus[i].quota, "`%s` gave %lld", cpus[i].in, (long long)q);
			cr_expect_eq(p, 100000, "`%s` period %lld", cpus[i].in, (long long)p);
		}
	}
}

Test(cgroup, parse_pids)
{
	int64_t v;
	kiwi_err e = { 0 };
	cr_expect_eq(kiwi_parse_pids("256", &v, &e), 0);
	cr_expect_eq(v, 256);
	cr_expect_eq(kiwi_parse_pids("max", &v, &e), 0);
	cr_expect_eq(v, KIWI_CGROUP_MAX);
	cr_expect_eq(kiwi_parse_pids("4194304", &v, &e), 0);
	const char *bad[] = { "0", "-3", "", "1k", "4194305", "12 ", "999999999" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_expect_eq(kiwi_parse_pids(bad[i], &v, &e), -1, "`%s`", bad[i]);
		cr_expect_not_null(strstr(e.msg, bad[i]), "%s", e.msg);
	}
}

Test(cgroup, io_max_lines)
{
	kiwi_err e = { 0 };
	cr_expect_eq(kiwi_cgroup_check_io_max("8:0 rbps=1048576 wbps=max", &e), 0, "%s", e.msg);
	cr_expect_eq(kiwi_cgroup_check_io_max("8:0 riops=100\n259:0 wiops=5 wbps=10\n", &e), 0, "%s", e.msg);
	const char *bad[] = {
		"", "\n", "8:0", "8:0 ", "8 rbps=1", "8:0 rbps=", "8:0 rbps=1x", "8:0 speed=1",
		"8:0  rbps=1", "a:0 rbps=1", "8:0 rbps=1\nbad", "8:0 rbps=-1",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(kiwi_cgroup_check_io_max(bad[i], &e), -1, "`%s` accepted", bad[i]);
	cr_expect_eq(kiwi_cgroup_check_io_max("8:0 rbps=1\nnope", &e), -1);
	cr_expect_not_null(strstr(e.msg, "`nope`"), "the bad line is named: %s", e.msg);
}

Test(cgroup, limits_any_and_needed)
{
	struct kiwi_cgroup_limits l = KIWI_CGROUP_LIMITS_INIT;
	cr_expect_not(kiwi_cgroup_limits_any(&l));
	cr_expect_not(kiwi_cgroup_limits_any(NULL));
	cr_expect_eq(kiwi_cgroup_needed(&l), 0u);

	l.memory_max = 1 << 20;
	cr_expect(kiwi_cgroup_limits_any(&l));
	cr_expect_eq(kiwi_cgroup_needed(&l), (unsigned)KIWI_CG_MEMORY);

	l = (struct kiwi_cgroup_limits)KIWI_CGROUP_LIMITS_INIT;
	l.memory_swap_max = 0;
	cr_expect_eq(kiwi_cgroup_needed(&l), (unsigned)KIWI_CG_MEMORY);

	l = (struct kiwi_cgroup_limits)KIWI_CGROUP_LIMITS_INIT;
	l.pids_max = KIWI_CGROUP_MAX;   /* "max" still wants accounting */
	cr_expect_eq(kiwi_cgroup_needed(&l), (unsigned)KIWI_CG_PIDS);

	l = (struct kiwi_cgroup_limits)KIWI_CGROUP_LIMITS_INIT;
	l.cpu_quota_us = 50000;
	l.cpu_period_us = 100000;
	l.io_weight = 100;
	cr_expect_eq(kiwi_cgroup_needed(&l), (unsigned)(KIWI_CG_CPU | KIWI_CG_IO));

	l = (struct kiwi_cgroup_limits)KIWI_CGROUP_LIMITS_INIT;
	l.cpu_weight = 39;   /* a weight alone needs the cpu controller */
	cr_expect_eq(kiwi_cgroup_needed(&l), (unsigned)KIWI_CG_CPU);

	l = (struct kiwi_cgroup_limits)KIWI_CGROUP_LIMITS_INIT;
	l.io_max = "8:0 rbps=1";
	cr_expect_eq(kiwi_cgroup_needed(&l), (unsigned)KIWI_CG_IO);
	cr_expect_str_eq(kiwi_cgroup_controller_name(KIWI_CG_MEMORY), "memory");
	cr_expect_str_eq(kiwi_cgroup_controller_name(KIWI_CG_IO), "io");
}

Test(cgroup, keyed_files)
{
	const char *events = "low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 1\n";
	uint64_t v = 99;
	cr_expect(kiwi_cgroup_keyed(events, "oom_kill", &v));
	cr_expect_eq(v, 2u);
	cr_expect(kiwi_cgroup_keyed(events, "oom", &v), "a key is not a prefix of another");
	cr_expect_eq(v, 3u);
	cr_expect(kiwi_cgroup_keyed(events, "max", &v));
	cr_expect_eq(v, 12u);
	cr_expect(kiwi_cgroup_keyed(events, "low", &v));
	cr_expect_eq(v, 0u);
	cr_expect_not(kiwi_cgroup_keyed(events, "oom_group", &v));
	cr_expect_not(kiwi_cgroup_keyed("populated 1", "populate", &v));
	cr_expect(kiwi_cgroup_keyed("populated 1", "populated", &v));
	cr_expect_eq(v, 1u);
	cr_expect_not(kiwi_cgroup_keyed("usage_usec x\n", "usage_usec", &v));
	cr_expect_not(kiwi_cgroup_keyed("", "usage_usec", &v));
	cr_expect(kiwi_cgroup_keyed("usage_usec 18446744073709551615", "usage_usec", &v));
	cr_expect_eq(v, UINT64_MAX);
}

Test(cgroup, format_limit)
{
	char buf[32];
	kiwi_cgroup_format_limit(KIWI_CGROUP_MAX, buf, sizeof(buf));
	cr_expect_str_eq(buf, "max");
	kiwi_cgroup_format_limit(536870912, buf, sizeof(buf));
	cr_expect_str_eq(buf, "536870912");
	kiwi_cgroup_format_limit(0, buf, sizeof(buf));
	cr_expect_str_eq(buf, "0");
}

Test(cgroup, destroy_null_is_fine)
{
	cr_expect_eq(kiwi_cgroup_destroy(NULL, NULL), 0);
	cr_expect_eq(kiwi_cgroup_fd(NULL), -1);
	cr_expect_null(kiwi_cgroup_path(NULL));
}

/* ---- the one reader of mountinfo and of /proc/PID/cgroup ---- */

Test(cgroup, mountinfo_lines)
{
	char v2[64] = "";
	bool v1 = false;
	/* a cgroup2 mount point with a space, escaped as the kernel does */
	cr_assert(kiwi_cgroup_mountinfo_line("35 25 0:30 / /sys/fs/cgroup/uni\\040fied rw,nosuid shared:9 - "
					     "cgroup2 cgroup2 rw,nsdelegate\n", v2, sizeof(v2), &v1));
	cr_assert_str_eq(v2, "/sys/fs/cgroup/uni fied");
	cr_assert_not(v1);
	cr_assert_not(kiwi_cgroup_mountinfo_line("36 25 0:31 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n",
						 v2, sizeof(v2), &v1));
	cr_assert(v1, "a cgroup v1 hierarchy is noticed");
	/* the fstype is the field after " - ", not any word in the line */
	v1 = false;
	cr_assert_not(kiwi_cgroup_mountinfo_line("37 25 0:32 / /mnt/cgroup2 rw - tmpfs cgroup2 rw\n", v2,
						 sizeof(v2), &v1));
	cr_assert_not(v1);
	/* a backslash without three octal digits is kept, and nothing is read past the end */
	cr_assert(kiwi_cgroup_mountinfo_line("1 2 0:3 / /a\\1 rw - cgroup2 none rw", v2, sizeof(v2), NULL));
	cr_assert_str_eq(v2, "/a\\1");
	/* a mount point longer than the buffer is cut, NUL-terminated */
	cr_assert(kiwi_cgroup_mountinfo_line("1 2 0:3 / /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa "
					     "rw - cgroup2 none rw", v2, 8, NULL));
	cr_assert_str_eq(v2, "/aaaaaa");
	cr_assert_not(kiwi_cgroup_mountinfo_line("garbage", v2, sizeof(v2), &v1));
}

Test(cgroup, proc_pid_cgroup_text)
{
	char out[64];
	cr_assert(kiwi_cgroup_v2_line("12:memory:/user.slice\n1:name=systemd:/x\n0::/user.slice/a b.scope\n", out,
				      sizeof(out)));
	cr_assert_str_eq(out, "/user.slice/a b.scope");
	cr_assert(kiwi_cgroup_v2_line("0::/", out, sizeof(out)));
	cr_assert_str_eq(out, "/");
	/* "0::" only at the start of a line */
	cr_assert_not(kiwi_cgroup_v2_line("10::/x\n", out, sizeof(out)));
	cr_assert_not(kiwi_cgroup_v2_line("4:cpu,cpuacct:/\n", out, sizeof(out)));
	cr_assert_not(kiwi_cgroup_v2_line("", out, sizeof(out)));
	cr_assert_not(kiwi_cgroup_v2_line("0:", out, sizeof(out)));
}
