/* SPDX-License-Identifier: Apache-2.0 */
/* cgroup v2, unified hierarchy only. Layout:
 *   <parent>/kiwi-<16 hex>     one per sandbox, removed on every path
 * where <parent> defaults to <mount>/kiwi.slice for root and to a "kiwi"
 * cgroup beside the caller's own for everyone else.
 *
 * Liveness for gc is a lock, not a pid: the owner holds flock(LOCK_SH) on
 * the cgroup's directory fd for as long as the object lives (the fd is
 * CLOEXEC, so an exec'd sandbox never inherits it). Creation takes LOCK_SH
 * on the parent from mkdir until the new cgroup is locked, and gc takes
 * LOCK_EX on the parent while it picks its victims, so gc can never take a
 * cgroup in the instant between its mkdir and its lock. */
#include "kiwi/cgroup.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "kiwi/cleanup.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

/* How long destroy and gc wait for a killed cgroup to empty. A SIGKILLed
 * task exits within milliseconds unless it is stuck in the kernel (D state
 * on a dead NFS server); past this we report instead of hanging. */
#define KIWI_CG_EMPTY_TIMEOUT_MS 10000
/* The sandbox may nest cgroups of its own below ours (it is root in its
 * cgroup namespace); removal recurses at most this deep. */
#define KIWI_CG_MAX_DEPTH 32
#define KIWI_CG_MAX_DESCENDANTS 4096
#define KIWI_PIDS_LIMIT 4194304  /* PID_MAX_LIMIT: pids.max refuses more */

struct kiwi_cgroup {
	int fd;            /* O_DIRECTORY, holds the LOCK_SH */
	char *path;        /* absolute */
	char *name;        /* path inside the hierarchy, for the verdict */
	bool adopted;      /* kiwi-helper's: it removes the cgroup itself */
};

static const char *const controller_names[] = { "cpu", "io", "memory", "pids" };

static void fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}

/* ---- parsing ------------------------------------------------------------ */

/* Digits at *p into *out (at most max_digits of them, none is an error);
 * advances *p. Returns the count of digits, 0 on overflow or none. */
static int parse_digits(const char **p, uint64_t *out, int max_digits)
{
	uint64_t v = 0;
	int n = 0;
	for (; isdigit((unsigned char)**p); (*p)++, n++) {
		if (n == max_digits || __builtin_mul_overflow(v, 10, &v) ||
		    __builtin_add_overflow(v, (uint64_t)(**p - '0'), &v))
			return 0;
	}
	*out = v;
	return n;
}

/* The optional ".digits" of a decimal: value and 10^count. */
static int parse_fraction(const char **p, uint64_t *frac, uint64_t *scale, int max_digits)
{
	*frac = 0;
	*scale = 1;
	if (**p != '.')
		return 0;
	(*p)++;
	int n = parse_digits(p, frac, max_digits);
	if (n == 0 || isdigit((unsigned char)**p))
		return -1;
	while (n--)
		*scale *= 10;
	return 0;
}

int kiwi_parse_cpus(const char *s, int64_t *quota_us, int64_t *period_us, kiwi_err *err)
{
	*period_us = KIWI_CGROUP_CPU_PERIOD_US;
	if (s && !strcmp(s, "max")) {
		*quota_us = KIWI_CGROUP_MAX;
		return 0;
	}
	const char *p = s ? s : "";
	uint64_t whole = 0, frac = 0, scale = 1;
	bool ok = parse_digits(&p, &whole, 7) > 0 && parse_fraction(&p, &frac, &scale, 5) == 0 &&
		  *p == '\0';
	/* One period is 100000 us, so five decimals are exactly whole microseconds. */
	uint64_t quota = ok ? whole * 100000 + frac * (100000 / scale) : 0;
	if (!ok || quota < 1000 || whole > 65536)
		return kiwi_error(err, EINVAL, "parse",
				  "`%s` is not a CPU count: want a decimal from 0.01 to 65536 "
				  "with at most 5 decimals, like 1.5, or max", s ? s : "");
	*quota_us = (int64_t)quota;
	return 0;
}

int kiwi_parse_pids(const char *s, int64_t *out, kiwi_err *err)
{
	if (s && !strcmp(s, "max")) {
		*out = KIWI_CGROUP_MAX;
		return 0;
	}
	const char *p = s ? s : "";
	uint64_t v = 0;
	if (!parse_digits(&p, &v, 8) || *p || v == 0 || v > KIWI_PIDS_LIMIT)
		return kiwi_error(err, EINVAL, "parse",
				  "`%s` is not a process count: want 1 to %d, or max", s ? s : "",
				  KIWI_PIDS_LIMIT);
	*out = (int64_t)v;
	return 0;
}

/* One io.max line: "MAJ:MIN" then one or more " key=value". */
static bool io_max_line_ok(const char *p, const char *end)
{
	static const char *const keys[] = { "rbps=", "wbps=", "riops=", "wiops=" };
	uint64_t n;
	if (!parse_digits(&p, &n, 10) || *p++ != ':' || !parse_digits(&p, &n, 10))
		return false;
	int pairs = 0;
	while (p < end) {
		if (*p++ != ' ')
			return false;
		size_t k = 0;
		while (k < KIWI_ARRAY_SIZE(keys) && strncmp(p, keys[k], strlen(keys[k])))
			k++;
		if (k == KIWI_ARRAY_SIZE(keys))
			return false;
		p += strlen(keys[k]);
		if (!strncmp(p, "max", 3))
			p += 3;
		else if (!parse_digits(&p, &n, 19))
			return false;
		pairs++;
	}
	return pairs > 0 && p == end;
}

int kiwi_cgroup_check_io_max(const char *lines, kiwi_err *err)
{
	const char *p = lines;
	int n = 0;
	while (p && *p) {
		const char *end = strchrnul(p, '\n');
		if (end > p && !io_max_line_ok(p, end))
			return kiwi_error(err, EINVAL, "parse",
					  "io.max line `%.*s` is malformed: want `MAJ:MIN` and "
					  "rbps=, wbps=, riops=, wiops= with a number or max",
					  (int)(end - p), p);
		n += end > p;
		p = *end ? end + 1 : end;
	}
	if (n == 0)
		return kiwi_error(err, EINVAL, "parse", "io.max is empty: want `MAJ:MIN rbps=N ...` lines");
	return 0;
}

/* The controllers of the limits kiwi-run writes itself, not those the
 * unified files name: a `pids.max` given as a unified file enables pids
 * but must not make kiwi-run write its own (unset) pids limit. */
static unsigned limits_needed(const struct kiwi_cgroup_limits *l)
{
	unsigned need = 0;
	if (l->memory_max >= 0 || l->memory_swap_max >= 0)
		need |= KIWI_CG_MEMORY;
	if (l->pids_max >= 0)
		need |= KIWI_CG_PIDS;
	if (l->cpu_quota_us >= 0 || l->cpu_weight > 0)
		need |= KIWI_CG_CPU;
	if (l->io_weight > 0 || l->io_max)
		need |= KIWI_CG_IO;
	return need;
}

unsigned kiwi_cgroup_needed(const struct kiwi_cgroup_limits *l)
{
	unsigned need = limits_needed(l);
	for (const char *const *u = l->unified; u && *u; u += 2)
		for (size_t i = 0; i < KIWI_ARRAY_SIZE(controller_names); i++) {
			size_t n = strlen(controller_names[i]);
			if (!strncmp(*u, controller_names[i], n) && (*u)[n] == '.')
				need |= 1u << i;
		}
	return need;
}

bool kiwi_cgroup_limits_any(const struct kiwi_cgroup_limits *l)
{
	return l && kiwi_cgroup_needed(l) != 0;
}

const char *kiwi_cgroup_controller_name(unsigned bit)
{
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(controller_names); i++)
		if (bit == 1u << i)
			return controller_names[i];
	return "?";
}

bool kiwi_cgroup_keyed(const char *text, const char *key, uint64_t *out)
{
	size_t klen = strlen(key);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, key, klen) || p[klen] != ' ')
			continue;
		const char *q = p + klen + 1;
		return parse_digits(&q, out, 20) > 0 && (*q == '\n' || *q == '\0');
	}
	return false;
}

void kiwi_cgroup_format_limit(int64_t v, char *buf, size_t len)
{
	if (v == KIWI_CGROUP_MAX)
		snprintf(buf, len, "max");
	else
		snprintf(buf, len, "%lld", (long long)v);
}

/* ---- files -------------------------------------------------------------- */

/* Reads a small cgroup file of dirfd into buf (NUL-terminated). Returns the
 * length, or -1 with errno set (no kiwi_err: callers decide if it matters). */
static ssize_t read_at(int dirfd, const char *file, char *buf, size_t len)
{
	_cleanup_close_ int fd = openat(dirfd, file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, len - 1);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return n;
}

/* One write(2) per value: the kernel parses each write as a whole. */
static int write_raw(int dirfd, const char *file, const char *value)
{
	_cleanup_close_ int fd = openat(dirfd, file, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t len = strlen(value);
	ssize_t n = write(fd, value, len);
	if (n >= 0 && (size_t)n != len) {
		errno = EIO;
		return -1;
	}
	return n < 0 ? -1 : 0;
}

static int write_at(int dirfd, const char *dir, const char *file, const char *value, kiwi_err *err)
{
	if (write_raw(dirfd, file, value) < 0)
		return kiwi_error(err, errno, "cgroup", "cannot write `%s` to `%s/%s`", value, dir, file);
	return 0;
}

/* ---- the host's view: /proc/self/mountinfo and /proc/PID/cgroup -------- */

static bool is_octal(char c)
{
	return c >= '0' && c <= '7';
}

/* A mountinfo field with its octal escapes (\040 for a space) undone: a
 * backslash and exactly three digits, as the kernel writes them. */
static void unescape_field(const char *in, char *out, size_t len)
{
	size_t o = 0;
	for (const char *p = in; *p && o + 1 < len; p++) {
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && is_octal(p[2]) && is_octal(p[3])) {
			out[o++] = (char)((p[1] - '0') << 6 | (p[2] - '0') << 3 | (p[3] - '0'));
			p += 3;
		} else {
			out[o++] = *p;
		}
	}
	out[o] = '\0';
}

bool kiwi_cgroup_mountinfo_line(const char *line, char *v2, size_t len, bool *v1)
{
	/* "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [TAGS...] - FSTYPE ..." */
	const char *dash = strstr(line, " - ");
	char fstype[16], mnt[PATH_MAX];
	if (!dash || sscanf(dash + 3, "%15s", fstype) != 1)
		return false;
	if (v1 && !strcmp(fstype, "cgroup"))
		*v1 = true;
	if (strcmp(fstype, "cgroup2") || sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1)
		return false;
	unescape_field(mnt, v2, len);
	return true;
}

int kiwi_cgroup_hierarchies(char *v2, size_t len, bool *v1, kiwi_err *err)
{
	v2[0] = '\0';
	if (v1)
		*v1 = false;
	_cleanup_(fclosep) FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return kiwi_error(err, errno, "cgroup", "cannot read /proc/self/mountinfo");
	_cleanup_free_ char *line = NULL;
	size_t cap = 0;
	char mnt[PATH_MAX];
	while (getline(&line, &cap, f) > 0)
		if (kiwi_cgroup_mountinfo_line(line, mnt, sizeof(mnt), v1) && !v2[0])
			snprintf(v2, len, "%s", mnt);
	return 0;
}

/* Mount point of the unified hierarchy. */
static int find_mount(char *out, size_t len, kiwi_err *err)
{
	/* Where every pure cgroup v2 host has it; hybrid hosts have a tmpfs
	 * there and (systemd's layout) the unified hierarchy below it. */
	static const char *const usual[] = { "/sys/fs/cgroup", "/sys/fs/cgroup/unified" };
	struct statfs sf;
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(usual); i++)
		if (statfs(usual[i], &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC) {
			snprintf(out, len, "%s", usual[i]);
			return 0;
		}
	/* Elsewhere: mountinfo says (a read that costs tens of
	 * microseconds, paid by every session client: bench/RESULTS.md). */
	if (kiwi_cgroup_hierarchies(out, len, NULL, err) < 0)
		return -1;
	if (!out[0])
		return kiwi_error(err, ENOENT, "cgroup",
				  "no cgroup2 filesystem is mounted: kiwi-run needs the unified hierarchy "
				  "(boot with systemd.unified_cgroup_hierarchy=1, or mount -t cgroup2 none /sys/fs/cgroup)");
	return 0;
}

bool kiwi_cgroup_v2_line(const char *text, char *out, size_t len)
{
	for (const char *line = text; *line;) {
		size_t n = strcspn(line, "\n");
		if (n >= 3 && !strncmp(line, "0::", 3)) {
			snprintf(out, len, "%.*s", (int)(n - 3), line + 3);
			return true;
		}
		line += n + (line[n] == '\n');
	}
	return false;
}

int kiwi_cgroup_of(pid_t pid, char *out, size_t len, kiwi_err *err)
{
	char path[64], text[8192];
	snprintf(path, sizeof(path), pid ? "/proc/%d/cgroup" : "/proc/self/cgroup", (int)pid);
	if (read_at(AT_FDCWD, path, text, sizeof(text)) < 0)
		return kiwi_error(err, errno, "cgroup", "cannot read %s", path);
	if (!kiwi_cgroup_v2_line(text, out, len))
		return kiwi_error(err, ENOENT, "cgroup",
				  "the process is in no cgroup v2 cgroup (%s has no `0::` line): the host runs cgroup "
				  "v1 only; boot with systemd.unified_cgroup_hierarchy=1", path);
	return 0;
}

/* Opens a directory and makes sure it lies on cgroup2, so that a stray
 * --cgroup-parent can never lead a write into a v1 hierarchy. */
static int open_cg_dir(int dirfd, const char *name, const char *shown, kiwi_err *err)
{
	_cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		int saved = errno;
		kiwi_error(err, saved, "cgroup", "cannot open cgroup `%s`", shown);
		errno = saved;
		return -1;
	}
	struct statfs sf;
	if (fstatfs(fd, &sf) < 0)
		return kiwi_error(err, errno, "cgroup", "cannot statfs `%s`", shown);
	if (sf.f_type != CGROUP2_SUPER_MAGIC)
		return kiwi_error(err, EXDEV, "cgroup", "`%s` is not on the cgroup2 filesystem", shown);
	return TAKE_FD(fd);
}

/* ---- controllers and the parent chain ----------------------------------- */

static bool has_word(const char *text, const char *word)
{
	size_t n = strlen(word);
	for (const char *p = text; (p = strstr(p, word)); p += n)
		if ((p == text || isspace((unsigned char)p[-1])) &&
		    (p[n] == '\0' || isspace((unsigned char)p[n])))
			return true;
	return false;
}

static unsigned missing_in(const char *list, unsigned need)
{
	unsigned miss = 0;
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(controller_names); i++)
		if ((need & (1u << i)) && !has_word(list, controller_names[i]))
			miss |= 1u << i;
	return miss;
}

/* "`memory`, `pids`" */
static void name_list(unsigned bits, char *buf, size_t len)
{
	size_t o = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(controller_names) && o < len; i++)
		if (bits & (1u << i))
			o += (size_t)snprintf(buf + o, len - o, "%s`%s`", o ? ", " : "",
					      controller_names[i]);
}

static void trim(char *s)
{
	size_t n = strlen(s);
	while (n && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';
}

/* The hierarchy's root must offer every controller the limits need. On a
 * hybrid host they are bound to v1 instead, and that is final: say so once,
 * with the fix, before anything is created. */
static int check_unified(int rootfd, const char *mount, unsigned need, kiwi_err *err)
{
	char avail[512], names[128];
	if (read_at(rootfd, "cgroup.controllers", avail, sizeof(avail)) < 0)
		return kiwi_error(err, errno, "cgroup", "cannot read `%s/cgroup.controllers`", mount);
	trim(avail);
	unsigned miss = missing_in(avail, need);
	if (!miss)
		return 0;
	name_list(miss, names, sizeof(names));
	return kiwi_error(err, 0, "cgroup",
			  "the unified cgroup hierarchy at `%s` lacks the %s controller%s (it "
			  "offers only: %s): this host runs cgroup v1 or hybrid mode, which kiwi-run does not "
			  "use; fix: boot with systemd.unified_cgroup_hierarchy=1 (or cgroup_no_v1=all), "
			  "or run without resource limits",
			  mount, names, (miss & (miss - 1)) ? "s" : "", *avail ? avail : "none");
}

unsigned kiwi_cgroup_unavailable(unsigned need)
{
	char mount[PATH_MAX], avail[512];
	if (find_mount(mount, sizeof(mount), NULL) < 0)
		return need;
	_cleanup_close_ int fd = open(mount, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || read_at(fd, "cgroup.controllers", avail, sizeof(avail)) < 0)
		return need;
	return missing_in(avail, need);
}

static int delegation_error(kiwi_err *err, int errnum, const char *shown, const char *what)
{
	return kiwi_error(err, errnum, "cgroup",
			  "cannot %s in `%s`: the cgroup is not delegated to uid %u (it needs to own "
			  "the directory and its cgroup.procs and cgroup.subtree_control, as "
			  "systemd's Delegate=yes arranges) or choose another --cgroup-parent",
			  what, shown, (unsigned)geteuid());
}

/* Makes the needed controllers available to the children of dirfd. */
static int enable_in(int dirfd, const char *shown, unsigned need, kiwi_err *err)
{
	char avail[512], on[512], names[128];
	if (read_at(dirfd, "cgroup.controllers", avail, sizeof(avail)) < 0 ||
	    read_at(dirfd, "cgroup.subtree_control", on, sizeof(on)) < 0)
		return kiwi_error(err, errno, "cgroup", "cannot read the controllers of `%s`", shown);
	unsigned miss = missing_in(avail, need);
	if (miss) {
		name_list(miss, names, sizeof(names));
		return kiwi_error(err, 0, "cgroup",
				  "%s not available in `%s`: its parent does not enable them in "
				  "cgroup.subtree_control; enable them there or choose another "
				  "--cgroup-parent", names, shown);
	}
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(controller_names); i++) {
		char plus[16];
		if (!(need & (1u << i)) || has_word(on, controller_names[i]))
			continue;
		snprintf(plus, sizeof(plus), "+%s", controller_names[i]);
		if (write_raw(dirfd, "cgroup.subtree_control", plus) == 0)
			continue;
		if (errno == EBUSY)
			return kiwi_error(err, errno, "cgroup",
					  "cannot enable `%s` in `%s`: the cgroup holds processes "
					  "of its own, and cgroup v2 hands controllers down only from "
					  "cgroups without processes; choose another --cgroup-parent",
					  controller_names[i], shown);
		if (errno == EACCES || errno == EPERM)
			return delegation_error(err, errno, shown, "enable controllers");
		return kiwi_error(err, errno, "cgroup", "cannot write `%s` to `%s/cgroup.subtree_control`",
				  plus, shown);
	}
	return 0;
}

/* How open_parent goes down. */
struct descent {
	bool create;       /* make what is missing */
	bool enable_all;   /* enable in every cgroup on the way, as runc and crun */
	char *made_top;    /* NULL, or PATH_MAX bytes: the first cgroup made ("" none) */
};

/* Opens <mount><rel>. With create, makes what is missing and enables the
 * controllers in each cgroup it made, in the existing one it attached them
 * to, and in the parent itself; never in any other, unless enable_all (the
 * kernel refuses a cgroup with processes of its own, the root excepted).
 * Without create, a missing parent gives -1 with errno ENOENT. */
static int open_parent(const char *mount, const char *rel, unsigned need, const struct descent *d, kiwi_err *err)
{
	bool create = d->create;
	char shown[PATH_MAX], buf[PATH_MAX];
	snprintf(shown, sizeof(shown), "%s", mount);
	snprintf(buf, sizeof(buf), "%s", rel);
	_cleanup_close_ int cur = open_cg_dir(AT_FDCWD, mount, shown, err);
	if (cur < 0 || check_unified(cur, mount, need, err) < 0)
		return -1;
	char *save = NULL;
	for (char *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		size_t at = strlen(shown);
		if (d->enable_all && enable_in(cur, shown, need, err) < 0)
			return -1;
		snprintf(shown + at, sizeof(shown) - at, "/%s", c);
		int fd = open_cg_dir(cur, c, shown, err);
		if (fd < 0 && errno == ENOENT && create) {
			shown[at] = '\0';
			if (enable_in(cur, shown, need, err) < 0)
				return -1;
			if (mkdirat(cur, c, 0755) < 0 && errno != EEXIST)
				return errno == EACCES ? delegation_error(err, errno, shown, "create a cgroup")
						       : kiwi_error(err, errno, "cgroup", "cannot create `%s/%s`", shown, c);
			shown[at] = '/';
			if (d->made_top && !d->made_top[0])
				snprintf(d->made_top, PATH_MAX, "%s", shown);
			fd = open_cg_dir(cur, c, shown, err);
		}
		if (fd < 0)
			return -1;
		close(cur);
		cur = fd;
	}
	if (create && enable_in(cur, shown, need, err) < 0)
		return -1;
	return TAKE_FD(cur);
}

/* Rootless default: "kiwi" beside the caller's own cgroup, not below it,
 * because the caller's cgroup holds the caller, and a cgroup with processes
 * cannot hand controllers to children. That needs the caller's parent
 * cgroup delegated: writable, and its cgroup.procs writable too, since
 * CLONE_INTO_CGROUP moves the child across it. */
static int rootless_parent(const char *mount, bool for_gc, char *rel, size_t len, kiwi_err *err)
{
	char own[PATH_MAX], dir[PATH_MAX + 32];
	if (kiwi_cgroup_of(0, own, sizeof(own), err) < 0)
		return -1;
	char *slash = strrchr(own, '/');
	if (slash)
		*slash = '\0';
	snprintf(dir, sizeof(dir), "%s%s", mount, own);
	static const char *const files[] = { ".", "cgroup.procs", "cgroup.subtree_control" };
	/* gc only looks: where nothing was delegated, nothing was made either. */
	for (size_t i = 0; !for_gc && i < KIWI_ARRAY_SIZE(files); i++) {
		char f[PATH_MAX + 64];
		snprintf(f, sizeof(f), "%s/%s", dir, files[i]);
		if (faccessat(AT_FDCWD, f, W_OK, AT_EACCESS) < 0)
			return kiwi_error(err, errno, "cgroup",
					  "rootless cgroups need the caller's parent cgroup `%s` "
					  "delegated to uid %u, but `%s` is not writable (under "
					  "systemd: systemd-run --user --scope -p Delegate=yes ...), "
					  "or pass --cgroup-parent",
					  dir, (unsigned)geteuid(), f);
	}
	if (snprintf(rel, len, "%s/kiwi", own) >= (int)len)
		return kiwi_error(err, ENAMETOOLONG, "cgroup", "cgroup path `%s` is too long", own);
	return 0;
}

/* Splits parent into the mount and a clean path below it ("" = the root). */
static int resolve_parent(const char *parent, bool for_gc, char *mount, char *rel, size_t len,
			  kiwi_err *err)
{
	if (find_mount(mount, PATH_MAX, err) < 0)
		return -1;
	if (!parent)
		return geteuid() == 0 ? (snprintf(rel, len, "/kiwi.slice"), 0)
				      : rootless_parent(mount, for_gc, rel, len, err);
	size_t m = strlen(mount);
	const char *p = parent;
	if (!strncmp(parent, mount, m) && (parent[m] == '/' || parent[m] == '\0'))
		p += m;
	else if (!strncmp(parent, "/sys/", 5))
		/* A filesystem path, but not into the unified hierarchy: a v1
		 * hierarchy (/sys/fs/cgroup/memory/...) or a typo. Never guess. */
		return kiwi_error(err, EINVAL, "cgroup",
				  "cgroup parent `%s` is not below the cgroup2 mount `%s`: give a "
				  "path in the unified hierarchy (like /kiwi.slice) or below `%s`",
				  parent, mount, mount);
	size_t o = 0;
	rel[0] = '\0';
	while (*p) {
		size_t n = strcspn(p, "/");
		if ((n == 1 && p[0] == '.') || (n == 2 && !strncmp(p, "..", 2)) || o + n + 2 > len)
			return kiwi_error(err, EINVAL, "cgroup",
					  "cgroup parent `%s` must be a plain path in the cgroup2 "
					  "hierarchy (no . or .. components)", parent);
		if (n) {
			o += (size_t)snprintf(rel + o, len - o, "/%.*s", (int)n, p);
		}
		p += n + (p[n] == '/');
	}
	return 0;
}

/* ---- one sandbox's cgroup ----------------------------------------------- */

static int check_limits(const struct kiwi_cgroup_limits *l, kiwi_err *err)
{
	if (l->memory_max < -1 || l->memory_swap_max < -1 || l->pids_max < -1 || l->pids_max == 0 ||
	    l->cpu_quota_us < -1)
		return kiwi_error(err, EINVAL, "cgroup", "negative or zero limit");
	if (l->cpu_quota_us >= 0 && l->cpu_period_us != -1 &&
	    (l->cpu_period_us < 1000 || l->cpu_period_us > 1000000))
		return kiwi_error(err, EINVAL, "cgroup", "cpu period %lld us is outside 1000..1000000",
				  (long long)l->cpu_period_us);
	if (l->io_weight < 0 || l->io_weight > 10000)
		return kiwi_error(err, EINVAL, "cgroup", "io weight %d is outside 1..10000", l->io_weight);
	if (l->cpu_weight < 0 || l->cpu_weight > 10000)
		return kiwi_error(err, EINVAL, "cgroup", "cpu weight %d is outside 1..10000", l->cpu_weight);
	/* A file of this cgroup's own interface (controller.name), never its
	 * structure (cgroup.procs, cgroup.subtree_control...) nor a path. */
	for (const char *const *u = l->unified; u && *u; u += 2) {
		const char *dot = strchr(*u, '.');
		if (!dot || dot == *u || !dot[1] || strspn(*u, "abcdefghijklmnopqrstuvwxyz0123456789_.") != strlen(*u) ||
		    !strncmp(*u, "cgroup.", 7))
			return kiwi_error(err, EINVAL, "cgroup", "`%s` is not a controller's interface file", *u);
	}
	if (l->io_max && kiwi_cgroup_check_io_max(l->io_max, err) < 0)
		return -1;
	return 0;
}

static int write_limit(struct kiwi_cgroup *cg, const char *file, int64_t v, kiwi_err *err)
{
	char text[32];
	kiwi_cgroup_format_limit(v, text, sizeof(text));
	return write_at(cg->fd, cg->path, file, text, err);
}

static int write_memory(struct kiwi_cgroup *cg, const struct kiwi_cgroup_limits *l, kiwi_err *err)
{
	if (l->memory_max >= 0 && write_limit(cg, "memory.max", l->memory_max, err) < 0)
		return -1;
	/* Without a swap ceiling, memory.max alone would let the task page
	 * out and go on; 0 makes memory.max the whole budget. */
	int64_t swap = l->memory_swap_max >= 0 ? l->memory_swap_max : 0;
	if (write_limit(cg, "memory.swap.max", swap, err) < 0) {
		/* No swap accounting in this kernel: only an explicit request is an error. */
		if (!(errno == ENOENT && l->memory_swap_max < 0))
			return -1;
	}
	/* An OOM kill takes the whole sandbox, not one random process of it. */
	return write_at(cg->fd, cg->path, "memory.oom.group", "1", err);
}

static int write_io(struct kiwi_cgroup *cg, const struct kiwi_cgroup_limits *l, kiwi_err *err)
{
	char text[64];
	if (l->io_weight > 0) {
		snprintf(text, sizeof(text), "default %d", l->io_weight);
		if (write_at(cg->fd, cg->path, "io.weight", text, err) < 0)
			return -1;
	}
	for (const char *p = l->io_max; p && *p;) {
		size_t n = strcspn(p, "\n");
		_cleanup_free_ char *line = strndup(p, n);
		if (!line)
			return kiwi_error(err, ENOMEM, "cgroup", "out of memory");
		if (n && write_at(cg->fd, cg->path, "io.max", line, err) < 0)
			return -1;
		p += n + (p[n] == '\n');
	}
	return 0;
}

static int write_limits(struct kiwi_cgroup *cg, const struct kiwi_cgroup_limits *l, kiwi_err *err)
{
	unsigned need = limits_needed(l);
	if ((need & KIWI_CG_MEMORY) && write_memory(cg, l, err) < 0)
		return -1;
	if ((need & KIWI_CG_PIDS) && write_limit(cg, "pids.max", l->pids_max, err) < 0)
		return -1;
	if (l->cpu_weight > 0 && write_limit(cg, "cpu.weight", l->cpu_weight, err) < 0)
		return -1;
	if ((need & KIWI_CG_CPU) && l->cpu_quota_us >= 0) {
		char text[64];
		kiwi_cgroup_format_limit(l->cpu_quota_us, text, 32);
		size_t n = strlen(text);
		snprintf(text + n, sizeof(text) - n, " %lld",
			 (long long)(l->cpu_period_us > 0 ? l->cpu_period_us : KIWI_CGROUP_CPU_PERIOD_US));
		if (write_at(cg->fd, cg->path, "cpu.max", text, err) < 0)
			return -1;
	}
	if ((need & KIWI_CG_IO) && write_io(cg, l, err) < 0)
		return -1;
	for (const char *const *u = l->unified; u && *u; u += 2)
		if (write_at(cg->fd, cg->path, u[0], u[1], err) < 0)
			return -1;
	return 0;
}

/* What the sandbox (or, through kiwi-helper, the caller it was delegated
 * to) may nest below the cgroup: no deeper than removal reaches, and not so
 * many that removing them takes long. Both files stay their creator's, so
 * a delegated cgroup cannot be made into a tree teardown cannot remove. */
static int write_bounds(struct kiwi_cgroup *cg, kiwi_err *err)
{
	if (write_limit(cg, "cgroup.max.depth", KIWI_CG_MAX_DEPTH - 1, err) < 0)
		return -1;
	return write_limit(cg, "cgroup.max.descendants", KIWI_CG_MAX_DESCENDANTS, err);
}

/* mkdir <parent>/kiwi-<random> and lock it, all under the parent's shared
 * lock (see the top of this file). */
static int make_locked(int pfd, char *name, size_t len, kiwi_err *err)
{
	if (flock(pfd, LOCK_SH) < 0)
		return kiwi_error(err, errno, "cgroup", "cannot lock the cgroup parent");
	for (int tries = 0;; tries++) {
		uint64_t r;
		if (getrandom(&r, sizeof(r), 0) != sizeof(r))
			return kiwi_error(err, errno, "cgroup", "getrandom");
		snprintf(name, len, "kiwi-%016llx", (unsigned long long)r);
		if (mkdirat(pfd, name, 0755) == 0)
			break;
		if (errno != EEXIST || tries == 8)
			return errno == EACCES ? delegation_error(err, errno, "the cgroup parent", "create a cgroup")
					       : kiwi_error(err, errno, "cgroup", "cannot create cgroup `%s`", name);
	}
	_cleanup_close_ int fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || flock(fd, LOCK_SH) < 0) {
		int saved = errno;
		unlinkat(pfd, name, AT_REMOVEDIR);
		return kiwi_error(err, saved, "cgroup", "cannot open and lock cgroup `%s`", name);
	}
	flock(pfd, LOCK_UN);
	return TAKE_FD(fd);
}

int kiwi_cgroup_create(const char *parent, const struct kiwi_cgroup_limits *l,
		       struct kiwi_cgroup **out, kiwi_err *err)
{
	char mount[PATH_MAX], rel[PATH_MAX], name[32];
	if (check_limits(l, err) < 0 || resolve_parent(parent, false, mount, rel, sizeof(rel), err) < 0)
		return -1;
	_cleanup_close_ int pfd = open_parent(mount, rel, kiwi_cgroup_needed(l), &(struct descent){ .create = true }, err);
	if (pfd < 0)
		return -1;
	struct kiwi_cgroup *cg = calloc(1, sizeof(*cg));
	if (!cg)
		return kiwi_error(err, ENOMEM, "cgroup", "out of memory");
	cg->fd = make_locked(pfd, name, sizeof(name), err);
	if (cg->fd < 0) {
		free(cg);
		return -1;
	}
	if (asprintf(&cg->path, "%s%s/%s", mount, rel, name) < 0)
		cg->path = NULL;
	if (asprintf(&cg->name, "%s/%s", rel, name) < 0)
		cg->name = NULL;
	if (!cg->path || !cg->name) {
		if (!cg->path)
			unlinkat(pfd, name, AT_REMOVEDIR);
		kiwi_cgroup_destroy(cg, NULL);
		return kiwi_error(err, ENOMEM, "cgroup", "out of memory");
	}
	if (write_bounds(cg, err) < 0 || write_limits(cg, l, err) < 0) {
		kiwi_cgroup_destroy(cg, NULL);
		return -1;
	}
	*out = cg;
	return 0;
}

static int reap_cgroup(int pfd, const char *name, int fd, const char *shown, kiwi_err *err);

void kiwi_cgroup_remove_parents(const char *from, const char *top)
{
	char path[PATH_MAX];
	size_t n = strlen(top);
	/* Only below the cgroup2 mount, and only what top names or holds. */
	if (!top[0] || strstr(top, "/..") || strstr(from, "/..") || strncmp(from, top, n) ||
	    (from[n] && from[n] != '/') || snprintf(path, sizeof(path), "%s", from) >= (int)sizeof(path))
		return;
	struct statfs sf;
	if (statfs(top, &sf) < 0 || sf.f_type != CGROUP2_SUPER_MAGIC)
		return;
	while (strlen(path) >= n) {
		/* Busy (a child or a process of someone else's): it stays. */
		if (rmdir(path) < 0 && errno != ENOENT)
			return;
		char *slash = strrchr(path, '/');
		if (!slash)
			return;
		*slash = '\0';
	}
}

/* An OCI container's cgroup (linux.cgroupsPath): exactly path, made with
 * its parents when missing. Not locked and not named kiwi-*: it outlives
 * the kiwi-run that made it, and gc must leave it alone. */
int kiwi_cgroup_open_path(const char *path, const struct kiwi_cgroup_limits *l, bool *made, char *made_top,
			  struct kiwi_cgroup **out, kiwi_err *err)
{
	char mount[PATH_MAX], rel[PATH_MAX];
	*made = false;
	made_top[0] = '\0';
	if (check_limits(l, err) < 0 || resolve_parent(path, false, mount, rel, sizeof(rel), err) < 0)
		return -1;
	char *slash = strrchr(rel, '/');
	if (!slash || !slash[1])
		return kiwi_error(err, EINVAL, "cgroup", "cgroup path `%s` names no cgroup below the root", path);
	*slash = '\0';
	const char *leaf = slash + 1;
	char pdir[2 * PATH_MAX];
	snprintf(pdir, sizeof(pdir), "%s%s", mount, rel);
	struct descent d = { .create = true, .enable_all = true, .made_top = made_top };
	_cleanup_close_ int pfd = open_parent(mount, rel, kiwi_cgroup_needed(l), &d, err);
	if (pfd < 0) {
		kiwi_cgroup_remove_parents(pdir, made_top);
		return -1;
	}
	*made = mkdirat(pfd, leaf, 0755) == 0;
	if (!*made && errno != EEXIST) {
		int e = errno;
		kiwi_cgroup_remove_parents(pdir, made_top);
		return e == EACCES ? delegation_error(err, e, path, "create a cgroup")
				   : kiwi_error(err, e, "cgroup", "cannot create cgroup `%s`", path);
	}
	struct kiwi_cgroup *cg = calloc(1, sizeof(*cg));
	if (!cg)
		return kiwi_error(err, ENOMEM, "cgroup", "out of memory");
	cg->fd = openat(pfd, leaf, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (cg->fd < 0 || asprintf(&cg->path, "%s%s/%s", mount, rel, leaf) < 0 ||
	    asprintf(&cg->name, "%s/%s", rel, leaf) < 0 || write_limits(cg, l, err) < 0) {
		if (!err || !err->step[0])
			kiwi_error(err, errno, "cgroup", "cannot set up cgroup `%s`", path);
		if (*made)
			unlinkat(pfd, leaf, AT_REMOVEDIR);
		kiwi_cgroup_remove_parents(pdir, made_top);
		kiwi_cgroup_forget(cg);
		return -1;
	}
	/* The leaf alone was made: it is the top of what delete removes. */
	if (*made && !made_top[0] && strlen(cg->path) < PATH_MAX)
		memcpy(made_top, cg->path, strlen(cg->path) + 1);
	*out = cg;
	return 0;
}

/* The controllers cgroup v2 offers in dirfd, as kiwi_cgroup_needed() bits. */
static unsigned offered(int dirfd)
{
	char avail[512];
	unsigned bits = 0;
	if (read_at(dirfd, "cgroup.controllers", avail, sizeof(avail)) < 0)
		return 0;
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(controller_names); i++)
		if (has_word(avail, controller_names[i]))
			bits |= 1u << i;
	return bits;
}

int kiwi_cgroup_enable_children(struct kiwi_cgroup *cg, kiwi_err *err)
{
	/* An OOM kill ends one exec (its cgroup is one OOM group), never the
	 * whole session: the session's cgroup is no group of its own. */
	if (write_raw(cg->fd, "memory.oom.group", "0") < 0 && errno != ENOENT)
		return kiwi_error(err, errno, "cgroup", "cannot write `%s/memory.oom.group`", cg->path);
	return enable_in(cg->fd, cg->path, offered(cg->fd), err);
}

int kiwi_cgroup_open_leaf(struct kiwi_cgroup *cg, const char *leaf, kiwi_err *err)
{
	if (mkdirat(cg->fd, leaf, 0755) < 0 && errno != EEXIST)
		return kiwi_error(err, errno, "cgroup", "cannot create `%s/%s`", cg->path, leaf);
	return open_cg_dir(cg->fd, leaf, cg->path, err);
}

static int open_child(const char *name, const char *leaf, bool make, struct kiwi_cgroup **out, kiwi_err *err);

int kiwi_cgroup_open_child(const char *name, const char *leaf, struct kiwi_cgroup **out, kiwi_err *err)
{
	return open_child(name, leaf, true, out, err);
}

int kiwi_cgroup_open_made(const char *name, const char *leaf, struct kiwi_cgroup **out, kiwi_err *err)
{
	return open_child(name, leaf, false, out, err);
}

static int open_child(const char *name, const char *leaf, bool make, struct kiwi_cgroup **out, kiwi_err *err)
{
	char mount[PATH_MAX];
	if (name[0] != '/' || strstr(name, "/..") || find_mount(mount, sizeof(mount), err) < 0)
		return kiwi_error(err, EINVAL, "cgroup", "`%s` is not a cgroup path", name);
	struct kiwi_cgroup *cg = calloc(1, sizeof(*cg));
	if (!cg)
		return kiwi_error(err, ENOMEM, "cgroup", "out of memory");
	cg->fd = -1;
	if (asprintf(&cg->path, "%s%s/%s", mount, name, leaf) < 0 || asprintf(&cg->name, "%s/%s", name, leaf) < 0) {
		kiwi_cgroup_forget(cg);
		return kiwi_error(err, ENOMEM, "cgroup", "out of memory");
	}
	if (make && mkdir(cg->path, 0755) < 0 && errno != EEXIST) {
		kiwi_error(err, errno, "cgroup", "cannot create `%s`", cg->path);
		kiwi_cgroup_forget(cg);
		return -1;
	}
	cg->fd = open_cg_dir(AT_FDCWD, cg->path, cg->path, err);
	if (cg->fd < 0 || !make) {
		if (cg->fd < 0)
			kiwi_cgroup_forget(TAKE_PTR(cg));
		*out = cg;
		return cg ? 0 : -1;
	}
	/* What an OOM kill hits in it, it hits whole. */
	if (write_raw(cg->fd, "memory.oom.group", "1") < 0 && errno != ENOENT) {
		kiwi_error(err, errno, "cgroup", "cannot write `%s/memory.oom.group`", cg->path);
		kiwi_cgroup_destroy(cg, NULL);
		return -1;
	}
	*out = cg;
	return 0;
}

int kiwi_cgroup_enter(struct kiwi_cgroup *cg, pid_t pid, kiwi_err *err)
{
	char text[32];
	snprintf(text, sizeof(text), "%d", (int)pid);
	if (write_raw(cg->fd, "cgroup.procs", text) < 0)
		return kiwi_error(err, errno, "cgroup", "cannot move process %d into `%s`", (int)pid, cg->path);
	return 0;
}

int kiwi_cgroup_give_procs(struct kiwi_cgroup *cg, uid_t uid, gid_t gid, kiwi_err *err)
{
	if (fchownat(cg->fd, "cgroup.procs", uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
		return kiwi_error(err, errno, "cgroup", "cannot give `%s/cgroup.procs` to %u:%u", cg->path,
				  (unsigned)uid, (unsigned)gid);
	return 0;
}

int kiwi_cgroup_inherit_procs_owner(struct kiwi_cgroup *cg, uid_t *owner, kiwi_err *err)
{
	struct stat st;
	if (fstatat(cg->fd, "../cgroup.procs", &st, AT_SYMLINK_NOFOLLOW) < 0)
		return kiwi_error(err, errno, "cgroup", "cannot read the owner of `%s/../cgroup.procs`", cg->path);
	*owner = st.st_uid;
	return st.st_uid == geteuid() ? 0 : kiwi_cgroup_give_procs(cg, st.st_uid, st.st_gid, err);
}

int kiwi_cgroup_mount(char *out, size_t len, kiwi_err *err)
{
	return find_mount(out, len, err);
}

int kiwi_cgroup_adopt(const char *name, struct kiwi_cgroup **out, kiwi_err *err)
{
	char mount[PATH_MAX];
	if (name[0] != '/' || strstr(name, "/..") || find_mount(mount, sizeof(mount), err) < 0)
		return kiwi_error(err, EINVAL, "cgroup", "kiwi-helper named the cgroup `%s`: not a cgroup path", name);
	struct kiwi_cgroup *cg = calloc(1, sizeof(*cg));
	if (!cg)
		return kiwi_error(err, ENOMEM, "cgroup", "out of memory");
	cg->adopted = true;
	cg->fd = -1;
	if (asprintf(&cg->path, "%s%s", mount, name) < 0 || !(cg->name = strdup(name))) {
		kiwi_cgroup_forget(cg);
		return kiwi_error(err, ENOMEM, "cgroup", "out of memory");
	}
	cg->fd = open_cg_dir(AT_FDCWD, cg->path, cg->path, err);
	if (cg->fd < 0 || flock(cg->fd, LOCK_SH) < 0) {
		if (cg->fd >= 0)
			kiwi_error(err, errno, "cgroup", "cannot lock `%s`", cg->path);
		kiwi_cgroup_forget(cg);
		return -1;
	}
	*out = cg;
	return 0;
}

bool kiwi_cgroup_adopted(const struct kiwi_cgroup *cg)
{
	return cg && cg->adopted;
}

void kiwi_cgroup_forget(struct kiwi_cgroup *cg)
{
	if (!cg)
		return;
	if (cg->fd >= 0)
		close(cg->fd);
	free(cg->path);
	free(cg->name);
	free(cg);
}

int kiwi_cgroup_remove_path(const char *path, kiwi_err *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT ? 0 : kiwi_error(err, errno, "cgroup", "cannot open cgroup `%s`", path);
	return reap_cgroup(AT_FDCWD, path, fd, path, err);
}

int kiwi_cgroup_fd(const struct kiwi_cgroup *cg)
{
	return cg ? cg->fd : -1;
}

const char *kiwi_cgroup_path(const struct kiwi_cgroup *cg)
{
	return cg ? cg->path : NULL;
}

const char *kiwi_cgroup_name(const struct kiwi_cgroup *cg)
{
	return cg ? cg->name : NULL;
}

static int kill_fd(int fd, const char *shown, kiwi_err *err)
{
	if (write_raw(fd, "cgroup.kill", "1") < 0)
		return kiwi_error(err, errno, "cgroup", "cannot kill the processes of `%s`%s", shown,
				  errno == ENOENT ? " (cgroup.kill needs Linux 5.14)" : "");
	return 0;
}

int kiwi_cgroup_kill(struct kiwi_cgroup *cg, kiwi_err *err)
{
	return kill_fd(cg->fd, cg->path, err);
}

/* Waits until cgroup.events says key is want ("populated 0", "frozen 1"):
 * the kernel notifies the file (POLLPRI) on every change, so no busy loop.
 * 1 once it does, 0 when timeout_ms passed first. */
static int wait_events(int dirfd, const char *shown, const char *key, uint64_t want, long timeout_ms,
		       kiwi_err *err)
{
	_cleanup_close_ int fd = openat(dirfd, "cgroup.events", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return kiwi_error(err, errno, "cgroup", "cannot open `%s/cgroup.events`", shown);
	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		char text[256];
		uint64_t value = !want;
		ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
		if (n < 0)
			return kiwi_error(err, errno, "cgroup", "cannot read `%s/cgroup.events`", shown);
		text[n] = '\0';
		if (kiwi_cgroup_keyed(text, key, &value) && value == want)
			return 1;
		clock_gettime(CLOCK_MONOTONIC, &now);
		long left = timeout_ms - ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000);
		if (left <= 0)
			return 0;
		struct pollfd pfd = { .fd = fd, .events = POLLPRI };
		/* Short slices too, in case a notification slips between read and poll. */
		if (poll(&pfd, 1, left < 100 ? (int)left : 100) < 0 && errno != EINTR)
			return kiwi_error(err, errno, "cgroup", "poll on `%s/cgroup.events`", shown);
	}
}

static int wait_empty(int dirfd, const char *shown, kiwi_err *err)
{
	int r = wait_events(dirfd, shown, "populated", 0, KIWI_CG_EMPTY_TIMEOUT_MS, err);
	if (r == 0)
		return kiwi_error(err, ETIMEDOUT, "cgroup", "`%s` still has processes %d s after cgroup.kill", shown,
				  KIWI_CG_EMPTY_TIMEOUT_MS / 1000);
	return r < 0 ? -1 : 0;
}

/* A freeze waits this long for every task to stop (a task in an
 * uninterruptible sleep stops only when it wakes). */
#define KIWI_CG_FREEZE_TIMEOUT_MS 2000

int kiwi_cgroup_freeze(struct kiwi_cgroup *cg, bool frozen, kiwi_err *err)
{
	if (write_at(cg->fd, cg->path, "cgroup.freeze", frozen ? "1" : "0", err) < 0)
		return -1;
	if (!frozen)
		return 0;
	int r = wait_events(cg->fd, cg->path, "frozen", 1, KIWI_CG_FREEZE_TIMEOUT_MS, err);
	if (r > 0)
		return 0;
	write_raw(cg->fd, "cgroup.freeze", "0");
	return r < 0 ? -1 : kiwi_error(err, ETIMEDOUT, "cgroup", "`%s` did not freeze within %d ms", cg->path,
				       KIWI_CG_FREEZE_TIMEOUT_MS);
}

/* Removes the cgroups the sandbox made below dirfd, deepest first. */
static int remove_children(int dirfd, const char *shown, int depth, kiwi_err *err)
{
	if (depth > KIWI_CG_MAX_DEPTH)
		return kiwi_error(err, ELOOP, "cgroup", "cgroups nested deeper than %d below `%s`",
				  KIWI_CG_MAX_DEPTH, shown);
	int dup_fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
	DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	if (!d) {
		if (dup_fd >= 0)
			close(dup_fd);
		return kiwi_error(err, errno, "cgroup", "cannot list `%s`", shown);
	}
	int rc = 0;
	for (struct dirent *e; rc == 0 && (e = readdir(d));) {
		if (e->d_type != DT_DIR || !strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		_cleanup_close_ int fd = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			rc = kiwi_error(err, errno, "cgroup", "cannot open `%s` below `%s`", e->d_name, shown);
		else if (remove_children(fd, shown, depth + 1, err) < 0)
			rc = -1;
		else if (unlinkat(dirfd, e->d_name, AT_REMOVEDIR) < 0)
			rc = kiwi_error(err, errno, "cgroup", "cannot remove `%s` below `%s`", e->d_name, shown);
	}
	closedir(d);
	return rc;
}

/* Kill, wait, remove: the end of every kiwi cgroup, ours or a stale one.
 * rmdir right after the last task exits can still see EBUSY for a moment. */
static int reap_cgroup(int pfd, const char *name, int fd, const char *shown, kiwi_err *err)
{
	/* The usual end: the sandbox is gone and made no cgroups of its own. */
	if (unlinkat(pfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
		return 0;
	if (kill_fd(fd, shown, err) < 0 || wait_empty(fd, shown, err) < 0 ||
	    remove_children(fd, shown, 0, err) < 0) {
		/* Removed meanwhile by whoever owns the cgroup above (a
		 * session's end takes its execs' with it): its files answer
		 * ENODEV then, and gone is what was wanted. */
		if (faccessat(pfd, name, F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT) {
			if (err)
				*err = (kiwi_err){ 0 };
			return 0;
		}
		return -1;
	}
	for (int i = 0; unlinkat(pfd, name, AT_REMOVEDIR) < 0; i++) {
		if (errno == ENOENT)
			return 0;
		if (errno != EBUSY || i == 100)
			return kiwi_error(err, errno, "cgroup", "cannot remove `%s`", shown);
		usleep(10000);
	}
	return 0;
}

int kiwi_cgroup_destroy(struct kiwi_cgroup *cg, kiwi_err *err)
{
	if (!cg)
		return 0;
	int rc = 0;
	if (cg->adopted) {
		/* The helper removes the cgroup: empty it and what is below. */
		char text[256];
		uint64_t populated = 1;
		bool busy = read_at(cg->fd, "cgroup.events", text, sizeof(text)) < 0 ||
			    !kiwi_cgroup_keyed(text, "populated", &populated) || populated;
		if (busy && (kill_fd(cg->fd, cg->path, err) < 0 || wait_empty(cg->fd, cg->path, err) < 0))
			rc = -1;
		else if (remove_children(cg->fd, cg->path, 0, err) < 0)
			rc = -1;
	} else if (cg->fd >= 0 && cg->path) {
		rc = reap_cgroup(AT_FDCWD, cg->path, cg->fd, cg->path, err);
	}
	if (cg->fd >= 0)
		close(cg->fd);
	free(cg->path);
	free(cg->name);
	free(cg);
	return rc;
}

/* ---- what the controllers counted --------------------------------------- */

int kiwi_cgroup_read_stats(struct kiwi_cgroup *cg, struct kiwi_cgroup_stats *st, kiwi_err *err)
{
	uint64_t v = 0;
	char text[2048];
	*st = (struct kiwi_cgroup_stats){ 0 };
	/* Files of controllers that are off do not exist: their fields stay 0. */
	if (read_at(cg->fd, "memory.events", text, sizeof(text)) >= 0) {
		st->memory_known = true;
		kiwi_cgroup_keyed(text, "oom_kill", &st->oom_kills);
		/* oom_group_kill (Linux 5.17) counts the kills memory.oom.group makes. */
		st->oom_killed = st->oom_kills > 0 || (kiwi_cgroup_keyed(text, "oom_group_kill", &v) && v > 0);
	}
	if (read_at(cg->fd, "memory.peak", text, sizeof(text)) >= 0) {
		const char *p = text;
		st->peak_known = parse_digits(&p, &v, 20) > 0;
		st->peak_memory_kib = (v + 1023) / 1024;
	}
	st->pids_known = read_at(cg->fd, "pids.events", text, sizeof(text)) >= 0;
	st->pids_limit_hit = st->pids_known && kiwi_cgroup_keyed(text, "max", &v) && v > 0;
	/* cpu.stat is always there: usage is accounted without the cpu controller. */
	if (read_at(cg->fd, "cpu.stat", text, sizeof(text)) < 0 ||
	    !kiwi_cgroup_keyed(text, "usage_usec", &st->cpu_usage_us))
		return kiwi_error(err, errno, "cgroup", "cannot read `%s/cpu.stat`", cg->path);
	kiwi_cgroup_keyed(text, "user_usec", &st->cpu_user_us);
	kiwi_cgroup_keyed(text, "system_usec", &st->cpu_system_us);
	return 0;
}

/* ---- gc ----------------------------------------------------------------- */

struct victim {
	char name[NAME_MAX + 1];
	int fd;   /* holds LOCK_EX: no owner can come back */
};

/* Under the parent's exclusive lock, takes every kiwi-* cgroup nobody holds
 * a lock on. Returns how many, or -1. */
static int pick_victims(int pfd, struct victim **out, kiwi_err *err)
{
	int dup_fd = fcntl(pfd, F_DUPFD_CLOEXEC, 0);
	DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	if (!d) {
		if (dup_fd >= 0)
			close(dup_fd);
		return kiwi_error(err, errno, "gc", "cannot list the cgroup parent");
	}
	struct victim *v = NULL;
	int n = 0;
	for (struct dirent *e; (e = readdir(d));) {
		if (e->d_type != DT_DIR || strncmp(e->d_name, "kiwi-", 5))
			continue;
		int fd = openat(pfd, e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			continue;
		struct victim *grown = flock(fd, LOCK_EX | LOCK_NB) == 0 ? realloc(v, (size_t)(n + 1) * sizeof(*v)) : NULL;
		if (!grown) {
			close(fd);   /* live (or out of memory: skip it this time) */
			continue;
		}
		v = grown;
		snprintf(v[n].name, sizeof(v[n].name), "%s", e->d_name);
		v[n++].fd = fd;
	}
	closedir(d);
	*out = v;
	return n;
}

int kiwi_cgroup_gc(const char *parent, unsigned *removed, kiwi_err *err)
{
	char mount[PATH_MAX], rel[PATH_MAX];
	*removed = 0;
	/* No cgroup2 at all (or, under ip netns exec, none in this view of
	 * /sys): no kiwi-run made a cgroup here, so nothing to collect. */
	kiwi_err e = { 0 };
	if (resolve_parent(parent, true, mount, rel, sizeof(rel), &e) < 0) {
		if (!parent && e.errnum == ENOENT)
			return 0;
		if (err)
			*err = e;
		return -1;
	}
	_cleanup_close_ int pfd = open_parent(mount, rel, 0, &(struct descent){ .create = false }, err);
	if (pfd < 0)
		return errno == ENOENT ? 0 : -1;   /* no parent, nothing to collect */
	if (flock(pfd, LOCK_EX) < 0)
		return kiwi_error(err, errno, "gc", "cannot lock `%s%s`", mount, rel);
	_cleanup_free_ struct victim *v = NULL;
	int n = pick_victims(pfd, &v, err);
	flock(pfd, LOCK_UN);
	int rc = n < 0 ? -1 : 0;
	for (int i = 0; i < n; i++) {
		char shown[PATH_MAX];
		kiwi_err one;
		if (snprintf(shown, sizeof(shown), "%s%s/%s", mount, rel, v[i].name) >= (int)sizeof(shown))
			shown[sizeof(shown) - 1] = '\0';   /* only for messages */
		if (reap_cgroup(pfd, v[i].name, v[i].fd, shown, &one) == 0)
			(*removed)++;
		else if (rc == 0) {
			if (err)
				*err = one;
			rc = -1;
		}
		close(v[i].fd);
	}
	return rc;
}
