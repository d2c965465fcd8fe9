/* SPDX-License-Identifier: Apache-2.0 */
#include "kiwi/layer.h"
#include "kiwi/cleanup.h"
#include "kiwi/digest.h"
#include "blob_stream.h"
#include "resolve.h"
#include "strmap.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#define PROGRESS_STEP (8U << 20)
#define WHITEOUT_PREFIX ".wh."
#define OPAQUE_MARKER ".wh..wh..opq"

struct dir_meta {
	mode_t mode;
	struct timespec mtime;
};

struct kiwi_extract {
	int root_fd;
	struct kiwi_extract_opts o;
	struct kiwi_extract_stats st;
	/* Paths this layer created, and their ancestors: whiteouts and opaque
	 * markers hide lower layers only, never their own layer's entries. */
	struct strmap touched;
	/* Directory modes and mtimes, applied by kiwi_extract_finish. */
	struct strmap dirs;
	/* The last parent resolved: tar streams list a directory's files
	 * together, so this saves an openat2 for most entries. Dropped whenever
	 * a directory is removed, as the path could then name another one. */
	char parent_path[PATH_MAX];
	int parent_fd;
	bool parent_gid_ours, parent_mode_from_open; /* of parent_fd (entry_ctx) */
	uid_t euid;
	gid_t egid;
	mode_t umask;
	bool privileged;
	uint64_t next_progress;
};

/* What the entry handlers share: the layer label and the raw name for
 * errors, the cleaned path, and where it goes. */
struct entry_ctx {
	const char *label;
	const char *raw;
	char path[PATH_MAX]; /* cleaned: "a/b/c", "" for the root */
	const char *name;    /* last component of path */
	int pfd;             /* the parent directory, O_PATH */
	bool gid_ours;       /* pfd's group is our egid: a new file's, setgid or not */
	bool mode_from_open; /* no default ACL on pfd: a new file's mode is open's less the umask */
};

/* Set on a file that set_attrs_fd gets just as O_EXCL made it. */
enum fresh {
	FRESH_OWNER = 1, /* owned by us, and by our group where the parent's is ours */
	FRESH_MODE = 2,  /* made with its mode already (open's mode, the umask clear of it) */
};

static int resolve(int root_fd, const char *path, int flags)
{
	return kiwi_resolve_in_root(root_fd, path, flags);
}

int kiwi_layer_compression_of(const char *media_type)
{
	static const struct {
		const char *suffix;
		enum kiwi_layer_compression comp;
	} known[] = {
		{ "tar", KIWI_LAYER_TAR },
		{ "tar+gzip", KIWI_LAYER_GZIP },
		{ "tar+zstd", KIWI_LAYER_ZSTD },
	};
	static const char *const prefixes[] = {
		"application/vnd.oci.image.layer.v1.",
		"application/vnd.oci.image.layer.nondistributable.v1.",
	};
	if (!media_type)
		return -1;
	if (!strcmp(media_type, "application/vnd.docker.image.rootfs.diff.tar.gzip"))
		return KIWI_LAYER_GZIP;
	for (size_t p = 0; p < KIWI_ARRAY_SIZE(prefixes); p++) {
		size_t pl = strlen(prefixes[p]);
		if (strncmp(media_type, prefixes[p], pl))
			continue;
		for (size_t k = 0; k < KIWI_ARRAY_SIZE(known); k++)
			if (!strcmp(media_type + pl, known[k].suffix))
				return (int)known[k].comp;
	}
	return -1;
}

kiwi_extract *kiwi_extract_new(int root_fd, const struct kiwi_extract_opts *opts)
{
	kiwi_extract *x = calloc(1, sizeof(*x));
	if (!x)
		return NULL;
	x->root_fd = root_fd;
	x->o = *opts;
	if (!x->o.max_size)
		x->o.max_size = KIWI_LAYER_DEFAULT_MAX_SIZE;
	if (!x->o.max_entries)
		x->o.max_entries = KIWI_LAYER_DEFAULT_MAX_ENTRIES;
	x->parent_fd = -1;
	x->privileged = geteuid() == 0;
	x->euid = geteuid();
	x->egid = getegid();
	x->umask = umask(0); /* read, and put back at once */
	umask(x->umask);
	x->next_progress = PROGRESS_STEP;
	return x;
}

static void drop_parent_cache(kiwi_extract *x)
{
	if (x->parent_fd >= 0)
		close(x->parent_fd);
	x->parent_fd = -1;
	x->parent_path[0] = '\0';
}

void kiwi_extract_free(kiwi_extract *x)
{
	if (!x)
		return;
	drop_parent_cache(x);
	strmap_clear(&x->touched, false);
	strmap_clear(&x->dirs, true);
	free(x);
}

const struct kiwi_extract_stats *kiwi_extract_get_stats(const kiwi_extract *x)
{
	return &x->st;
}

/* Lexically cleans a member name into out ("a/b", "" for the root).
 * Returns why the name cannot be contained, or NULL. */
static const char *clean_name(const char *in, char *out, size_t outlen)
{
	if (in[0] == '/')
		return "is an absolute path";
	size_t len = 0;
	for (const char *p = in; *p;) {
		const char *end = strchrnul(p, '/');
		size_t cl = (size_t)(end - p);
		if (cl == 2 && p[0] == '.' && p[1] == '.') {
			if (len == 0)
				return "climbs out of the root with `..`";
			while (len > 0 && out[len - 1] != '/')
				len--;
			if (len > 0)
				len--;
		} else if (cl > 0 && !(cl == 1 && p[0] == '.')) {
			if (len + cl + 2 > outlen)
				return "is too long";
			if (len)
				out[len++] = '/';
			memcpy(out + len, p, cl);
			len += cl;
		}
		p = *end ? end + 1 : end;
	}
	out[len] = '\0';
	return NULL;
}

static bool at_or_below(const char *path, const char *top)
{
	size_t n = strlen(top);
	return !strncmp(path, top, n) && (path[n] == '\0' || path[n] == '/');
}

/* A cleaned path (PATH_MAX bytes) as this extraction places it (opts.map);
 * true when it is not this extraction's. */
static bool route_away(const kiwi_extract *x, char *path)
{
	if (!x->o.n_map)
		return false;
	const struct kiwi_extract_map *best = NULL;
	for (size_t i = 0; i < x->o.n_map; i++) {
		const struct kiwi_extract_map *m = &x->o.map[i];
		if ((!m->from[0] || at_or_below(path, m->from)) && (!best || strlen(m->from) > strlen(best->from)))
			best = m;
	}
	if (!best)
		return true;
	char rest[PATH_MAX];
	const char *r = path + strlen(best->from);
	r += *r == '/';
	snprintf(rest, sizeof(rest), "%s", r);
	int n = snprintf(path, PATH_MAX, "%s%s%s", best->to, best->to[0] && rest[0] ? "/" : "", rest);
	return n < 0 || n >= PATH_MAX;
}

int kiwi_remove_tree_at(int dir_fd, const char *name, kiwi_err *err)
{
	if (unlinkat(dir_fd, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR)
		return kiwi_error(err, errno, "remove", "cannot remove `%s`", name);
	int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return kiwi_error(err, errno, "remove", "cannot open directory `%s`", name);
	/* An unprivileged owner needs write and search permission to empty it. */
	(void)fchmod(fd, 0700);
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return kiwi_error(err, errno, "remove", "cannot read directory `%s`", name);
	}
	int r = 0;
	struct dirent *de;
	while (r == 0 && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			r = kiwi_remove_tree_at(dirfd(d), de->d_name, err);
	closedir(d);
	if (r < 0)
		return kiwi_error_wrap(err, "`%s`", name);
	if (unlinkat(dir_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		return kiwi_error(err, errno, "remove", "cannot remove directory `%s`", name);
	return 0;
}

/* Removes what lower layers put under the directory dfd (whose path is
 * path[0..len)), keeping everything this layer touched. */
static int prune_lower(kiwi_extract *x, int dfd, char *path, size_t len, kiwi_err *err)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return kiwi_error(err, errno, "whiteout", "cannot read directory `%s`", path);
	}
	drop_parent_cache(x);
	int r = 0;
	struct dirent *de;
	while (r == 0 && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		int n = snprintf(path + len, PATH_MAX - len, "%s%s", len ? "/" : "", de->d_name);
		if (n < 0 || (size_t)n >= PATH_MAX - len) {
			r = kiwi_error(err, ENAMETOOLONG, "whiteout", "path under `%s` too long", path);
			break;
		}
		if (!strmap_find(&x->touched, path)) {
			r = kiwi_remove_tree_at(dirfd(d), de->d_name, err);
		} else {
			int cfd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (cfd >= 0) {
				r = prune_lower(x, cfd, path, len + (size_t)n, err);
				close(cfd);
			}
		}
		path[len] = '\0';
	}
	closedir(d);
	return r;
}

static int mark_touched(kiwi_extract *x, const char *path, kiwi_err *err)
{
	char buf[PATH_MAX];
	snprintf(buf, sizeof(buf), "%s", path);
	for (;;) {
		bool added;
		if (!strmap_put(&x->touched, buf, &added))
			return kiwi_error(err, ENOMEM, "unpack", "cannot track `%s`", buf);
		char *slash = strrchr(buf, '/');
		if (!added || !slash)
			return 0;
		*slash = '\0';
	}
}

/* Opens each missing ancestor of path in turn, creating it (0755, like tar)
 * inside the directory its own parent resolved to. */
static int make_parents(kiwi_extract *x, const char *path, kiwi_err *err)
{
	char buf[PATH_MAX];
	snprintf(buf, sizeof(buf), "%s", path);
	int prev = resolve(x->root_fd, "", O_PATH | O_DIRECTORY);
	if (prev < 0)
		return kiwi_error(err, errno, "unpack", "cannot open the destination");
	for (char *p = buf;; p++) {
		if (*p && *p != '/')
			continue;
		char saved = *p;
		*p = '\0';
		int fd = resolve(x->root_fd, buf, O_PATH | O_DIRECTORY);
		if (fd < 0 && errno == ENOENT) {
			const char *comp = strrchr(buf, '/');
			comp = comp ? comp + 1 : buf;
			if (mkdirat(prev, comp, 0755) < 0 && errno != EEXIST) {
				close(prev);
				return kiwi_error(err, errno, "unpack", "cannot create directory `%s`", buf);
			}
			/* 0755 whatever the umask, as the image would have said. */
			(void)fchmodat(prev, comp, 0755, AT_SYMLINK_NOFOLLOW);
			fd = resolve(x->root_fd, buf, O_PATH | O_DIRECTORY);
		}
		close(prev);
		if (fd < 0)
			return kiwi_error(err, errno, "unpack", "cannot open directory `%s`", buf);
		prev = fd;
		*p = saved;
		if (!saved)
			return prev;
	}
}

/* What a file made in the directory fd gets without being told, checked
 * once per parent so that most files need no fchown or fchmod: its group
 * is our egid when the directory's is (whether the directory is setgid or
 * the filesystem mounted grpid), and its mode is open's less the umask
 * unless the directory has a default ACL. When unsure, neither. */
static void learn_parent(kiwi_extract *x, int fd)
{
	x->parent_gid_ours = x->parent_mode_from_open = false;
	_cleanup_close_ int dir = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat st;
	if (dir < 0 || fstat(dir, &st) < 0)
		return;
	x->parent_gid_ours = st.st_gid == x->egid;
	x->parent_mode_from_open = fgetxattr(dir, "system.posix_acl_default", NULL, 0) < 0 &&
				   (errno == ENODATA || errno == EOPNOTSUPP);
}

static int get_parent(kiwi_extract *x, const char *parent, kiwi_err *err)
{
	if (x->parent_fd >= 0 && !strcmp(x->parent_path, parent))
		return x->parent_fd;
	drop_parent_cache(x);
	int fd = resolve(x->root_fd, parent, O_PATH | O_DIRECTORY);
	if (fd < 0 && errno == ENOENT)
		fd = make_parents(x, parent, err);
	else if (fd < 0)
		return kiwi_error(err, errno, "unpack", "cannot open directory `%s`", parent);
	if (fd < 0)
		return -1;
	snprintf(x->parent_path, sizeof(x->parent_path), "%s", parent);
	x->parent_fd = fd;
	learn_parent(x, fd);
	return fd;
}

/* Clears the way for a new entry: a directory stays when the new entry is
 * a directory too (tar's merge), anything else is removed. */
static int make_room(struct entry_ctx *c, bool new_is_dir, bool *kept_dir,
		     kiwi_err *err)
{
	struct stat st;
	*kept_dir = false;
	if (fstatat(c->pfd, c->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : kiwi_error(err, errno, "unpack", "cannot inspect `%s`", c->path);
	if (S_ISDIR(st.st_mode)) {
		if (new_is_dir) {
			*kept_dir = true;
			return 0;
		}
		/* The cached parent is c's own parent, which stays valid. */
		return kiwi_remove_tree_at(c->pfd, c->name, err);
	}
	if (unlinkat(c->pfd, c->name, 0) < 0)
		return kiwi_error(err, errno, "unpack", "cannot replace `%s`", c->path);
	return 0;
}

/* An entry is created with an exclusive call (O_EXCL, mkdirat, linkat,
 * symlinkat, mknodat), which fails with EEXIST when something is in the
 * way, never follows it: only then is the way cleared (make_room), and
 * the call made again. Most entries land where nothing is: no fstatat
 * for each of them. Returns 1 after clearing, 0 when errno is not EEXIST
 * (kept for the caller), -1 (err set) when clearing failed. */
static int in_the_way(struct entry_ctx *c, kiwi_err *err)
{
	if (errno != EEXIST)
		return 0;
	bool kept;
	return make_room(c, false, &kept, err) < 0 ? -1 : 1;
}

static bool xattr_wanted(const kiwi_extract *x, const char *name)
{
	/* A redirect or origin from a layer could point the overlay anywhere in its lower. */
	if (x->o.overlay && (!strncmp(name, "user.overlay.", 13) || !strncmp(name, "trusted.overlay.", 16)))
		return false;
	if (!strncmp(name, "user.", 5))
		return true;
	if (!strncmp(name, "trusted.", 8))
		return x->privileged;
	if (!strcmp(name, "security.capability"))
		return x->o.keep_capabilities;
	return false;
}

/* Owner, xattrs and (for files) mode and mtime, on an open fd. Owner first:
 * chown clears set-id bits, which the mode then restores. */
static int set_attrs_fd(kiwi_extract *x, struct entry_ctx *c, struct archive_entry *e, int fd,
			bool is_dir, unsigned fresh, kiwi_err *err)
{
	uid_t uid = (uid_t)archive_entry_uid(e);
	gid_t gid = (gid_t)archive_entry_gid(e);
	mode_t mode = archive_entry_perm(e) & 07777;
	if (x->o.plain) /* an oci-archive's files are data: no owners, no set-id */
		return fchmod(fd, (mode & 0755) | (is_dir ? 0700 : 0600)) < 0 ?
		       kiwi_error(err, errno, "unpack", "cannot chmod `%s`", c->path) : 0;
	bool owned = (fresh & FRESH_OWNER) && uid == x->euid && gid == x->egid;
	if (!owned && (!x->privileged || fchown(fd, uid, gid) < 0)) {
		if (x->privileged && errno != EINVAL && errno != EPERM)
			return kiwi_error(err, errno, "unpack", "cannot chown `%s`", c->path);
		if (uid != x->euid || gid != x->egid)
			x->st.owners_skipped++;
	}
	const char *xname;
	const void *val;
	size_t vlen;
	archive_entry_xattr_reset(e);
	while (archive_entry_xattr_next(e, &xname, &val, &vlen) == ARCHIVE_OK) {
		if (!xattr_wanted(x, xname) || fsetxattr(fd, xname, val, vlen, 0) < 0)
			x->st.xattrs_skipped++;
	}
	if (!(fresh & FRESH_MODE) && fchmod(fd, is_dir ? mode | 0700 : mode) < 0)
		return kiwi_error(err, errno, "unpack", "cannot chmod `%s`", c->path);
	if (is_dir)
		return 0;
	struct timespec ts[2] = {
		{ .tv_sec = archive_entry_mtime(e), .tv_nsec = archive_entry_mtime_nsec(e) },
		{ .tv_sec = archive_entry_mtime(e), .tv_nsec = archive_entry_mtime_nsec(e) },
	};
	if (futimens(fd, ts) < 0)
		return kiwi_error(err, errno, "unpack", "cannot set the mtime of `%s`", c->path);
	return 0;
}

#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif

/* fchmodat(AT_SYMLINK_NOFOLLOW) with no /proc, which glibc's goes through
 * (/proc/self/fd) and a confined restore has not (kiwi-rootfs
 * snapshot-restore --confine): fchmodat2 where the kernel has it (6.6),
 * else, for a fifo, the node itself opened without blocking. */
static int chmod_node(int pfd, const char *name, mode_t perm)
{
	if (syscall(SYS_fchmodat2, pfd, name, perm, AT_SYMLINK_NOFOLLOW) == 0)
		return 0;
	if (errno != ENOSYS)
		return -1;
	if (fchmodat(pfd, name, perm, AT_SYMLINK_NOFOLLOW) == 0)
		return 0;
	if (errno != EOPNOTSUPP)
		return -1;
	_cleanup_close_ int fd = openat(pfd, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISFIFO(st.st_mode)) {
		errno = fd < 0 ? errno : EOPNOTSUPP;
		return -1;
	}
	return fchmod(fd, perm);
}

/* Owner and mtime of what cannot be opened (symlinks, devices, fifos). */
static int set_attrs_at(kiwi_extract *x, struct entry_ctx *c, struct archive_entry *e,
			kiwi_err *err)
{
	uid_t uid = (uid_t)archive_entry_uid(e);
	gid_t gid = (gid_t)archive_entry_gid(e);
	if (!x->privileged || fchownat(c->pfd, c->name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0) {
		if (x->privileged && errno != EINVAL && errno != EPERM)
			return kiwi_error(err, errno, "unpack", "cannot chown `%s`", c->path);
		if (uid != geteuid() || gid != getegid())
			x->st.owners_skipped++;
	}
	struct timespec ts[2] = {
		{ .tv_sec = archive_entry_mtime(e), .tv_nsec = archive_entry_mtime_nsec(e) },
		{ .tv_sec = archive_entry_mtime(e), .tv_nsec = archive_entry_mtime_nsec(e) },
	};
	if (utimensat(c->pfd, c->name, ts, AT_SYMLINK_NOFOLLOW) < 0)
		return kiwi_error(err, errno, "unpack", "cannot set the mtime of `%s`", c->path);
	return 0;
}

static int charge(kiwi_extract *x, struct entry_ctx *c, uint64_t bytes, kiwi_err *err)
{
	if (bytes > x->o.max_size - x->st.bytes)
		return kiwi_error(err, EFBIG, "unpack",
				  "%s: entry `%s`: the image exceeds the size limit of %llu bytes (--max-size)",
				  c->label, c->raw, (unsigned long long)x->o.max_size);
	x->st.bytes += bytes;
	return 0;
}

static int write_all(int fd, const char *buf, size_t len, int64_t off)
{
	while (len > 0) {
		ssize_t n = pwrite(fd, buf, len, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		buf += n;
		len -= (size_t)n;
		off += n;
	}
	return 0;
}

/* Writes buf at off but leaves holes for whole zero pages, so sparse files
 * (and zero-filled ones) stay sparse. Sets *holes when it skipped any. */
static int write_sparse(int fd, const char *buf, size_t len, int64_t off, bool *holes)
{
	static const char zeros[4096];
	size_t start = 0; /* beginning of the pending non-zero run */
	for (size_t i = 0; i < len; i += sizeof(zeros)) {
		size_t n = len - i < sizeof(zeros) ? len - i : sizeof(zeros);
		if (n < sizeof(zeros) || memcmp(buf + i, zeros, n))
			continue;
		if (i > start && write_all(fd, buf + start, i - start, off + (int64_t)start) < 0)
			return -1;
		start = i + n;
		*holes = true;
	}
	return start < len ? write_all(fd, buf + start, len - start, off + (int64_t)start) : 0;
}

static int put_file(kiwi_extract *x, struct archive *a, struct entry_ctx *c,
		    struct archive_entry *e, kiwi_err *err)
{
	int64_t size = archive_entry_size(e);
	/* Refuse a bomb on its header before inflating any of it. */
	if (size > 0 && (uint64_t)size > x->o.max_size - x->st.bytes)
		return charge(x, c, (uint64_t)size, err);
	/* Made with its mode where that is exact: no set-id bits (kept for the
	 * fchmod after the fchown), none the umask takes, no xattrs to set
	 * first (an owner cannot set user.* on a file it may not write). */
	mode_t perm = archive_entry_perm(e) & 07777;
	bool exact = !x->o.plain && c->mode_from_open && !(perm & (07000 | x->umask)) &&
		     !archive_entry_xattr_count(e);
	mode_t cmode = exact ? perm : 0600;
	const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
	_cleanup_close_ int fd = openat(c->pfd, c->name, flags, cmode);
	int w = fd < 0 ? in_the_way(c, err) : 0;
	if (w > 0)
		fd = openat(c->pfd, c->name, flags, cmode);
	if (w < 0)
		return -1;
	if (fd < 0)
		return kiwi_error(err, errno, "unpack", "cannot create `%s`", c->path);
	int64_t end = 0;
	bool holes = false;
	for (;;) {
		const void *buf;
		size_t len;
		la_int64_t off;
		int r = archive_read_data_block(a, &buf, &len, &off);
		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN)
			return kiwi_error(err, archive_errno(a) > 0 ? archive_errno(a) : EIO, "unpack",
					  "%s: entry `%s`: %s", c->label, c->raw, archive_error_string(a));
		if (charge(x, c, len, err) < 0)
			return -1;
		if (write_sparse(fd, buf, len, off, &holes) < 0)
			return kiwi_error(err, errno, "unpack", "cannot write `%s`", c->path);
		end = off + (int64_t)len;
	}
	if ((end < size || holes) && ftruncate(fd, end > size ? end : size) < 0) /* a sparse tail */
		return kiwi_error(err, errno, "unpack", "cannot size `%s`", c->path);
	unsigned fresh = (c->gid_ours ? FRESH_OWNER : 0) | (exact ? FRESH_MODE : 0);
	return set_attrs_fd(x, c, e, fd, false, fresh, err);
}

static int put_dir(kiwi_extract *x, struct entry_ctx *c, struct archive_entry *e, kiwi_err *err)
{
	int fd;
	if (!c->path[0]) {
		fd = resolve(x->root_fd, "", O_RDONLY | O_DIRECTORY);
	} else {
		/* A directory in the way stays (tar's merge); anything else goes. */
		bool kept = false;
		if (mkdirat(c->pfd, c->name, 0700) < 0) {
			int first = errno;
			if (first == EEXIST && make_room(c, true, &kept, err) < 0)
				return -1;
			if (first != EEXIST || (!kept && mkdirat(c->pfd, c->name, 0700) < 0))
				return kiwi_error(err, first != EEXIST ? first : errno, "unpack",
						  "cannot create directory `%s`", c->path);
		}
		fd = openat(c->pfd, c->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0)
		return kiwi_error(err, errno, "unpack", "cannot open directory `%s`", c->path);
	int r = set_attrs_fd(x, c, e, fd, true, 0, err);
	close(fd);
	/* Its group or mode may have changed: what learn_parent knew is stale. */
	if (x->parent_fd >= 0 && !strcmp(x->parent_path, c->path))
		drop_parent_cache(x);
	if (r < 0)
		return r;
	bool added;
	struct strmap_slot *s = strmap_put(&x->dirs, c->path, &added);
	if (s && !s->val)
		s->val = malloc(sizeof(struct dir_meta));
	if (!s || !s->val)
		return kiwi_error(err, ENOMEM, "unpack", "cannot record `%s`", c->path);
	struct dir_meta *m = s->val;
	m->mode = archive_entry_perm(e) & (x->o.plain ? 0755 : 07777);
	m->mtime = (struct timespec){ archive_entry_mtime(e), archive_entry_mtime_nsec(e) };
	return 0;
}

static int put_hardlink(kiwi_extract *x, struct entry_ctx *c, struct archive_entry *e,
			kiwi_err *err)
{
	const char *target = archive_entry_hardlink(e);
	char tpath[PATH_MAX];
	const char *why = clean_name(target, tpath, sizeof(tpath));
	if (!why && !tpath[0])
		why = "names the root";
	if (!why && route_away(x, tpath))
		why = "is not where the link goes";
	if (!why && !tpath[0])
		why = "names the root";
	if (why)
		return kiwi_error(err, EINVAL, "unpack", "%s: entry `%s`: hardlink target `%s` %s",
				  c->label, c->raw, target, why);
	char *slash = strrchr(tpath, '/');
	const char *tname = slash ? slash + 1 : tpath;
	if (slash)
		*slash = '\0';
	_cleanup_close_ int tfd = resolve(x->root_fd, slash ? tpath : "", O_PATH | O_DIRECTORY);
	/* linkat without AT_SYMLINK_FOLLOW links a symlink itself, never what
	 * it points to, and the target's directory was resolved in the root. */
	int r = tfd < 0 ? -1 : linkat(tfd, tname, c->pfd, c->name, 0);
	int w = r < 0 && tfd >= 0 ? in_the_way(c, err) : 0;
	if (w > 0)
		r = linkat(tfd, tname, c->pfd, c->name, 0);
	if (w < 0)
		return -1;
	if (r < 0)
		return kiwi_error(err, errno, "unpack", "%s: entry `%s`: cannot hardlink to `%s`",
				  c->label, c->raw, target);
	return 0;
}

static int put_special(kiwi_extract *x, struct entry_ctx *c, struct archive_entry *e,
		       kiwi_err *err)
{
	mode_t type = archive_entry_filetype(e);
	mode_t perm = archive_entry_perm(e) & 07777;
	if (type == AE_IFLNK) {
		const char *target = archive_entry_symlink(e);
		if (!target)
			return kiwi_error(err, EINVAL, "unpack", "cannot create symlink `%s`", c->path);
		int r = symlinkat(target, c->pfd, c->name);
		int w = r < 0 ? in_the_way(c, err) : 0;
		if (w > 0)
			r = symlinkat(target, c->pfd, c->name);
		if (w < 0)
			return -1;
		if (r < 0)
			return kiwi_error(err, errno, "unpack", "cannot create symlink `%s`", c->path);
		return set_attrs_at(x, c, e, err);
	}
	if (type == AE_IFCHR || type == AE_IFBLK || type == AE_IFIFO) {
		bool dev = type != AE_IFIFO;
		if (dev && !x->privileged) {
			x->st.devices_skipped++;
			return 0;
		}
		dev_t rdev = dev ? archive_entry_rdev(e) : 0;
		int r = mknodat(c->pfd, c->name, type | perm, rdev);
		int w = r < 0 ? in_the_way(c, err) : 0;
		if (w > 0)
			r = mknodat(c->pfd, c->name, type | perm, rdev);
		if (w < 0)
			return -1;
		if (r < 0 && dev && errno == EPERM) {
			x->st.devices_skipped++;
			return 0;
		}
		if (r < 0)
			return kiwi_error(err, errno, "unpack", "cannot create %s `%s`", dev ? "device" : "fifo",
					  c->path);
	} else {
		return kiwi_error(err, EINVAL, "unpack", "%s: entry `%s` has unsupported type 0%o",
				  c->label, c->raw, (unsigned)type);
	}
	if (set_attrs_at(x, c, e, err) < 0)
		return -1;
	/* Created by us a moment ago in our own scratch tree; NOFOLLOW still
	 * guards against it being anything but the node just made. */
	if (chmod_node(c->pfd, c->name, perm) < 0)
		return kiwi_error(err, errno, "unpack", "cannot chmod `%s`", c->path);
	return 0;
}

/* overlayfs's own form of a whiteout or an opaque directory. */
static int overlay_whiteout(kiwi_extract *x, struct entry_ctx *c, const char *parent, bool opaque,
			    const char *victim, kiwi_err *err)
{
	c->pfd = get_parent(x, parent, err);
	if (c->pfd < 0)
		return kiwi_error_wrap(err, "%s: entry `%s`", c->label, c->raw);
	if (opaque) {
		_cleanup_close_ int dfd = resolve(x->root_fd, parent, O_RDONLY | O_DIRECTORY);
		if (dfd < 0 || fsetxattr(dfd, "user.overlay.opaque", "y", 1, 0) < 0)
			return kiwi_error(err, errno, "unpack", "cannot mark `%s` opaque", parent);
		return 0;
	}
	c->name = victim;
	bool kept;
	if (make_room(c, false, &kept, err) < 0)
		return -1;
	if (mknodat(c->pfd, victim, S_IFCHR, makedev(0, 0)) < 0)
		return kiwi_error(err, errno, "unpack", "%s: entry `%s`: cannot make a whiteout", c->label, c->raw);
	return 0;
}

static int apply_whiteout(kiwi_extract *x, struct entry_ctx *c, char *parent, kiwi_err *err)
{
	bool opaque = !strcmp(c->name, OPAQUE_MARKER);
	const char *victim = c->name + strlen(WHITEOUT_PREFIX);
	if (!opaque && (!*victim || !strcmp(victim, ".") || !strcmp(victim, "..")))
		return kiwi_error(err, EINVAL, "unpack", "%s: entry `%s`: whiteout names `%s`",
				  c->label, c->raw, *victim ? victim : "(nothing)");
	if (x->o.overlay)
		return overlay_whiteout(x, c, parent, opaque, victim, err);
	/* Nothing below to hide when the directory does not exist. */
	_cleanup_close_ int pfd = resolve(x->root_fd, parent, O_RDONLY | O_DIRECTORY);
	if (pfd < 0)
		return errno == ENOENT || errno == ENOTDIR ? 0 :
		       kiwi_error(err, errno, "whiteout", "cannot open `%s`", parent);
	char path[PATH_MAX];
	size_t len = (size_t)snprintf(path, sizeof(path), "%s", parent);
	if (opaque)
		return prune_lower(x, pfd, path, len, err);
	snprintf(path + len, sizeof(path) - len, "%s%s", len ? "/" : "", victim);
	drop_parent_cache(x);
	if (!strmap_find(&x->touched, path))
		return kiwi_remove_tree_at(pfd, victim, err);
	_cleanup_close_ int vfd = openat(pfd, victim, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return vfd < 0 ? 0 : prune_lower(x, vfd, path, strlen(path), err);
}

static int apply_entry(kiwi_extract *x, struct archive *a, struct archive_entry *e,
		       const char *label, kiwi_err *err)
{
	struct entry_ctx c = { .label = label, .raw = archive_entry_pathname(e), .pfd = -1 };
	if (!c.raw)
		return kiwi_error(err, EINVAL, "unpack", "%s: an entry has no name", label);
	const char *why = clean_name(c.raw, c.path, sizeof(c.path));
	if (why)
		return kiwi_error(err, EINVAL, "unpack", "%s: entry `%s` %s", label, c.raw, why);
	if (route_away(x, c.path))
		return 0;
	if (x->o.cancel && *x->o.cancel)
		return kiwi_error(err, EINTR, "unpack", "%s: interrupted", label);
	if (++x->st.entries > x->o.max_entries)
		return kiwi_error(err, EFBIG, "unpack", "%s: more than %llu entries", label,
				  (unsigned long long)x->o.max_entries);
	mode_t type = archive_entry_filetype(e);
	bool is_dir = type == AE_IFDIR && !archive_entry_hardlink(e);
	if (!c.path[0]) {
		if (!is_dir)
			return kiwi_error(err, EINVAL, "unpack", "%s: entry `%s` would replace the root",
					  label, c.raw);
		return put_dir(x, &c, e, err);
	}
	char parent[PATH_MAX];
	snprintf(parent, sizeof(parent), "%s", c.path);
	char *slash = strrchr(parent, '/');
	c.name = c.path + (slash ? (size_t)(slash - parent) + 1 : 0);
	if (slash)
		*slash = '\0';
	else
		parent[0] = '\0';
	if (!x->o.plain && !strncmp(c.name, WHITEOUT_PREFIX, strlen(WHITEOUT_PREFIX)))
		return apply_whiteout(x, &c, parent, err);
	if (mark_touched(x, c.path, err) < 0)
		return -1;
	c.pfd = get_parent(x, parent, err);
	if (c.pfd < 0)
		return kiwi_error_wrap(err, "%s: entry `%s`", label, c.raw);
	c.gid_ours = x->parent_gid_ours;
	c.mode_from_open = x->parent_mode_from_open;
	if (archive_entry_hardlink(e))
		return put_hardlink(x, &c, e, err);
	/* An oci-archive holds a layout: files and directories, nothing that
	 * should appear, even for a moment, in a scratch directory on the host. */
	if (x->o.plain && !is_dir && type != AE_IFREG)
		return kiwi_error(err, EINVAL, "unpack", "%s: entry `%s` is neither a file nor a directory",
				  label, c.raw);
	if (is_dir)
		return put_dir(x, &c, e, err);
	if (type == AE_IFREG)
		return put_file(x, a, &c, e, err);
	return put_special(x, &c, e, err);
}

static void report(kiwi_extract *x, uint64_t blob_bytes)
{
	x->st.blob_bytes = blob_bytes;
	if (x->o.progress && x->st.bytes + blob_bytes >= x->next_progress) {
		x->next_progress = x->st.bytes + blob_bytes + PROGRESS_STEP;
		x->o.progress(x->o.progress_arg, &x->st);
	}
}

/* Applies the entries, then reads what follows the tar's end marker so
 * the diff_id covers the whole stream; that tail is bounded by what is
 * left of --max-size, as a compressed run of zeros costs little. */
static int read_layer(kiwi_extract *x, struct archive *a, struct blob_stream *bs,
		      const char *label, kiwi_err *err)
{
	uint64_t base = x->st.blob_bytes;
	for (;;) {
		struct archive_entry *e;
		int rc = archive_read_next_header(a, &e);
		if (rc == ARCHIVE_EOF)
			break;
		if (rc < ARCHIVE_WARN)
			return kiwi_error(err, archive_errno(a) > 0 ? archive_errno(a) : EINVAL, "unpack",
					  "%s: %s", label, archive_error_string(a));
		if (apply_entry(x, a, e, label, err) < 0)
			return -1;
		report(x, base + blob_stream_count(bs));
	}
	if (blob_stream_drain(bs, x->o.max_size - x->st.bytes) < 0)
		return kiwi_error(err, errno, "unpack", "%s: %s", label,
				  errno == EFBIG ? "the data after the end of the tar archive exceeds the size limit (--max-size)"
						 : "cannot read the end of the layer");
	return 0;
}

/* Which failure to tell: a blob that is not what its descriptor says
 * outranks whatever its content made the decompressor or the tar reader
 * say, and a decompressor's error outranks the tar reader's. The diff_id
 * is only meaningful once the whole stream was read without error. */
static int layer_verdict(int rc, const struct blob_stream_result *res, kiwi_hasher *h,
			 const char *digest, int64_t size, const char *label, kiwi_err *err)
{
	if (res->too_long)
		return kiwi_error(err, EBADMSG, "verify", "%s: the blob is longer than its descriptor's %lld bytes",
				  label, (long long)size);
	kiwi_err verr;
	if (h && kiwi_blob_check(h, digest, size, &verr) < 0) {
		*err = verr;
		return kiwi_error_wrap(err, "%s", label);
	}
	if (res->errnum)
		return kiwi_error(err, res->errnum, "unpack", "%s: %s", label, res->why);
	return rc;
}

static int check_diff_id(kiwi_hasher *tar_h, const char *diff_id, const char *label, kiwi_err *err)
{
	char actual[KIWI_DIGEST_MAX];
	kiwi_hasher_final(tar_h, actual);
	if (strcmp(actual, diff_id))
		return kiwi_error(err, EBADMSG, "verify",
				  "%s: the uncompressed layer has diff_id %s, the config says %s", label,
				  actual, diff_id);
	return 0;
}

int kiwi_extract_layer(kiwi_extract *x, int blob_fd, enum kiwi_layer_compression comp,
		       const char *digest, int64_t size, const char *diff_id, const char *label,
		       kiwi_err *err)
{
	enum kiwi_digest_alg alg = KIWI_DIGEST_SHA256, diff_alg = KIWI_DIGEST_SHA256;
	if ((digest && kiwi_digest_parse(digest, &alg, NULL, err) < 0) ||
	    (diff_id && kiwi_digest_parse(diff_id, &diff_alg, NULL, err) < 0))
		return kiwi_error_wrap(err, "%s", label);
	_cleanup_hasher_ kiwi_hasher *h = digest ? kiwi_hasher_new(alg) : NULL;
	_cleanup_hasher_ kiwi_hasher *tar_h = diff_id ? kiwi_hasher_new(diff_alg) : NULL;
	if ((digest && !h) || (diff_id && !tar_h))
		return kiwi_error(err, ENOMEM, "unpack", "%s: cannot hash", label);
	struct blob_stream *bs = blob_stream_start(blob_fd, comp, h, tar_h, digest ? size : -1, err);
	if (!bs)
		return kiwi_error_wrap(err, "%s", label);
	struct archive *a = archive_read_new();
	int rc;
	if (!a) {
		rc = kiwi_error(err, ENOMEM, "unpack", "%s: cannot set up the reader", label);
	} else {
		archive_read_support_format_tar(a);
		archive_read_support_format_empty(a); /* a layer with no entries at all */
		strmap_clear(&x->touched, false);
		if (archive_read_open(a, bs, NULL, blob_stream_read, NULL) != ARCHIVE_OK)
			rc = kiwi_error(err, archive_errno(a) > 0 ? archive_errno(a) : EINVAL, "unpack",
					"%s: %s", label, archive_error_string(a));
		else
			rc = read_layer(x, a, bs, label, err);
	}
	archive_read_free(a);
	struct blob_stream_result res;
	blob_stream_finish(bs, &res); /* joins the thread: tar_h is final */
	x->st.blob_bytes += res.count;
	rc = layer_verdict(rc, &res, h, digest, size, label, err);
	if (rc == 0 && tar_h)
		rc = check_diff_id(tar_h, diff_id, label, err);
	if (rc == 0)
		x->st.layers++;
	return rc;
}

static int by_depth_desc(const void *a, const void *b)
{
	size_t la = strlen(*(char *const *)a), lb = strlen(*(char *const *)b);
	return la < lb ? 1 : la > lb ? -1 : 0;
}

int kiwi_extract_finish(kiwi_extract *x, kiwi_err *err)
{
	drop_parent_cache(x);
	_cleanup_free_ char **keys = calloc(x->dirs.n + 1, sizeof(*keys));
	if (!keys)
		return kiwi_error(err, ENOMEM, "unpack", "cannot sort directories");
	size_t n = 0;
	for (size_t i = 0; i < x->dirs.cap; i++)
		if (x->dirs.slots[i].key)
			keys[n++] = x->dirs.slots[i].key;
	/* Children before parents: a parent made read-only (or 0000 for an
	 * unprivileged owner) must not block reaching its children. */
	qsort(keys, n, sizeof(*keys), by_depth_desc);
	for (size_t i = 0; i < n; i++) {
		const struct dir_meta *m = strmap_find(&x->dirs, keys[i])->val;
		_cleanup_close_ int fd = resolve(x->root_fd, keys[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
		if (fd < 0) /* removed or replaced by a later layer */
			continue;
		struct timespec ts[2] = { m->mtime, m->mtime };
		if (fchmod(fd, m->mode) < 0 || futimens(fd, ts) < 0)
			return kiwi_error(err, errno, "unpack", "cannot set the metadata of `%s`", keys[i]);
	}
	return 0;
}
