/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-helper's admin config (kiwi-helper.json(5)) and /etc/subuid-style
 * files: which rule applies to the caller, and which ids it may map.
 * Pure code, fuzzed by fuzz_helper_request (config mode). */
#include "kiwi/helper.h"
#include "kiwi/json.h"
#include "kiwi/units.h"
#include "kiwi/userns.h"
#include "kiwi/passwd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_MAX_SANDBOXES 4

static int parse_ops(const kiwi_json *v, unsigned *ops, kiwi_err *err)
{
	if (kiwi_json_type_of(v) != KIWI_JSON_ARRAY)
		return kiwi_error(err, EINVAL, "config", "\"operations\" is not an array");
	*ops = 0;
	for (size_t i = 0; i < kiwi_json_len(v); i++) {
		const char *s = kiwi_json_string(kiwi_json_at(v, i));
		if (s && !strcmp(s, "idmap"))
			*ops |= KIWI_HELPER_OP_IDMAP;
		else if (s && !strcmp(s, "egress"))
			*ops |= KIWI_HELPER_OP_EGRESS_PREPARE | KIWI_HELPER_OP_EGRESS_ATTACH;
		else if (s && !strcmp(s, "cgroup"))
			*ops |= KIWI_HELPER_OP_CGROUP_PREPARE | KIWI_HELPER_OP_CGROUP_ATTACH;
		else if (s && !strcmp(s, "disk"))
			*ops |= KIWI_HELPER_OP_DISK;
		else if (s && !strcmp(s, "bind"))
			*ops |= KIWI_HELPER_OP_BIND;
		else
			return kiwi_error(err, EINVAL, "config",
					  "\"operations\" item %zu is not idmap, egress, cgroup, disk or bind", i);
	}
	return 0;
}

static int parse_kinds(const kiwi_json *v, unsigned *kinds, kiwi_err *err)
{
	static const char *const names[] = { "public_internet", "private_network", "host_allowlist" };
	if (kiwi_json_type_of(v) != KIWI_JSON_ARRAY)
		return kiwi_error(err, EINVAL, "config", "\"egress\" is not an array");
	*kinds = 0;
	for (size_t i = 0; i < kiwi_json_len(v); i++) {
		const char *s = kiwi_json_string(kiwi_json_at(v, i));
		size_t k = 0;
		while (k < 3 && (!s || strcmp(s, names[k])))
			k++;
		if (k == 3)
			return kiwi_error(err, EINVAL, "config", "\"egress\" item %zu is not an egress mode", i);
		*kinds |= 1u << k;
	}
	return 0;
}

/* [[start, count], ...] */
static int parse_ranges(const kiwi_json *v, const char *key, struct kiwi_id_range *out, size_t *n,
			kiwi_err *err)
{
	if (kiwi_json_type_of(v) != KIWI_JSON_ARRAY || kiwi_json_len(v) > KIWI_HELPER_MAX_RANGES)
		return kiwi_error(err, EINVAL, "config", "\"%s\" is not an array of at most %d ranges", key,
				  KIWI_HELPER_MAX_RANGES);
	for (size_t i = 0; i < kiwi_json_len(v); i++) {
		const kiwi_json *x = kiwi_json_at(v, i);
		long long start, count;
		if (kiwi_json_type_of(x) != KIWI_JSON_ARRAY || kiwi_json_len(x) != 2 ||
		    !kiwi_json_int(kiwi_json_at(x, 0), &start) || !kiwi_json_int(kiwi_json_at(x, 1), &count) ||
		    start < 1 || count < 1 || start + count > UINT32_MAX)
			return kiwi_error(err, EINVAL, "config",
					  "\"%s\" range %zu is not [start, count] with 0 < start, start+count < 2^32",
					  key, i);
		out[i] = (struct kiwi_id_range){ (uint32_t)start, (uint32_t)count };
	}
	*n = kiwi_json_len(v);
	return 0;
}

static int parse_count(const kiwi_json *v, const char *key, unsigned *out, kiwi_err *err)
{
	long long n;
	if (!kiwi_json_int(v, &n) || n < 0 || n > 65536)
		return kiwi_error(err, EINVAL, "config", "\"%s\" is not a count from 0 to 65536", key);
	*out = (unsigned)n;
	return 0;
}

/* "user" or "group": a name or a number. */
static int parse_who(const kiwi_json *v, const char *key, kiwi_err *err)
{
	long long n;
	if (kiwi_json_string(v) || (kiwi_json_int(v, &n) && n >= 0 && n < UINT32_MAX))
		return 0;
	return kiwi_error(err, EINVAL, "config", "\"%s\" is not a name or an id", key);
}

/* A cap: a number, never "max" (leave the key out for no cap). */
static int parse_cap(const kiwi_json *v, const char *key, int64_t *out, kiwi_err *err)
{
	char num[32];
	long long n;
	const char *s = kiwi_json_string(v);
	if (!s && kiwi_json_int(v, &n) && n >= 0) {
		snprintf(num, sizeof(num), "%lld", n);
		s = num;
	}
	int r = -1;
	if (!s)
		r = kiwi_error(err, EINVAL, "config", "\"%s\" is not a number or a string", key);
	else if (!strcmp(key, "max_pids"))
		r = kiwi_parse_pids(s, out, err);
	else if (!strcmp(key, "max_cpus")) {
		int64_t period;
		r = kiwi_parse_cpus(s, out, &period, err);
	} else
		r = kiwi_parse_size(s, key, out, err);
	if (r < 0)
		return kiwi_error_wrap(err, "\"%s\"", key);
	if (*out == KIWI_CGROUP_MAX)
		return kiwi_error(err, EINVAL, "config", "\"%s\" is max: leave the key out for no cap", key);
	return 0;
}

static int parse_subtree(const kiwi_json *v, char *out, kiwi_err *err)
{
	const char *s = kiwi_json_string(v);
	if (!s || s[0] != '/')
		return kiwi_error(err, EINVAL, "config", "\"cgroup_subtree\" is not an absolute path");
	if (kiwi_helper_cgroup_path(s, "\"cgroup_subtree\"", out, KIWI_HELPER_SUBTREE_MAX, err) < 0)
		return -1;
	/* The whole hierarchy holds every user's and service's cgroups. */
	if (!strcmp(out, "/"))
		return kiwi_error(err, EINVAL, "config", "\"cgroup_subtree\" is the root: name a subtree like /kiwi.slice");
	return 0;
}

/* [CIDR, ...], each as --allow-cidr takes it. */
static int parse_cidrs(const kiwi_json *v, const char *key, struct kiwi_cidr4 *out, size_t *n, kiwi_err *err)
{
	if (kiwi_json_type_of(v) != KIWI_JSON_ARRAY || kiwi_json_len(v) > KIWI_HELPER_MAX_BOUNDS)
		return kiwi_error(err, EINVAL, "config", "\"%s\" is not an array of at most %d CIDRs", key,
				  KIWI_HELPER_MAX_BOUNDS);
	for (size_t i = 0; i < kiwi_json_len(v); i++) {
		const char *s = kiwi_json_string(kiwi_json_at(v, i));
		struct kiwi_egress_config c;
		kiwi_egress_config_init(&c);
		if (!s || strchr(s, ',') || kiwi_egress_config_add(&c, "allow-cidr", s, err) < 0 || c.n_allow_cidrs != 1)
			return kiwi_error(err, EINVAL, "config", "\"%s\" item %zu is not a CIDR like 192.0.2.0/24", key, i);
		out[i] = c.allow_cidrs[0];
	}
	*n = kiwi_json_len(v);
	return 0;
}

/* true (any value), false (none) or a list of them. */
static int parse_bound(const kiwi_json *v, const char *key, enum kiwi_helper_bound *bound, kiwi_err *err)
{
	bool b;
	if (kiwi_json_bool(v, &b)) {
		*bound = b ? KIWI_HELPER_BOUND_ANY : KIWI_HELPER_BOUND_NONE;
		return 0;
	}
	if (kiwi_json_type_of(v) != KIWI_JSON_ARRAY || kiwi_json_len(v) > KIWI_HELPER_MAX_BOUNDS)
		return kiwi_error(err, EINVAL, "config", "\"%s\" is not true, false or an array of at most %d strings",
				  key, KIWI_HELPER_MAX_BOUNDS);
	*bound = KIWI_HELPER_BOUND_LIST;
	return 0;
}

static int parse_hosts(const kiwi_json *v, struct kiwi_helper_egress_rule *e, kiwi_err *err)
{
	if (parse_bound(v, "allow_host", &e->hosts_bound, err) < 0)
		return -1;
	if (e->hosts_bound != KIWI_HELPER_BOUND_LIST)
		return 0;
	for (size_t i = 0; i < kiwi_json_len(v); i++) {
		const char *s = kiwi_json_string(kiwi_json_at(v, i));
		if (!s || !*s || strlen(s) > KIWI_EGRESS_NAME_MAX)
			return kiwi_error(err, EINVAL, "config", "\"allow_host\" item %zu is not a host name", i);
		snprintf(e->hosts[i], sizeof(e->hosts[i]), "%s", s);
	}
	e->n_hosts = kiwi_json_len(v);
	return 0;
}

static int parse_dns(const kiwi_json *v, struct kiwi_helper_egress_rule *e, kiwi_err *err)
{
	if (parse_bound(v, "dns", &e->dns_bound, err) < 0)
		return -1;
	if (e->dns_bound != KIWI_HELPER_BOUND_LIST)
		return 0;
	for (size_t i = 0; i < kiwi_json_len(v); i++) {
		const char *s = kiwi_json_string(kiwi_json_at(v, i));
		struct kiwi_egress_config c;
		kiwi_egress_config_init(&c);
		if (!s || kiwi_egress_config_add(&c, "dns", s, err) < 0)
			return kiwi_error(err, EINVAL, "config", "\"dns\" item %zu is not an IPv4 address", i);
		e->dns[i] = c.dns;
	}
	e->n_dns = kiwi_json_len(v);
	return 0;
}

static int parse_rule_key(struct kiwi_helper_rule *r, const char *key, const kiwi_json *v, kiwi_err *err)
{
	if (!strcmp(key, "user") || !strcmp(key, "group"))
		return parse_who(v, key, err);
	if (!strcmp(key, "operations"))
		return parse_ops(v, &r->ops, err);
	if (!strcmp(key, "subids"))
		return kiwi_json_bool(v, &r->subids) ? 0 : kiwi_error(err, EINVAL, "config", "\"subids\" is not a boolean");
	if (!strcmp(key, "uids"))
		return parse_ranges(v, key, r->uids, &r->n_uids, err);
	if (!strcmp(key, "gids"))
		return parse_ranges(v, key, r->gids, &r->n_gids, err);
	if (!strcmp(key, "max_sandboxes"))
		return parse_count(v, key, &r->max_sandboxes, err);
	if (!strcmp(key, "max_veths"))
		return parse_count(v, key, &r->max_veths, err);
	if (!strcmp(key, "egress"))
		return parse_kinds(v, &r->egress_kinds, err);
	if (!strcmp(key, "max_memory"))
		return parse_cap(v, key, &r->max_memory, err);
	if (!strcmp(key, "max_memory_swap"))
		return parse_cap(v, key, &r->max_memory_swap, err);
	if (!strcmp(key, "max_pids"))
		return parse_cap(v, key, &r->max_pids, err);
	if (!strcmp(key, "max_cpus"))
		return parse_cap(v, key, &r->max_cpu_quota_us, err);
	if (!strcmp(key, "max_disk"))
		return kiwi_helper_json_size(v, key, &r->max_disk, err);
	if (!strcmp(key, "cgroup_subtree"))
		return parse_subtree(v, r->cgroup_subtree, err);
	if (!strcmp(key, "allow_cidr_within")) {
		r->egress.has_within = true;
		return parse_cidrs(v, key, r->egress.within, &r->egress.n_within, err);
	}
	if (!strcmp(key, "allow_cidr_never"))
		return parse_cidrs(v, key, r->egress.never, &r->egress.n_never, err);
	if (!strcmp(key, "allow_host"))
		return parse_hosts(v, &r->egress, err);
	if (!strcmp(key, "dns"))
		return parse_dns(v, &r->egress, err);
	return kiwi_error(err, EINVAL, "config", "unknown key \"%.64s\"", key);
}

static bool matches(const kiwi_json *v, uint32_t id, const char *name)
{
	long long n;
	if (kiwi_json_int(v, &n))
		return n == (long long)id;
	const char *s = kiwi_json_string(v);
	return s && name && !strcmp(s, name);
}

static bool rule_matches(const kiwi_json *j, const struct kiwi_helper_caller *who,
			 int (*lookup_group)(const char *, gid_t *))
{
	const kiwi_json *u = kiwi_json_get(j, "user"), *g = kiwi_json_get(j, "group");
	if (u)
		return matches(u, who->uid, who->name);
	long long n;
	gid_t gid;
	if (kiwi_json_int(g, &n))
		gid = (gid_t)n;
	else if (!lookup_group || lookup_group(kiwi_json_string(g), &gid) < 0)
		return false;
	if (gid == who->gid)
		return true;
	for (size_t i = 0; i < who->n_groups; i++)
		if (who->groups[i] == gid)
			return true;
	return false;
}

static int parse_rule(const kiwi_json *j, size_t index, const char *subtree, struct kiwi_helper_rule *r,
		      kiwi_err *err)
{
	*r = (struct kiwi_helper_rule){ .index = index, .max_sandboxes = DEFAULT_MAX_SANDBOXES, .max_memory = -1,
					.max_memory_swap = -1, .max_pids = -1, .max_cpu_quota_us = -1, .max_disk = -1 };
	if (kiwi_json_type_of(j) != KIWI_JSON_OBJECT)
		return kiwi_error(err, EINVAL, "config", "rule %zu is not an object", index);
	if (!kiwi_json_get(j, "user") == !kiwi_json_get(j, "group"))
		return kiwi_error(err, EINVAL, "config", "rule %zu needs exactly one of \"user\" and \"group\"", index);
	for (size_t i = 0; i < kiwi_json_len(j); i++)
		if (parse_rule_key(r, kiwi_json_key_at(j, i), kiwi_json_at(j, i), err) < 0)
			return kiwi_error_wrap(err, "rule %zu", index);
	r->max_veths = kiwi_json_get(j, "max_veths") ? r->max_veths : r->max_sandboxes;
	if ((r->ops & KIWI_HELPER_OP_DISK) && r->max_disk < 0)
		return kiwi_error(err, EINVAL, "config", "rule %zu allows disk without \"max_disk\"", index);
	if (!r->cgroup_subtree[0])
		snprintf(r->cgroup_subtree, sizeof(r->cgroup_subtree), "%s", subtree);
	return 0;
}

int kiwi_helper_config_parse(const char *text, size_t len, const struct kiwi_helper_caller *who,
			     int (*lookup_group)(const char *name, gid_t *gid),
			     struct kiwi_helper_rule *rule, kiwi_err *err)
{
	_cleanup_json_ kiwi_json *j = kiwi_json_parse(text, len, err);
	if (!j)
		return kiwi_error_wrap(err, "config");
	if (kiwi_json_type_of(j) != KIWI_JSON_OBJECT)
		return kiwi_error(err, EINVAL, "config", "not a JSON object");
	for (size_t i = 0; i < kiwi_json_len(j); i++)
		if (strcmp(kiwi_json_key_at(j, i), "rules") && strcmp(kiwi_json_key_at(j, i), "cgroup_subtree"))
			return kiwi_error(err, EINVAL, "config", "unknown key \"%.64s\"", kiwi_json_key_at(j, i));
	char subtree[KIWI_HELPER_SUBTREE_MAX] = KIWI_HELPER_DEFAULT_SUBTREE;
	const kiwi_json *sub = kiwi_json_get(j, "cgroup_subtree");
	if (sub && parse_subtree(sub, subtree, err) < 0)
		return -1;
	const kiwi_json *rules = kiwi_json_get(j, "rules");
	if (kiwi_json_type_of(rules) != KIWI_JSON_ARRAY)
		return kiwi_error(err, EINVAL, "config", "\"rules\" is missing or not an array");
	int found = 0;
	for (size_t i = 0; i < kiwi_json_len(rules); i++) {
		struct kiwi_helper_rule r;
		if (parse_rule(kiwi_json_at(rules, i), i, subtree, &r, err) < 0)
			return -1;
		if (!found && rule_matches(kiwi_json_at(rules, i), who, lookup_group)) {
			*rule = r;
			found = 1;
		}
	}
	return found;
}

/* One "owner:start:count" line of len bytes (no newline). */
static bool subid_line(const char *s, size_t len, const struct kiwi_helper_caller *who, struct kiwi_id_range *r)
{
	const char *owner;
	size_t owner_len;
	uint32_t owner_id;
	if (!kiwi_subid_line(s, len, &owner, &owner_len, &r->start, &r->count))
		return false;
	return (who->name && strlen(who->name) == owner_len && !memcmp(owner, who->name, owner_len)) ||
	       (kiwi_parse_id(owner, owner_len, &owner_id) && owner_id == who->uid);
}

void kiwi_subid_parse(const char *text, size_t len, const struct kiwi_helper_caller *who,
		      struct kiwi_id_range *ranges, size_t max, size_t *n)
{
	size_t at = 0;
	while (at < len && *n < max) {
		const char *nl = memchr(text + at, '\n', len - at);
		size_t line = nl ? (size_t)(nl - (text + at)) : len - at;
		if (subid_line(text + at, line, who, &ranges[*n]))
			(*n)++;
		at += line + 1;
	}
}

bool kiwi_id_extent_allowed(const struct kiwi_id_extent *e, uint32_t own_id,
			    const struct kiwi_id_range *ranges, size_t n)
{
	uint64_t lo = e->outside, hi = (uint64_t)e->outside + e->count;
	if (e->count == 0 || lo == 0)
		return false;
	if (lo == own_id && e->count == 1)
		return true;
	for (size_t i = 0; i < n; i++)
		if (lo >= ranges[i].start && hi <= (uint64_t)ranges[i].start + ranges[i].count)
			return true;
	return false;
}
