/* SPDX-License-Identifier: Apache-2.0 */
/* The --uidmap/--gidmap and --user parsers: the edges the kernel would
 * refuse later without naming the extent (a count of 0, the last id,
 * overlaps on either side, one extent too many), table-driven; and the
 * /etc/subuid lines kiwi's range is found in. */
#include <criterion/criterion.h>
#include <string.h>

#include "kiwi/userns.h"

Test(idmap, extents_well_formed_or_refused)
{
	const struct {
		const char *text;
		bool ok;
	} cases[] = {
		{ "0:100000:65536", true },
		{ "0:0:1", true },
		{ "4294967294:0:1", true },          /* the last id there is */
		{ "0:4294967294:1", true },
		{ "4294967295:0:1", false },         /* (u32)-1 is no id */
		{ "0:4294967295:1", false },
		{ "4294967294:0:2", false },
		{ "4294967000:0:1000", false },      /* runs past the end */
		{ "0:100000:0", false },             /* empty */
		{ "0:100000", false },
		{ "0:100000:1:", false },
		{ "0:100000:1:2", false },
		{ ":100000:1", false },
		{ "0::1", false },
		{ "-1:100000:1", false },
		{ "+1:100000:1", false },
		{ " 1:100000:1", false },
		{ "1:100000:1 ", false },
		{ "0x10:100000:1", false },
		{ "4294967296:0:1", false },         /* not a u32 */
		{ "99999999999999999999:0:1", false },
		{ "", false },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct kiwi_id_extent map[KIWI_USERNS_MAX_EXTENTS];
		size_t n = 0;
		kiwi_err err = { 0 };
		int r = kiwi_idmap_add(map, &n, cases[i].text, &err);
		cr_expect_eq(r == 0, cases[i].ok, "`%s`: %s", cases[i].text, err.msg);
		cr_expect_eq(n, cases[i].ok ? 1u : 0u, "`%s`", cases[i].text);
		if (!cases[i].ok)
			cr_expect(strstr(err.msg, cases[i].text) || strstr(err.msg, "INSIDE:OUTSIDE:COUNT"),
				  "`%s`: the message names neither the value nor the form: %s", cases[i].text, err.msg);
	}
}

Test(idmap, overlaps_on_either_side_refused)
{
	const struct {
		const char *second;
		bool ok;
	} cases[] = {
		{ "10:100010:5", true },     /* adjacent on both sides */
		{ "9:200000:1", false },     /* inside: its last id */
		{ "5:200000:100", false },   /* inside: contains it */
		{ "100:100009:1", false },   /* outside: its last id */
		{ "100:99990:11", false },   /* outside: reaches its first */
		{ "100:99990:10", true },    /* outside: just before it */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct kiwi_id_extent map[KIWI_USERNS_MAX_EXTENTS];
		size_t n = 0;
		kiwi_err err = { 0 };
		cr_assert_eq(kiwi_idmap_add(map, &n, "0:100000:10", &err), 0);
		cr_expect_eq(kiwi_idmap_add(map, &n, cases[i].second, &err) == 0, cases[i].ok, "`%s`: %s",
			     cases[i].second, err.msg);
		cr_expect_eq(n, cases[i].ok ? 2u : 1u);
	}
}

Test(idmap, at_most_five_extents)
{
	struct kiwi_id_extent map[KIWI_USERNS_MAX_EXTENTS];
	size_t n = 0;
	kiwi_err err = { 0 };
	const char *ok[] = { "0:100:1", "1:101:1", "2:102:1", "3:103:1", "4:104:1" };
	for (size_t i = 0; i < 5; i++)
		cr_assert_eq(kiwi_idmap_add(map, &n, ok[i], &err), 0, "%s", err.msg);
	cr_expect_eq(kiwi_idmap_add(map, &n, "5:105:1", &err), -1);
	cr_expect_eq(n, 5u);
	cr_expect(strstr(err.msg, "at most 5"), "%s", err.msg);
	cr_expect(kiwi_idmap_maps(map, n, 4));
	cr_expect(!kiwi_idmap_maps(map, n, 5));
}

Test(idmap, own_ids_alone)
{
	struct kiwi_idmap m = { .uid = { { 1000, 1000, 1 } }, .n_uid = 1, .gid = { { 0, 1000, 1 } }, .n_gid = 1 };
	cr_expect(kiwi_idmap_is_own(&m, 1000, 1000));
	cr_expect(!kiwi_idmap_is_own(&m, 1000, 1001));
	m.uid[0].count = 2;
	cr_expect(!kiwi_idmap_is_own(&m, 1000, 1000));
	m.uid[0].count = 1;
	m.uid[1] = (struct kiwi_id_extent){ 1, 100000, 10 };
	m.n_uid = 2;
	cr_expect(!kiwi_idmap_is_own(&m, 1000, 1000));
}

Test(idmap, user_uid_and_gid)
{
	const struct {
		const char *text;
		int r;
		uint32_t uid, gid;
	} cases[] = {
		{ "1000", 0, 1000, 0 },
		{ "1000:1000", 0, 1000, 1000 },
		{ "0:5", 0, 0, 5 },
		{ "4294967294:4294967294", 0, 4294967294u, 4294967294u },
		{ "4294967295", -1, 7, 7 },          /* (uid_t)-1: "unchanged" */
		{ "1:4294967295", -1, 7, 7 },
		{ "1000:", -1, 7, 7 },
		{ ":1000", -1, 7, 7 },
		{ "root", -1, 7, 7 },
		{ "1:2:3", -1, 7, 7 },
		{ "", -1, 7, 7 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint32_t uid = 7, gid = 7;
		kiwi_err err = { 0 };
		cr_expect_eq(kiwi_userns_parse_user(cases[i].text, &uid, &gid, &err), cases[i].r, "`%s`", cases[i].text);
		cr_expect_eq(uid, cases[i].uid, "`%s`", cases[i].text);
		cr_expect_eq(gid, cases[i].gid, "`%s`", cases[i].text);
	}
}

Test(subid, kiwi_range_found_past_others_and_bad_lines)
{
	static const char text[] = "alice:100000:65536\n"
				   "kiwi:5:10\n"               /* too few ids */
				   "kiwi:0:65536\n"            /* start 0 is refused */
				   "kiwi:x:65536\n"
				   "kiwi:4294967295:65536\n"   /* past 2^32-1 */
				   "kiwiz:200000:65536\n"
				   "kiwi:1073741824:65536";    /* no final newline */
	uint32_t start = 0;
	cr_assert(kiwi_subid_find(text, strlen(text), "kiwi", 65536, &start));
	cr_assert_eq(start, 1073741824u);
	cr_assert(!kiwi_subid_find(text, strlen(text), "bob", 1, &start));
	cr_assert(!kiwi_subid_find("", 0, "kiwi", 1, &start));
}

Test(subid, lines_walked_in_order)
{
	static const char text[] = "a:1:2\nnot a line\n\nb:3:4\n";
	struct kiwi_subid e;
	size_t at = 0;
	cr_assert(kiwi_subid_next(text, strlen(text), &at, &e));
	cr_assert(e.owner_len == 1 && e.owner[0] == 'a' && e.start == 1 && e.count == 2);
	cr_assert(kiwi_subid_next(text, strlen(text), &at, &e));
	cr_assert(e.owner_len == 1 && e.owner[0] == 'b' && e.start == 3 && e.count == 4);
	cr_assert(!kiwi_subid_next(text, strlen(text), &at, &e));
}
