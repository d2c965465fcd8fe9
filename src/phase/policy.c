/* SPDX-License-Identifier: Apache-2.0 */
/* The policy file (kiwi-run-policy(5)): read, walked key by key against a
 * fixed schema, every value through the same parser as its command-line
 * flag. Any key the schema does not know is an error that names its path,
 * so a typo never silently drops a limit. */
#include "policy_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kiwi/cleanup.h"
#include "kiwi/egress.h"
#include "kiwi/fileio.h"
#include "kiwi/units.h"

#define PATH_MAX_LEN 256

struct ctx {
	const char *origin;
	struct kiwi_policy *p;
	kiwi_err *err;
	/* Egress values are checked as they come by the egress module itself,
	 * into a scratch config, so the file accepts exactly what the flags do. */
	struct kiwi_egress_config egress;
	bool egress_seen;
};

static int fail(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct ctx *c, const char *fmt, ...)
{
	char why[KIWI_ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	/* Keys and values come from the file: a "\n" in one must not split
	 * the one error line the caller prints. */
	for (char *p = why; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	return kiwi_error(c->err, 0, "policy", "%s: %s", c->origin, why);
}

/* A value parser's error (it names the value) under the key's path. */
static int fail_value(struct ctx *c, const char *path, const kiwi_err *sub)
{
	return fail(c, "`%s`: %s", path, sub->msg);
}

static int fail_type(struct ctx *c, const char *path, const char *want, const kiwi_json *v)
{
	return fail(c, "`%s`: expected %s, got %s", path, want, kiwi_json_type_name(kiwi_json_type_of(v)));
}

static int fail_nomem(struct ctx *c)
{
	return kiwi_error(c->err, ENOMEM, "policy", "%s: cannot hold the policy", c->origin);
}

static void join(char *out, const char *parent, const char *key)
{
	snprintf(out, PATH_MAX_LEN, "%s%s%s", parent, parent[0] ? "." : "", key);
}

static void join_index(char *out, const char *parent, size_t i)
{
	snprintf(out, PATH_MAX_LEN, "%s[%zu]", parent, i);
}

static int expect(struct ctx *c, const char *path, const kiwi_json *v, enum kiwi_json_type t)
{
	static const char *const want[] = {
		[KIWI_JSON_NULL] = "null", [KIWI_JSON_BOOL] = "true or false",
		[KIWI_JSON_NUMBER] = "a number", [KIWI_JSON_STRING] = "a string",
		[KIWI_JSON_ARRAY] = "an array", [KIWI_JSON_OBJECT] = "an object",
	};
	return kiwi_json_type_of(v) == t ? 0 : fail_type(c, path, want[t], v);
}

/* A string, or a number taken as the text it was written with: the value
 * then goes through the flag's parser, so 512 and "512" mean the same. */
static const char *scalar_text(struct ctx *c, const char *path, const kiwi_json *v, const char *want)
{
	const char *s = kiwi_json_string(v);
	if (!s)
		s = kiwi_json_number_text(v);
	if (!s)
		fail_type(c, path, want, v);
	return s;
}

/* One entry of a key table: the key and what takes its value. */
typedef int (*field_fn)(struct ctx *c, const char *path, const kiwi_json *v, void *target);
struct field {
	const char *key;
	field_fn fn;
};

/* Walks an object, handing each key to its field; an unknown key fails. */
static int walk_object(struct ctx *c, const char *path, const kiwi_json *obj, const struct field *fields,
		       size_t n_fields, void *target)
{
	if (expect(c, path, obj, KIWI_JSON_OBJECT) < 0)
		return -1;
	for (size_t i = 0; i < kiwi_json_len(obj); i++) {
		const char *key = kiwi_json_key_at(obj, i);
		char sub[PATH_MAX_LEN];
		join(sub, path, key);
		size_t f = 0;
		while (f < n_fields && strcmp(fields[f].key, key))
			f++;
		if (f == n_fields)
			return fail(c, "unknown key `%s`", sub);
		if (fields[f].fn(c, sub, kiwi_json_at(obj, i), target) < 0)
			return -1;
	}
	return 0;
}

/* ---- limits ---- */

static int size_field(struct ctx *c, const char *path, const kiwi_json *v, int64_t *out)
{
	const char *s = scalar_text(c, path, v, "a size (\"512M\", \"2G\", a number of bytes or \"max\")");
	char what[PATH_MAX_LEN + 2];
	snprintf(what, sizeof(what), "`%s`", path);
	kiwi_err sub = { 0 };
	if (!s)
		return -1;
	if (kiwi_parse_size(s, what, out, &sub) < 0)
		return fail(c, "%s", sub.msg);
	return 0;
}

static int limit_memory(struct ctx *c, const char *path, const kiwi_json *v, void *t)
{
	return size_field(c, path, v, &((struct kiwi_phase_policy *)t)->limits.memory_max);
}

static int limit_memory_swap(struct ctx *c, const char *path, const kiwi_json *v, void *t)
{
	return size_field(c, path, v, &((struct kiwi_phase_policy *)t)->limits.memory_swap_max);
}

static int limit_pids(struct ctx *c, const char *path, const kiwi_json *v, void *t)
{
	const char *s = scalar_text(c, path, v, "a process count or \"max\"");
	kiwi_err sub = { 0 };
	if (!s)
		return -1;
	if (kiwi_parse_pids(s, &((struct kiwi_phase_policy *)t)->limits.pids_max, &sub) < 0)
		return fail_value(c, path, &sub);
	return 0;
}

static int limit_cpus(struct ctx *c, const char *path, const kiwi_json *v, void *t)
{
	struct kiwi_cgroup_limits *l = &((struct kiwi_phase_policy *)t)->limits;
	const char *s = scalar_text(c, path, v, "a CPU count (1.5) or \"max\"");
	kiwi_err sub = { 0 };
	if (!s)
		return -1;
	if (kiwi_parse_cpus(s, &l->cpu_quota_us, &l->cpu_period_us, &sub) < 0)
		return fail_value(c, path, &sub);
	return 0;
}

static int limit_io_weight(struct ctx *c, const char *path, const kiwi_json *v, void *t)
{
	long long w;
	if (!kiwi_json_int(v, &w) || w < 1 || w > 10000) {
		const char *text = kiwi_json_number_text(v);
		if (!text)
			return fail_type(c, path, "an integer from 1 to 10000", v);
		return fail(c, "`%s` wants 1 to 10000, got `%s`", path, text);
	}
	((struct kiwi_phase_policy *)t)->limits.io_weight = (int)w;
	return 0;
}

/* io.max lines: one string (lines split by \n) or an array of lines. */
static char *io_max_text(struct ctx *c, const char *path, const kiwi_json *v)
{
	const char *s = kiwi_json_string(v);
	if (s)
		return strdup(s) ?: (fail_nomem(c), NULL);
	if (kiwi_json_type_of(v) != KIWI_JSON_ARRAY) {
		fail_type(c, path, "a string or an array of `MAJ:MIN rbps=N ...` lines", v);
		return NULL;
	}
	size_t len = 1;
	for (size_t i = 0; i < kiwi_json_len(v); i++) {
		char item[PATH_MAX_LEN];
		join_index(item, path, i);
		if (expect(c, item, kiwi_json_at(v, i), KIWI_JSON_STRING) < 0)
			return NULL;
		len += strlen(kiwi_json_string(kiwi_json_at(v, i))) + 1;
	}
	char *text = calloc(1, len);
	if (!text) {
		fail_nomem(c);
		return NULL;
	}
	for (size_t i = 0; i < kiwi_json_len(v); i++) {
		if (i)
			strcat(text, "\n");
		strcat(text, kiwi_json_string(kiwi_json_at(v, i)));
	}
	return text;
}

static int limit_io_max(struct ctx *c, const char *path, const kiwi_json *v, void *t)
{
	struct kiwi_cgroup_limits *l = &((struct kiwi_phase_policy *)t)->limits;
	_cleanup_free_ char *text = io_max_text(c, path, v);
	kiwi_err sub = { 0 };
	if (!text)
		return -1;
	if (kiwi_cgroup_check_io_max(text, &sub) < 0)
		return fail_value(c, path, &sub);
	free((char *)l->io_max);
	l->io_max = TAKE_PTR(text);
	return 0;
}

static int limit_timeout(struct ctx *c, const char *path, const kiwi_json *v, void *t)
{
	struct kiwi_phase_policy *ph = t;
	const char *s = scalar_text(c, path, v, "a duration (\"30s\", \"5m\") or a number of seconds");
	char what[PATH_MAX_LEN + 2];
	snprintf(what, sizeof(what), "`%s`", path);
	kiwi_err sub = { 0 };
	if (!s)
		return -1;
	if (kiwi_parse_duration(s, what, &ph->timeout_ns, &sub) < 0)
		return fail(c, "%s", sub.msg);
	ph->timeout_set = true;
	return 0;
}

static int limit_output(struct ctx *c, const char *path, const kiwi_json *v, void *t)
{
	struct kiwi_phase_policy *ph = t;
	int64_t size;
	if (size_field(c, path, v, &size) < 0)
		return -1;
	ph->output_limit = (uint64_t)size;
	ph->output_limit_set = true;
	return 0;
}

static int limit_disk(struct ctx *c, const char *path, const kiwi_json *v, void *t)
{
	int64_t size;
	if (size_field(c, path, v, &size) < 0)
		return -1;
	if (size < 4096)
		return fail(c, "`%s` must be at least 4k, got `%s`", path, scalar_text(c, path, v, ""));
	((struct kiwi_phase_policy *)t)->disk_bytes = (uint64_t)size;
	return 0;
}

/* The keys are the kiwi-run(1) flags with - written _. */
static const struct field limit_fields[] = {
	{ "memory", limit_memory },       { "memory_swap", limit_memory_swap },
	{ "pids", limit_pids },           { "cpus", limit_cpus },
	{ "io_weight", limit_io_weight }, { "io_max", limit_io_max },
	{ "timeout", limit_timeout },     { "output_limit", limit_output },
	{ "disk", limit_disk },
};

static int phase_limits(struct ctx *c, const char *path, const kiwi_json *v, void *t)
{
	return walk_object(c, path, v, limit_fields, KIWI_ARRAY_SIZE(limit_fields), t);
}

/* ---- egress (install only) ---- */

static int egress_add(struct ctx *c, struct kiwi_phase_policy *ph, const char *path, const char *key,
		      const char *value)
{
	kiwi_err sub = { 0 };
	if (kiwi_egress_config_add(&c->egress, key, value, &sub) < 0) {
		/* The module speaks of the flag ("--allow-cidr `x`: why"); the
		 * file's reader wants the key, so keep only the why. */
		const char *why = sub.msg;
		const char *cut = strstr(why, "`: ");
		if (!strncmp(why, "--", 2) && cut)
			why = cut + 3;
		return fail(c, "`%s` `%s`: %s", path, value, why);
	}
	if (kiwi_strv_push(&ph->egress_keys, &ph->n_egress, key) < 0)
		return fail_nomem(c);
	size_t n = ph->n_egress - 1;
	if (kiwi_strv_push(&ph->egress_values, &n, value) < 0) {
		free(ph->egress_keys[--ph->n_egress]);
		return fail_nomem(c);
	}
	return 0;
}

static int egress_mode(struct ctx *c, const char *path, const kiwi_json *v, void *t)
{
	if (expect(c, path, v, KIWI_JSON_STRING) < 0)
		return -1;
	return egress_add(c, t, path, "egress", kiwi_json_string(v));
}

static int egress_dns(struct ctx *c, const char *path, const kiwi_json *v, void *t)
{
	if (expect(c, path, v, KIWI_JSON_STRING) < 0)
		return -1;
	return egress_add(c, t, path, "dns", kiwi_json_string(v));
}

/* allow_cidr, allow_host, allow_port: one value per item (the flags' comma
 * lists are an array here). */
static int egress_list(struct ctx *c, const char *path, const kiwi_json *v, void *t, const char *key)
{
	if (expect(c, path, v, KIWI_JSON_ARRAY) < 0)
		return -1;
	bool ports = !strcmp(key, "allow-port");
	for (size_t i = 0; i < kiwi_json_len(v); i++) {
		char item[PATH_MAX_LEN];
		join_index(item, path, i);
		const kiwi_json *e = kiwi_json_at(v, i);
		const char *s = ports ? scalar_text(c, item, e, "a port number") : kiwi_json_string(e);
		if (!s)
			return ports ? -1 : fail_type(c, item, "a string", e);
		if (strchr(s, ','))
			return fail(c, "`%s` `%s`: one value per item; a list is a JSON array", item, s);
		if (egress_add(c, t, item, key, s) < 0)
			return -1;
	}
	return 0;
}

static int egress_cidrs(struct ctx *c, const char *path, const kiwi_json *v, void *t)
{
	return egress_list(c, path, v, t, "allow-cidr");
}

static int egress_hosts(struct ctx *c, const char *path, const kiwi_json *v, void *t)
{
	return egress_list(c, path, v, t, "allow-host");
}

static int egress_ports(struct ctx *c, const char *path, const kiwi_json *v, void *t)
{
	return egress_list(c, path, v, t, "allow-port");
}

static const struct field egress_fields[] = {
	{ "mode", egress_mode },          { "allow_cidr", egress_cidrs }, { "allow_host", egress_hosts },
	{ "allow_port", egress_ports },   { "dns", egress_dns },
};

/* ---- the phases ---- */

static bool is_install(const struct ctx *c, const void *t)
{
	return t == &c->p->install;
}

static int phase_network(struct ctx *c, const char *path, const kiwi_json *v, void *t)
{
	struct kiwi_phase_policy *ph = t;
	const char *s = kiwi_json_string(v);
	if (!s)
		return fail_type(c, path, "\"egress\" or \"none\"", v);
	if (strcmp(s, "egress") && strcmp(s, "none"))
		return fail(c, "`%s` wants \"egress\" or \"none\", got `%s`", path, s);
	if (!is_install(c, t) && !strcmp(s, "egress"))
		return fail(c, "`%s`: verify never has a network; only \"none\" is accepted", path);
	ph->network_egress = !strcmp(s, "egress");
	return 0;
}

static int phase_egress(struct ctx *c, const char *path, const kiwi_json *v, void *t)
{
	if (!is_install(c, t))
		return fail(c, "`%s`: verify never has a network, so it takes no egress settings", path);
	c->egress_seen = true;
	return walk_object(c, path, v, egress_fields, KIWI_ARRAY_SIZE(egress_fields), t);
}

static int phase_env(struct ctx *c, const char *path, const kiwi_json *v, void *t)
{
	struct kiwi_phase_policy *ph = t;
	if (expect(c, path, v, KIWI_JSON_OBJECT) < 0)
		return -1;
	for (size_t i = 0; i < kiwi_json_len(v); i++) {
		const char *name = kiwi_json_key_at(v, i);
		char sub[PATH_MAX_LEN];
		join(sub, path, name);
		const char *value = kiwi_json_string(kiwi_json_at(v, i));
		if (!value)
			return fail_type(c, sub, "a string", kiwi_json_at(v, i));
		if (!kiwi_env_name_ok(name))
			return fail(c, "`%s`: not a variable name: want letters, digits and _, not starting with a digit",
				    sub);
		size_t len = strlen(name) + strlen(value) + 2;
		_cleanup_free_ char *kv = malloc(len);
		if (!kv)
			return fail_nomem(c);
		snprintf(kv, len, "%s=%s", name, value);
		if (kiwi_strv_push(&ph->set_env, &ph->n_set_env, kv) < 0)
			return fail_nomem(c);
	}
	return 0;
}

static int phase_pass_env(struct ctx *c, const char *path, const kiwi_json *v, void *t)
{
	struct kiwi_phase_policy *ph = t;
	if (is_install(c, t))
		return fail(c, "`%s`: install never receives the caller's variables; pass_env is for verify only",
			    path);
	if (expect(c, path, v, KIWI_JSON_ARRAY) < 0)
		return -1;
	for (size_t i = 0; i < kiwi_json_len(v); i++) {
		char item[PATH_MAX_LEN];
		join_index(item, path, i);
		const char *name = kiwi_json_string(kiwi_json_at(v, i));
		if (!name)
			return fail_type(c, item, "a variable name", kiwi_json_at(v, i));
		if (!kiwi_env_name_ok(name))
			return fail(c, "`%s`: `%s` is not a variable name (pass_env takes names, not patterns: "
				       "letters, digits and _, not starting with a digit)", item, name);
		for (size_t k = 0; k < ph->n_pass_env; k++)
			if (!strcmp(ph->pass_env[k], name))
				return fail(c, "`%s`: `%s` is listed twice", item, name);
		if (kiwi_strv_push(&ph->pass_env, &ph->n_pass_env, name) < 0)
			return fail_nomem(c);
	}
	return 0;
}

static bool path_ok(const char *s)
{
	if (!s || s[0] != '/')
		return false;
	for (const char *p = s; (p = strstr(p, "..")); p += 2)
		if (p[-1] == '/' && (p[2] == '/' || p[2] == '\0'))
			return false;
	return true;
}

static int cache_path(struct ctx *c, const char *path, const kiwi_json *v, char **out)
{
	const char *s = kiwi_json_string(v);
	if (!s)
		return fail_type(c, path, "an absolute path", v);
	if (!path_ok(s))
		return fail(c, "`%s` wants an absolute path without `..`, got `%s`", path, s);
	if (!s[strspn(s, "/")])
		return fail(c, "`%s`: a cache is a directory of its own, never `/`", path);
	free(*out);
	*out = strdup(s);
	return *out ? 0 : fail_nomem(c);
}

static int cache_host(struct ctx *c, const char *path, const kiwi_json *v, void *t)
{
	return cache_path(c, path, v, &((struct kiwi_policy_cache *)t)->host);
}

static int cache_dest(struct ctx *c, const char *path, const kiwi_json *v, void *t)
{
	return cache_path(c, path, v, &((struct kiwi_policy_cache *)t)->dest);
}

static const struct field cache_fields[] = { { "host", cache_host }, { "dest", cache_dest } };

static int one_cache(struct ctx *c, const char *item, const kiwi_json *e, struct kiwi_phase_policy *ph)
{
	struct kiwi_policy_cache *cache = &ph->caches[ph->n_caches];
	*cache = (struct kiwi_policy_cache){ 0 };
	ph->n_caches++;   /* counted now, so clear frees a half-made entry */
	if (walk_object(c, item, e, cache_fields, KIWI_ARRAY_SIZE(cache_fields), cache) < 0)
		return -1;
	if (!cache->host || !cache->dest)
		return fail(c, "`%s` needs both \"host\" and \"dest\"", item);
	for (size_t k = 0; k + 1 < ph->n_caches; k++)
		if (!strcmp(ph->caches[k].dest, cache->dest))
			return fail(c, "`%s`: two caches on `%s`", item, cache->dest);
	return 0;
}

static int phase_caches(struct ctx *c, const char *path, const kiwi_json *v, void *t)
{
	struct kiwi_phase_policy *ph = t;
	if (expect(c, path, v, KIWI_JSON_ARRAY) < 0)
		return -1;
	size_t n = kiwi_json_len(v);
	struct kiwi_policy_cache *grown = realloc(ph->caches, (ph->n_caches + n + 1) * sizeof(*grown));
	if (!grown)
		return fail_nomem(c);
	ph->caches = grown;
	for (size_t i = 0; i < n; i++) {
		char item[PATH_MAX_LEN];
		join_index(item, path, i);
		if (one_cache(c, item, kiwi_json_at(v, i), ph) < 0)
			return -1;
	}
	return 0;
}

static const struct field phase_fields[] = {
	{ "network", phase_network }, { "egress", phase_egress },     { "limits", phase_limits },
	{ "env", phase_env },         { "pass_env", phase_pass_env }, { "caches", phase_caches },
};

/* The egress module's own cross checks, said in the file's terms. */
static int check_egress(struct ctx *c)
{
	const struct kiwi_egress_config *e = &c->egress;
	if (e->kind == KIWI_EGRESS_PRIVATE_NETWORK && !e->n_allow_cidrs && !e->n_allow_cidrs6)
		return fail(c, "`install.egress.mode` private_network needs at least one `install.egress.allow_cidr`");
	if (e->kind == KIWI_EGRESS_HOST_ALLOWLIST && !e->n_allow_hosts)
		return fail(c, "`install.egress.mode` host_allowlist needs at least one `install.egress.allow_host`");
	if (e->kind != KIWI_EGRESS_HOST_ALLOWLIST && e->n_allow_hosts)
		return fail(c, "`install.egress.allow_host` needs `install.egress.mode` host_allowlist");
	kiwi_err sub = { 0 };
	if (kiwi_egress_config_check(e, &sub) < 0)
		return fail(c, "`install.egress`: %s", sub.msg);
	return 0;
}

static int one_phase(struct ctx *c, const char *path, const kiwi_json *v, void *t)
{
	struct kiwi_phase_policy *ph = t;
	if (walk_object(c, path, v, phase_fields, KIWI_ARRAY_SIZE(phase_fields), t) < 0)
		return -1;
	if (!is_install(c, t))
		return 0;
	if (c->egress_seen && !ph->network_egress)
		return fail(c, "`install.egress` needs `install.network` \"egress\" (it is \"none\")");
	return ph->network_egress ? check_egress(c) : 0;
}

/* ---- the top level ---- */

static int top_names(struct ctx *c, const char *path, const kiwi_json *v, char ***list, size_t *n,
		     bool model_keys)
{
	if (expect(c, path, v, KIWI_JSON_ARRAY) < 0)
		return -1;
	for (size_t i = 0; i < kiwi_json_len(v); i++) {
		char item[PATH_MAX_LEN];
		join_index(item, path, i);
		const char *s = kiwi_json_string(kiwi_json_at(v, i));
		if (!s)
			return fail_type(c, item, "a variable name or pattern", kiwi_json_at(v, i));
		if (!s[0] || strpbrk(s, "= \t\n"))
			return fail(c, "`%s`: `%s` is not a variable name or pattern", item, s);
		int r = model_keys ? kiwi_policy_add_model_key(c->p, s) : kiwi_strv_push(list, n, s);
		if (r < 0)
			return fail_nomem(c);
	}
	return 0;
}

static int top_deny_env(struct ctx *c, const char *path, const kiwi_json *v, void *t)
{
	(void)t;
	return top_names(c, path, v, &c->p->deny_env, &c->p->n_deny_env, false);
}

static int top_model_keys(struct ctx *c, const char *path, const kiwi_json *v, void *t)
{
	(void)t;
	return top_names(c, path, v, NULL, NULL, true);
}

static int top_allow_test_credentials(struct ctx *c, const char *path, const kiwi_json *v, void *t)
{
	(void)t;
	if (!kiwi_json_bool(v, &c->p->allow_test_credentials))
		return fail_type(c, path, "true or false", v);
	return 0;
}

static int top_version(struct ctx *c, const char *path, const kiwi_json *v, void *t)
{
	(void)c, (void)path, (void)v, (void)t;
	return 0;   /* checked before anything else */
}

static int top_install(struct ctx *c, const char *path, const kiwi_json *v, void *t)
{
	(void)t;
	return one_phase(c, path, v, &c->p->install);
}

static int top_verify(struct ctx *c, const char *path, const kiwi_json *v, void *t)
{
	(void)t;
	return one_phase(c, path, v, &c->p->verify);
}

static const struct field top_fields[] = {
	{ "version", top_version },         { "install", top_install },
	{ "verify", top_verify },           { "deny_env", top_deny_env },
	{ "model_keys", top_model_keys },   { "allow_test_credentials", top_allow_test_credentials },
};

/* First, so that a newer file is refused for its version, not for a key
 * this kiwi-run does not know yet. */
static int check_version(struct ctx *c, const kiwi_json *root)
{
	const kiwi_json *v = kiwi_json_get(root, "version");
	long long n;
	if (!v)
		return fail(c, "missing `version` (this kiwi-run reads version %d)", KIWI_POLICY_VERSION);
	if (!kiwi_json_int(v, &n))
		return fail_type(c, "version", "an integer", v);
	if (n != KIWI_POLICY_VERSION)
		return fail(c, "`version` %lld is not supported: this kiwi-run reads version %d", n,
			    KIWI_POLICY_VERSION);
	return 0;
}

/* The credential rules need the whole file (deny_env may come last), so
 * the variables are checked once everything is read. */
static int check_variables(struct ctx *c, enum kiwi_phase phase)
{
	const struct kiwi_phase_policy *ph = kiwi_policy_phase(c->p, phase);
	const char *name = kiwi_phase_name(phase);
	kiwi_err sub = { 0 };
	for (size_t i = 0; i < ph->n_set_env; i++) {
		_cleanup_free_ char *key = strndup(ph->set_env[i], strcspn(ph->set_env[i], "="));
		if (!key)
			return fail_nomem(c);
		if (kiwi_policy_check_literal(c->p, phase, key, &sub) < 0)
			return fail(c, "`%s.env.%s`: %s", name, key, sub.msg);
		for (size_t k = 0; k < ph->n_pass_env; k++)
			if (!strcmp(ph->pass_env[k], key))
				return fail(c, "`%s.env.%s`: `%s` is also in `%s.pass_env`: set it or pass it, not both",
					    name, key, key, name);
	}
	for (size_t i = 0; i < ph->n_pass_env; i++)
		if (kiwi_policy_check_env(c->p, phase, ph->pass_env[i], &sub) < 0)
			return fail(c, "`%s.pass_env[%zu]`: %s", name, i, sub.msg);
	return 0;
}

static void phase_init(struct kiwi_phase_policy *ph, bool network)
{
	*ph = (struct kiwi_phase_policy){ .network_egress = network,
					  .limits = KIWI_CGROUP_LIMITS_INIT };
}

void kiwi_policy_init(struct kiwi_policy *p)
{
	*p = (struct kiwi_policy){ 0 };
	phase_init(&p->install, true);
	phase_init(&p->verify, false);
}

const struct kiwi_phase_policy *kiwi_policy_phase(const struct kiwi_policy *p, enum kiwi_phase phase)
{
	return phase == KIWI_PHASE_INSTALL ? &p->install : &p->verify;
}

static void phase_clear(struct kiwi_phase_policy *ph)
{
	kiwi_strv_free(ph->egress_keys, ph->n_egress);
	kiwi_strv_free(ph->egress_values, ph->n_egress);
	free((char *)ph->limits.io_max);
	kiwi_strv_free(ph->pass_env, ph->n_pass_env);
	kiwi_strv_free(ph->set_env, ph->n_set_env);
	for (size_t i = 0; i < ph->n_caches; i++) {
		free(ph->caches[i].host);
		free(ph->caches[i].dest);
	}
	free(ph->caches);
}

void kiwi_policy_clear(struct kiwi_policy *p)
{
	if (!p)
		return;
	phase_clear(&p->install);
	phase_clear(&p->verify);
	kiwi_strv_free(p->deny_env, p->n_deny_env);
	kiwi_strv_free(p->model_keys, p->n_model_keys);
	kiwi_policy_init(p);
}

static int parse_tree(struct ctx *c, const kiwi_json *root)
{
	if (kiwi_json_type_of(root) != KIWI_JSON_OBJECT)
		return fail(c, "a policy is a JSON object, got %s", kiwi_json_type_name(kiwi_json_type_of(root)));
	if (check_version(c, root) < 0)
		return -1;
	if (walk_object(c, "", root, top_fields, KIWI_ARRAY_SIZE(top_fields), NULL) < 0)
		return -1;
	if (check_variables(c, KIWI_PHASE_INSTALL) < 0 || check_variables(c, KIWI_PHASE_VERIFY) < 0)
		return -1;
	return 0;
}

int kiwi_policy_parse(const char *text, size_t len, const char *origin, struct kiwi_policy *p,
		      kiwi_err *err)
{
	kiwi_policy_init(p);
	_cleanup_free_ struct ctx *c = calloc(1, sizeof(*c));
	if (!c)
		return kiwi_error(err, ENOMEM, "policy", "%s: cannot hold the policy", origin);
	*c = (struct ctx){ .origin = origin, .p = p, .err = err };
	kiwi_egress_config_init(&c->egress);
	kiwi_err sub = { 0 };
	_cleanup_json_ kiwi_json *root = kiwi_json_parse(text, len, &sub);
	if (!root)
		return fail(c, "%s", sub.msg);
	if (parse_tree(c, root) < 0) {
		kiwi_policy_clear(p);
		return -1;
	}
	return 0;
}

/* A policy decides what reaches the sandbox (the network, credentials), so
 * it must be a regular file that nobody but its owner can change, and the
 * owner must be root or the caller: the rule ssh applies to
 * authorized_keys. The checks are on the opened file (fstat), so a
 * rename between check and read changes nothing. */
static int open_policy(const char *path, int *out, kiwi_err *err)
{
	/* O_NONBLOCK: a FIFO put in the file's place must not hang us. */
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return kiwi_error(err, errno, "policy", "%s: cannot open", path);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return kiwi_error(err, errno, "policy", "%s: cannot stat", path);
	if (!S_ISREG(st.st_mode))
		return kiwi_error(err, 0, "policy", "%s: not a regular file", path);
	if (st.st_uid != 0 && st.st_uid != geteuid())
		return kiwi_error(err, 0, "policy",
				  "%s: owned by uid %u, neither root nor the caller (uid %u): a policy "
				  "decides what reaches the sandbox, so only a trusted owner may write it",
				  path, (unsigned)st.st_uid, (unsigned)geteuid());
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return kiwi_error(err, 0, "policy",
				  "%s: writable by group or others (mode %04o): a policy decides what reaches "
				  "the sandbox, so only its owner may write it (chmod go-w)",
				  path, (unsigned)(st.st_mode & 07777));
	*out = TAKE_FD(fd);
	return 0;
}

int kiwi_policy_load(const char *path, struct kiwi_policy *p, kiwi_err *err)
{
	kiwi_policy_init(p);
	_cleanup_close_ int fd = -1;
	if (open_policy(path, &fd, err) < 0)
		return -1;
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	kiwi_err sub = { 0 };
	if (kiwi_read_bounded(fd, KIWI_POLICY_MAX_BYTES, "the file", &text, &len, &sub) < 0)
		return kiwi_error(err, sub.errnum, "policy", "%s: %s", path, sub.msg);
	return kiwi_policy_parse(text, len, path, p, err);
}
