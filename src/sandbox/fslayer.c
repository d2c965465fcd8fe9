/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox's writable layer (kiwi/fslayer.h): made in the child,
 * landed, dropped or exported by the parent. */
#include "kiwi/fslayer.h"
#include "kiwi/cleanup.h"
#include "kiwi/mount.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

int kiwi_fslayer_create(uint64_t size, int disk_fd, int at_fd, kiwi_err *err)
{
	char bytes[32];
	snprintf(bytes, sizeof(bytes), "%llu", (unsigned long long)size);
	const char *const opts[] = { "mode", "0755", "size", bytes, NULL };
	/* Attached, not left detached: before Linux 6.5 nothing below a
	 * detached mount can be cloned, and /tmp and /dev/shm are clones. */
	int mfd = disk_fd >= 0 ? disk_fd : kiwi_mount_new_fs("tmpfs", opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, err);
	if (mfd < 0)
		return -1;
	if (move_mount(mfd, "", at_fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0) {
		close(mfd);
		return kiwi_error(err, errno, "layer", "cannot attach the writable layer");
	}
	return mfd;
}

static int make_dir(int dirfd, const char *name, mode_t mode, kiwi_err *err)
{
	int made = mkdirat(dirfd, name, mode);
	if (made < 0 && errno != EEXIST)
		return kiwi_error(err, errno, "layer", "cannot make `%s` in the writable layer", name);
	/* Not the umask's: 1777 for /tmp. One there already is a restored
	 * snapshot's upper directory, with the mode it had. */
	if (made == 0 && fchmodat(dirfd, name, mode, 0) < 0)
		return kiwi_error(err, errno, "layer", "cannot set the mode of `%s` in the writable layer", name);
	int fd = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return kiwi_error(err, errno, "layer", "cannot open `%s` in the writable layer", name);
	return fd;
}

int kiwi_fslayer_dirs(int layer, const char *name, int *workfd, kiwi_err *err)
{
	_cleanup_close_ int top = make_dir(layer, name, 0755, err);
	if (top < 0)
		return -1;
	_cleanup_close_ int upper = make_dir(top, "upper", 0755, err);
	if (upper < 0 || (*workfd = make_dir(top, "work", 0700, err)) < 0)
		return -1;
	return TAKE_FD(upper);
}

int kiwi_fslayer_overlay(int upper, int work, int lower, kiwi_err *err)
{
	char l[32], u[32], w[32];
	snprintf(l, sizeof(l), "/proc/self/fd/%d", lower);
	snprintf(u, sizeof(u), "/proc/self/fd/%d", upper);
	snprintf(w, sizeof(w), "/proc/self/fd/%d", work);
	/* userxattr: the only kind a user namespace may write; the layer's
	 * tmpfs holds them from Linux 6.6 on. */
	const char *const opts[] = { "lowerdir", l, "upperdir", u, "workdir", w, "userxattr", "", NULL };
	return kiwi_mount_new_fs("overlay", opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, err);
}

int kiwi_fslayer_subdir(int layer, const char *name, mode_t mode, kiwi_err *err)
{
	_cleanup_close_ int dir = make_dir(layer, name, mode, err);
	if (dir < 0)
		return -1;
	int tree = open_tree(dir, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	if (tree < 0)
		return kiwi_error(err, errno, "layer", "cannot bind `%s` of the writable layer", name);
	return tree;
}

bool kiwi_fslayer_holds_xattrs(int layer)
{
	_cleanup_close_ int fd = openat(layer, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsetxattr(fd, "user.kiwi.probe", "y", 1, 0) < 0)
		return false;
	fremovexattr(fd, "user.kiwi.probe");
	return true;
}

/* ext4 on a recent kernel (large folios, Linux 6.16) reserves a whole
 * folio of up to 2 MiB per write and refuses one that does not fit, so
 * ENOSPC comes with a little still shown free: measured 140 KiB to 888
 * KiB left after `dd bs=1M` from 16 MiB to 4 GiB images (0 with bs=4k).
 * Less than this left counts as full; tmpfs fills to the last page. */
#define FOLIO_SLACK (2ULL << 20)

int kiwi_fslayer_usage(int layer, uint64_t *used_kib, bool *full)
{
	struct statfs sf;
	if (fstatfs(layer, &sf) < 0)
		return -1;
	uint64_t bsize = (uint64_t)sf.f_bsize;
	*used_kib = (uint64_t)(sf.f_blocks - sf.f_bfree) * bsize / 1024;
	uint64_t slack = 0;
	if (sf.f_type != TMPFS_MAGIC) {
		uint64_t size = (uint64_t)sf.f_blocks * bsize;
		slack = size / 4 < FOLIO_SLACK ? size / 4 : FOLIO_SLACK;
	}
	/* Out of inodes is full too: a new file meets ENOSPC. */
	*full = (sf.f_blocks > 0 && (uint64_t)sf.f_bavail * bsize <= slack) || (sf.f_files > 0 && sf.f_ffree == 0);
	return 0;
}

enum kiwi_disk_backend kiwi_fslayer_backend(int layer)
{
	struct statfs sf;
	return fstatfs(layer, &sf) == 0 && sf.f_type != TMPFS_MAGIC ? KIWI_DISK_LOOP : KIWI_DISK_TMPFS;
}

/* ------------------------------------------------------------------ */
/* Parent side: landing an upper directory on the host. Every name comes
 * from the upper directory (one component, never "/"), every host path is
 * reached through *at() from the destination's fd without following a
 * symlink, so nothing the sandbox made can point the landing elsewhere. */

struct land {
	kiwi_err *err;
	bool chown;       /* root: files take the destination's owner */
	uid_t uid;
	gid_t gid;
	unsigned n;       /* for temporary names */
};

/* A DIR stream over fd, which it takes (closed on failure too). */
static DIR *open_stream(int fd)
{
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d && fd >= 0)
		close(fd);
	return d;
}

static int remove_tree(int parent, const char *name)
{
	struct stat st;
	if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(parent, name, 0) < 0 && errno != ENOENT ? -1 : 0;
	DIR *d = open_stream(openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
	if (!d)
		return -1;
	int r = 0;
	for (struct dirent *e; (e = readdir(d));)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && remove_tree(dirfd(d), e->d_name) < 0)
			r = -1;
	closedir(d);
	return r < 0 || unlinkat(parent, name, AT_REMOVEDIR) < 0 ? -1 : 0;
}

static bool is_whiteout(const struct stat *st)
{
	return S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0);
}

static bool is_opaque(int dirfd)
{
	char v[2];
	ssize_t n = fgetxattr(dirfd, "user.overlay.opaque", v, sizeof(v));
	return n == 1 && v[0] == 'y';
}

/* Never a set-id bit: a root caller's host would run it as root. Files
 * are created with their mode already (the umask is 0 while landing). */
static void fix_attrs(struct land *l, int fd, const struct stat *st, bool set_mode)
{
	if (set_mode)
		fchmod(fd, st->st_mode & 0777);
	if (l->chown)
		(void)!fchown(fd, l->uid, l->gid);
	struct timespec ts[2] = { st->st_atim, st->st_mtim };
	futimens(fd, ts);
}

static int copy_data(int in, int out, off_t size)
{
	for (off_t done = 0; done < size;) {
		ssize_t n = sendfile(out, in, NULL, (size_t)(size - done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -1 : 0;  /* shorter than it was: it is what it is */
		done += n;
	}
	return 0;
}

/* tmp (beside name) renamed over name, a directory there removed first. */
static int replace(int dst, const char *tmp, const char *name)
{
	struct stat old;
	if ((fstatat(dst, name, &old, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(old.st_mode) && remove_tree(dst, name) < 0) ||
	    renameat(dst, tmp, dst, name) < 0) {
		unlinkat(dst, tmp, 0);
		return -1;
	}
	return 0;
}

/* A regular file. A name new to the host is written in place: there was
 * nothing to keep whole. One that replaces something is written beside it
 * and renamed over it, so the host never sees it half-written. */
static int land_file(struct land *l, int up, const char *name, const struct stat *st, int dst)
{
	_cleanup_close_ int in = openat(up, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0)
		return -1;
	char tmp[64];
	const char *at = name;
	const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
	_cleanup_close_ int out = openat(dst, name, flags, st->st_mode & 0777);
	if (out < 0 && errno == EEXIST) {
		snprintf(tmp, sizeof(tmp), ".kiwi-land.%d.%u", (int)getpid(), l->n++);
		at = tmp;
		out = openat(dst, tmp, flags, st->st_mode & 0777);
	}
	if (out < 0)
		return -1;
	if (copy_data(in, out, st->st_size) < 0) {
		unlinkat(dst, at, 0);
		return -1;
	}
	fix_attrs(l, out, st, false);
	return at == name ? 0 : replace(dst, tmp, name);
}

/* A symlink or a fifo, made beside name and renamed over it. */
static int land_special(struct land *l, int up, const char *name, const struct stat *st, int dst)
{
	char tmp[64];
	snprintf(tmp, sizeof(tmp), ".kiwi-land.%d.%u", (int)getpid(), l->n++);
	if (S_ISLNK(st->st_mode)) {
		char target[PATH_MAX];
		ssize_t n = readlinkat(up, name, target, sizeof(target) - 1);
		if (n < 0)
			return -1;
		target[n] = '\0';
		if (symlinkat(target, dst, tmp) < 0)
			return -1;
		if (l->chown)
			(void)!fchownat(dst, tmp, l->uid, l->gid, AT_SYMLINK_NOFOLLOW);
	} else if (mkfifoat(dst, tmp, st->st_mode & 0777) < 0) {
		return -1;
	}
	return replace(dst, tmp, name);
}

static int land_dir(struct land *l, int up, int dst, unsigned depth);

/* A directory of the upper: merged into the host's, or, when opaque or
 * in place of something else, replacing it. */
static int land_subdir(struct land *l, int up, const char *name, const struct stat *st, int dst,
		       unsigned depth)
{
	_cleanup_close_ int sub = openat(up, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub < 0)
		return -1;
	struct stat old;
	bool have = fstatat(dst, name, &old, AT_SYMLINK_NOFOLLOW) == 0;
	if (have && (!S_ISDIR(old.st_mode) || is_opaque(sub))) {
		if (remove_tree(dst, name) < 0)
			return -1;
		have = false;
	}
	/* Its own mode once its entries are in: one without write
	 * permission would refuse them. */
	if (!have && mkdirat(dst, name, 0700) < 0)
		return -1;
	_cleanup_close_ int out = openat(dst, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (out < 0 || land_dir(l, sub, out, depth + 1) < 0)
		return -1;
	fix_attrs(l, out, st, true);
	return 0;
}

static int land_dir(struct land *l, int up, int dst, unsigned depth)
{
	if (depth > 4096)
		return errno = ELOOP, -1;
	DIR *d = open_stream(fcntl(up, F_DUPFD_CLOEXEC, 3));
	if (!d)
		return -1;
	int r = 0;
	for (struct dirent *e; r == 0 && (e = readdir(d));) {
		struct stat st;
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (fstatat(up, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			r = -1;
		else if (is_whiteout(&st))
			r = remove_tree(dst, e->d_name);
		else if (S_ISDIR(st.st_mode))
			r = land_subdir(l, up, e->d_name, &st, dst, depth);
		else if (S_ISREG(st.st_mode))
			r = land_file(l, up, e->d_name, &st, dst);
		else if (S_ISLNK(st.st_mode) || S_ISFIFO(st.st_mode))
			r = land_special(l, up, e->d_name, &st, dst);
		/* Sockets and device nodes do not cross to the host. */
		if (r < 0 && !l->err->step[0])
			kiwi_error(l->err, errno, "workspace", "cannot land `%s` on the host", e->d_name);
	}
	closedir(d);
	return r;
}

int kiwi_fslayer_export_upper(int layer, const char *name, kiwi_err *err)
{
	/* One component at a time, following no symlink, and on the layer's
	 * own filesystem: what is read (and, for a snapshot, published) is
	 * the layer's, whatever a process that could reach it put there. */
	if (strchr(name, '/'))
		return kiwi_error(err, EINVAL, "layer", "`%s` names no layer directory", name);
	_cleanup_close_ int top = openat(layer, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_close_ int fd = top < 0 ? -1 : openat(top, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat l, u;
	if (fd < 0 || fstat(layer, &l) < 0 || fstat(fd, &u) < 0)
		return kiwi_error(err, errno, "layer", "cannot open the upper directory of `%s`", name);
	if (l.st_dev != u.st_dev)
		return kiwi_error(err, EXDEV, "layer", "the upper directory of `%s` is not on the layer", name);
	return TAKE_FD(fd);
}

int kiwi_fslayer_land(int layer, const char *name, int destfd, kiwi_err *err)
{
	_cleanup_close_ int up = kiwi_fslayer_export_upper(layer, name, err);
	if (up < 0)
		return -1;
	struct stat st;
	if (fstat(destfd, &st) < 0)
		return kiwi_error(err, errno, "workspace", "cannot stat the workspace");
	struct land l = {
		.err = err, .uid = st.st_uid, .gid = st.st_gid,
		.chown = geteuid() == 0 && (st.st_uid != geteuid() || st.st_gid != getegid()),
	};
	mode_t mask = umask(0);
	int r = land_dir(&l, up, destfd, 0);
	umask(mask);
	if (r < 0)
		return err->step[0] ? -1 : kiwi_error(err, errno, "workspace", "cannot land the changes on the host");
	return 0;
}
