/* SPDX-License-Identifier: Apache-2.0 */
/* config.json -> struct kiwi_oci_config. The tree walk follows the
 * runtime-spec's sections; each refusal names the field (JSON path) and the
 * reason, so a bundle's author can fix it from the one line. */
#include "kiwi/oci_config.h"
#include "kiwi/cleanup.h"
#include "kiwi/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>

struct parser {
	struct kiwi_oci_config *c;
	kiwi_err *err;
};

__attribute__((format(printf, 3, 4)))
static int bad(struct parser *p, const char *where, const char *fmt, ...)
{
	char why[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	return kiwi_error(p->err, EINVAL, "config", "config.json: %s: %s", where, why);
}

static int want_type(struct parser *p, const kiwi_json *j, enum kiwi_json_type t, const char *where)
{
	if (kiwi_json_type_of(j) == t)
		return 0;
	return bad(p, where, "must be %s", kiwi_json_type_name(t));
}

/* Optional string: absent or null leaves *out as it is. */
static int opt_string(struct parser *p, const kiwi_json *obj, const char *key, const char *where,
		      const char **out)
{
	const kiwi_json *v = kiwi_json_get(obj, key);
	if (!v || kiwi_json_type_of(v) == KIWI_JSON_NULL)
		return 0;
	char path[128];
	snprintf(path, sizeof(path), "%s.%s", where, key);
	if (want_type(p, v, KIWI_JSON_STRING, path) < 0)
		return -1;
	*out = kiwi_json_string(v);
	return 0;
}

static int opt_bool(struct parser *p, const kiwi_json *obj, const char *key, const char *where, bool *out)
{
	const kiwi_json *v = kiwi_json_get(obj, key);
	if (!v || kiwi_json_type_of(v) == KIWI_JSON_NULL)
		return 0;
	if (!kiwi_json_bool(v, out)) {
		char path[128];
		snprintf(path, sizeof(path), "%s.%s", where, key);
		return bad(p, path, "must be %s", "true or false");
	}
	return 0;
}

/* Optional integer in [lo, hi]; *set tells whether it was there. */
static int opt_int(struct parser *p, const kiwi_json *obj, const char *key, const char *where,
		   long long lo, long long hi, long long *out, bool *set)
{
	const kiwi_json *v = kiwi_json_get(obj, key);
	if (set)
		*set = false;
	if (!v || kiwi_json_type_of(v) == KIWI_JSON_NULL)
		return 0;
	char path[128];
	snprintf(path, sizeof(path), "%s.%s", where, key);
	long long n;
	if (!kiwi_json_int(v, &n))
		return bad(p, path, "must be %s", "an integer");
	if (n < lo || n > hi)
		return bad(p, path, "%s", "is out of range");
	*out = n;
	if (set)
		*set = true;
	return 0;
}

/* A NULL-terminated array of the strings of a JSON array of strings. */
static int string_array(struct parser *p, const kiwi_json *v, const char *where, char ***out, size_t *n_out)
{
	*out = NULL;
	if (n_out)
		*n_out = 0;
	if (!v || kiwi_json_type_of(v) == KIWI_JSON_NULL)
		return 0;
	if (want_type(p, v, KIWI_JSON_ARRAY, where) < 0)
		return -1;
	size_t n = kiwi_json_len(v);
	char **a = calloc(n + 1, sizeof(*a));
	if (!a)
		return kiwi_error(p->err, ENOMEM, "config", "cannot allocate %s", where);
	for (size_t i = 0; i < n; i++) {
		const char *s = kiwi_json_string(kiwi_json_at(v, i));
		if (!s) {
			free(a);
			char path[128];
			snprintf(path, sizeof(path), "%s[%zu]", where, i);
			return bad(p, path, "must be %s", "a string");
		}
		a[i] = (char *)s;
	}
	*out = a;
	if (n_out)
		*n_out = n;
	return 0;
}

/* A key that kiwi-run cannot honour: present and not empty is refused. */
static int refuse_if_set(struct parser *p, const kiwi_json *obj, const char *key, const char *where,
			 const char *why)
{
	const kiwi_json *v = kiwi_json_get(obj, key);
	if (!v || kiwi_json_type_of(v) == KIWI_JSON_NULL)
		return 0;
	if ((kiwi_json_type_of(v) == KIWI_JSON_ARRAY || kiwi_json_type_of(v) == KIWI_JSON_OBJECT) &&
	    kiwi_json_len(v) == 0)
		return 0;
	char path[128];
	snprintf(path, sizeof(path), "%s.%s", where, key);
	return bad(p, path, "%s", why);
}

static void note_ignored(struct parser *p, const kiwi_json *obj, const char *key)
{
	const kiwi_json *v = kiwi_json_get(obj, key);
	if (v && kiwi_json_type_of(v) != KIWI_JSON_NULL && p->c->n_ignored < KIWI_ARRAY_SIZE(p->c->ignored))
		p->c->ignored[p->c->n_ignored++] = key;
}

/* ---- capabilities ---- */

static const char *const cap_names[] = {
	"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID",
	"SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW",
	"IPC_LOCK", "IPC_OWNER", "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT",
	"SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD",
	"LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG",
	"WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE",
};

int kiwi_oci_cap_count(void)
{
	return (int)KIWI_ARRAY_SIZE(cap_names);
}

const char *kiwi_oci_cap_name(int cap)
{
	return cap >= 0 && cap < kiwi_oci_cap_count() ? cap_names[cap] : NULL;
}

int kiwi_oci_cap_from_name(const char *name)
{
	if (!strncasecmp(name, "CAP_", 4))
		name += 4;
	for (int i = 0; i < kiwi_oci_cap_count(); i++)
		if (!strcasecmp(name, cap_names[i]))
			return i;
	return -1;
}

static int parse_caps(struct parser *p, const kiwi_json *caps)
{
	static const char *const sets[] = { "bounding", "effective", "inheritable", "permitted", "ambient" };
	if (!caps || kiwi_json_type_of(caps) == KIWI_JSON_NULL)
		return 0;
	if (want_type(p, caps, KIWI_JSON_OBJECT, "process.capabilities") < 0)
		return -1;
	for (size_t s = 0; s < KIWI_ARRAY_SIZE(sets); s++) {
		char where[64];
		snprintf(where, sizeof(where), "process.capabilities.%s", sets[s]);
		_cleanup_free_ char **names = NULL;
		size_t n = 0;
		if (string_array(p, kiwi_json_get(caps, sets[s]), where, &names, &n) < 0)
			return -1;
		for (size_t i = 0; i < n; i++) {
			int cap = kiwi_oci_cap_from_name(names[i]);
			/* Skipped with a warning, as runc does: a config written
			 * for a newer kernel still runs on this one. */
			if (cap < 0) {
				if (p->c->n_unknown_caps < KIWI_ARRAY_SIZE(p->c->unknown_caps))
					p->c->unknown_caps[p->c->n_unknown_caps++] = names[i];
				continue;
			}
			p->c->process.caps[s] |= 1ULL << cap;
		}
	}
	return 0;
}

/* ---- process ---- */

static const struct {
	const char *name;
	int resource;
} rlimit_names[] = {
	{ "RLIMIT_AS", RLIMIT_AS }, { "RLIMIT_CORE", RLIMIT_CORE }, { "RLIMIT_CPU", RLIMIT_CPU },
	{ "RLIMIT_DATA", RLIMIT_DATA }, { "RLIMIT_FSIZE", RLIMIT_FSIZE },
	{ "RLIMIT_LOCKS", RLIMIT_LOCKS }, { "RLIMIT_MEMLOCK", RLIMIT_MEMLOCK },
	{ "RLIMIT_MSGQUEUE", RLIMIT_MSGQUEUE }, { "RLIMIT_NICE", RLIMIT_NICE },
	{ "RLIMIT_NOFILE", RLIMIT_NOFILE }, { "RLIMIT_NPROC", RLIMIT_NPROC },
	{ "RLIMIT_RSS", RLIMIT_RSS }, { "RLIMIT_RTPRIO", RLIMIT_RTPRIO },
	{ "RLIMIT_RTTIME", RLIMIT_RTTIME }, { "RLIMIT_SIGPENDING", RLIMIT_SIGPENDING },
	{ "RLIMIT_STACK", RLIMIT_STACK },
};

const char *kiwi_oci_rlimit_name(int resource)
{
	for (size_t k = 0; k < KIWI_ARRAY_SIZE(rlimit_names); k++)
		if (rlimit_names[k].resource == resource)
			return rlimit_names[k].name;
	return NULL;
}

/* An rlimit value: JSON integers above INT64_MAX (RLIM_INFINITY is
 * 2^64-1) arrive as doubles. */
static bool rlimit_value(const kiwi_json *v, uint64_t *out)
{
	long long n;
	double d;
	if (kiwi_json_int(v, &n)) {
		if (n < 0)
			return false;
		*out = (uint64_t)n;
		return true;
	}
	if (!kiwi_json_double(v, &d) || d < 9.2e18 || d > 1.85e19)
		return false;
	*out = d >= 1.8446744073709552e19 ? UINT64_MAX : (uint64_t)d;
	return true;
}

static int parse_rlimits(struct parser *p, const kiwi_json *v)
{
	struct kiwi_oci_process *pr = &p->c->process;
	if (!v || kiwi_json_type_of(v) == KIWI_JSON_NULL)
		return 0;
	if (want_type(p, v, KIWI_JSON_ARRAY, "process.rlimits") < 0)
		return -1;
	pr->rlimits = calloc(kiwi_json_len(v) + 1, sizeof(*pr->rlimits));
	if (!pr->rlimits)
		return kiwi_error(p->err, ENOMEM, "config", "cannot allocate the rlimits");
	for (size_t i = 0; i < kiwi_json_len(v); i++) {
		const kiwi_json *r = kiwi_json_at(v, i);
		char where[64];
		snprintf(where, sizeof(where), "process.rlimits[%zu]", i);
		const char *type = NULL;
		if (want_type(p, r, KIWI_JSON_OBJECT, where) < 0 || opt_string(p, r, "type", where, &type) < 0)
			return -1;
		int res = -1;
		for (size_t k = 0; type && k < KIWI_ARRAY_SIZE(rlimit_names); k++)
			if (!strcmp(type, rlimit_names[k].name))
				res = rlimit_names[k].resource;
		if (res < 0)
			return bad(p, where, "unknown rlimit type `%s`", type ? type : "(none)");
		for (size_t k = 0; k < pr->n_rlimits; k++)
			if (pr->rlimits[k].resource == res)
				return bad(p, where, "rlimit `%s` is given twice", type);
		struct kiwi_oci_rlimit *rl = &pr->rlimits[pr->n_rlimits++];
		rl->resource = res;
		const kiwi_json *soft = kiwi_json_get(r, "soft"), *hard = kiwi_json_get(r, "hard");
		if (!soft || !hard || !rlimit_value(soft, &rl->soft) || !rlimit_value(hard, &rl->hard))
			return bad(p, where, "%s", "needs non-negative integer `soft` and `hard`");
		if (rl->soft > rl->hard)
			return bad(p, where, "%s", "soft is above hard");
	}
	return 0;
}

static int parse_user(struct parser *p, const kiwi_json *u)
{
	struct kiwi_oci_process *pr = &p->c->process;
	long long n;
	bool set;
	if (!u)
		return 0;
	if (want_type(p, u, KIWI_JSON_OBJECT, "process.user") < 0)
		return -1;
	if (opt_int(p, u, "uid", "process.user", 0, UINT32_MAX - 1, &n, &set) < 0)
		return -1;
	pr->uid = set ? (uint32_t)n : 0;
	if (opt_int(p, u, "gid", "process.user", 0, UINT32_MAX - 1, &n, &set) < 0)
		return -1;
	pr->gid = set ? (uint32_t)n : 0;
	if (opt_int(p, u, "umask", "process.user", 0, 0777, &n, &set) < 0)
		return -1;
	if (set) {
		pr->umask = (uint32_t)n;
		pr->umask_text = "set";
	}
	if (refuse_if_set(p, u, "username", "process.user", "is Windows-only") < 0)
		return -1;
	const kiwi_json *g = kiwi_json_get(u, "additionalGids");
	if (!g || kiwi_json_type_of(g) == KIWI_JSON_NULL)
		return 0;
	if (want_type(p, g, KIWI_JSON_ARRAY, "process.user.additionalGids") < 0)
		return -1;
	pr->additional_gids = calloc(kiwi_json_len(g) + 1, sizeof(*pr->additional_gids));
	if (!pr->additional_gids)
		return kiwi_error(p->err, ENOMEM, "config", "cannot allocate the gids");
	for (size_t i = 0; i < kiwi_json_len(g); i++) {
		if (!kiwi_json_int(kiwi_json_at(g, i), &n) || n < 0 || n >= UINT32_MAX)
			return bad(p, "process.user.additionalGids", "%s", "must hold gids");
		pr->additional_gids[pr->n_additional_gids++] = (uint32_t)n;
	}
	return 0;
}

static int parse_process(struct parser *p, const kiwi_json *v)
{
	struct kiwi_oci_process *pr = &p->c->process;
	long long n;
	bool set;
	if (!v || kiwi_json_type_of(v) == KIWI_JSON_NULL)
		return 0;
	if (want_type(p, v, KIWI_JSON_OBJECT, "process") < 0)
		return -1;
	p->c->has_process = true;
	if (opt_bool(p, v, "terminal", "process", &pr->terminal) < 0)
		return -1;
	const kiwi_json *cs = kiwi_json_get(v, "consoleSize");
	if (cs && kiwi_json_type_of(cs) != KIWI_JSON_NULL) {
		/* Either may be absent: 0, not set (opt_int leaves it alone). */
		long long height = 0, width = 0;
		if (want_type(p, cs, KIWI_JSON_OBJECT, "process.consoleSize") < 0 ||
		    opt_int(p, cs, "height", "process.consoleSize", 0, 65535, &height, NULL) < 0 ||
		    opt_int(p, cs, "width", "process.consoleSize", 0, 65535, &width, NULL) < 0)
			return -1;
		pr->console_height = (unsigned)height;
		pr->console_width = (unsigned)width;
	}
	if (parse_user(p, kiwi_json_get(v, "user")) < 0)
		return -1;
	if (string_array(p, kiwi_json_get(v, "args"), "process.args", &pr->args, NULL) < 0 ||
	    string_array(p, kiwi_json_get(v, "env"), "process.env", &pr->env, NULL) < 0)
		return -1;
	if (!pr->args || !pr->args[0] || !pr->args[0][0])
		return bad(p, "process.args", "%s", "must name the program to run");
	if (refuse_if_set(p, v, "commandLine", "process", "is Windows-only") < 0)
		return -1;
	if (!pr->env && !(pr->env = calloc(1, sizeof(*pr->env))))
		return kiwi_error(p->err, ENOMEM, "config", "cannot allocate the environment");
	for (char **e = pr->env; *e; e++)
		if (!strchr(*e, '=') || **e == '=')
			return bad(p, "process.env", "`%s` is not KEY=VALUE", *e);
	pr->cwd = "/";
	if (opt_string(p, v, "cwd", "process", &pr->cwd) < 0)
		return -1;
	if (pr->cwd[0] != '/')
		return bad(p, "process.cwd", "`%s` is not an absolute path", pr->cwd);
	if (parse_caps(p, kiwi_json_get(v, "capabilities")) < 0 || parse_rlimits(p, kiwi_json_get(v, "rlimits")) < 0)
		return -1;
	if (opt_bool(p, v, "noNewPrivileges", "process", &pr->no_new_privileges) < 0)
		return -1;
	if (opt_int(p, v, "oomScoreAdj", "process", -1000, 1000, &n, &set) < 0)
		return -1;
	pr->has_oom_score_adj = set;
	pr->oom_score_adj = (int)n;
	/* No LSM is driven by kiwi-run: the profile is not applied, which
	 * is what runc and crun do on a host without the LSM. */
	note_ignored(p, v, "apparmorProfile");
	note_ignored(p, v, "selinuxLabel");
	static const char *const refused[] = { "scheduler", "ioPriority", "execCPUAffinity" };
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(refused); i++)
		if (refuse_if_set(p, v, refused[i], "process", "is not supported by kiwi-run") < 0)
			return -1;
	return 0;
}

/* ---- mounts ---- */

static const struct {
	const char *name;
	uint64_t set, clr;
} mount_flags[] = {
	{ "ro", MOUNT_ATTR_RDONLY, 0 }, { "rw", 0, MOUNT_ATTR_RDONLY },
	{ "nosuid", MOUNT_ATTR_NOSUID, 0 }, { "suid", 0, MOUNT_ATTR_NOSUID },
	{ "nodev", MOUNT_ATTR_NODEV, 0 }, { "dev", 0, MOUNT_ATTR_NODEV },
	{ "noexec", MOUNT_ATTR_NOEXEC, 0 }, { "exec", 0, MOUNT_ATTR_NOEXEC },
	{ "noatime", MOUNT_ATTR_NOATIME, MOUNT_ATTR__ATIME },
	{ "relatime", MOUNT_ATTR_RELATIME, MOUNT_ATTR__ATIME },
	{ "strictatime", MOUNT_ATTR_STRICTATIME, MOUNT_ATTR__ATIME },
	{ "nodiratime", MOUNT_ATTR_NODIRATIME, 0 }, { "diratime", 0, MOUNT_ATTR_NODIRATIME },
	/* Accepted without effect: the kernel's defaults already. */
	{ "atime", 0, 0 }, { "norelatime", 0, 0 }, { "nostrictatime", 0, 0 },
	{ "async", 0, 0 }, { "nomand", 0, 0 }, { "defaults", 0, 0 },
};

static const struct {
	const char *name;
	uint64_t flag;
	bool recursive;
} propagations[] = {
	{ "private", MS_PRIVATE, false }, { "rprivate", MS_PRIVATE, true },
	{ "shared", MS_SHARED, false }, { "rshared", MS_SHARED, true },
	{ "slave", MS_SLAVE, false }, { "rslave", MS_SLAVE, true },
	{ "unbindable", MS_UNBINDABLE, false }, { "runbindable", MS_UNBINDABLE, true },
};

/* One mount option: a flag, a propagation, bind/rbind, or a filesystem
 * option passed on. Options kiwi-run cannot apply are refused. */
static int mount_option(struct parser *p, struct kiwi_oci_mount *m, char *opt, const char *where, size_t *n_data)
{
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(mount_flags); i++)
		if (!strcmp(opt, mount_flags[i].name)) {
			m->attr_set = (m->attr_set & ~mount_flags[i].clr) | mount_flags[i].set;
			m->attr_clr = (m->attr_clr & ~mount_flags[i].set) | mount_flags[i].clr;
			return 0;
		}
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(propagations); i++)
		if (!strcmp(opt, propagations[i].name)) {
			m->propagation = propagations[i].flag;
			m->propagation_recursive = propagations[i].recursive;
			return 0;
		}
	if (!strcmp(opt, "bind") || !strcmp(opt, "rbind")) {
		m->bind = true;
		m->recursive = opt[0] == 'r';
		return 0;
	}
	if (!strcmp(opt, "idmap") || !strcmp(opt, "ridmap")) {
		m->idmap = true;
		m->idmap_recursive |= opt[0] == 'r';
		return 0;
	}
	if (!strcmp(opt, "sync") || !strcmp(opt, "dirsync")) {
		*(opt[0] == 's' ? &m->sync : &m->dirsync) = true;
		return 0;
	}
	static const char *const refused[] = {
		"remount", "mand", "tmpcopyup", "copy-symlink",
		"rro", "rrw", "rnosuid", "rsuid", "rnodev", "rdev", "rnoexec", "rexec", "rnoatime",
		"ratime", "rrelatime", "rnorelatime", "rstrictatime", "rnostrictatime", "rdiratime",
		"rnodiratime", "nosymfollow", "rnosymfollow", "symfollow", "rsymfollow",
	};
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(refused); i++)
		if (!strcmp(opt, refused[i]))
			return bad(p, where, "mount option `%s` is not supported by kiwi-run", opt);
	if (!opt[0] || opt[0] == '=')
		return bad(p, where, "empty mount option `%s`", opt);
	m->data[(*n_data)++] = opt;
	return 0;
}

static int parse_idmaps(struct parser *p, const kiwi_json *v, const char *where, struct kiwi_oci_idmap **out,
			size_t *n_out);

/* Destinations are resolved inside the rootfs, so ".." components are
 * harmless there; still, an OCI destination must be absolute. */
static int parse_mount(struct parser *p, const kiwi_json *j, struct kiwi_oci_mount *m, const char *where)
{
	if (want_type(p, j, KIWI_JSON_OBJECT, where) < 0 ||
	    opt_string(p, j, "destination", where, &m->destination) < 0 ||
	    opt_string(p, j, "type", where, &m->type) < 0 || opt_string(p, j, "source", where, &m->source) < 0)
		return -1;
	if (!m->destination || m->destination[0] != '/')
		return bad(p, where, "%s", "destination must be an absolute path");
	char path[96];
	snprintf(path, sizeof(path), "%s.uidMappings", where);
	if (parse_idmaps(p, kiwi_json_get(j, "uidMappings"), path, &m->uid_maps, &m->n_uid_maps) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s.gidMappings", where);
	if (parse_idmaps(p, kiwi_json_get(j, "gidMappings"), path, &m->gid_maps, &m->n_gid_maps) < 0)
		return -1;
	if (!m->n_uid_maps != !m->n_gid_maps)
		return bad(p, where, "%s", "an idmapped mount needs both uidMappings and gidMappings");
	char **opts = NULL;
	size_t n = 0;
	snprintf(path, sizeof(path), "%s.options", where);
	if (string_array(p, kiwi_json_get(j, "options"), path, &opts, &n) < 0)
		return -1;
	m->data = calloc(n + 1, sizeof(*m->data));
	if (!m->data) {
		free(opts);
		return kiwi_error(p->err, ENOMEM, "config", "cannot allocate mount options");
	}
	size_t n_data = 0;
	for (size_t i = 0; i < n; i++)
		if (mount_option(p, m, opts[i], path, &n_data) < 0) {
			free(opts);
			return -1;
		}
	free(opts);
	if (m->type && !strcmp(m->type, "bind"))
		m->bind = true;
	if (m->bind) {
		if (n_data)
			return bad(p, where, "bind mount takes no filesystem option such as `%s`", m->data[0]);
		m->type = "bind";
	} else if (!m->type || !m->type[0] || !strcmp(m->type, "none")) {
		return bad(p, where, "%s", "needs a type, or the bind option");
	}
	if (!m->source)
		m->source = m->bind ? NULL : m->type;
	if (m->bind && (!m->source || !m->source[0]))
		return bad(p, where, "%s", "a bind mount needs a source");
	m->idmap |= m->n_uid_maps > 0;
	if (m->idmap && !m->bind)
		return bad(p, where, "%s", "idmapped mounts are bind mounts in kiwi-run");
	return 0;
}

/* An idmapped mount without maps of its own takes the container's. */
static int check_idmapped(struct parser *p)
{
	for (size_t i = 0; i < p->c->n_mounts; i++) {
		struct kiwi_oci_mount *m = &p->c->mounts[i];
		if (m->idmap && !m->n_uid_maps && !(p->c->new_ns & CLONE_NEWUSER)) {
			char where[32];
			snprintf(where, sizeof(where), "mounts[%zu]", i);
			return bad(p, where, "%s", "idmap needs uidMappings and gidMappings, or a user namespace");
		}
	}
	return 0;
}

static int parse_mounts(struct parser *p, const kiwi_json *v)
{
	if (!v || kiwi_json_type_of(v) == KIWI_JSON_NULL)
		return 0;
	if (want_type(p, v, KIWI_JSON_ARRAY, "mounts") < 0)
		return -1;
	p->c->mounts = calloc(kiwi_json_len(v) + 1, sizeof(*p->c->mounts));
	if (!p->c->mounts)
		return kiwi_error(p->err, ENOMEM, "config", "cannot allocate the mounts");
	for (size_t i = 0; i < kiwi_json_len(v); i++) {
		char where[32];
		snprintf(where, sizeof(where), "mounts[%zu]", i);
		if (parse_mount(p, kiwi_json_at(v, i), &p->c->mounts[p->c->n_mounts++], where) < 0)
			return -1;
	}
	return 0;
}

/* ---- linux ---- */

static const struct {
	const char *name;
	int flag;
} ns_names[] = {
	{ "pid", CLONE_NEWPID }, { "network", CLONE_NEWNET }, { "mount", CLONE_NEWNS },
	{ "ipc", CLONE_NEWIPC }, { "uts", CLONE_NEWUTS }, { "user", CLONE_NEWUSER },
	{ "cgroup", CLONE_NEWCGROUP }, { "time", CLONE_NEWTIME },
};

static int parse_namespaces(struct parser *p, const kiwi_json *v)
{
	struct kiwi_oci_config *c = p->c;
	if (!v || kiwi_json_type_of(v) == KIWI_JSON_NULL)
		return 0;
	if (want_type(p, v, KIWI_JSON_ARRAY, "linux.namespaces") < 0)
		return -1;
	/* One spare slot: annotations.c may add a network namespace. */
	c->namespaces = calloc(kiwi_json_len(v) + 1, sizeof(*c->namespaces));
	if (!c->namespaces)
		return kiwi_error(p->err, ENOMEM, "config", "cannot allocate the namespaces");
	for (size_t i = 0; i < kiwi_json_len(v); i++) {
		const kiwi_json *ns = kiwi_json_at(v, i);
		char where[40];
		snprintf(where, sizeof(where), "linux.namespaces[%zu]", i);
		const char *type = NULL, *path = NULL;
		if (want_type(p, ns, KIWI_JSON_OBJECT, where) < 0 || opt_string(p, ns, "type", where, &type) < 0 ||
		    opt_string(p, ns, "path", where, &path) < 0)
			return -1;
		int flag = 0;
		for (size_t k = 0; type && k < KIWI_ARRAY_SIZE(ns_names); k++)
			if (!strcmp(type, ns_names[k].name))
				flag = ns_names[k].flag;
		if (!flag)
			return bad(p, where, "unknown namespace type `%s`", type ? type : "(none)");
		if ((c->new_ns | c->join_ns) & (uint64_t)flag)
			return bad(p, where, "namespace `%s` is listed twice", type);
		if (path && !path[0])
			path = NULL;
		if (path && path[0] != '/')
			return bad(p, where, "path `%s` is not absolute", path);
		if (path && (flag == CLONE_NEWUSER || flag == CLONE_NEWTIME))
			return bad(p, where, "joining an existing %s namespace is not supported by kiwi-run", type);
		c->namespaces[c->n_namespaces++] = (struct kiwi_oci_namespace){ .type = flag, .path = path };
		if (path)
			c->join_ns |= (uint64_t)flag;
		else
			c->new_ns |= (uint64_t)flag;
	}
	if (c->new_ns & CLONE_NEWTIME)
		return bad(p, "linux.namespaces", "%s", "time namespaces are not supported by kiwi-run");
	return 0;
}

static int parse_idmaps(struct parser *p, const kiwi_json *v, const char *where, struct kiwi_oci_idmap **out,
			size_t *n_out)
{
	if (!v || kiwi_json_type_of(v) == KIWI_JSON_NULL)
		return 0;
	if (want_type(p, v, KIWI_JSON_ARRAY, where) < 0)
		return -1;
	/* The kernel takes at most 340 lines per map. */
	if (kiwi_json_len(v) > 340)
		return bad(p, where, "%s", "has more than 340 ranges");
	*out = calloc(kiwi_json_len(v) + 1, sizeof(**out));
	if (!*out)
		return kiwi_error(p->err, ENOMEM, "config", "cannot allocate %s", where);
	for (size_t i = 0; i < kiwi_json_len(v); i++) {
		const kiwi_json *m = kiwi_json_at(v, i);
		long long cid, hid, size;
		bool s1, s2, s3;
		if (want_type(p, m, KIWI_JSON_OBJECT, where) < 0 ||
		    opt_int(p, m, "containerID", where, 0, UINT32_MAX - 1, &cid, &s1) < 0 ||
		    opt_int(p, m, "hostID", where, 0, UINT32_MAX - 1, &hid, &s2) < 0 ||
		    opt_int(p, m, "size", where, 1, UINT32_MAX, &size, &s3) < 0)
			return -1;
		if (!s1 || !s2 || !s3)
			return bad(p, where, "%s", "each range needs containerID, hostID and size");
		(*out)[(*n_out)++] = (struct kiwi_oci_idmap){ (uint32_t)cid, (uint32_t)hid, (uint32_t)size };
	}
	return 0;
}

/* cgroup v1 numbers in the spec, v2 files in the kernel: the same
 * conversions runc and crun make, so a pod spec means the same here. */
static int parse_memory(struct parser *p, const kiwi_json *m)
{
	struct kiwi_cgroup_limits *l = &p->c->limits;
	long long limit, swap;
	bool has_limit, has_swap;
	if (!m)
		return 0;
	if (want_type(p, m, KIWI_JSON_OBJECT, "linux.resources.memory") < 0 ||
	    opt_int(p, m, "limit", "linux.resources.memory", -1, INT64_MAX, &limit, &has_limit) < 0 ||
	    opt_int(p, m, "swap", "linux.resources.memory", -1, INT64_MAX, &swap, &has_swap) < 0)
		return -1;
	static const char *const refused[] = { "reservation", "kernel", "kernelTCP", "swappiness",
					       "disableOOMKiller", "useHierarchy", "checkBeforeUpdate" };
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(refused); i++) {
		const kiwi_json *v = kiwi_json_get(m, refused[i]);
		bool b;
		long long n;
		/* false and 0 ask for nothing, and generators write them. */
		if (v && ((kiwi_json_bool(v, &b) && !b) || (kiwi_json_int(v, &n) && n == 0)))
			continue;
		if (refuse_if_set(p, m, refused[i], "linux.resources.memory", "is not supported by kiwi-run") < 0)
			return -1;
	}
	if (has_limit && limit != 0) {
		l->memory_max = limit < 0 ? KIWI_CGROUP_MAX : limit;
		p->c->has_limits = true;
	}
	if (has_swap && swap != 0) {
		if (swap > 0 && (!has_limit || limit <= 0))
			return bad(p, "linux.resources.memory.swap", "%s", "needs a memory limit");
		if (swap > 0 && swap < limit)
			return bad(p, "linux.resources.memory.swap", "%s", "is memory+swap and must be at least the limit");
		l->memory_swap_max = swap < 0 ? KIWI_CGROUP_MAX : swap - limit;
		p->c->has_limits = true;
	}
	return 0;
}

static int parse_cpu(struct parser *p, const kiwi_json *cpu)
{
	struct kiwi_cgroup_limits *l = &p->c->limits;
	long long quota, period, shares;
	bool has_quota, has_period, has_shares;
	if (!cpu)
		return 0;
	if (want_type(p, cpu, KIWI_JSON_OBJECT, "linux.resources.cpu") < 0 ||
	    opt_int(p, cpu, "quota", "linux.resources.cpu", -1, INT64_MAX, &quota, &has_quota) < 0 ||
	    opt_int(p, cpu, "period", "linux.resources.cpu", 0, 1000000, &period, &has_period) < 0 ||
	    opt_int(p, cpu, "shares", "linux.resources.cpu", 0, 262144, &shares, &has_shares) < 0)
		return -1;
	static const char *const refused[] = { "realtimeRuntime", "realtimePeriod", "cpus", "mems", "idle",
					       "burst" };
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(refused); i++) {
		const kiwi_json *v = kiwi_json_get(cpu, refused[i]);
		long long n;
		const char *s = kiwi_json_string(v);
		if (v && ((kiwi_json_int(v, &n) && n == 0) || (s && !s[0])))
			continue;
		if (refuse_if_set(p, cpu, refused[i], "linux.resources.cpu", "is not supported by kiwi-run") < 0)
			return -1;
	}
	if (has_quota && quota != 0) {
		l->cpu_quota_us = quota < 0 ? KIWI_CGROUP_MAX : quota;
		l->cpu_period_us = has_period && period ? period : KIWI_CGROUP_CPU_PERIOD_US;
		if (quota > 0 && quota < 1000)
			return bad(p, "linux.resources.cpu.quota", "%s", "must be at least 1000 microseconds");
		p->c->has_limits = true;
	}
	/* cgroup v1 shares (2..262144) onto v2's cpu.weight (1..10000), the
	 * mapping runc and crun use: Kubernetes sets shares on every pod (2
	 * for BestEffort, from the request otherwise). */
	if (has_shares && shares != 0) {
		if (shares < 2)
			return bad(p, "linux.resources.cpu.shares", "%s", "must be 0 (unset) or 2 to 262144");
		l->cpu_weight = (int)(1 + ((shares - 2) * 9999) / 262142);
		p->c->cpu_shares = shares;
		p->c->has_limits = true;
	}
	return 0;
}

/* cgroup v2 files written as given; the cgroup module checks the names
 * (a controller's own interface file, never a path or cgroup.*). */
static int parse_unified(struct parser *p, const kiwi_json *v)
{
	struct kiwi_oci_config *c = p->c;
	if (!v || kiwi_json_type_of(v) == KIWI_JSON_NULL || !kiwi_json_len(v))
		return 0;
	if (want_type(p, v, KIWI_JSON_OBJECT, "linux.resources.unified") < 0)
		return -1;
	c->unified = calloc(2 * kiwi_json_len(v) + 1, sizeof(*c->unified));
	if (!c->unified)
		return kiwi_error(p->err, ENOMEM, "config", "cannot allocate linux.resources.unified");
	for (size_t i = 0; i < kiwi_json_len(v); i++) {
		const char *key = kiwi_json_key_at(v, i), *val = kiwi_json_string(kiwi_json_at(v, i));
		if (!val)
			return bad(p, "linux.resources.unified", "value of `%s` must be a string", key);
		if (strchr(key, '/') || !strchr(key, '.') || !strncmp(key, "cgroup.", 7))
			return bad(p, "linux.resources.unified", "`%s` is not a controller's interface file", key);
		c->unified[2 * i] = key;
		c->unified[2 * i + 1] = val;
	}
	c->limits.unified = c->unified;
	c->has_limits = true;
	return 0;
}

/* linux.resources.devices: enforced by the nodes kiwi-run places and the
 * mounts it makes nodev (kiwi-run-oci(1), DEVICES), so only read. */
static int parse_device_rules(struct parser *p, const kiwi_json *v)
{
	struct kiwi_oci_config *c = p->c;
	if (!v || kiwi_json_type_of(v) == KIWI_JSON_NULL)
		return 0;
	if (want_type(p, v, KIWI_JSON_ARRAY, "linux.resources.devices") < 0)
		return -1;
	c->device_rules = calloc(kiwi_json_len(v) + 1, sizeof(*c->device_rules));
	if (!c->device_rules)
		return kiwi_error(p->err, ENOMEM, "config", "cannot allocate the device rules");
	for (size_t i = 0; i < kiwi_json_len(v); i++) {
		const kiwi_json *d = kiwi_json_at(v, i);
		struct kiwi_oci_device_rule *r = &c->device_rules[c->n_device_rules++];
		char where[48];
		snprintf(where, sizeof(where), "linux.resources.devices[%zu]", i);
		const char *type = NULL, *access = NULL;
		long long n;
		bool set;
		if (want_type(p, d, KIWI_JSON_OBJECT, where) < 0 || opt_bool(p, d, "allow", where, &r->allow) < 0 ||
		    opt_string(p, d, "type", where, &type) < 0 || opt_string(p, d, "access", where, &access) < 0)
			return -1;
		if (type && (strlen(type) != 1 || !strchr("acb", type[0])))
			return bad(p, where, "type `%s` is not a, c or b", type);
		r->type = type ? type[0] : 'a';
		if (opt_int(p, d, "major", where, -1, 0xfff, &n, &set) < 0)
			return -1;
		r->major = set ? n : -1;
		if (opt_int(p, d, "minor", where, -1, 0xfffff, &n, &set) < 0)
			return -1;
		r->minor = set ? n : -1;
		for (const char *a = access ? access : "rwm"; *a; a++) {
			const char *at = strchr("rwm", *a);
			if (!at)
				return bad(p, where, "access `%s` is not made of r, w and m", access);
			r->access |= 1u << (at - "rwm");
		}
	}
	return 0;
}

static bool rule_matches(const struct kiwi_oci_device_rule *r, char type, int64_t major, int64_t minor)
{
	return (r->type == 'a' || r->type == type) && (r->major < 0 || r->major == major) &&
	       (r->minor < 0 || r->minor == minor);
}

unsigned kiwi_oci_device_access(const struct kiwi_oci_config *c, char type, int64_t major, int64_t minor)
{
	/* runc's default nodes, with /dev/console, the ptys and tun. */
	static const int64_t always[][2] = { { 1, 3 }, { 1, 5 }, { 1, 7 }, { 1, 8 }, { 1, 9 }, { 5, 0 },
					     { 5, 1 }, { 5, 2 }, { 136, -1 }, { 10, 200 } };
	unsigned all = KIWI_OCI_DEV_READ | KIWI_OCI_DEV_WRITE | KIWI_OCI_DEV_MKNOD, got = all;
	for (size_t i = 0; i < c->n_device_rules; i++)
		if (rule_matches(&c->device_rules[i], type, major, minor))
			got = c->device_rules[i].allow ? got | c->device_rules[i].access : got & ~c->device_rules[i].access;
	for (size_t i = 0; type == 'c' && i < KIWI_ARRAY_SIZE(always); i++)
		if (always[i][0] == major && (always[i][1] < 0 || always[i][1] == minor))
			return all;
	for (size_t i = 0; i < c->n_devices; i++)
		if (c->devices[i].type == type && c->devices[i].major == major && c->devices[i].minor == minor)
			return all;
	return got;
}

static int parse_resources(struct parser *p, const kiwi_json *r)
{
	long long n;
	bool set;
	if (!r || kiwi_json_type_of(r) == KIWI_JSON_NULL)
		return 0;
	if (want_type(p, r, KIWI_JSON_OBJECT, "linux.resources") < 0)
		return -1;
	if (parse_memory(p, kiwi_json_get(r, "memory")) < 0 || parse_cpu(p, kiwi_json_get(r, "cpu")) < 0)
		return -1;
	const kiwi_json *pids = kiwi_json_get(r, "pids");
	if (pids && (want_type(p, pids, KIWI_JSON_OBJECT, "linux.resources.pids") < 0 ||
		     opt_int(p, pids, "limit", "linux.resources.pids", INT64_MIN, INT64_MAX, &n, &set) < 0))
		return -1;
	if (pids && set && n != 0) {
		p->c->limits.pids_max = n < 0 ? KIWI_CGROUP_MAX : n;
		p->c->has_limits = true;
	}
	const kiwi_json *bio = kiwi_json_get(r, "blockIO");
	if (bio && kiwi_json_type_of(bio) != KIWI_JSON_NULL) {
		if (want_type(p, bio, KIWI_JSON_OBJECT, "linux.resources.blockIO") < 0 ||
		    opt_int(p, bio, "weight", "linux.resources.blockIO", 0, 1000, &n, &set) < 0)
			return -1;
		if (set && n != 0) {
			if (n < 10)
				return bad(p, "linux.resources.blockIO.weight", "%s", "must be 10..1000");
			p->c->limits.io_weight = (int)(1 + (n - 10) * 9999 / 990);
			p->c->has_limits = true;
		}
		static const char *const refused[] = { "leafWeight", "weightDevice", "throttleReadBpsDevice",
						       "throttleWriteBpsDevice", "throttleReadIOPSDevice",
						       "throttleWriteIOPSDevice" };
		for (size_t i = 0; i < KIWI_ARRAY_SIZE(refused); i++)
			if (refuse_if_set(p, bio, refused[i], "linux.resources.blockIO", "is not supported by kiwi-run") < 0)
				return -1;
	}
	if (parse_device_rules(p, kiwi_json_get(r, "devices")) < 0)
		return -1;
	static const char *const refused[] = { "hugepageLimits", "network", "rdma" };
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(refused); i++)
		if (refuse_if_set(p, r, refused[i], "linux.resources", "is not supported by kiwi-run") < 0)
			return -1;
	return parse_unified(p, kiwi_json_get(r, "unified"));
}

static int parse_devices(struct parser *p, const kiwi_json *v)
{
	struct kiwi_oci_config *c = p->c;
	if (!v || kiwi_json_type_of(v) == KIWI_JSON_NULL)
		return 0;
	if (want_type(p, v, KIWI_JSON_ARRAY, "linux.devices") < 0)
		return -1;
	c->devices = calloc(kiwi_json_len(v) + 1, sizeof(*c->devices));
	if (!c->devices)
		return kiwi_error(p->err, ENOMEM, "config", "cannot allocate the devices");
	for (size_t i = 0; i < kiwi_json_len(v); i++) {
		const kiwi_json *d = kiwi_json_at(v, i);
		struct kiwi_oci_device *dev = &c->devices[c->n_devices++];
		char where[40];
		snprintf(where, sizeof(where), "linux.devices[%zu]", i);
		const char *type = NULL;
		long long n;
		bool set;
		if (want_type(p, d, KIWI_JSON_OBJECT, where) < 0 || opt_string(p, d, "path", where, &dev->path) < 0 ||
		    opt_string(p, d, "type", where, &type) < 0)
			return -1;
		if (!dev->path || dev->path[0] != '/')
			return bad(p, where, "%s", "needs an absolute path");
		if (!type || strlen(type) != 1 || !strchr("cbup", type[0]))
			return bad(p, where, "%s", "type must be c, b, u or p");
		dev->type = type[0];
		if (opt_int(p, d, "major", where, 0, 0xfff, &n, &set) < 0)
			return -1;
		if (dev->type != 'p' && !set)
			return bad(p, where, "%s", "needs a major number");
		dev->major = set ? n : 0;
		if (opt_int(p, d, "minor", where, 0, 0xfffff, &n, &set) < 0)
			return -1;
		if (dev->type != 'p' && !set)
			return bad(p, where, "%s", "needs a minor number");
		dev->minor = set ? n : 0;
		dev->mode = 0666;
		if (opt_int(p, d, "fileMode", where, 0, 07777, &n, &set) < 0)
			return -1;
		if (set)
			dev->mode = (uint32_t)n;
		if (opt_int(p, d, "uid", where, 0, UINT32_MAX - 1, &n, &set) < 0)
			return -1;
		dev->uid = set ? (uint32_t)n : 0;
		if (opt_int(p, d, "gid", where, 0, UINT32_MAX - 1, &n, &set) < 0)
			return -1;
		dev->gid = set ? (uint32_t)n : 0;
	}
	return 0;
}

/* A sysctl is written in the container's /proc/sys, but most are global:
 * only those of a namespace the container has apart from the host may be
 * set (the list runc allows), never the host's through a shared one. */
static int check_sysctl_ns(struct parser *p, const char *key)
{
	static const char *const ipc[] = { "kernel.msgmax", "kernel.msgmnb", "kernel.msgmni", "kernel.sem",
					   "kernel.shmall", "kernel.shmmax", "kernel.shmmni", "kernel.shm_rmid_forced" };
	uint64_t own = p->c->new_ns | p->c->join_ns;
	if (!strcmp(key, "kernel.hostname") || !strcmp(key, "kernel.domainname"))
		return bad(p, "linux.sysctl", "`%s` is refused: set `%s` in config.json instead", key,
			   key[7] == 'h' ? "hostname" : "domainname");
	if (!strncmp(key, "net.", 4)) {
		if (!(own & CLONE_NEWNET))
			return bad(p, "linux.sysctl", "`%s` needs a network namespace of the container's own", key);
		return 0;
	}
	bool is_ipc = !strncmp(key, "fs.mqueue.", 10);
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(ipc); i++)
		is_ipc |= !strcmp(key, ipc[i]);
	if (!is_ipc)
		return bad(p, "linux.sysctl", "`%s` is not in a namespace of the container's own: it would change the host",
			   key);
	if (!(own & CLONE_NEWIPC))
		return bad(p, "linux.sysctl", "`%s` needs an ipc namespace of the container's own", key);
	return 0;
}

static int parse_sysctl(struct parser *p, const kiwi_json *v)
{
	struct kiwi_oci_config *c = p->c;
	if (!v || kiwi_json_type_of(v) == KIWI_JSON_NULL)
		return 0;
	if (want_type(p, v, KIWI_JSON_OBJECT, "linux.sysctl") < 0)
		return -1;
	c->sysctl = calloc(2 * kiwi_json_len(v) + 1, sizeof(*c->sysctl));
	if (!c->sysctl)
		return kiwi_error(p->err, ENOMEM, "config", "cannot allocate the sysctls");
	for (size_t i = 0; i < kiwi_json_len(v); i++) {
		const char *key = kiwi_json_key_at(v, i), *val = kiwi_json_string(kiwi_json_at(v, i));
		if (!val)
			return bad(p, "linux.sysctl", "value of `%s` must be a string", key);
		/* A key becomes a path under /proc/sys: no way out of it. */
		if (!key[0] || strstr(key, "..") || strchr(key, '/') || key[0] == '.')
			return bad(p, "linux.sysctl", "`%s` is not a sysctl name", key);
		if (check_sysctl_ns(p, key) < 0)
			return -1;
		c->sysctl[2 * i] = key;
		c->sysctl[2 * i + 1] = val;
		c->n_sysctl++;
	}
	return 0;
}

static int parse_propagation(struct parser *p, const kiwi_json *lx)
{
	const char *prop = NULL;
	if (opt_string(p, lx, "rootfsPropagation", "linux", &prop) < 0)
		return -1;
	if (!prop || !prop[0])
		return 0;
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(propagations); i++)
		if (!strcmp(prop, propagations[i].name)) {
			p->c->rootfs_propagation = propagations[i].flag;
			return 0;
		}
	return bad(p, "linux.rootfsPropagation", "unknown propagation `%s`", prop);
}

static int parse_seccomp(struct parser *p, const kiwi_json *s)
{
	if (!s || kiwi_json_type_of(s) == KIWI_JSON_NULL)
		return 0;
	if (want_type(p, s, KIWI_JSON_OBJECT, "linux.seccomp") < 0)
		return -1;
	/* The seccomp module checks the profile itself, at create. */
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
	if (!w)
		return kiwi_error(p->err, ENOMEM, "config", "cannot allocate a JSON writer");
	kiwi_jw_value(w, s);
	size_t len;
	const char *text = kiwi_jw_text(w, &len);
	p->c->seccomp_json = strndup(text, len);
	if (!p->c->seccomp_json)
		return kiwi_error(p->err, ENOMEM, "config", "cannot copy linux.seccomp");
	return 0;
}

static int path_list(struct parser *p, const kiwi_json *lx, const char *key, const char ***out, size_t *n)
{
	char where[40];
	snprintf(where, sizeof(where), "linux.%s", key);
	if (string_array(p, kiwi_json_get(lx, key), where, (char ***)out, n) < 0)
		return -1;
	for (size_t i = 0; i < *n; i++)
		if ((*out)[i][0] != '/')
			return bad(p, where, "`%s` is not an absolute path", (*out)[i]);
	return 0;
}

static int parse_linux(struct parser *p, const kiwi_json *v)
{
	struct kiwi_oci_config *c = p->c;
	if (!v || kiwi_json_type_of(v) == KIWI_JSON_NULL)
		return bad(p, "linux", "%s", "is required on Linux");
	if (want_type(p, v, KIWI_JSON_OBJECT, "linux") < 0)
		return -1;
	if (parse_namespaces(p, kiwi_json_get(v, "namespaces")) < 0 ||
	    parse_idmaps(p, kiwi_json_get(v, "uidMappings"), "linux.uidMappings", &c->uid_maps, &c->n_uid_maps) < 0 ||
	    parse_idmaps(p, kiwi_json_get(v, "gidMappings"), "linux.gidMappings", &c->gid_maps, &c->n_gid_maps) < 0)
		return -1;
	if ((c->n_uid_maps || c->n_gid_maps) && !(c->new_ns & CLONE_NEWUSER))
		return bad(p, "linux.uidMappings", "%s", "needs a new user namespace");
	if ((c->new_ns & CLONE_NEWUSER) && (!c->n_uid_maps || !c->n_gid_maps))
		return bad(p, "linux.namespaces", "%s", "a new user namespace needs uidMappings and gidMappings");
	if (opt_string(p, v, "cgroupsPath", "linux", &c->cgroups_path) < 0 ||
	    parse_resources(p, kiwi_json_get(v, "resources")) < 0 || parse_seccomp(p, kiwi_json_get(v, "seccomp")) < 0 ||
	    path_list(p, v, "maskedPaths", &c->masked_paths, &c->n_masked_paths) < 0 ||
	    path_list(p, v, "readonlyPaths", &c->readonly_paths, &c->n_readonly_paths) < 0 ||
	    parse_devices(p, kiwi_json_get(v, "devices")) < 0 || parse_sysctl(p, kiwi_json_get(v, "sysctl")) < 0 ||
	    parse_propagation(p, v) < 0)
		return -1;
	if (c->cgroups_path && !c->cgroups_path[0])
		c->cgroups_path = NULL;
	note_ignored(p, v, "mountLabel");
	static const char *const refused[] = { "intelRdt", "personality", "timeOffsets", "memoryPolicy",
					       "netDevices" };
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(refused); i++)
		if (refuse_if_set(p, v, refused[i], "linux", "is not supported by kiwi-run") < 0)
			return -1;
	return 0;
}

/* ---- hooks ---- */

static const char *const hook_kinds[] = {
	"prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop",
};

const char *kiwi_oci_hook_kind_name(enum kiwi_oci_hook_kind k)
{
	return k < KIWI_OCI_HOOK_KINDS ? hook_kinds[k] : "?";
}

static int parse_hook(struct parser *p, const kiwi_json *h, struct kiwi_oci_hook *hook, const char *where)
{
	long long n;
	bool set;
	char path[64];
	if (want_type(p, h, KIWI_JSON_OBJECT, where) < 0 || opt_string(p, h, "path", where, &hook->path) < 0)
		return -1;
	if (!hook->path || hook->path[0] != '/')
		return bad(p, where, "%s", "needs an absolute path");
	snprintf(path, sizeof(path), "%s.args", where);
	if (string_array(p, kiwi_json_get(h, "args"), path, &hook->argv, NULL) < 0)
		return -1;
	if (!hook->argv || !hook->argv[0]) {
		free(hook->argv);
		if (!(hook->argv = calloc(2, sizeof(*hook->argv))))
			return kiwi_error(p->err, ENOMEM, "config", "cannot allocate a hook");
		hook->argv[0] = (char *)hook->path;
	}
	snprintf(path, sizeof(path), "%s.env", where);
	/* Without `env`, NULL: the hook gets the runtime's own environment. */
	if (string_array(p, kiwi_json_get(h, "env"), path, &hook->env, NULL) < 0)
		return -1;
	if (opt_int(p, h, "timeout", where, 1, 86400, &n, &set) < 0)
		return -1;
	hook->timeout_s = set ? (int)n : 0;
	return 0;
}

static int parse_hooks(struct parser *p, const kiwi_json *v)
{
	struct kiwi_oci_config *c = p->c;
	if (!v || kiwi_json_type_of(v) == KIWI_JSON_NULL)
		return 0;
	if (want_type(p, v, KIWI_JSON_OBJECT, "hooks") < 0)
		return -1;
	for (size_t k = 0; k < KIWI_OCI_HOOK_KINDS; k++) {
		const kiwi_json *list = kiwi_json_get(v, hook_kinds[k]);
		char where[48];
		snprintf(where, sizeof(where), "hooks.%s", hook_kinds[k]);
		if (!list || kiwi_json_type_of(list) == KIWI_JSON_NULL)
			continue;
		if (want_type(p, list, KIWI_JSON_ARRAY, where) < 0)
			return -1;
		c->hooks[k] = calloc(kiwi_json_len(list) + 1, sizeof(*c->hooks[k]));
		if (!c->hooks[k])
			return kiwi_error(p->err, ENOMEM, "config", "cannot allocate the hooks");
		for (size_t i = 0; i < kiwi_json_len(list); i++) {
			snprintf(where, sizeof(where), "hooks.%s[%zu]", hook_kinds[k], i);
			if (parse_hook(p, kiwi_json_at(list, i), &c->hooks[k][c->n_hooks[k]++], where) < 0)
				return -1;
		}
	}
	return 0;
}

/* ---- top level ---- */

static int parse_root(struct parser *p, const kiwi_json *v)
{
	struct kiwi_oci_config *c = p->c;
	if (!v)
		return bad(p, "root", "%s", "is required");
	if (want_type(p, v, KIWI_JSON_OBJECT, "root") < 0 || opt_string(p, v, "path", "root", &c->root_path) < 0 ||
	    opt_bool(p, v, "readonly", "root", &c->root_readonly) < 0)
		return -1;
	if (!c->root_path || !c->root_path[0])
		return bad(p, "root.path", "%s", "is required");
	return 0;
}

static int parse_top(struct parser *p)
{
	struct kiwi_oci_config *c = p->c;
	const kiwi_json *doc = c->doc;
	if (want_type(p, doc, KIWI_JSON_OBJECT, "(top level)") < 0 ||
	    opt_string(p, doc, "ociVersion", "(top level)", &c->oci_version) < 0)
		return -1;
	if (!c->oci_version)
		return bad(p, "ociVersion", "%s", "is required");
	/* Every 1.x is a compatible extension of 1.0. */
	if (strncmp(c->oci_version, "1.", 2) != 0)
		return bad(p, "ociVersion", "`%s` is not a 1.x runtime-spec version", c->oci_version);
	if (parse_root(p, kiwi_json_get(doc, "root")) < 0 || parse_process(p, kiwi_json_get(doc, "process")) < 0 ||
	    opt_string(p, doc, "hostname", "(top level)", &c->hostname) < 0 ||
	    opt_string(p, doc, "domainname", "(top level)", &c->domainname) < 0 ||
	    parse_mounts(p, kiwi_json_get(doc, "mounts")) < 0 || parse_linux(p, kiwi_json_get(doc, "linux")) < 0 ||
	    parse_hooks(p, kiwi_json_get(doc, "hooks")) < 0)
		return -1;
	if (check_idmapped(p) < 0)
		return -1;
	if ((c->hostname || c->domainname) && !(c->new_ns & CLONE_NEWUTS))
		return bad(p, "hostname", "%s", "needs a new uts namespace");
	const kiwi_json *a = kiwi_json_get(doc, "annotations");
	if (a && kiwi_json_type_of(a) != KIWI_JSON_NULL) {
		if (want_type(p, a, KIWI_JSON_OBJECT, "annotations") < 0)
			return -1;
		for (size_t i = 0; i < kiwi_json_len(a); i++)
			if (!kiwi_json_string(kiwi_json_at(a, i)))
				return bad(p, "annotations", "value of `%s` must be a string", kiwi_json_key_at(a, i));
		c->annotations = a;
	}
	return 0;
}

int kiwi_oci_config_parse(const char *text, size_t len, struct kiwi_oci_config **out, kiwi_err *err)
{
	struct kiwi_oci_config *c = calloc(1, sizeof(*c));
	if (!c)
		return kiwi_error(err, ENOMEM, "config", "cannot allocate the configuration");
	c->limits = (struct kiwi_cgroup_limits)KIWI_CGROUP_LIMITS_INIT;
	c->doc = kiwi_json_parse(text, len, err);
	if (!c->doc) {
		kiwi_error_wrap(err, "config.json");
		snprintf(err->step, sizeof(err->step), "config");
		free(c);
		return -1;
	}
	struct parser p = { .c = c, .err = err };
	if (parse_top(&p) < 0) {
		kiwi_oci_config_free(c);
		return -1;
	}
	*out = c;
	return 0;
}

int kiwi_oci_config_load(const char *bundle, struct kiwi_oci_config **out, kiwi_err *err)
{
	char path[4096];
	if (snprintf(path, sizeof(path), "%s/config.json", bundle) >= (int)sizeof(path))
		return kiwi_error(err, ENAMETOOLONG, "config", "bundle path `%s` is too long", bundle);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return kiwi_error(err, errno, "config", "cannot open `%s`", path);
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	if (kiwi_read_bounded(fd, KIWI_OCI_CONFIG_MAX, path, &text, &len, err) < 0)
		return -1;
	return kiwi_oci_config_parse(text, len, out, err);
}

void kiwi_oci_config_free(struct kiwi_oci_config *c)
{
	if (!c)
		return;
	free(c->process.additional_gids);
	free(c->process.args);
	free(c->process.env);
	free(c->process.rlimits);
	for (size_t i = 0; i < c->n_mounts; i++) {
		free(c->mounts[i].data);
		free(c->mounts[i].uid_maps);
		free(c->mounts[i].gid_maps);
	}
	free(c->mounts);
	free(c->namespaces);
	free(c->uid_maps);
	free(c->gid_maps);
	free(c->seccomp_json);
	free(c->masked_paths);
	free(c->readonly_paths);
	free(c->devices);
	free(c->device_rules);
	free(c->sysctl);
	free(c->unified);
	for (size_t k = 0; k < KIWI_OCI_HOOK_KINDS; k++) {
		for (size_t i = 0; i < c->n_hooks[k]; i++) {
			free(c->hooks[k][i].argv);
			free(c->hooks[k][i].env);
		}
		free(c->hooks[k]);
	}
	kiwi_json_free(c->doc);
	free(c);
}

const char *kiwi_oci_annotation(const struct kiwi_oci_config *c, const char *key)
{
	return c->annotations ? kiwi_json_string(kiwi_json_get(c->annotations, key)) : NULL;
}
