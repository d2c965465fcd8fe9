/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-helper's pure parts: which ids a caller may map, its subid lines,
 * its rule in the admin config, and the request parser. The edges are the
 * point: one id past a range, host id 0, the first rule that matches. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "kiwi/helper.h"

static const gid_t groups[] = { 27, 1500 };
static const struct kiwi_helper_caller svc = {
	.uid = 1000, .gid = 1000, .name = "svc", .groups = groups, .n_groups = 2,
};

Test(helper_ids, extents_inside_one_allotted_range_only)
{
	const struct kiwi_id_range r[] = { { 100000, 65536 }, { 300000, 10 } };
	const struct {
		struct kiwi_id_extent e;
		bool ok;
	} cases[] = {
		{ { 0, 1000, 1 }, true },            /* its own id alone */
		{ { 0, 1000, 2 }, false },           /* its own id and the next */
		{ { 0, 0, 1 }, false },              /* host root */
		{ { 1, 100000, 65536 }, true },      /* the whole range */
		{ { 1, 100000, 65537 }, false },     /* one past its end */
		{ { 1, 99999, 2 }, false },          /* one before its start */
		{ { 1, 165535, 1 }, true },          /* its last id */
		{ { 1, 300000, 10 }, true },
		{ { 1, 165530, 134480 }, false },    /* spanning two ranges and the gap */
		{ { 1, 100000, 0 }, false },         /* empty */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		cr_expect_eq(kiwi_id_extent_allowed(&cases[i].e, 1000, r, 2), cases[i].ok, "case %zu", i);
}

Test(helper_ids, subid_lines_of_the_caller_only)
{
	const char text[] = "svc:100000:65536\n"
			    "other:200000:65536\n"
			    "1000:300000:10\n"
			    "svc:0:10\n"                  /* would hold host root */
			    "svc:4294967290:10\n"         /* overflows */
			    "svc:abc:10\n"
			    "svc:5\n"
			    "svcx:400000:1\n"
			    "svc:500000:7";               /* no final newline */
	struct kiwi_id_range r[8];
	size_t n = 0;
	kiwi_subid_parse(text, strlen(text), &svc, r, 8, &n);
	cr_assert_eq(n, 3);
	cr_expect(r[0].start == 100000 && r[0].count == 65536);
	cr_expect(r[1].start == 300000 && r[1].count == 10);
	cr_expect(r[2].start == 500000 && r[2].count == 7);
	n = 0;
	kiwi_subid_parse(text, strlen(text), &svc, r, 1, &n);
	cr_expect_eq(n, 1, "stops at max");
}

static int group_1500(const char *name, gid_t *gid)
{
	if (strcmp(name, "kiwi"))
		return -1;
	*gid = 1500;
	return 0;
}

static int parse_config(const char *text, struct kiwi_helper_rule *rule, kiwi_err *err)
{
	return kiwi_helper_config_parse(text, strlen(text), &svc, group_1500, rule, err);
}

Test(helper_config, first_matching_rule_wins)
{
	struct kiwi_helper_rule rule;
	kiwi_err err = { 0 };
	cr_assert_eq(parse_config("{\"rules\":[{\"user\":\"other\",\"operations\":[\"egress\"]},"
				  "{\"group\":\"kiwi\",\"operations\":[\"idmap\"],\"max_sandboxes\":2},"
				  "{\"user\":1000,\"operations\":[\"idmap\",\"egress\"]}]}",
				  &rule, &err), 1, "%s", err.msg);
	cr_expect_eq(rule.ops, KIWI_HELPER_OP_IDMAP);
	cr_expect_eq(rule.max_sandboxes, 2);
	cr_expect_eq(rule.max_veths, 2, "max_veths defaults to max_sandboxes");
	cr_assert_eq(parse_config("{\"rules\":[{\"user\":\"svc\",\"operations\":[\"egress\"],"
				  "\"egress\":[\"host_allowlist\"],\"uids\":[[100000,5]]}]}", &rule, &err), 1);
	cr_expect_eq(rule.ops, KIWI_HELPER_OP_EGRESS_PREPARE | KIWI_HELPER_OP_EGRESS_ATTACH);
	cr_expect_eq(rule.egress_kinds, 1u << KIWI_EGRESS_HOST_ALLOWLIST);
	cr_expect(rule.n_uids == 1 && rule.uids[0].start == 100000 && rule.uids[0].count == 5);
	cr_expect_eq(parse_config("{\"rules\":[{\"user\":\"other\"},{\"group\":99}]}", &rule, &err), 0);
}

Test(helper_config, mistakes_are_named)
{
	const struct {
		const char *text, *says;
	} cases[] = {
		{ "{\"rules\":[{\"user\":\"svc\",\"max_everything\":1}]}", "max_everything" },
		{ "{\"rules\":[{\"user\":\"svc\",\"group\":\"kiwi\"}]}", "exactly one" },
		{ "{\"rules\":[{\"operations\":[\"idmap\"]}]}", "exactly one" },
		{ "{\"rules\":[{\"user\":\"svc\",\"operations\":[\"mount\"]}]}", "operations" },
		{ "{\"rules\":[{\"user\":\"svc\",\"uids\":[[0,65536]]}]}", "uids" },
		{ "{\"rules\":[{\"user\":\"svc\",\"uids\":[[4294967000,1000]]}]}", "uids" },
		{ "{\"rules\":[{\"user\":\"svc\",\"egress\":[\"everything\"]}]}", "egress" },
		{ "{\"rules\":[{\"user\":\"svc\",\"max_sandboxes\":-1}]}", "max_sandboxes" },
		{ "{\"rule\":[]}", "rule" },
		{ "{\"rules\":{}}", "rules" },
		/* a later rule is checked even when an earlier one matched */
		{ "{\"rules\":[{\"user\":\"svc\"},{\"user\":\"x\",\"typo\":1}]}", "typo" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct kiwi_helper_rule rule;
		kiwi_err err = { 0 };
		cr_expect_eq(parse_config(cases[i].text, &rule, &err), -1, "case %zu", i);
		cr_expect(strstr(err.msg, cases[i].says), "case %zu: `%s` should name %s", i, err.msg, cases[i].says);
	}
}

static int parse_request(const char *text, struct kiwi_helper_request *req, kiwi_err *err)
{
	return kiwi_helper_request_parse(text, strlen(text), req, err);
}

Test(helper_request, idmap_and_egress)
{
	struct kiwi_helper_request req;
	kiwi_err err = { 0 };
	cr_assert_eq(parse_request("{\"op\":\"idmap\",\"uid_map\":[[0,1000,1],[1,100000,65536]],"
				   "\"gid_map\":[[0,1000,1]]}", &req, &err), 0, "%s", err.msg);
	cr_expect(req.op == KIWI_HELPER_OP_IDMAP && req.n_uid_map == 2 && req.n_gid_map == 1);
	cr_expect(req.uid_map[1].inside == 1 && req.uid_map[1].outside == 100000 && req.uid_map[1].count == 65536);
	cr_assert_eq(parse_request("{\"op\":\"egress-prepare\",\"egress\":\"public_internet\","
				   "\"allow-cidr\":[\"192.0.2.0/24\"],\"allow-port\":\"443\",\"dns\":\"192.0.2.53\"}",
				   &req, &err), 0, "%s", err.msg);
	cr_expect(req.egress.n_allow_cidrs == 1 && req.egress.n_allow_ports == 1 && req.egress.dns);
	cr_expect_eq(req.egress.audit_path, NULL);
}

Test(helper_request, refusals)
{
	const struct {
		const char *text, *says;
	} cases[] = {
		{ "{\"op\":\"mount\"}", "unknown op" },
		{ "{\"uid_map\":[]}", "\"op\"" },
		{ "{\"op\":\"idmap\",\"uid_map\":[[0,1000,1]]}", "both" },
		{ "{\"op\":\"idmap\",\"uid_map\":[[0,1,1],[1,2,1],[2,3,1],[3,4,1],[4,5,1],[5,6,1]],"
		  "\"gid_map\":[[0,1,1]]}", "more than 5" },
		{ "{\"op\":\"idmap\",\"uid_map\":[[0,4294967290,10]],\"gid_map\":[[0,1,1]]}", "overflows" },
		{ "{\"op\":\"idmap\",\"uid_map\":[[0,1000,0]],\"gid_map\":[[0,1,1]]}", "empty" },
		{ "{\"op\":\"idmap\",\"uid_map\":[[0,-1,1]],\"gid_map\":[[0,1,1]]}", "extent 0" },
		{ "{\"op\":\"idmap\",\"uid_map\":[[0,1000]],\"gid_map\":[[0,1,1]]}", "extent 0" },
		{ "{\"op\":\"idmap\",\"uid_map\":[[0,1000,1]],\"gid_map\":[[0,1,1]],\"x\":1}", "unknown key" },
		{ "{\"op\":\"egress-prepare\",\"egress-audit\":\"/etc/shadow\"}", "egress-audit" },
		{ "{\"op\":\"egress-prepare\",\"egress-pool\":\"10.0.0.0/8\"}", "egress-pool" },
		{ "{\"op\":\"egress-prepare\",\"allow-cidr\":[1]}", "item 0" },
		{ "{\"op\":\"egress-attach\",\"uid_map\":[]}", "unknown key" },
		{ "[]", "object" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct kiwi_helper_request req;
		kiwi_err err = { 0 };
		cr_expect_eq(parse_request(cases[i].text, &req, &err), -1, "case %zu", i);
		cr_expect(strstr(err.msg, cases[i].says), "case %zu: `%s` should name %s", i, err.msg, cases[i].says);
	}
}

/* ---- the cgroup operation ---- */

Test(helper_config, cgroup_caps_and_subtree)
{
	struct kiwi_helper_rule rule;
	kiwi_err err = { 0 };
	cr_assert_eq(parse_config("{\"cgroup_subtree\":\"/sandboxes.slice/\"," "\"rules\":[{\"user\":\"svc\","
				  "\"operations\":[\"cgroup\"],\"max_memory\":\"2G\",\"max_memory_swap\":0,"
				  "\"max_pids\":100,\"max_cpus\":\"1.5\"}]}", &rule, &err), -1,
		     "a trailing slash is an empty component");
	cr_assert_eq(parse_config("{\"cgroup_subtree\":\"/sandboxes.slice\",\"rules\":[{\"user\":\"svc\","
				  "\"operations\":[\"cgroup\"],\"max_memory\":\"2G\",\"max_memory_swap\":0,"
				  "\"max_pids\":100,\"max_cpus\":\"1.5\"}]}", &rule, &err), 1, "%s", err.msg);
	cr_expect_eq(rule.ops, KIWI_HELPER_OP_CGROUP_PREPARE | KIWI_HELPER_OP_CGROUP_ATTACH);
	cr_expect_eq(rule.max_memory, 2LL << 30);
	cr_expect_eq(rule.max_memory_swap, 0);
	cr_expect_eq(rule.max_pids, 100);
	cr_expect_eq(rule.max_cpu_quota_us, 150000);
	cr_expect_str_eq(rule.cgroup_subtree, "/sandboxes.slice");
	cr_assert_eq(parse_config("{\"cgroup_subtree\":\"/a\",\"rules\":[{\"user\":\"svc\","
				  "\"cgroup_subtree\":\"/sys/fs/cgroup/b/c\"}]}", &rule, &err), 1, "%s", err.msg);
	cr_expect_str_eq(rule.cgroup_subtree, "/b/c", "a rule's own subtree wins");
	cr_assert_eq(parse_config("{\"rules\":[{\"user\":\"svc\"}]}", &rule, &err), 1);
	cr_expect_str_eq(rule.cgroup_subtree, "/kiwi.slice");
	cr_expect(rule.max_memory == -1 && rule.max_pids == -1 && rule.max_cpu_quota_us == -1, "no caps");
	const struct {
		const char *text, *says;
	} bad[] = {
		{ "{\"cgroup_subtree\":\"/\",\"rules\":[]}", "root" },
		{ "{\"cgroup_subtree\":\"kiwi.slice\",\"rules\":[]}", "absolute" },
		{ "{\"cgroup_subtree\":\"/a/../b\",\"rules\":[]}", ".." },
		{ "{\"cgroup_subtree\":\"/a//b\",\"rules\":[]}", "empty" },
		{ "{\"rules\":[{\"user\":\"svc\",\"cgroup_subtree\":\"/./a\"}]}", "cgroup_subtree" },
		{ "{\"rules\":[{\"user\":\"svc\",\"max_memory\":\"lots\"}]}", "max_memory" },
		{ "{\"rules\":[{\"user\":\"svc\",\"max_memory\":\"max\"}]}", "leave the key out" },
		{ "{\"rules\":[{\"user\":\"svc\",\"max_pids\":0}]}", "max_pids" },
		{ "{\"rules\":[{\"user\":\"svc\",\"max_cpus\":\"0.001\"}]}", "max_cpus" },
		{ "{\"rules\":[{\"user\":\"svc\",\"max_memory_swap\":[]}]}", "max_memory_swap" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		kiwi_err e = { 0 };
		cr_expect_eq(parse_config(bad[i].text, &rule, &e), -1, "case %zu", i);
		cr_expect(strstr(e.msg, bad[i].says), "case %zu: `%s` should name %s", i, e.msg, bad[i].says);
	}
}

static const char caps_config[] = "{\"rules\":[{\"user\":\"svc\",\"operations\":[\"cgroup\"],"
				  "\"max_memory\":\"2G\",\"max_pids\":100,\"max_cpus\":2}]}";

static int cgroup_check(const char *request, struct kiwi_cgroup_limits *l, char *parent, kiwi_err *err)
{
	struct kiwi_helper_rule rule;
	struct kiwi_helper_request req;
	cr_assert_eq(parse_config(caps_config, &rule, err), 1, "%s", err->msg);
	if (parse_request(request, &req, err) < 0)
		return -2;
	return kiwi_helper_cgroup_check(&rule, &req, "/etc/kiwi/helper.json", l, parent, KIWI_HELPER_SUBTREE_MAX, err);
}

Test(helper_cgroup, a_cap_binds_whether_asked_or_not)
{
	struct kiwi_cgroup_limits l;
	char parent[KIWI_HELPER_SUBTREE_MAX];
	kiwi_err err = { 0 };
	cr_assert_eq(cgroup_check("{\"op\":\"cgroup-prepare\",\"io_weight\":50}", &l, parent, &err), 0, "%s", err.msg);
	cr_expect_eq(l.memory_max, 2LL << 30);
	cr_expect_eq(l.pids_max, 100);
	cr_expect(l.cpu_quota_us == 200000 && l.cpu_period_us == 100000);
	cr_expect_eq(l.memory_swap_max, -1, "no cap, not asked: kiwi's default (0 with memory)");
	cr_expect_eq(l.io_weight, 50);
	cr_expect_str_eq(parent, "/kiwi.slice");
	cr_assert_eq(cgroup_check("{\"op\":\"cgroup-prepare\",\"memory\":\"64M\",\"pids\":20,\"cpus\":\"2\","
				  "\"parent\":\"/sys/fs/cgroup/kiwi.slice/jobs\"}", &l, parent, &err), 0, "%s", err.msg);
	cr_expect(l.memory_max == 64 << 20 && l.pids_max == 20 && l.cpu_quota_us == 200000);
	cr_expect_str_eq(parent, "/kiwi.slice/jobs");
}

Test(helper_cgroup, over_a_cap_or_outside_the_subtree_is_refused)
{
	const struct {
		const char *req, *says;
	} cases[] = {
		{ "{\"op\":\"cgroup-prepare\",\"memory\":\"4G\"}", "memory 4G is over your max_memory 2G in /etc/kiwi/helper.json" },
		{ "{\"op\":\"cgroup-prepare\",\"memory\":\"max\"}", "memory max is over" },
		{ "{\"op\":\"cgroup-prepare\",\"memory\":2147483649}", "memory 2147483649 is over" },
		{ "{\"op\":\"cgroup-prepare\",\"pids\":101}", "pids 101 is over your max_pids 100" },
		{ "{\"op\":\"cgroup-prepare\",\"pids\":\"max\"}", "pids max" },
		{ "{\"op\":\"cgroup-prepare\",\"cpus\":\"2.00001\"}", "cpus 2.00001 is over your max_cpus 2" },
		{ "{\"op\":\"cgroup-prepare\",\"parent\":\"/user.slice\"}", "outside your cgroup subtree `/kiwi.slice`" },
		{ "{\"op\":\"cgroup-prepare\",\"parent\":\"/kiwi.slicex\"}", "outside" },
		{ "{\"op\":\"cgroup-prepare\",\"parent\":\"/\"}", "outside" },
		{ "{\"op\":\"cgroup-prepare\",\"parent\":\"/kiwi.slice/../user.slice\"}", ".." },
		{ "{\"op\":\"cgroup-prepare\",\"parent\":\"/kiwi.slice/./x\"}", "plain" },
		{ "{\"op\":\"cgroup-prepare\",\"parent\":\"/kiwi.slice//x\"}", "plain" },
		{ "{\"op\":\"cgroup-prepare\",\"parent\":\"/sys/fs/cgroup/memory/kiwi.slice\"}", "outside" },
		{ "{\"op\":\"cgroup-prepare\",\"parent\":\"/sys/kernel/kiwi.slice\"}", "unified" },
		{ "{\"op\":\"cgroup-prepare\",\"parent\":\"/kiwi.slice/kiwi-0123456789abcdef\"}", "sandbox's cgroup" },
		{ "{\"op\":\"cgroup-prepare\",\"parent\":\"/kiwi.slice/x\\ny\"}", "plain" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct kiwi_cgroup_limits l;
		char parent[KIWI_HELPER_SUBTREE_MAX];
		kiwi_err err = { 0 };
		cr_expect_eq(cgroup_check(cases[i].req, &l, parent, &err), -1, "case %zu", i);
		cr_expect(strstr(err.msg, cases[i].says), "case %zu: `%s` should say %s", i, err.msg, cases[i].says);
	}
}

Test(helper_request, cgroup_keys)
{
	struct kiwi_helper_request req;
	kiwi_err err = { 0 };
	cr_assert_eq(parse_request("{\"op\":\"cgroup-prepare\",\"memory\":67108864,\"memory_swap\":\"0\","
				   "\"pids\":\"max\",\"cpus\":\"0.5\",\"cpu_weight\":10}", &req, &err), 0, "%s", err.msg);
	cr_expect_eq(req.op, KIWI_HELPER_OP_CGROUP_PREPARE);
	cr_expect(req.limits.memory_max == 64 << 20 && req.limits.memory_swap_max == 0);
	cr_expect(req.limits.pids_max == KIWI_CGROUP_MAX && req.limits.cpu_quota_us == 50000);
	cr_expect(!req.session);
	cr_assert_eq(parse_request("{\"op\":\"cgroup-prepare\",\"memory\":\"64M\",\"session\":true}", &req, &err), 0,
		     "%s", err.msg);
	cr_expect(req.session);
	cr_assert_eq(parse_request("{\"op\":\"cgroup-attach\"}", &req, &err), 0);
	cr_expect_eq(req.op, KIWI_HELPER_OP_CGROUP_ATTACH);
	const struct {
		const char *req, *says;
	} bad[] = {
		{ "{\"op\":\"cgroup-prepare\",\"io_max\":\"8:0 rbps=1\"}", "io_max" },
		{ "{\"op\":\"cgroup-prepare\",\"unified\":{}}", "unified" },
		{ "{\"op\":\"cgroup-prepare\",\"memory\":-1}", "memory" },
		{ "{\"op\":\"cgroup-prepare\",\"pids\":0}", "pids" },
		{ "{\"op\":\"cgroup-prepare\",\"io_weight\":10001}", "io_weight" },
		{ "{\"op\":\"cgroup-prepare\",\"parent\":\"\"}", "parent" },
		{ "{\"op\":\"cgroup-prepare\",\"hugetlb\":1}", "hugetlb" },
		{ "{\"op\":\"cgroup-attach\",\"memory\":1}", "memory" },
		{ "{\"op\":\"cgroup-prepare\",\"session\":\"yes\"}", "session" },
		{ "{\"op\":\"cgroup-attach\",\"session\":true}", "session" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		kiwi_err e = { 0 };
		cr_expect_eq(parse_request(bad[i].req, &req, &e), -1, "case %zu", i);
		cr_expect(strstr(e.msg, bad[i].says), "case %zu: `%s` should name %s", i, e.msg, bad[i].says);
	}
}

Test(helper_cgroup, sizes_are_shown_as_written)
{
	const struct { int64_t v; const char *s; } cases[] = {
		{ 2LL << 30, "2G" }, { 64 << 20, "64M" }, { 1536 << 10, "1536K" }, { 1000, "1000" },
		{ 0, "0" }, { 3LL << 40, "3T" }, { KIWI_CGROUP_MAX, "max" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char buf[32];
		kiwi_helper_format_size(cases[i].v, buf, sizeof(buf));
		cr_expect_str_eq(buf, cases[i].s);
	}
}

/* The admin's destination bounds (issue 19): a caller allowed only
 * host_allowlist must not widen it with allow-cidr, allow-host or dns. */
static int check_request(const char *rule_json, const char *cidrs, const char *hosts, const char *dns, kiwi_err *err)
{
	struct kiwi_helper_rule rule;
	char text[1024];
	snprintf(text, sizeof(text), "{\"rules\":[{\"user\":\"other\"},{\"user\":\"svc\",\"operations\":[\"egress\"]%s}]}",
		 rule_json);
	cr_assert_eq(parse_config(text, &rule, err), 1, "%s", err->msg);
	struct kiwi_egress_config c;
	kiwi_egress_config_init(&c);
	cr_assert(!cidrs || kiwi_egress_config_add(&c, "allow-cidr", cidrs, err) == 0, "%s", err->msg);
	cr_assert(!hosts || kiwi_egress_config_add(&c, "allow-host", hosts, err) == 0, "%s", err->msg);
	cr_assert(!dns || kiwi_egress_config_add(&c, "dns", dns, err) == 0, "%s", err->msg);
	return kiwi_helper_egress_check(&rule, &c, "/etc/kiwi/helper.json", err);
}

Test(helper_config, egress_bounds_refuse_by_name)
{
	const char *tight = ",\"allow_cidr_within\":[\"192.0.2.0/24\"],\"allow_cidr_never\":[\"192.0.2.128/25\"],"
			    "\"allow_host\":[\"pkgs.example.org\",\"*.registry.example\"],\"dns\":[\"192.0.2.53\"]";
	const struct {
		const char *cidrs, *hosts, *dns, *says;
	} refused[] = {
		{ "10.0.0.0/8", NULL, NULL, "allow-cidr 10.0.0.0/8 is outside your rule's \"allow_cidr_within\" (rule 1" },
		{ "192.0.0.0/16", NULL, NULL, "allow_cidr_within" },          /* wider than the bound */
		{ "192.0.2.0/24", NULL, NULL, "allow_cidr_never" },           /* overlaps the never half */
		{ "192.0.2.200/32", NULL, NULL, "allow_cidr_never" },
		{ NULL, "10.1.2.3:22", NULL, "allow-host 10.1.2.3 is outside your rule's \"allow_host\"" },
		{ NULL, "registry.example", NULL, "allow_host" },            /* *.x is below x, not x */
		{ NULL, "evil.example.org", NULL, "allow_host" },
		{ NULL, NULL, "10.0.0.53", "dns 10.0.0.53 is outside your rule's \"dns\"" },
	};
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		kiwi_err err = { 0 };
		cr_expect_eq(check_request(tight, refused[i].cidrs, refused[i].hosts, refused[i].dns, &err), -1, "case %zu", i);
		cr_expect(strstr(err.msg, refused[i].says), "case %zu: %s", i, err.msg);
		cr_expect(strstr(err.msg, "/etc/kiwi/helper.json") && !strchr(err.msg, '\n'), "%s", err.msg);
	}
	kiwi_err err = { 0 };
	cr_expect_eq(check_request(tight, "192.0.2.0/25,192.0.2.16/28", "pkgs.example.org:443,a.b.REGISTRY.example",
				   "192.0.2.53", &err), 0, "%s", err.msg);
	/* no bounds: anything the mode takes, as before */
	cr_expect_eq(check_request("", "10.0.0.0/8", "10.1.2.3:22", "10.0.0.53", &err), 0, "%s", err.msg);
	/* false: none at all */
	cr_expect_eq(check_request(",\"allow_host\":false,\"dns\":false", NULL, "a.example.org", NULL, &err), -1);
	cr_expect_eq(check_request(",\"allow_host\":false,\"dns\":false", NULL, NULL, "192.0.2.53", &err), -1);
	cr_expect_eq(check_request(",\"allow_host\":false,\"dns\":false", "192.0.2.0/24", NULL, NULL, &err), 0);
	/* an empty within: no allow-cidr */
	cr_expect_eq(check_request(",\"allow_cidr_within\":[]", "192.0.2.0/24", NULL, NULL, &err), -1);
}

Test(helper_config, egress_bounds_malformed)
{
	const char *bad[] = { "\"allow_cidr_within\":\"10.0.0.0/8\"", "\"allow_cidr_never\":[\"10.0.0.0/33\"]",
			      "\"allow_cidr_within\":[\"10.0.0.0/8,10.1.0.0/16\"]", "\"allow_host\":[1]",
			      "\"allow_host\":\"x\"", "\"dns\":[\"resolver\"]", "\"dns\":1" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char text[512];
		struct kiwi_helper_rule rule;
		kiwi_err err = { 0 };
		snprintf(text, sizeof(text), "{\"rules\":[{\"user\":\"svc\",%s}]}", bad[i]);
		cr_expect_eq(parse_config(text, &rule, &err), -1, "%s", bad[i]);
		cr_expect(err.msg[0], "%s", bad[i]);
	}
}

/* ---- the disk operation ---- */

Test(helper_request, disk_size)
{
	struct kiwi_helper_request req;
	kiwi_err err = { 0 };
	cr_assert_eq(parse_request("{\"op\":\"disk\",\"size\":\"16M\"}", &req, &err), 0, "%s", err.msg);
	cr_expect_eq(req.op, KIWI_HELPER_OP_DISK);
	cr_expect_eq(req.disk_size, 16LL << 20);
	cr_assert_eq(parse_request("{\"op\":\"disk\",\"size\":1048576}", &req, &err), 0, "%s", err.msg);
	cr_expect_eq(req.disk_size, 1LL << 20);
	const struct {
		const char *text, *says;
	} bad[] = {
		{ "{\"op\":\"disk\"}", "\"size\"" },
		{ "{\"op\":\"disk\",\"size\":0}", "\"size\"" },
		{ "{\"op\":\"disk\",\"size\":-1}", "size" },
		{ "{\"op\":\"disk\",\"size\":\"lots\"}", "size" },
		{ "{\"op\":\"disk\",\"size\":\"1M\",\"dir\":\"/tmp\"}", "unknown key" },
		{ "{\"op\":\"disk\",\"size\":\"1M\",\"uid_map\":[]}", "unknown key" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err = (kiwi_err){ 0 };
		cr_expect_eq(parse_request(bad[i].text, &req, &err), -1, "case %zu", i);
		cr_expect(strstr(err.msg, bad[i].says), "case %zu: `%s` should name %s", i, err.msg, bad[i].says);
	}
}

Test(helper_config, disk_needs_max_disk)
{
	struct kiwi_helper_rule rule;
	kiwi_err err = { 0 };
	cr_assert_eq(parse_config("{\"rules\":[{\"user\":\"svc\",\"operations\":[\"disk\"],\"max_disk\":\"2G\"}]}",
				  &rule, &err), 1, "%s", err.msg);
	cr_expect_eq(rule.ops, KIWI_HELPER_OP_DISK);
	cr_expect_eq(rule.max_disk, 2LL << 30);
	cr_assert_eq(parse_config("{\"rules\":[{\"user\":\"svc\"}]}", &rule, &err), 1);
	cr_expect_eq(rule.max_disk, -1, "no bound given");
	err = (kiwi_err){ 0 };
	cr_expect_eq(parse_config("{\"rules\":[{\"user\":\"svc\",\"operations\":[\"disk\"]}]}", &rule, &err), -1);
	cr_expect(strstr(err.msg, "max_disk"), "%s", err.msg);
	err = (kiwi_err){ 0 };
	cr_expect_eq(parse_config("{\"rules\":[{\"user\":\"svc\",\"max_disk\":\"big\"}]}", &rule, &err), -1);
	cr_expect(strstr(err.msg, "max_disk"), "%s", err.msg);
}

/* ---- the bind operation ---- */

Test(helper_request, bind_takes_no_key)
{
	struct kiwi_helper_request req;
	kiwi_err err = { 0 };
	cr_assert_eq(parse_request("{\"op\":\"bind\"}", &req, &err), 0, "%s", err.msg);
	cr_expect_eq(req.op, KIWI_HELPER_OP_BIND);
	cr_expect_eq(parse_request("{\"op\":\"bind\",\"path\":\"/etc\"}", &req, &err), -1);
	cr_expect(strstr(err.msg, "unknown key"), "%s", err.msg);
	struct kiwi_helper_rule rule;
	cr_assert_eq(parse_config("{\"rules\":[{\"user\":\"svc\",\"operations\":[\"idmap\",\"bind\"]}]}", &rule,
				  &err), 1, "%s", err.msg);
	cr_expect_eq(rule.ops, KIWI_HELPER_OP_IDMAP | KIWI_HELPER_OP_BIND);
}
