/* SPDX-License-Identifier: Apache-2.0 */
/* The cgroup operation's policy, pure code (unit-tested, fuzzed through
 * the config and request parsers): which parent a caller may name, and
 * its limits capped by its rule. The kernel enforces a limit only where
 * it is written, so a cap the caller leaves out is written too: the cap
 * always binds. */
#include "kiwi/helper.h"
#include "kiwi/units.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

int kiwi_helper_cgroup_path(const char *in, const char *what, char *out, size_t len, kiwi_err *err)
{
	const char *p = in;
	/* The mount where every pure v2 host has it; the hierarchy's own
	 * path otherwise. */
	if (!strncmp(p, "/sys/fs/cgroup/", 15))
		p += 14;
	else if (!strncmp(p, "/sys/", 5))
		return kiwi_error(err, EINVAL, "cgroup", "%s `%.64s` is not a path in the unified hierarchy", what, in);
	size_t o = 0;
	if (*p == '/')
		p++;
	while (*p) {
		size_t n = strcspn(p, "/");
		bool bad = n == 0 || (n == 1 && p[0] == '.') || (n == 2 && !strncmp(p, "..", 2));
		for (size_t i = 0; i < n && !bad; i++)
			bad = (unsigned char)p[i] < 0x20 || p[i] == 0x7f;
		if (bad)
			return kiwi_error(err, EINVAL, "cgroup", "%s `%.64s` must be a plain absolute path in the "
					  "cgroup2 hierarchy (no empty, . or .. components)", what, in);
		if (o + n + 2 > len)
			return kiwi_error(err, ENAMETOOLONG, "cgroup", "%s `%.64s...` is too long", what, in);
		o += (size_t)snprintf(out + o, len - o, "/%.*s", (int)n, p);
		p += n;
		if (*p == '/' && !*++p)
			return kiwi_error(err, EINVAL, "cgroup", "%s `%.64s` ends with a slash", what, in);
	}
	if (o == 0)
		snprintf(out, len, "/");
	return 0;
}

int kiwi_helper_json_size(const kiwi_json *v, const char *what, int64_t *out, kiwi_err *err)
{
	long long n;
	if (kiwi_json_int(v, &n) && n >= 0) {
		*out = n;
		return 0;
	}
	const char *s = kiwi_json_string(v);
	if (!s)
		return kiwi_error(err, EINVAL, "cgroup", "\"%s\" is not a size (bytes, or a string like \"2G\")", what);
	return kiwi_parse_size(s, what, out, err);
}

void kiwi_helper_format_size(int64_t v, char *buf, size_t len)
{
	static const char units[] = "KMGT";
	if (v == KIWI_CGROUP_MAX) {
		snprintf(buf, len, "max");
		return;
	}
	int u = -1;
	while (u < 3 && v >= 1024 && v % 1024 == 0) {
		v /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, len, "%" PRId64, v);
	else
		snprintf(buf, len, "%" PRId64 "%c", v, units[u]);
}

static void format_cpus(int64_t quota, int64_t period, char *buf, size_t len)
{
	if (quota == KIWI_CGROUP_MAX) {
		snprintf(buf, len, "max");
		return;
	}
	/* in units of 1e-5 CPU, exact for the CLI's 100000 us period */
	__int128 v = (__int128)quota * 100000 / (period > 0 ? period : KIWI_CGROUP_CPU_PERIOD_US);
	int64_t whole = (int64_t)(v / 100000), frac = (int64_t)(v % 100000);
	int w = snprintf(buf, len, "%" PRId64, whole);
	if (frac && w > 0 && (size_t)w < len) {
		snprintf(buf + w, len - (size_t)w, ".%05" PRId64, frac);
		for (size_t e = strlen(buf); buf[e - 1] == '0'; e--)
			buf[e - 1] = '\0';
	}
}

static void format_count(int64_t v, char *buf, size_t len)
{
	if (v == KIWI_CGROUP_MAX)
		snprintf(buf, len, "max");
	else
		snprintf(buf, len, "%" PRId64, v);
}

/* One limit against its cap: over it is refused, left out it is set to it. */
static int cap_one(int64_t *v, int64_t cap, const char *name, const char *key, const char *config_path,
		   void (*fmt)(int64_t, char *, size_t), kiwi_err *err)
{
	if (cap < 0)
		return 0;
	if (*v < 0) {
		*v = cap;
		return 0;
	}
	if (*v <= cap)
		return 0;
	char a[32], b[32];
	fmt(*v, a, sizeof(a));
	fmt(cap, b, sizeof(b));
	return kiwi_error(err, 0, "policy", "%s %s is over your %s %s in %s", name, a, key, b, config_path);
}

static int cap_cpus(struct kiwi_cgroup_limits *l, int64_t cap, const char *config_path, kiwi_err *err)
{
	if (cap < 0)
		return 0;
	if (l->cpu_quota_us < 0) {
		l->cpu_quota_us = cap;
		l->cpu_period_us = KIWI_CGROUP_CPU_PERIOD_US;
		return 0;
	}
	int64_t period = l->cpu_period_us > 0 ? l->cpu_period_us : KIWI_CGROUP_CPU_PERIOD_US;
	/* quota/period <= cap/100000, without rounding */
	if (l->cpu_quota_us != KIWI_CGROUP_MAX &&
	    (__int128)l->cpu_quota_us * KIWI_CGROUP_CPU_PERIOD_US <= (__int128)cap * period)
		return 0;
	char a[32], b[32];
	format_cpus(l->cpu_quota_us, period, a, sizeof(a));
	format_cpus(cap, KIWI_CGROUP_CPU_PERIOD_US, b, sizeof(b));
	return kiwi_error(err, 0, "policy", "cpus %s is over your max_cpus %s in %s", a, b, config_path);
}

static int check_parent(const struct kiwi_helper_rule *rule, const struct kiwi_helper_request *req,
			const char *config_path, char *parent, size_t len, kiwi_err *err)
{
	const char *sub = rule->cgroup_subtree[0] ? rule->cgroup_subtree : KIWI_HELPER_DEFAULT_SUBTREE;
	if (!req->parent[0])
		snprintf(parent, len, "%s", sub);
	else if (kiwi_helper_cgroup_path(req->parent, "cgroup parent", parent, len, err) < 0)
		return -1;
	size_t n = strlen(sub);
	if (strncmp(parent, sub, n) || (parent[n] && parent[n] != '/'))
		return kiwi_error(err, EPERM, "policy", "cgroup parent `%s` is outside your cgroup subtree `%s` "
				  "(cgroup_subtree in %s)", parent, sub, config_path);
	/* Another sandbox's cgroup is delegated to its owner: a cgroup
	 * below it would be in that owner's hands. */
	if (strstr(parent + n, "/kiwi-"))
		return kiwi_error(err, EPERM, "policy", "cgroup parent `%s` is inside a sandbox's cgroup (kiwi-*)",
				  parent);
	return 0;
}

int kiwi_helper_cgroup_check(const struct kiwi_helper_rule *rule, const struct kiwi_helper_request *req,
			     const char *config_path, struct kiwi_cgroup_limits *l, char *parent,
			     size_t len, kiwi_err *err)
{
	*l = req->limits;
	if (l->io_max || l->unified)
		return kiwi_error(err, EPERM, "policy", "io.max and raw cgroup files are not available through the helper");
	if (check_parent(rule, req, config_path, parent, len, err) < 0 ||
	    cap_one(&l->memory_max, rule->max_memory, "memory", "max_memory", config_path,
		    kiwi_helper_format_size, err) < 0 ||
	    cap_one(&l->memory_swap_max, rule->max_memory_swap, "memory-swap", "max_memory_swap", config_path,
		    kiwi_helper_format_size, err) < 0 ||
	    cap_one(&l->pids_max, rule->max_pids, "pids", "max_pids", config_path, format_count, err) < 0)
		return -1;
	return cap_cpus(l, rule->max_cpu_quota_us, config_path, err);
}
