/* SPDX-License-Identifier: Apache-2.0 */
#include "kiwi/mount.h"
#include "kiwi/cleanup.h"
#include "kiwi/fslayer.h"
#include "kiwi/idmount.h"
#include "kiwi/openat2.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* Resolves path (absolute or relative, meaning the same) inside the rootfs:
 * ".." stops at the rootfs root. Symlinks on the way are followed inside
 * the rootfs with KIWI_ENSURE_FOLLOW (the OCI runtime's destinations), and
 * refused (ELOOP) otherwise, so nothing the image contains can point a
 * mount elsewhere. */
static int open_in_root(int rootfd, const char *path, unsigned flags, int oflags)
{
	struct open_how how = {
		.flags = (unsigned)(oflags | O_CLOEXEC),
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS |
			   (flags & KIWI_ENSURE_FOLLOW ? 0 : RESOLVE_NO_SYMLINKS),
	};
	return kiwi_openat2(rootfd, path, &how);
}

static int resolve_error(const char *what, const char *path, kiwi_err *err)
{
	if (errno == ELOOP)
		return kiwi_error(err, ELOOP, "mount",
				  "%s `%s` passes through a symlink in the rootfs; name the real path", what, path);
	return kiwi_error(err, errno, "mount", "cannot resolve %s `%s` in the rootfs", what, path);
}

/* Creates name below parent: a directory, or an empty file that is never
 * a symlink's target. One already there is fine. */
static int create_below(int parent, const char *name, bool dir)
{
	int r = dir ? mkdirat(parent, name, 0755)
		    : openat(parent, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (r < 0)
		return errno == EEXIST ? 0 : -1;
	if (!dir)
		close(r);
	return 0;
}

/* A component that is a symlink to nothing yet (/var/run -> /run/x): the
 * path rewritten through its target, resolved inside the rootfs as the
 * kernel would, into next; false when name is no such symlink. */
static bool through_dangling(int parent, const char *buf, size_t start, size_t end, const char *path,
			     char *next, size_t len)
{
	char target[PATH_MAX];
	ssize_t n = readlinkat(parent, buf + start, target, sizeof(target) - 1);
	if (n <= 0)
		return false;
	target[n] = '\0';
	int w = target[0] == '/' ? snprintf(next, len, "%s%s", target, path + end)
				 : snprintf(next, len, "%.*s%s%s", (int)start, buf, target, path + end);
	return w > 0 && (size_t)w < len;
}

static int ensure_walk(int rootfd, const char *path, unsigned flags, const char *what, char *next, kiwi_err *err);

int kiwi_mount_ensure(int rootfd, const char *path, unsigned flags, const char *what, kiwi_err *err)
{
	char a[PATH_MAX], b[PATH_MAX];
	const char *cur = path;
	/* Bounded like the kernel's own symlink following (40). */
	for (int hops = 0; hops < 40; hops++) {
		char *next = cur == a ? b : a;
		int fd = ensure_walk(rootfd, cur, flags, what, next, err);
		if (fd != -2)
			return fd;
		cur = next;
	}
	return kiwi_error(err, ELOOP, "mount", "%s `%s` passes through too many symlinks", what, path);
}

/* One walk down path; -2 with next set when it passes a dangling symlink. */
static int ensure_walk(int rootfd, const char *path, unsigned flags, const char *what, char *next, kiwi_err *err)
{
	int fd = open_in_root(rootfd, path, flags, O_PATH);
	if (fd >= 0 || errno != ENOENT)
		return fd >= 0 ? fd : resolve_error(what, path, err);
	char buf[PATH_MAX];
	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return kiwi_error(err, ENAMETOOLONG, "mount", "%s `%s` is too long", what, path);
	size_t len = strlen(buf);
	while (len > 1 && buf[len - 1] == '/')
		buf[--len] = '\0';
	if (!len)
		return kiwi_error(err, EINVAL, "mount", "%s is empty", what);
	/* One prefix at a time, in a loop: a destination of thousands of
	 * components once recursed that deep and overflowed pid 1's stack.
	 * Each prefix is resolved from the root again (".." and, when
	 * followed, symlinks mean what they mean there); what is missing is
	 * created below the prefix before it. */
	_cleanup_close_ int parent = open_in_root(rootfd, "/", flags, O_PATH);
	if (parent < 0)
		return resolve_error(what, "/", err);
	for (size_t end = 0; end < len;) {
		size_t start = end + strspn(buf + end, "/");
		if (start == len)
			break;
		end = start + strcspn(buf + start, "/");
		char saved = buf[end];
		buf[end] = '\0';
		fd = open_in_root(rootfd, buf, flags, O_PATH);
		if (fd < 0 && errno == ENOENT) {
			if (create_below(parent, buf + start, end < len || (flags & KIWI_ENSURE_DIR)) < 0) {
				kiwi_error(err, errno, "mount", "cannot create %s `%s` in the rootfs", what, path);
				return -1;
			}
			fd = open_in_root(rootfd, buf, flags, O_PATH);
			if (fd < 0 && errno == ENOENT && (flags & KIWI_ENSURE_FOLLOW) &&
			    through_dangling(parent, buf, start, end, path, next, PATH_MAX))
				return -2;
		}
		buf[end] = saved;
		if (fd < 0)
			return resolve_error(what, path, err);
		close(parent);
		parent = fd;
	}
	return TAKE_FD(parent);
}

/* Attaches a detached mount onto the object an fd refers to (path "") or
 * onto a name below a directory fd that kiwi-run itself created. */
static int attach(int mntfd, int dirfd, const char *name, const char *what, kiwi_err *err)
{
	unsigned flags = MOVE_MOUNT_F_EMPTY_PATH | (*name ? 0 : MOVE_MOUNT_T_EMPTY_PATH);
	if (move_mount(mntfd, "", dirfd, name, flags) < 0)
		return kiwi_error(err, errno, "mount", "cannot attach %s", what);
	return 0;
}

/* The host's nodes that a sandbox gets, and what each must be. */
static const struct host_node {
	const char *name;
	unsigned major, minor;
} host_nodes[] = {
	{ "null", 1, 3 }, { "zero", 1, 5 }, { "full", 1, 7 },
	{ "random", 1, 8 }, { "urandom", 1, 9 }, { "tty", 5, 0 },
};

/* A detached bind of the host's /dev/<n->name>, checked to be that
 * device and read-only: I/O on a device ignores the mount's flag, but
 * chmod, chown and utime of the host's inode, which a root caller's
 * sandbox owns, do not. */
static int clone_host_node(const struct host_node *n, kiwi_err *err)
{
	char host[64];
	snprintf(host, sizeof(host), "/dev/%s", n->name);
	_cleanup_close_ int tree = open_tree(AT_FDCWD, host, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (tree < 0)
		return kiwi_error(err, errno, "mount", "cannot clone the host's `%s`", host);
	struct stat st;
	if (fstat(tree, &st) < 0)
		return kiwi_error(err, errno, "mount", "cannot stat the host's `%s`", host);
	if (!S_ISCHR(st.st_mode) || major(st.st_rdev) != n->major || minor(st.st_rdev) != n->minor)
		return kiwi_error(err, ENODEV, "mount", "the host's `%s` is not the character device %u:%u",
				  host, n->major, n->minor);
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC };
	if (mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
		return kiwi_error(err, errno, "mount", "cannot restrict the host's `%s`", host);
	return TAKE_FD(tree);
}

/* The node's mount point below devfd: an empty file made here, or what
 * the image has there if that is a file or a device (inert: the image is
 * nodev). A symlink is never followed: /dev/null -> a procfs file would
 * put that file where the sandbox writes without a second thought. */
static int node_mount_point(int devfd, const char *name, kiwi_err *err)
{
	if (create_below(devfd, name, false) < 0)
		return kiwi_error(err, errno, "mount", "cannot create /dev/%s", name);
	_cleanup_close_ int fd = openat(devfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return kiwi_error(err, errno, "mount", "cannot open /dev/%s", name);
	if (!S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode))
		return kiwi_error(err, S_ISLNK(st.st_mode) ? ELOOP : EEXIST, "mount",
				  "the image's /dev/%s is %s, not a device node: it is never followed nor "
				  "used (remove it from the image, or mount a tmpfs on /dev)",
				  name, S_ISLNK(st.st_mode) ? "a symlink" : "neither a file nor a device");
	return TAKE_FD(fd);
}

static int bind_host_node(int devfd, const struct host_node *n, kiwi_err *err)
{
	const char *name = n->name;
	/* A mount of its own there is the caller's (an OCI bind): theirs. */
	struct statx stx;
	if (statx(devfd, name, AT_SYMLINK_NOFOLLOW, 0, &stx) == 0 && (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT))
		return 0;
	_cleanup_close_ int target = node_mount_point(devfd, name, err);
	if (target < 0)
		return -1;
	_cleanup_close_ int tree = clone_host_node(n, err);
	if (tree < 0)
		return -1;
	return attach(tree, target, "", name, err);
}

int kiwi_mount_host_nodes(int devfd, kiwi_err *err)
{
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(host_nodes); i++)
		if (bind_host_node(devfd, &host_nodes[i], err) < 0)
			return -1;
	return 0;
}

/* A /dev of our own: a small tmpfs holding binds of the harmless host
 * nodes, a private devpts instance and /dev/shm (shm: a directory of the
 * writable layer); read-only afterwards. */
static int mount_dev(int rootfd, int shm, kiwi_err *err)
{
	static const char *const dev_opts[] = { "mode", "0755", "size", "256k", NULL };
	/* Every devpts mount is a new instance since Linux 4.7. No gid=: a
	 * slave gets its opener's gid (pid 1's, 0 inside), while the host's
	 * tty group (5) is not mapped in a rootless sandbox and the mount
	 * would fail. ptmxmode 0666: --tty's pid 1 opens pts/ptmx after
	 * dropping its capabilities. */
	static const char *const pts_opts[] = { "ptmxmode", "0666", "mode", "0620", NULL };
	static const char *const links[][2] = {
		{ "fd", "/proc/self/fd" }, { "stdin", "/proc/self/fd/0" },
		{ "stdout", "/proc/self/fd/1" }, { "stderr", "/proc/self/fd/2" },
		{ "ptmx", "pts/ptmx" },
	};
	_cleanup_close_ int target = kiwi_mount_ensure(rootfd, "/dev", KIWI_ENSURE_DIR, "mount point", err);
	if (target < 0)
		return -1;
	_cleanup_close_ int dev = kiwi_mount_new_fs("tmpfs", dev_opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, err);
	if (dev < 0 || attach(dev, target, "", "/dev", err) < 0)
		return -1;
	if (kiwi_mount_host_nodes(dev, err) < 0)
		return -1;
	if (mkdirat(dev, "pts", 0755) < 0 || mkdirat(dev, "shm", 01777) < 0)
		return kiwi_error(err, errno, "mount", "cannot create /dev/pts or /dev/shm");
	_cleanup_close_ int pts = kiwi_mount_new_fs("devpts", pts_opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, err);
	if (pts < 0 || attach(pts, dev, "pts", "/dev/pts", err) < 0)
		return -1;
	struct mount_attr noexec = { .attr_set = MOUNT_ATTR_NOEXEC };
	if (mount_setattr(shm, "", AT_EMPTY_PATH, &noexec, sizeof(noexec)) < 0)
		return kiwi_error(err, errno, "mount", "cannot make /dev/shm noexec");
	if (attach(shm, dev, "shm", "/dev/shm", err) < 0)
		return -1;
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(links); i++)
		if (symlinkat(links[i][1], dev, links[i][0]) < 0)
			return kiwi_error(err, errno, "mount", "cannot create /dev/%s", links[i][0]);
	struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY };
	if (mount_setattr(dev, "", AT_EMPTY_PATH, &ro, sizeof(ro)) < 0)
		return kiwi_error(err, errno, "mount", "cannot make /dev read-only");
	return 0;
}

/* overlayfs takes a lower layer only from a mount of the caller's
 * namespace: an idmapped tree kiwi-run made (kiwi/idmount.h) is attached
 * first, at name (made here) in the layer, out of the sandbox's view. */
static int attach_lower(int layer, const char *name, int tree, kiwi_err *err)
{
	if (mkdirat(layer, name, 0700) < 0)
		return kiwi_error(err, errno, "bind", "cannot make `%s` in the writable layer", name);
	_cleanup_close_ int at = openat(layer, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (at < 0)
		return kiwi_error(err, errno, "bind", "cannot open `%s` in the writable layer", name);
	return attach(tree, at, "", "an idmapped bind", err) < 0 ? -1 : fcntl(tree, F_DUPFD_CLOEXEC, 3);
}

/* A layered bind: an overlay of the source (given: its idmapped tree, or
 * -1) with its upper directory in the layer, so that its writes count
 * against the one bound and reach the host only when kiwi-run lands them. */
static int layered_tree(const struct kiwi_sandbox_config *cfg, int layer, size_t index, int given, kiwi_err *err)
{
	const char *source = cfg->binds[index].source;
	char name[32], lower_name[48];
	snprintf(name, sizeof(name), "bind%zu", index);
	snprintf(lower_name, sizeof(lower_name), "%s/lower", name);
	_cleanup_close_ int work = -1;
	_cleanup_close_ int upper = kiwi_fslayer_dirs(layer, name, &work, err);
	if (upper < 0)
		return -1;
	struct stat st;
	if (given >= 0 && (fstat(given, &st) < 0 || !S_ISDIR(st.st_mode)))
		return kiwi_error(err, ENOTDIR, "bind", "cannot use bind source `%s` (a layered bind is a directory)",
				  source);
	_cleanup_close_ int lower = given >= 0 ? attach_lower(layer, lower_name, given, err)
					       : open(source, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (lower < 0 && err->step[0])
		return -1;
	if (lower < 0)
		return kiwi_error(err, errno, "bind", "cannot use bind source `%s` (a layered bind is a directory)",
				  source);
	return kiwi_fslayer_overlay(upper, work, lower, err);
}

/* layer: -1 when layered binds are bound in place (kiwi_fslayer_holds_xattrs).
 * given: the bind's idmapped tree (kiwi/idmount.h), or -1. */
static int mount_bind(const struct kiwi_sandbox_config *cfg, int rootfd, int layer, size_t index, int given,
		      kiwi_err *err)
{
	const struct kiwi_bind *b = &cfg->binds[index];
	_cleanup_close_ int tree = b->layered && !b->read_only && layer >= 0
		? layered_tree(cfg, layer, index, given, err)
		: given >= 0 ? fcntl(given, F_DUPFD_CLOEXEC, 3)
		: open_tree(AT_FDCWD, b->source, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
	if (tree < 0 && err->step[0])
		return -1;
	if (tree < 0)
		return kiwi_error(err, errno, "bind", "cannot use bind source `%s`", b->source);
	struct mount_attr attr = {
		.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (b->read_only ? MOUNT_ATTR_RDONLY : 0),
	};
	if (mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) < 0)
		return kiwi_error(err, errno, "bind", "cannot set the flags of bind source `%s`", b->source);
	struct stat st;
	if (fstat(tree, &st) < 0)
		return kiwi_error(err, errno, "bind", "cannot stat bind source `%s`", b->source);
	_cleanup_close_ int target = kiwi_mount_ensure(rootfd, b->dest, S_ISDIR(st.st_mode) ? KIWI_ENSURE_DIR : 0,
							 "bind destination", err);
	if (target < 0) {
		snprintf(err->step, sizeof(err->step), "bind");
		return -1;
	}
	struct stat tst;
	if (fstat(target, &tst) < 0)
		return kiwi_error(err, errno, "bind", "cannot stat bind destination `%s`", b->dest);
	if (S_ISDIR(st.st_mode) != S_ISDIR(tst.st_mode))
		return kiwi_error(err, S_ISDIR(st.st_mode) ? ENOTDIR : EISDIR, "bind",
				  "bind `%s` onto `%s`: one is a directory, the other is not", b->source, b->dest);
	return attach(tree, target, "", b->dest, err);
}

int kiwi_mount_pivot(int rootfd, uint64_t root_attrs, kiwi_err *err)
{
	/* pivot_root(".", ".") stacks the old root on top of the new one;
	 * detaching it at once leaves no path back to the host's tree. */
	if (fchdir(rootfd) < 0)
		return kiwi_error(err, errno, "pivot_root", "cannot enter the rootfs");
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		return kiwi_error(err, errno, "pivot_root", "cannot pivot into the rootfs");
	if (umount2(".", MNT_DETACH) < 0)
		return kiwi_error(err, errno, "pivot_root", "cannot detach the old root");
	if (chdir("/") < 0)
		return kiwi_error(err, errno, "pivot_root", "cannot enter the new root");
	struct mount_attr attr = { .attr_set = root_attrs };
	if (mount_setattr(AT_FDCWD, "/", 0, &attr, sizeof(attr)) < 0)
		return kiwi_error(err, errno, "mount", "cannot set the options of the root");
	return 0;
}

/* Makes name (below the mount dirfd is the root of) a read-only bind of
 * itself. A path this kernel does not have is fine. */
int kiwi_mount_make_readonly(int mntfd, const char *name, kiwi_err *err)
{
	_cleanup_close_ int tree = open_tree(mntfd, name, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
	if (tree < 0)
		return errno == ENOENT ? 0 : kiwi_error(err, errno, "mount", "cannot clone `%s`", name);
	struct mount_attr attr = {
		.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
	};
	if (mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) < 0)
		return kiwi_error(err, errno, "mount", "cannot make `%s` read-only", name);
	return attach(tree, mntfd, name, name, err);
}

int kiwi_mount_mask_source(struct kiwi_mask_source *src, kiwi_err *err)
{
	src->attached = false;
	src->fd = clone_host_node(&host_nodes[0], err);
	return src->fd < 0 ? -1 : 0;
}

void kiwi_mount_mask_source_close(struct kiwi_mask_source *src)
{
	if (src->fd >= 0)
		close(src->fd);
	src->fd = -1;
}

/* Before Linux 6.5 a detached mount cannot be cloned: the source is
 * attached over the first file masked, and each later mask is a clone of
 * that mount, which then is in our namespace. */
static int mask_file(int mntfd, const char *name, struct kiwi_mask_source *src, kiwi_err *err)
{
	if (!src->attached) {
		if (attach(src->fd, mntfd, name, name, err) < 0)
			return -1;
		src->attached = true;
		return 0;
	}
	_cleanup_close_ int tree = open_tree(src->fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	if (tree < 0)
		return kiwi_error(err, errno, "mount", "cannot make a mask for `%s`", name);
	return attach(tree, mntfd, name, name, err);
}

/* Each directory gets a tmpfs of its own, for the same reason. */
int kiwi_mount_mask(int mntfd, const char *name, struct kiwi_mask_source *src, kiwi_err *err)
{
	static const char *const empty_opts[] = { "size", "0", "mode", "0555", NULL };
	struct stat st;
	if (fstatat(mntfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : kiwi_error(err, errno, "mount", "cannot stat `%s`", name);
	if (!S_ISDIR(st.st_mode))
		return mask_file(mntfd, name, src, err);
	_cleanup_close_ int tree = kiwi_mount_new_fs("tmpfs", empty_opts, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
					  MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, err);
	if (tree < 0)
		return -1;
	return attach(tree, mntfd, name, name, err);
}

/* procfs and sysfs show and change the whole host in places. Capabilities
 * do not guard most of them, file ownership does, and a root caller's
 * sandbox runs as the host's uid 0: so they are made read-only or hidden
 * in every mode, as bubblewrap and the OCI defaults do. */
static int harden_proc_and_sys(int proc, int sys, kiwi_err *err)
{
	_cleanup_(kiwi_mount_mask_source_close) struct kiwi_mask_source src = { .fd = -1 };
	static const char *const proc_readonly[] = { "sys", "sysrq-trigger", "irq", "bus", "fs" };
	/* Besides what reveals the host outright, every file root alone may
	 * read (mode 0400): a root caller's sandbox owns them, and slabinfo,
	 * vmallocinfo and pagetypeinfo lay out the kernel's heap, which is
	 * what exploits are tuned with. */
	static const char *const proc_masked[] = {
		"kcore", "keys", "timer_list", "sched_debug", "latency_stats", "timer_stats",
		"acpi", "scsi", "kmsg", "kpagecount", "kpageflags", "kpagecgroup", "config.gz",
		"slabinfo", "vmallocinfo", "pagetypeinfo", "kallsyms", "modules", "iomem", "ioports",
	};
	if (kiwi_mount_mask_source(&src, err) < 0)
		return -1;
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(proc_readonly); i++)
		if (kiwi_mount_make_readonly(proc, proc_readonly[i], err) < 0)
			return -1;
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(proc_masked); i++)
		if (kiwi_mount_mask(proc, proc_masked[i], &src, err) < 0)
			return -1;
	return sys >= 0 ? kiwi_mount_mask(sys, "firmware", &src, err) : 0;
}

/* A fresh procfs and a read-only sysfs. Both must be mounted while the
 * host's copies are still visible in this mount namespace: the kernel
 * refuses a new instance in a user namespace unless an unobscured one is
 * already there. A host that hides its sysfs gets a sandbox without one. */
static int mount_proc_and_sys(int rootfd, kiwi_err *err)
{
	const unsigned hardened = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
	_cleanup_close_ int proc_target = kiwi_mount_ensure(rootfd, "/proc", KIWI_ENSURE_DIR, "mount point", err);
	if (proc_target < 0)
		return -1;
	_cleanup_close_ int proc = kiwi_mount_new_fs("proc", NULL, hardened, err);
	if (proc < 0 || attach(proc, proc_target, "", "/proc", err) < 0)
		return -1;
	_cleanup_close_ int sys = kiwi_mount_new_fs("sysfs", NULL, hardened | MOUNT_ATTR_RDONLY, NULL);
	if (sys >= 0) {
		_cleanup_close_ int target = kiwi_mount_ensure(rootfd, "/sys", KIWI_ENSURE_DIR, "mount point", err);
		if (target < 0 || attach(sys, target, "", "/sys", err) < 0)
			return -1;
	}
	return harden_proc_and_sys(proc, sys, err);
}

/* Makes path, when the rootfs lacks it, in the layer's upper directory
 * before the overlay is mounted: the shared rootfs is never written, and a
 * rootfs the sandbox cannot write (root's, in a rootless run) still gets
 * its mount points. Anything odd on the way (a symlink, a file where a
 * directory should be) is left for kiwi_mount_ensure() to report. */
static int prepare_mount_point(int lower, int upper, const char *path, bool dir, kiwi_err *err)
{
	int probe = open_in_root(lower, path, 0, O_PATH);
	if (probe >= 0 || errno != ENOENT) {
		if (probe >= 0)
			close(probe);
		return 0;
	}
	char buf[4096];
	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return kiwi_error(err, ENAMETOOLONG, "mount", "mount point `%s` is too long", path);
	_cleanup_close_ int l = fcntl(lower, F_DUPFD_CLOEXEC, 3);
	_cleanup_close_ int u = fcntl(upper, F_DUPFD_CLOEXEC, 3);
	char *save = NULL;
	for (char *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		if (!strcmp(c, ".") || !strcmp(c, ".."))
			return 0;
		bool last = !save || !*save || strspn(save, "/") == strlen(save);
		struct stat st;
		bool in_lower = l >= 0 && fstatat(l, c, &st, AT_SYMLINK_NOFOLLOW) == 0;
		if (in_lower && !S_ISDIR(st.st_mode))
			return 0;
		if (!last || dir) {
			if (mkdirat(u, c, in_lower ? st.st_mode & 07777 : 0755) < 0 && errno != EEXIST)
				return kiwi_error(err, errno, "mount", "cannot make mount point `%s` in the layer", path);
		} else {
			int f = openat(u, c, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
			if (f < 0)
				return kiwi_error(err, errno, "mount", "cannot make mount point `%s` in the layer", path);
			close(f);
			return 0;
		}
		int nl = in_lower ? openat(l, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
		int nu = openat(u, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(TAKE_FD(l));
		close(TAKE_FD(u));
		l = nl;
		u = nu;
		if (u < 0)
			return kiwi_error(err, errno, "mount", "cannot open mount point `%s` in the layer", path);
	}
	return 0;
}

static int prepare_mount_points(const struct kiwi_sandbox_config *cfg, const struct kiwi_idmounts *trees, int lower,
				int upper, kiwi_err *err)
{
	static const char *const fixed[] = { "/proc", "/sys", "/dev", "/tmp" };
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(fixed); i++)
		if (prepare_mount_point(lower, upper, fixed[i], true, err) < 0)
			return -1;
	for (size_t i = 0; i < cfg->n_binds; i++) {
		struct stat st;
		if ((trees && trees->binds[i] >= 0 ? fstat(trees->binds[i], &st) : stat(cfg->binds[i].source, &st)) < 0)
			return kiwi_error(err, errno, "bind", "cannot use bind source `%s`", cfg->binds[i].source);
		if (prepare_mount_point(lower, upper, cfg->binds[i].dest, S_ISDIR(st.st_mode), err) < 0)
			return -1;
	}
	return 0;
}

/* The root: an overlay of the shared, never written rootfs with the
 * layer's root/upper. The layer itself goes over the rootfs's directory,
 * the overlay over the layer; pivot_root detaches both from view. */
static int mount_root_overlay(const struct kiwi_sandbox_config *cfg, const struct kiwi_idmounts *trees, int lower,
			      int layer, kiwi_err *err)
{
	_cleanup_close_ int work = -1;
	_cleanup_close_ int upper = kiwi_fslayer_dirs(layer, "root", &work, err);
	if (upper < 0 || prepare_mount_points(cfg, trees, lower, upper, err) < 0)
		return -1;
	_cleanup_close_ int rootfd = kiwi_fslayer_overlay(upper, work, lower, err);
	if (rootfd < 0 || attach(rootfd, layer, "", "the rootfs", err) < 0)
		return -1;
	struct mount_attr private = { .propagation = MS_PRIVATE };
	if (mount_setattr(rootfd, "", AT_EMPTY_PATH | AT_RECURSIVE, &private, sizeof(private)) < 0)
		return kiwi_error(err, errno, "mount", "cannot make the rootfs private");
	return TAKE_FD(rootfd);
}

int kiwi_mount_rootfs(const struct kiwi_sandbox_config *cfg, const struct kiwi_idmounts *trees, int *layer_out,
		      kiwi_err *err)
{
	/* The rootfs path is resolved once; from then on everything goes
	 * through fds, so swapping the directory midway redirects nothing. */
	_cleanup_close_ int dirfd = trees ? fcntl(trees->rootfs_dir, F_DUPFD_CLOEXEC, 3)
					  : open(cfg->rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return kiwi_error(err, errno, "rootfs", "cannot open `%s`", cfg->rootfs);
	/* The idmapped rootfs is attached first, under the layer: overlayfs
	 * takes a lower layer only from a mount of our namespace. */
	int lower = trees && trees->rootfs >= 0 ? trees->rootfs : dirfd;
	if (lower != dirfd && attach(trees->rootfs, dirfd, "", "the idmapped rootfs", err) < 0)
		return -1;
	_cleanup_close_ int layer = kiwi_fslayer_create(cfg->disk_bytes ? cfg->disk_bytes : KIWI_FSLAYER_DEFAULT_SIZE,
							cfg->disk_backend == KIWI_DISK_LOOP ? cfg->disk_fd : -1,
							dirfd, err);
	if (layer < 0)
		return -1;
	struct mount_attr private = { .propagation = MS_PRIVATE };
	if (mount_setattr(layer, "", AT_EMPTY_PATH, &private, sizeof(private)) < 0)
		return kiwi_error(err, errno, "mount", "cannot make the writable layer private");
	if (cfg->restore && cfg->restore(cfg->restore_arg, layer, err) < 0)
		return -1;
	_cleanup_close_ int rootfd = mount_root_overlay(cfg, trees, lower, layer, err);
	if (rootfd < 0 || mount_proc_and_sys(rootfd, err) < 0)
		return -1;
	_cleanup_close_ int shm = kiwi_fslayer_subdir(layer, "shm", 01777, err);
	if (shm < 0 || mount_dev(rootfd, shm, err) < 0)
		return -1;
	_cleanup_close_ int tmp = kiwi_fslayer_subdir(layer, "tmp", 01777, err);
	_cleanup_close_ int tmp_target = tmp < 0 ? -1 : kiwi_mount_ensure(rootfd, "/tmp", KIWI_ENSURE_DIR, "mount point", err);
	if (tmp_target < 0 || attach(tmp, tmp_target, "", "/tmp", err) < 0)
		return -1;
	int for_binds = kiwi_fslayer_holds_xattrs(layer) ? layer : -1;
	if (for_binds < 0 && cfg->ws_mode == KIWI_WS_DISCARD)
		return kiwi_error(err, EOPNOTSUPP, "workspace", "cannot discard the workspace's changes: this "
				  "kernel's tmpfs holds no user xattrs (Linux 6.6), so it is bound in place");
	for (size_t i = 0; i < cfg->n_binds; i++)
		if (mount_bind(cfg, rootfd, for_binds, i, trees ? trees->binds[i] : -1, err) < 0)
			return -1;
	if (kiwi_mount_pivot(rootfd, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (cfg->rw_root ? 0 : MOUNT_ATTR_RDONLY),
			     err) < 0)
		return -1;
	*layer_out = TAKE_FD(layer);
	return 0;
}

/* Not in the headers of every libc this builds with (Linux 6.10, 6.11). */
#ifndef NS_GET_MNTNS_ID
#define NS_GET_MNTNS_ID _IOR(0xb7, 0x5, uint64_t)
#endif
#ifndef SYS_listmount
#define SYS_listmount 458
#endif
#define KIWI_LSMT_ROOT 0xffffffffffffffffULL

struct kiwi_mnt_id_req {
	uint32_t size, spare;
	uint64_t mnt_id, param, mnt_ns_id;
};

uint64_t kiwi_mount_ns_id(void)
{
	_cleanup_close_ int fd = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
	uint64_t id = 0;
	if (fd < 0 || ioctl(fd, NS_GET_MNTNS_ID, &id) < 0)
		return 0;
	return id;
}

int kiwi_mount_ns_exists(uint64_t id)
{
	if (!id)
		return -1;
	struct kiwi_mnt_id_req req = { .size = sizeof(req), .mnt_id = KIWI_LSMT_ROOT, .mnt_ns_id = id };
	uint64_t one;
	/* ENOENT: no namespace of that id; EPERM: it exists, not ours to list. */
	if (syscall(SYS_listmount, &req, &one, 1, 0) >= 0 || errno == EPERM)
		return 1;
	return errno == ENOENT ? 0 : -1;
}
