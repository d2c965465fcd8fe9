/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-helper's request parser: outside input from an unprivileged caller,
 * read by a setuid-root process. Pure code over kiwi/json.h, fuzzed by
 * fuzz_helper_request. Everything not understood is refused by name. */
#include "kiwi/helper.h"
#include "kiwi/json.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const struct {
	const char *name;
	enum kiwi_helper_op op;
} ops[] = {
	{ "idmap", KIWI_HELPER_OP_IDMAP },
	{ "egress-prepare", KIWI_HELPER_OP_EGRESS_PREPARE },
	{ "egress-attach", KIWI_HELPER_OP_EGRESS_ATTACH },
	{ "cgroup-prepare", KIWI_HELPER_OP_CGROUP_PREPARE },
	{ "cgroup-attach", KIWI_HELPER_OP_CGROUP_ATTACH },
	{ "disk", KIWI_HELPER_OP_DISK },
	{ "bind", KIWI_HELPER_OP_BIND },
};

const char *kiwi_helper_op_name(enum kiwi_helper_op op)
{
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (ops[i].op == op)
			return ops[i].name;
	return "?";
}

static int parse_op(const kiwi_json *v, enum kiwi_helper_op *op, kiwi_err *err)
{
	const char *s = kiwi_json_string(v);
	if (!s)
		return kiwi_error(err, EINVAL, "request", "\"op\" is missing or not a string");
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (!strcmp(s, ops[i].name)) {
			*op = ops[i].op;
			return 0;
		}
	return kiwi_error(err, EINVAL, "request", "unknown op `%.64s`", s);
}

static bool u32_of(const kiwi_json *v, uint32_t *out)
{
	long long n;
	if (!kiwi_json_int(v, &n) || n < 0 || n > UINT32_MAX)
		return false;
	*out = (uint32_t)n;
	return true;
}

/* [[inside, outside, count], ...]: the kernel's own order. */
static int parse_map(const kiwi_json *v, const char *key, struct kiwi_id_extent *out, size_t *n,
		     kiwi_err *err)
{
	if (kiwi_json_type_of(v) != KIWI_JSON_ARRAY || kiwi_json_len(v) == 0)
		return kiwi_error(err, EINVAL, "request", "\"%s\" is not a non-empty array", key);
	if (kiwi_json_len(v) > KIWI_HELPER_MAX_EXTENTS)
		return kiwi_error(err, E2BIG, "request", "\"%s\" has more than %d extents", key,
				  KIWI_HELPER_MAX_EXTENTS);
	for (size_t i = 0; i < kiwi_json_len(v); i++) {
		const kiwi_json *x = kiwi_json_at(v, i);
		struct kiwi_id_extent e;
		if (kiwi_json_type_of(x) != KIWI_JSON_ARRAY || kiwi_json_len(x) != 3 ||
		    !u32_of(kiwi_json_at(x, 0), &e.inside) || !u32_of(kiwi_json_at(x, 1), &e.outside) ||
		    !u32_of(kiwi_json_at(x, 2), &e.count))
			return kiwi_error(err, EINVAL, "request",
					  "\"%s\" extent %zu is not [inside, outside, count] of ids", key, i);
		/* (uid_t)-1 is no id: neither end may reach it. */
		if (e.count == 0 || (uint64_t)e.inside + e.count > UINT32_MAX || (uint64_t)e.outside + e.count > UINT32_MAX)
			return kiwi_error(err, EINVAL, "request", "\"%s\" extent %zu is empty or overflows", key, i);
		out[i] = e;
	}
	*n = kiwi_json_len(v);
	return 0;
}

/* One egress key, as the flag of the same name takes it; lists take each
 * item. The audit file and the address pool are the admin's. */
static int parse_egress_key(struct kiwi_egress_config *c, const char *key, const kiwi_json *v,
			    kiwi_err *err)
{
	static const char *const allowed[] = { "egress", "allow-cidr", "allow-host", "allow-port", "dns" };
	bool known = false;
	for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
		known |= !strcmp(key, allowed[i]);
	if (!known)
		return kiwi_error(err, EPERM, "request", "egress-prepare: key \"%.64s\" is not allowed", key);
	if (kiwi_json_type_of(v) == KIWI_JSON_STRING)
		return kiwi_egress_config_add(c, key, kiwi_json_string(v), err);
	if (kiwi_json_type_of(v) != KIWI_JSON_ARRAY)
		return kiwi_error(err, EINVAL, "request", "\"%s\" is not a string or an array of strings", key);
	for (size_t i = 0; i < kiwi_json_len(v); i++) {
		const char *s = kiwi_json_string(kiwi_json_at(v, i));
		if (!s)
			return kiwi_error(err, EINVAL, "request", "\"%s\" item %zu is not a string", key, i);
		if (kiwi_egress_config_add(c, key, s, err) < 0)
			return -1;
	}
	return 0;
}

static int parse_weight(const kiwi_json *v, const char *key, int *out, kiwi_err *err)
{
	long long n;
	if (!kiwi_json_int(v, &n) || n < 1 || n > 10000)
		return kiwi_error(err, EINVAL, "request", "\"%s\" is not a weight from 1 to 10000", key);
	*out = (int)n;
	return 0;
}

/* A count or "max", as the flag takes it. */
static int parse_pids(const kiwi_json *v, int64_t *out, kiwi_err *err)
{
	long long n;
	char num[32];
	const char *s = kiwi_json_string(v);
	if (!s && kiwi_json_int(v, &n)) {
		snprintf(num, sizeof(num), "%lld", n);
		s = num;
	}
	if (!s || kiwi_parse_pids(s, out, err) < 0)
		return kiwi_error(err, EINVAL, "request", "\"pids\" is not a process count or \"max\"");
	return 0;
}

/* One cgroup-prepare key: the limits a caller may ask for, and where. */
static int parse_cgroup_key(struct kiwi_helper_request *req, const char *key, const kiwi_json *v, kiwi_err *err)
{
	struct kiwi_cgroup_limits *l = &req->limits;
	if (!strcmp(key, "memory"))
		return kiwi_helper_json_size(v, key, &l->memory_max, err);
	if (!strcmp(key, "memory_swap"))
		return kiwi_helper_json_size(v, key, &l->memory_swap_max, err);
	if (!strcmp(key, "pids"))
		return parse_pids(v, &l->pids_max, err);
	if (!strcmp(key, "cpus")) {
		const char *s = kiwi_json_string(v);
		if (!s)
			return kiwi_error(err, EINVAL, "request", "\"cpus\" is not a string like \"1.5\"");
		return kiwi_parse_cpus(s, &l->cpu_quota_us, &l->cpu_period_us, err);
	}
	if (!strcmp(key, "io_weight"))
		return parse_weight(v, key, &l->io_weight, err);
	if (!strcmp(key, "cpu_weight"))
		return parse_weight(v, key, &l->cpu_weight, err);
	if (!strcmp(key, "parent")) {
		const char *s = kiwi_json_string(v);
		if (!s || !*s || strlen(s) >= sizeof(req->parent))
			return kiwi_error(err, EINVAL, "request", "\"parent\" is not a cgroup path of 1 to %zu bytes",
					  sizeof(req->parent) - 1);
		snprintf(req->parent, sizeof(req->parent), "%s", s);
		return 0;
	}
	if (!strcmp(key, "session")) {
		if (!kiwi_json_bool(v, &req->session))
			return kiwi_error(err, EINVAL, "request", "\"session\" is not a boolean");
		return 0;
	}
	if (!strcmp(key, "io_max") || !strcmp(key, "unified"))
		return kiwi_error(err, EPERM, "request", "cgroup-prepare: \"%s\" is not available through the helper "
				  "(it names devices or raw files: root only)", key);
	return kiwi_error(err, EINVAL, "request", "cgroup-prepare: unknown key \"%.64s\"", key);
}

/* A port of the caller's own name gate: unprivileged, 1024 to 65535. */
static int parse_port(const kiwi_json *v, const char *key, uint16_t *out, kiwi_err *err)
{
	long long n;
	if (!kiwi_json_int(v, &n) || n < 1024 || n > 65535)
		return kiwi_error(err, EINVAL, "request", "\"%s\" is not a port from 1024 to 65535", key);
	*out = (uint16_t)n;
	return 0;
}

static int parse_key(struct kiwi_helper_request *req, const char *key, const kiwi_json *v, kiwi_err *err)
{
	switch (req->op) {
	case KIWI_HELPER_OP_IDMAP:
		if (!strcmp(key, "uid_map"))
			return parse_map(v, key, req->uid_map, &req->n_uid_map, err);
		if (!strcmp(key, "gid_map"))
			return parse_map(v, key, req->gid_map, &req->n_gid_map, err);
		break;
	case KIWI_HELPER_OP_EGRESS_PREPARE:
		return parse_egress_key(&req->egress, key, v, err);
	case KIWI_HELPER_OP_CGROUP_PREPARE:
		return parse_cgroup_key(req, key, v, err);
	case KIWI_HELPER_OP_EGRESS_ATTACH:
		if (!strcmp(key, "gate_dns"))
			return parse_port(v, key, &req->gate_dns, err);
		if (!strcmp(key, "gate_tcp"))
			return parse_port(v, key, &req->gate_tcp, err);
		break;
	case KIWI_HELPER_OP_DISK:
		if (!strcmp(key, "size"))
			return kiwi_helper_json_size(v, key, &req->disk_size, err);
		break;
	case KIWI_HELPER_OP_BIND:
		if (!strcmp(key, "last")) {
			if (!kiwi_json_bool(v, &req->last))
				return kiwi_error(err, EINVAL, "request", "\"last\" is not a boolean");
			return 0;
		}
		break;
	case KIWI_HELPER_OP_CGROUP_ATTACH:
	default:
		break;
	}
	return kiwi_error(err, EINVAL, "request", "%s: unknown key \"%.64s\"", kiwi_helper_op_name(req->op), key);
}

int kiwi_helper_request_parse(const char *text, size_t len, struct kiwi_helper_request *req,
			      kiwi_err *err)
{
	memset(req, 0, sizeof(*req));
	kiwi_egress_config_init(&req->egress);
	req->limits = (struct kiwi_cgroup_limits)KIWI_CGROUP_LIMITS_INIT;
	if (len > KIWI_HELPER_MSG_MAX)
		return kiwi_error(err, E2BIG, "request", "larger than %d bytes", KIWI_HELPER_MSG_MAX);
	_cleanup_json_ kiwi_json *j = kiwi_json_parse(text, len, err);
	if (!j)
		return kiwi_error_wrap(err, "request");
	if (kiwi_json_type_of(j) != KIWI_JSON_OBJECT)
		return kiwi_error(err, EINVAL, "request", "not a JSON object");
	if (parse_op(kiwi_json_get(j, "op"), &req->op, err) < 0)
		return -1;
	for (size_t i = 0; i < kiwi_json_len(j); i++) {
		const char *key = kiwi_json_key_at(j, i);
		if (strcmp(key, "op") && parse_key(req, key, kiwi_json_at(j, i), err) < 0)
			return -1;
	}
	if (req->op == KIWI_HELPER_OP_IDMAP && (!req->n_uid_map || !req->n_gid_map))
		return kiwi_error(err, EINVAL, "request", "idmap needs both \"uid_map\" and \"gid_map\"");
	if (req->op == KIWI_HELPER_OP_DISK && req->disk_size <= 0)
		return kiwi_error(err, EINVAL, "request", "disk needs \"size\", in bytes");
	if (req->op == KIWI_HELPER_OP_EGRESS_PREPARE && kiwi_egress_config_check(&req->egress, err) < 0)
		return -1;
	return 0;
}
