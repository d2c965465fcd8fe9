/* SPDX-License-Identifier: Apache-2.0 */
/* The registry of running sandboxes (see include/kiwi/registry.h).
 *
 * Who is alive, and which process to signal, comes from the kernel's own
 * table of locks, /proc/locks: a state file held under an exclusive flock
 * names, in that table, the pid of the kiwi-run that holds it. A pid taken
 * from the file alone could be stale and reused; a pid that holds the lock
 * right now cannot, and a pidfd opened before that check stays bound to the
 * same process whatever happens after. */
#include "kiwi/registry.h"
#include "kiwi/cleanup.h"
#include "kiwi/fileio.h"
#include "kiwi/json.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define ROOT_DIR "/run/kiwi/sandboxes"
#define SUFFIX ".json"

struct kiwi_registry {
	int fd;            /* the state file, holding LOCK_EX */
	int replaced_fd;   /* the one it replaced (kiwi_registry_update), still locked; -1: none */
	struct kiwi_registry_entry entry;   /* what fd says */
	int dirfd;
	bool transient;    /* the /tmp fallback: removed once empty */
	char dir[PATH_MAX];
	char name[KIWI_REGISTRY_ID_LEN + sizeof(SUFFIX)];
};

/* ---- the directory -------------------------------------------------------- */

/* An open registry directory and where it is. */
struct regdir {
	int fd;
	bool transient;
	char path[PATH_MAX];
};

/* The directory must be the caller's and closed to others: anyone else who
 * could write there could point `kill` at a process of their choosing. */
static int check_owned(int fd, const char *path, mode_t forbidden, kiwi_err *err)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return kiwi_error(err, errno, "registry", "cannot stat `%s`", path);
	if (st.st_uid != geteuid() || (st.st_mode & forbidden))
		return kiwi_error(err, EPERM, "registry",
				  "`%s` is not safe to use: it must belong to uid %u and be closed to "
				  "others (mode %04o, owner %u); remove it or fix its owner and mode",
				  path, (unsigned)geteuid(), (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid);
	return 0;
}

/* Opens dirfd/name as a directory, making it 0700 first when create. */
static int open_sub(int dirfd, const char *name, const char *path, bool create, mode_t forbidden,
		    kiwi_err *err)
{
	int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	_cleanup_close_ int fd = openat(dirfd, name, flags);
	if (fd < 0 && errno == ENOENT && create) {
		if (mkdirat(dirfd, name, 0700) < 0 && errno != EEXIST)
			return kiwi_error(err, errno, "registry", "cannot create `%s`", path);
		fd = openat(dirfd, name, flags);
	}
	if (fd < 0) {
		int saved = errno;
		kiwi_error(err, saved, "registry", "cannot open `%s`", path);
		errno = saved;
		return -1;
	}
	if (check_owned(fd, path, forbidden, err) < 0)
		return -1;
	return TAKE_FD(fd);
}

/* $XDG_RUNTIME_DIR/kiwi/sandboxes, when that variable names a directory of
 * the caller's own (a root shell's value survives `setpriv`, for one). */
static int open_xdg(const char *xdg, bool create, struct regdir *d, kiwi_err *err)
{
	kiwi_err ignored;
	_cleanup_close_ int base = open_sub(AT_FDCWD, xdg, xdg, false, 022, &ignored);
	if (base < 0)
		return 1;   /* not usable: the caller falls back */
	snprintf(d->path, sizeof(d->path), "%s/kiwi", xdg);
	_cleanup_close_ int kiwi = open_sub(base, "kiwi", d->path, create, 022, err);
	if (kiwi < 0)
		return -1;
	snprintf(d->path, sizeof(d->path), "%s/kiwi/sandboxes", xdg);
	d->fd = open_sub(kiwi, "sandboxes", d->path, create, 077, err);
	return d->fd < 0 ? -1 : 0;
}

/* /tmp is sticky: only we can remove or rename a directory we own there.
 * But anyone may take a name there first: when /tmp/kiwi-run-UID is not
 * ours, the registry lives in /tmp/kiwi-run-UID.XXXXXX directories of
 * ours instead, found by their owner and mode, never by name alone. */
#define TMP_DIR "/tmp"

static void tmp_primary(char *out, size_t len)
{
	snprintf(out, len, TMP_DIR "/kiwi-run-%u", (unsigned)geteuid());
}

/* The next directory of ours in /tmp named kiwi-run-UID.*, or -1. */
static int next_fallback(DIR *tmp, struct regdir *d)
{
	char prefix[32];
	snprintf(prefix, sizeof(prefix), "kiwi-run-%u.", (unsigned)geteuid());
	for (struct dirent *de; (de = readdir(tmp));) {
		if (strncmp(de->d_name, prefix, strlen(prefix)))
			continue;
		kiwi_err ignored;
		snprintf(d->path, sizeof(d->path), TMP_DIR "/%s", de->d_name);
		d->fd = open_sub(dirfd(tmp), de->d_name, d->path, false, 077, &ignored);
		if (d->fd >= 0)
			return 0;
	}
	return -1;
}

static int open_fallback(bool create, struct regdir *d, kiwi_err *err)
{
	DIR *tmp = opendir(TMP_DIR);
	int r = tmp ? next_fallback(tmp, d) : -1;
	if (tmp)
		closedir(tmp);
	if (r == 0)
		return 0;
	if (!create)
		return kiwi_error(err, ENOENT, "registry", "no registry directory of uid %u in " TMP_DIR,
				  (unsigned)geteuid());
	snprintf(d->path, sizeof(d->path), TMP_DIR "/kiwi-run-%u.XXXXXX", (unsigned)geteuid());
	if (!mkdtemp(d->path))
		return kiwi_error(err, errno, "registry", "cannot create `%s`", d->path);
	d->fd = open_sub(AT_FDCWD, d->path, d->path, false, 077, err);
	return d->fd < 0 ? -1 : 0;
}

static int open_tmp(bool create, struct regdir *d, kiwi_err *err)
{
	kiwi_err e = { 0 };
	d->transient = true;
	tmp_primary(d->path, sizeof(d->path));
	d->fd = open_sub(AT_FDCWD, d->path, d->path, create, 077, &e);
	if (d->fd >= 0)
		return 0;
	/* Not there (and not to be made): nothing registered. Anything
	 * else there means someone else holds the name. */
	if (e.errnum == ENOENT ||
	    (e.errnum != EPERM && e.errnum != EACCES && e.errnum != ELOOP && e.errnum != ENOTDIR)) {
		*err = e;
		errno = e.errnum;
		return -1;
	}
	return open_fallback(create, d, err);
}

/* The caller's registry directory. Without create, one that does not exist
 * gives -1 with errno ENOENT. */
static int open_regdir(bool create, struct regdir *d, kiwi_err *err)
{
	*d = (struct regdir){ .fd = -1 };
	if (geteuid() == 0) {
		/* /run is root's alone, so the path up to here is too. */
		snprintf(d->path, sizeof(d->path), ROOT_DIR);
		d->fd = open_sub(AT_FDCWD, ROOT_DIR, ROOT_DIR, false, 077, err);
		/* The first sandbox since boot makes the directories. */
		if (d->fd < 0 && errno == ENOENT && create) {
			if (mkdir("/run/kiwi", 0755) < 0 && errno != EEXIST)
				return kiwi_error(err, errno, "registry", "cannot create /run/kiwi");
			d->fd = open_sub(AT_FDCWD, ROOT_DIR, ROOT_DIR, true, 077, err);
		}
		return d->fd < 0 ? -1 : 0;
	}
	/* No setuid: kiwi-run runs with the caller's own rights, so the
	 * caller's environment is trusted as far as the caller is. */
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	if (xdg && xdg[0] == '/') {
		int r = open_xdg(xdg, create, d, err);
		if (r <= 0)
			return r;
	}
	return open_tmp(create, d, err);
}

/* ---- the state file ------------------------------------------------------- */

int kiwi_registry_new_id(char id[KIWI_REGISTRY_ID_LEN + 1], kiwi_err *err)
{
	unsigned char r[KIWI_REGISTRY_ID_LEN / 2];
	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return kiwi_error(err, errno, "registry", "cannot make a sandbox id");
	for (size_t i = 0; i < sizeof(r); i++)
		snprintf(id + 2 * i, 3, "%02x", r[i]);
	return 0;
}

/* Length of the valid UTF-8 sequence at p (1-4), or 0. */
static size_t utf8_len(const unsigned char *p)
{
	size_t n = p[0] < 0x80 ? 1 : (p[0] & 0xe0) == 0xc0 && p[0] >= 0xc2 ? 2
		   : (p[0] & 0xf0) == 0xe0 ? 3 : (p[0] & 0xf8) == 0xf0 && p[0] <= 0xf4 ? 4 : 0;
	for (size_t i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	/* Overlong three- and four-byte forms, surrogates, past U+10FFFF. */
	if ((n == 3 && ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0))) ||
	    (n == 4 && ((p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90))))
		return 0;
	return n;
}

void kiwi_registry_set_command(struct kiwi_registry_entry *e, char *const *argv)
{
	size_t o = 0, cap = sizeof(e->command) - 1;
	for (char *const *a = argv; a && *a && o < cap; a++) {
		if (a != argv)
			e->command[o++] = ' ';
		/* JSON holds UTF-8 only: a byte that is not part of a valid
		 * sequence becomes '?', so one odd argument spoils nothing else. */
		for (const unsigned char *p = (const unsigned char *)*a; *p && o < cap;) {
			size_t n = utf8_len(p);
			if (n == 0 || o + n > cap) {
				e->command[o++] = '?';
				p++;
				continue;
			}
			memcpy(e->command + o, p, n);
			o += n;
			p += n;
		}
	}
	e->command[o] = '\0';
}

bool kiwi_registry_valid_id(const char *s, size_t min)
{
	size_t n = strspn(s, "0123456789abcdef");
	return s[n] == '\0' && n >= min && n <= KIWI_REGISTRY_ID_LEN;
}

char *kiwi_registry_format(const struct kiwi_registry_entry *e)
{
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
	if (!w)
		return NULL;
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "version");
	kiwi_jw_int(w, 1);
	kiwi_jw_key(w, "id");
	kiwi_jw_string(w, e->id);
	kiwi_jw_key(w, "pid");
	kiwi_jw_int(w, e->pid);
	kiwi_jw_key(w, "supervisor_pid");
	kiwi_jw_int(w, e->supervisor_pid);
	kiwi_jw_key(w, "uid");
	kiwi_jw_int(w, e->uid);
	kiwi_jw_key(w, "phase");
	kiwi_jw_string(w, e->phase[0] ? e->phase : NULL);
	kiwi_jw_key(w, "cgroup");
	kiwi_jw_string(w, e->cgroup[0] ? e->cgroup : NULL);
	kiwi_jw_key(w, "network");
	kiwi_jw_string(w, e->network);
	kiwi_jw_key(w, "command");
	kiwi_jw_string(w, e->command);
	kiwi_jw_key(w, "started_ns");
	kiwi_jw_int(w, e->started_ns);
	kiwi_jw_key(w, "session");
	kiwi_jw_bool(w, e->session);
	kiwi_jw_key(w, "sealed");
	kiwi_jw_bool(w, e->sealed);
	kiwi_jw_close_object(w);
	size_t len;
	const char *text = kiwi_jw_text(w, &len);
	return text ? strndup(text, len) : NULL;
}

/* A string field into a fixed buffer; null means "" where allowed. */
static int get_string(const kiwi_json *root, const char *key, bool nullable, char *out, size_t len,
		      kiwi_err *err)
{
	const kiwi_json *v = kiwi_json_get(root, key);
	if (v && nullable && kiwi_json_type_of(v) == KIWI_JSON_NULL) {
		out[0] = '\0';
		return 0;
	}
	const char *s = v ? kiwi_json_string(v) : NULL;
	if (!s)
		return kiwi_error(err, EINVAL, "registry", "`%s` is missing or not a string", key);
	if (strlen(s) >= len)
		return kiwi_error(err, EINVAL, "registry", "`%s` is longer than %zu bytes", key, len - 1);
	memcpy(out, s, strlen(s) + 1);
	return 0;
}

static int get_int(const kiwi_json *root, const char *key, long long min, long long max, long long *out,
		   kiwi_err *err)
{
	const kiwi_json *v = kiwi_json_get(root, key);
	if (!v || !kiwi_json_int(v, out) || *out < min || *out > max)
		return kiwi_error(err, EINVAL, "registry", "`%s` is missing or not an integer in %lld..%lld",
				  key, min, max);
	return 0;
}

int kiwi_registry_parse(const char *text, size_t len, struct kiwi_registry_entry *e, kiwi_err *err)
{
	*e = (struct kiwi_registry_entry){ 0 };
	_cleanup_json_ kiwi_json *root = kiwi_json_parse(text, len, err);
	if (!root)
		return -1;
	if (kiwi_json_type_of(root) != KIWI_JSON_OBJECT)
		return kiwi_error(err, EINVAL, "registry", "a state file holds one JSON object");
	long long version, pid, sup, uid, started;
	if (get_int(root, "version", 1, 1, &version, err) < 0 ||
	    get_string(root, "id", false, e->id, sizeof(e->id), err) < 0 ||
	    get_int(root, "pid", 1, INT_MAX, &pid, err) < 0 ||
	    get_int(root, "supervisor_pid", 1, INT_MAX, &sup, err) < 0 ||
	    get_int(root, "uid", 0, UINT32_MAX - 1, &uid, err) < 0 ||
	    get_string(root, "phase", true, e->phase, sizeof(e->phase), err) < 0 ||
	    get_string(root, "cgroup", true, e->cgroup, sizeof(e->cgroup), err) < 0 ||
	    get_string(root, "network", false, e->network, sizeof(e->network), err) < 0 ||
	    get_string(root, "command", false, e->command, sizeof(e->command), err) < 0 ||
	    get_int(root, "started_ns", 0, INT64_MAX, &started, err) < 0)
		return -1;
	if (!kiwi_registry_valid_id(e->id, KIWI_REGISTRY_ID_LEN))
		return kiwi_error(err, EINVAL, "registry", "`id` is not %d hex digits", KIWI_REGISTRY_ID_LEN);
	e->pid = (pid_t)pid;
	e->supervisor_pid = (pid_t)sup;
	e->uid = (uid_t)uid;
	e->started_ns = started;
	/* Optional: written since sessions, absent before. */
	const kiwi_json *session = kiwi_json_get(root, "session");
	if (session && !kiwi_json_bool(session, &e->session))
		return kiwi_error(err, EINVAL, "registry", "`session` is not a boolean");
	/* Optional too: written since sessions could be sealed. */
	const kiwi_json *sealed = kiwi_json_get(root, "sealed");
	if (sealed && !kiwi_json_bool(sealed, &e->sealed))
		return kiwi_error(err, EINVAL, "registry", "`sealed` is not a boolean");
	return 0;
}

static int write_all(int fd, const char *text, kiwi_err *err)
{
	size_t len = strlen(text);
	while (len) {
		ssize_t n = write(fd, text, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return kiwi_error(err, n < 0 ? errno : EIO, "registry", "cannot write the state file");
		text += n;
		len -= (size_t)n;
	}
	return 0;
}

/* One try at an unnamed, locked, written file linked in as name. Returns
 * the fd, or -1; errno ENOENT means the (transient) directory went away
 * under us and a fresh one may be made. */
static int add_in(const struct regdir *d, const char *name, const char *text, kiwi_err *err)
{
	_cleanup_close_ int fd = openat(d->fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0) {
		int saved = errno;
		kiwi_error(err, saved, "registry", "cannot create a state file in `%s`", d->path);
		errno = saved;
		return -1;
	}
	/* Nobody else can reach an unnamed file: this never waits. */
	if (flock(fd, LOCK_EX) < 0 || write_all(fd, text, err) < 0)
		return kiwi_error(err, errno, "registry", "cannot write a state file in `%s`", d->path);
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	if (linkat(AT_FDCWD, proc, d->fd, name, AT_SYMLINK_FOLLOW) < 0) {
		int saved = errno;
		kiwi_error(err, saved, "registry", "cannot add `%s/%s`", d->path, name);
		errno = saved;
		return -1;
	}
	return TAKE_FD(fd);
}

int kiwi_registry_add(const struct kiwi_registry_entry *e, struct kiwi_registry **out, kiwi_err *err)
{
	_cleanup_free_ char *text = kiwi_registry_format(e);
	_cleanup_free_ struct kiwi_registry *r = calloc(1, sizeof(*r));
	if (!text || !r)
		return kiwi_error(err, ENOMEM, "registry", "out of memory");
	snprintf(r->name, sizeof(r->name), "%s" SUFFIX, e->id);
	r->entry = *e;
	r->replaced_fd = -1;
	/* The /tmp fallback is removed by the last sandbox to leave it; one
	 * arriving at that moment makes it again. */
	for (int tries = 0;; tries++) {
		struct regdir d;
		if (open_regdir(true, &d, err) < 0)
			return -1;
		r->fd = add_in(&d, r->name, text, err);
		if (r->fd >= 0) {
			r->dirfd = d.fd;
			r->transient = d.transient;
			snprintf(r->dir, sizeof(r->dir), "%s", d.path);
			break;
		}
		/* Whatever errno a create in a directory removed under us gives
		 * (ENOENT from the link; the ASan lane once saw EPERM from the
		 * O_TMPFILE), a link count of 0 says that is what happened. */
		struct stat st;
		bool gone = errno == ENOENT || (fstat(d.fd, &st) == 0 && st.st_nlink == 0);
		close(d.fd);
		if (!gone || !d.transient || tries == 3)
			return -1;
	}
	*out = TAKE_PTR(r);
	return 0;
}

void kiwi_registry_remove(struct kiwi_registry *r)
{
	if (!r)
		return;
	int saved = errno;
	/* Unlinked before the lock goes: no one ever sees it unlocked. */
	unlinkat(r->dirfd, r->name, 0);
	close(r->fd);
	if (r->replaced_fd >= 0)
		close(r->replaced_fd);
	close(r->dirfd);
	if (r->transient)
		rmdir(r->dir);   /* fails while other sandboxes are registered */
	free(r);
	errno = saved;
}

/* ".<id>.json.new": kiwi_registry_update's file before its rename; one a
 * SIGKILL left is unlocked, which gc removes. */
static void update_name(const char *entry, char *out, size_t len)
{
	snprintf(out, len, ".%s.new", entry);
}

int kiwi_registry_update(struct kiwi_registry *r, const struct kiwi_registry_entry *e, kiwi_err *err)
{
	_cleanup_free_ char *text = kiwi_registry_format(e);
	if (!text)
		return kiwi_error(err, ENOMEM, "registry", "out of memory");
	char tmp[sizeof(r->name) + 8];
	update_name(r->name, tmp, sizeof(tmp));
	struct regdir d = { .fd = r->dirfd };
	snprintf(d.path, sizeof(d.path), "%s", r->dir);
	/* A whole new file, locked before it is named, renamed over the old
	 * one: a reader sees either text, never half of one, and the name is
	 * never unlocked. */
	_cleanup_close_ int fd = add_in(&d, tmp, text, err);
	if (fd < 0)
		return -1;
	if (renameat(r->dirfd, tmp, r->dirfd, r->name) < 0) {
		int saved = errno;
		unlinkat(r->dirfd, tmp, 0);
		return kiwi_error(err, saved, "registry", "cannot update `%s/%s`", r->dir, r->name);
	}
	/* The replaced file stays locked to the end: a gc that opened it by
	 * name a moment ago must still find it held, or its unlink of the name
	 * would remove the new entry. */
	if (r->replaced_fd >= 0)
		close(r->replaced_fd);
	r->replaced_fd = r->fd;
	r->fd = TAKE_FD(fd);
	r->entry = *e;
	return 0;
}

int kiwi_registry_set_sealed(struct kiwi_registry *r, kiwi_err *err)
{
	if (!r || r->entry.sealed)
		return 0;
	struct kiwi_registry_entry e = r->entry;
	e.sealed = true;
	return kiwi_registry_update(r, &e, err);
}

const char *kiwi_registry_network_now(const struct kiwi_registry_entry *e)
{
	return e->sealed ? "audit" : e->network;
}

/* ---- who holds what: /proc/locks ------------------------------------------ */

/* The pid holding an exclusive flock on fd's file, 0 when none. */
static pid_t lock_holder(int fd)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return 0;
	_cleanup_close_ int lfd = open("/proc/locks", O_RDONLY | O_CLOEXEC);
	FILE *f = lfd >= 0 ? fdopen(lfd, "re") : NULL;
	if (!f)
		return 0;
	TAKE_FD(lfd);
	_cleanup_free_ char *line = NULL;
	size_t cap = 0;
	pid_t holder = 0;
	/* "1: FLOCK  ADVISORY  WRITE 6210 fe:00:10952802 0 EOF"; blocked
	 * waiters come as "1: -> FLOCK ..." and do not count. */
	while (!holder && getline(&line, &cap, f) > 0) {
		char kind[16], mode[16];
		unsigned maj, min;
		unsigned long ino;
		int pid;
		if (strstr(line, "->") ||
		    sscanf(line, "%*d: %15s %*s %15s %d %x:%x:%lu", kind, mode, &pid, &maj, &min, &ino) != 6)
			continue;
		if (!strcmp(kind, "FLOCK") && !strcmp(mode, "WRITE") && ino == st.st_ino &&
		    maj == major(st.st_dev) && min == minor(st.st_dev) && pid > 0)
			holder = pid;
	}
	fclose(f);
	return holder;
}

static void fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}

/* Whether pid's parent is parent and pid is pid 1 of its own namespace:
 * the sandbox's init as its kiwi-run sees it. */
static bool is_init_of(pid_t pid, pid_t parent)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	_cleanup_(fclosep) FILE *f = fopen(path, "re");
	_cleanup_free_ char *line = NULL;
	size_t cap = 0;
	int ppid = -1;
	bool ns_init = false;
	while (f && getline(&line, &cap, f) > 0) {
		if (!strncmp(line, "PPid:", 5))
			ppid = atoi(line + 5);
		/* "NSpid:\t4242\t1": at least two levels, the last one 1. */
		if (!strncmp(line, "NSpid:", 6)) {
			char *first = strchr(line, '\t'), *last = strrchr(line, '\t');
			ns_init = first && last != first && atoi(last + 1) == 1;
		}
	}
	return ppid == parent && ns_init;
}

/* ---- reading the directory ------------------------------------------------ */

/* Opens and parses one entry. Returns 1 when it is live (its lock held by
 * its supervisor; with any_holder, held at all), 0 when stale, -1 on error.
 * With fd_out, the open file is handed back. */
static int read_entry(int dirfd, const char *name, struct kiwi_registry_entry *e, int *fd_out, bool any_holder,
		      kiwi_err *err)
{
	_cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : kiwi_error(err, errno, "registry", "cannot open `%s`", name);
	/* Gets a shared lock only when no kiwi-run holds it: a stale entry. */
	if (flock(fd, LOCK_SH | LOCK_NB) == 0)
		return 0;
	_cleanup_free_ char *text = NULL;
	size_t len;
	if (kiwi_read_bounded(fd, KIWI_REGISTRY_FILE_MAX, name, &text, &len, err) < 0 ||
	    kiwi_registry_parse(text, len, e, err) < 0)
		return kiwi_error_wrap(err, "state file `%s`", name);
	/* Held by the kiwi-run the entry names, or (gc mid-way through a stale
	 * one, a hand-made file) not a sandbox at all. */
	if (!any_holder && lock_holder(fd) != e->supervisor_pid)
		return 0;
	if (fd_out)
		*fd_out = TAKE_FD(fd);
	return 1;
}

static bool entry_name(const char *name)
{
	size_t n = strlen(name);
	return n == KIWI_REGISTRY_ID_LEN + strlen(SUFFIX) && !strcmp(name + KIWI_REGISTRY_ID_LEN, SUFFIX);
}

static int by_start(const void *a, const void *b)
{
	const struct kiwi_registry_entry *x = a, *y = b;
	return (x->started_ns > y->started_ns) - (x->started_ns < y->started_ns);
}

/* What a reader does with one registry directory: 0 to go on, 1 to stop,
 * -1 on error. */
typedef int (*regdir_fn)(struct regdir *d, DIR *dir, void *ctx, kiwi_err *err);

/* Calls fn with d open for reading, and closes it. */
static int visit(struct regdir *d, regdir_fn fn, void *ctx, kiwi_err *err)
{
	int dup_fd = fcntl(d->fd, F_DUPFD_CLOEXEC, 0);
	DIR *dir = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	if (!dir) {
		if (dup_fd >= 0)
			close(dup_fd);
		close(d->fd);
		return kiwi_error(err, errno, "registry", "cannot list `%s`", d->path);
	}
	int r = fn(d, dir, ctx, err);
	closedir(dir);
	close(d->fd);
	return r;
}

/* Every registry directory of the caller: one, or in /tmp, ours of
 * kiwi-run-UID and kiwi-run-UID.* (two first sandboxes may each have
 * made one). None at all is nothing to read. */
static int each_regdir(regdir_fn fn, void *ctx, kiwi_err *err)
{
	struct regdir d;
	kiwi_err e = { 0 };
	if (open_regdir(false, &d, &e) < 0 && e.errnum != ENOENT) {
		*err = e;
		return -1;
	}
	if (!d.transient)
		return d.fd >= 0 && visit(&d, fn, ctx, err) < 0 ? -1 : 0;
	if (d.fd >= 0)
		close(d.fd);
	char primary[64];
	tmp_primary(primary, sizeof(primary));
	d = (struct regdir){ .transient = true };
	snprintf(d.path, sizeof(d.path), "%s", primary);
	kiwi_err ignored;
	d.fd = open_sub(AT_FDCWD, primary, primary, false, 077, &ignored);
	int r = d.fd >= 0 ? visit(&d, fn, ctx, err) : 0;
	DIR *tmp = r == 0 ? opendir(TMP_DIR) : NULL;
	while (tmp && r == 0 && next_fallback(tmp, &d) == 0)
		r = visit(&d, fn, ctx, err);
	if (tmp)
		closedir(tmp);
	return r < 0 ? -1 : 0;
}

struct listing {
	struct kiwi_registry_entry *v;
	size_t count;
};

static int list_in(struct regdir *d, DIR *dir, void *ctx, kiwi_err *err)
{
	struct listing *l = ctx;
	struct kiwi_registry_entry one;
	for (struct dirent *de; (de = readdir(dir));) {
		int r;
		if (!entry_name(de->d_name) || (r = read_entry(d->fd, de->d_name, &one, NULL, false, err)) == 0)
			continue;
		struct kiwi_registry_entry *grown = r > 0 ? realloc(l->v, (l->count + 1) * sizeof(*l->v)) : NULL;
		if (!grown)
			return r < 0 ? -1 : kiwi_error(err, ENOMEM, "registry", "out of memory");
		l->v = grown;
		l->v[l->count++] = one;
	}
	return 0;
}

int kiwi_registry_list(struct kiwi_registry_entry **out, size_t *n, kiwi_err *err)
{
	struct listing l = { 0 };
	*out = NULL;
	*n = 0;
	if (each_regdir(list_in, &l, err) < 0) {
		free(l.v);
		return -1;
	}
	if (l.count)
		qsort(l.v, l.count, sizeof(*l.v), by_start);
	*out = l.v;
	*n = l.count;
	return 0;
}

int kiwi_registry_dir(char *out, size_t len, bool create, kiwi_err *err)
{
	struct regdir d;
	if (open_regdir(create, &d, err) < 0)
		return -1;
	close(d.fd);
	if (snprintf(out, len, "%s", d.path) >= (int)len)
		return kiwi_error(err, ENAMETOOLONG, "registry", "`%s` is too long a path", d.path);
	return 0;
}

/* Whether someone listens on the socket dir/name: a session being
 * created listens before it is registered. */
static bool listened_on(const char *dir, const char *name)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	if (snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/%s", dir, name) >= (int)sizeof(sun.sun_path))
		return false;
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	/* EAGAIN: a full backlog is a listener too. The supervisor reads
	 * this connection's end at once and drops it. */
	return fd >= 0 && (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0 || errno == EAGAIN);
}

/* A session's socket (<id>.sock) whose entry is gone or stale, and that
 * nobody listens on. */
static bool stale_socket(const struct regdir *d, const char *name)
{
	size_t n = strlen(name);
	if (n != KIWI_REGISTRY_ID_LEN + 5 || strcmp(name + KIWI_REGISTRY_ID_LEN, ".sock"))
		return false;
	char entry[KIWI_REGISTRY_ID_LEN + sizeof(SUFFIX)];
	snprintf(entry, sizeof(entry), "%.*s%s", KIWI_REGISTRY_ID_LEN, name, SUFFIX);
	_cleanup_close_ int fd = openat(d->fd, entry, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	return (fd < 0 || flock(fd, LOCK_SH | LOCK_NB) == 0) && !listened_on(d->path, name);
}

static int gc_in(struct regdir *d, DIR *dir, void *ctx, kiwi_err *err)
{
	unsigned *removed = ctx;
	(void)err;
	for (struct dirent *de; (de = readdir(dir));) {
		if (stale_socket(d, de->d_name)) {
			unlinkat(d->fd, de->d_name, 0);
			continue;
		}
		size_t n = strlen(de->d_name);
		bool update = n == KIWI_REGISTRY_ID_LEN + strlen(SUFFIX) + 5 && de->d_name[0] == '.' &&
			      !strcmp(de->d_name + n - 4, ".new");
		if (update) {
			/* A kiwi_registry_update its writer did not finish. */
			_cleanup_close_ int fd = openat(d->fd, de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
			if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0)
				unlinkat(d->fd, de->d_name, 0);
			continue;
		}
		if (!entry_name(de->d_name))
			continue;
		_cleanup_close_ int fd = openat(d->fd, de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		/* Exclusive, so two gcs never both count one entry. */
		if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0 && unlinkat(d->fd, de->d_name, 0) == 0)
			(*removed)++;
	}
	if (d->transient)
		rmdir(d->path);
	return 0;
}

int kiwi_registry_gc(unsigned *removed, kiwi_err *err)
{
	*removed = 0;
	return each_regdir(gc_in, removed, err);
}

/* ---- records beside the entries ------------------------------------------- */

static bool record_name(const char *name, const char *suffix)
{
	size_t n = strlen(name);
	return n == KIWI_REGISTRY_ID_LEN + strlen(suffix) && !strcmp(name + KIWI_REGISTRY_ID_LEN, suffix) &&
	       strspn(name, "0123456789abcdef") == KIWI_REGISTRY_ID_LEN;
}

int kiwi_registry_record_add(const char *id, const char *suffix, const char *text, kiwi_err *err)
{
	char name[KIWI_REGISTRY_ID_LEN + 32];
	snprintf(name, sizeof(name), "%s%s", id, suffix);
	if (!record_name(name, suffix))
		return kiwi_error(err, EINVAL, "registry", "`%s` names no record", name);
	struct regdir d;
	if (open_regdir(true, &d, err) < 0)
		return -1;
	int fd = add_in(&d, name, text, err);
	close(d.fd);
	return fd;
}

void kiwi_registry_record_remove(const char *id, const char *suffix, int fd)
{
	char name[KIWI_REGISTRY_ID_LEN + 32];
	snprintf(name, sizeof(name), "%s%s", id, suffix);
	struct regdir d;
	kiwi_err ignored;
	/* Unlinked before the lock goes, as an entry is. */
	if (record_name(name, suffix) && open_regdir(false, &d, &ignored) == 0) {
		unlinkat(d.fd, name, 0);
		close(d.fd);
	}
	if (fd >= 0)
		close(fd);
}

struct record_sweep {
	const char *suffix;
	kiwi_registry_record_fn fn;
	void *ctx;
	unsigned removed;
};

static int sweep_in(struct regdir *d, DIR *dir, void *ctx, kiwi_err *err)
{
	struct record_sweep *s = ctx;
	(void)err;
	for (struct dirent *de; (de = readdir(dir));) {
		if (!record_name(de->d_name, s->suffix))
			continue;
		_cleanup_close_ int fd = openat(d->fd, de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		/* Held: its writer lives. Exclusive: two gcs never both sweep one. */
		if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0)
			continue;
		char text[KIWI_REGISTRY_FILE_MAX + 1];
		ssize_t n = pread(fd, text, KIWI_REGISTRY_FILE_MAX, 0);
		char id[KIWI_REGISTRY_ID_LEN + 1];
		snprintf(id, sizeof(id), "%.*s", KIWI_REGISTRY_ID_LEN, de->d_name);
		if (n >= 0)
			text[n] = '\0';
		if (n >= 0 && s->fn(s->ctx, id, text, (size_t)n) == 0 && unlinkat(d->fd, de->d_name, 0) == 0)
			s->removed++;
	}
	return 0;
}

int kiwi_registry_record_gc(const char *suffix, kiwi_registry_record_fn fn, void *ctx, unsigned *removed,
			    kiwi_err *err)
{
	struct record_sweep s = { .suffix = suffix, .fn = fn, .ctx = ctx };
	int r = each_regdir(sweep_in, &s, err);
	*removed = s.removed;
	return r;
}

/* ---- kill ----------------------------------------------------------------- */

bool kiwi_registry_signal_ok(int sig)
{
	static const int ok[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGKILL };
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(ok); i++)
		if (ok[i] == sig)
			return true;
	return false;
}

struct search {
	const char *id;
	struct kiwi_registry_entry *e;
	int *fd;
	int found;   /* 2: more than one */
	bool any_holder;
};

/* One more entry id names: two are one too many (an ambiguous prefix). */
static void take_found(struct search *s, const char *name, int dirfd)
{
	struct kiwi_registry_entry one;
	int one_fd = -1;
	kiwi_err ignored;
	if (read_entry(dirfd, name, &one, &one_fd, s->any_holder, &ignored) <= 0)
		return;
	if (s->found++)
		close(*s->fd);
	*s->e = one;
	*s->fd = one_fd;
}

static int find_in(struct regdir *d, DIR *dir, void *ctx, kiwi_err *err)
{
	struct search *s = ctx;
	size_t len = strlen(s->id);
	(void)err;
	/* A whole id names its file: no listing to read through, however
	 * many sandboxes the directory holds. */
	if (len == KIWI_REGISTRY_ID_LEN) {
		char name[KIWI_REGISTRY_ID_LEN + sizeof(SUFFIX)];
		snprintf(name, sizeof(name), "%s%s", s->id, SUFFIX);
		take_found(s, name, d->fd);
	} else {
		for (struct dirent *de; s->found < 2 && (de = readdir(dir));)
			if (entry_name(de->d_name) && !strncmp(de->d_name, s->id, len))
				take_found(s, de->d_name, d->fd);
	}
	return s->found < 2 ? 0 : 1;
}

/* The live entry id names (or the only one it is a prefix of). */
static int find(const char *id, struct kiwi_registry_entry *e, int *fd, bool any_holder, kiwi_err *err)
{
	if (!kiwi_registry_valid_id(id, 4))
		return kiwi_error(err, EINVAL, "kill", "`%s` is not a sandbox id (4 to %d hex digits, see "
				  "`kiwi-run list`)", id, KIWI_REGISTRY_ID_LEN);
	struct search s = { .id = id, .e = e, .fd = fd, .any_holder = any_holder };
	if (each_regdir(find_in, &s, err) < 0)
		return -1;
	int found = s.found;
	if (found == 1)
		return 0;
	if (found > 1) {
		close(*fd);
		return kiwi_error(err, EINVAL, "kill", "`%s` names more than one sandbox: give more digits", id);
	}
	return kiwi_error(err, 0, "kill", "no running sandbox `%s` of uid %u (see `kiwi-run list`)", id,
			  (unsigned)geteuid());
}

int kiwi_registry_find(const char *id, struct kiwi_registry_entry *e, int *fd, kiwi_err *err)
{
	return find(id, e, fd, false, err);
}

int kiwi_registry_find_held(const char *id, struct kiwi_registry_entry *e, int *fd, kiwi_err *err)
{
	return find(id, e, fd, true, err);
}

static int pidfd_open_(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

static int pidfd_signal(int pidfd, int sig)
{
	return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

/* A pidfd for the entry's target, proven to be that sandbox's: the target
 * is opened first, then checked, so a check that passes speaks for it. */
static int open_target(const struct kiwi_registry_entry *e, int file, int sig, kiwi_err *err)
{
	pid_t pid = sig == SIGKILL ? e->pid : e->supervisor_pid;
	_cleanup_close_ int pidfd = pidfd_open_(pid);
	if (pidfd < 0 && errno != ESRCH)
		return kiwi_error(err, errno, "kill", "cannot open process %d", (int)pid);
	/* The supervisor still holds the lock: it is alive, so the pid it
	 * holds it under was never reused. Its sandbox's init is its child
	 * and pid 1 of a namespace; kiwi-run makes no other child. */
	if (pidfd < 0 || lock_holder(file) != e->supervisor_pid ||
	    (sig == SIGKILL && !is_init_of(e->pid, e->supervisor_pid)))
		return kiwi_error(err, 0, "kill", "sandbox `%s` has just ended", e->id);
	return TAKE_FD(pidfd);
}

int kiwi_registry_kill(const char *id, int sig, kiwi_err *err)
{
	if (!kiwi_registry_signal_ok(sig))
		return kiwi_error(err, EINVAL, "kill",
				  "signal %d is not one kiwi-run passes on: use TERM, INT, HUP, QUIT, "
				  "USR1, USR2 or KILL", sig);
	struct kiwi_registry_entry e;
	_cleanup_close_ int file = -1;
	if (kiwi_registry_find(id, &e, &file, err) < 0)
		return -1;
	_cleanup_close_ int pidfd = open_target(&e, file, sig, err);
	if (pidfd < 0)
		return -1;
	if (pidfd_signal(pidfd, sig) < 0)
		return kiwi_error(err, errno, "kill", "cannot signal sandbox `%s`", e.id);
	return 0;
}
