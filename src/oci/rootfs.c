/* SPDX-License-Identifier: Apache-2.0 */
/* The container's filesystem from config.json: the rootfs cloned into a
 * mount of its own, each `mounts` entry attached in order through the new
 * mount API, the devices, pivot_root, then the masked and read-only paths.
 * Destinations are resolved inside the rootfs with openat2(RESOLVE_IN_ROOT):
 * a symlink in the image (/var/run -> /run) is followed, but never out of
 * the rootfs.
 * Devices: there is no device cgroup program. Instead no process of the
 * container can make a device node (CAP_MKNOD is never granted) and every
 * mount but the container's /dev, its devpts and binds of device nodes is
 * nodev, so the only usable nodes are the ones placed here;
 * linux.resources.devices decides only about nodes bound in from the host. */
#include "oci_int.h"
#include "kiwi/cleanup.h"
#include "kiwi/mount.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* Destinations follow the image's symlinks, inside the rootfs. */
static int ensure_in_root(int rootfd, const char *path, bool dir, kiwi_err *err)
{
	return kiwi_mount_ensure(rootfd, path, KIWI_ENSURE_FOLLOW | (dir ? KIWI_ENSURE_DIR : 0), "destination", err);
}

static int attach(int mnt, int target, const char *dest, kiwi_err *err)
{
	if (move_mount(mnt, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		return kiwi_error(err, errno, "mount", "cannot mount on `%s`", dest);
	return 0;
}

static int set_attrs(int tree, const struct kiwi_oci_mount *m, uint64_t extra, bool recursive, kiwi_err *err)
{
	struct mount_attr a = { .attr_set = m->attr_set | extra, .attr_clr = m->attr_clr & ~extra };
	/* The atime mode is one field: changing it means clearing it. */
	if (a.attr_set & MOUNT_ATTR__ATIME)
		a.attr_clr |= MOUNT_ATTR__ATIME;
	if (mount_setattr(tree, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0), &a, sizeof(a)) < 0)
		return kiwi_error(err, errno, "mount", "cannot set the options of `%s`", m->destination);
	if (m->propagation) {
		struct mount_attr p = { .propagation = m->propagation };
		if (mount_setattr(tree, "", AT_EMPTY_PATH | (m->propagation_recursive ? AT_RECURSIVE : 0), &p,
				  sizeof(p)) < 0)
			return kiwi_error(err, errno, "mount", "cannot set the propagation of `%s`", m->destination);
	}
	return 0;
}

static int bind_tree(const char *source, bool recursive, kiwi_err *err)
{
	int tree = open_tree(AT_FDCWD, source, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (recursive ? AT_RECURSIVE : 0));
	if (tree < 0)
		return kiwi_error(err, errno, "mount", "cannot use bind source `%s`", source);
	return tree;
}

/* The source is opened here, in the user namespace, as runc does; one that
 * the namespace's root may not reach (a 0700 directory of the host's
 * root) is the clone the parent opened, which, made in the host's mount
 * namespace, takes its options only once attached in ours. */
/* A bound device node keeps dev when linux.resources.devices lets it be
 * read and written, becomes nodev (open fails) when neither; read or write
 * alone cannot be enforced without a device cgroup program: refused. */
static int device_bind_attrs(const struct kiwi_oci_config *cfg, const struct kiwi_oci_mount *m,
			     const struct stat *st, uint64_t *extra, kiwi_err *err)
{
	unsigned rw = KIWI_OCI_DEV_READ | KIWI_OCI_DEV_WRITE;
	unsigned got = kiwi_oci_device_access(cfg, S_ISBLK(st->st_mode) ? 'b' : 'c', major(st->st_rdev),
					      minor(st->st_rdev)) & rw;
	*extra = got ? 0 : MOUNT_ATTR_NODEV;
	if (got && got != rw)
		return kiwi_error(err, EINVAL, "devices",
				  "linux.resources.devices lets `%s` (%u:%u) be %s only, which kiwi-run cannot "
				  "enforce (it has no device cgroup program): allow rw, or deny both",
				  m->source, major(st->st_rdev), minor(st->st_rdev), got == KIWI_OCI_DEV_READ ? "read" : "written");
	return 0;
}

static int mount_bind(int rootfd, const struct kiwi_oci_config *cfg, const struct kiwi_oci_mount *m, int parent_tree,
		      kiwi_err *err)
{
	/* An idmapped one exists only as the parent's clone. */
	_cleanup_close_ int tree = m->idmap ? -1 : bind_tree(m->source, m->recursive, err);
	bool late = false;
	if ((m->idmap || (tree < 0 && (err->errnum == EACCES || err->errnum == EPERM))) && parent_tree >= 0) {
		tree = fcntl(parent_tree, F_DUPFD_CLOEXEC, 3);
		late = true;
	}
	struct stat st;
	if (tree < 0 && m->idmap)
		return kiwi_error(err, EBADF, "idmap", "no idmapped clone of bind source `%s`", m->source);
	if (tree < 0)
		return -1;
	if (fstat(tree, &st) < 0)
		return kiwi_error(err, errno, "mount", "cannot stat bind source `%s`", m->source);
	uint64_t extra = MOUNT_ATTR_NODEV;
	if ((S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) && device_bind_attrs(cfg, m, &st, &extra, err) < 0)
		return -1;
	if (!late && set_attrs(tree, m, extra, m->recursive, err) < 0)
		return -1;
	_cleanup_close_ int target = ensure_in_root(rootfd, m->destination, S_ISDIR(st.st_mode), err);
	if (target < 0 || attach(tree, target, m->destination, err) < 0)
		return -1;
	return late ? set_attrs(tree, m, extra, m->recursive, err) : 0;
}

/* A new filesystem instance with the mount's data options. */
static int new_fs(const struct kiwi_oci_mount *m, const char *type, kiwi_err *err)
{
	_cleanup_close_ int fs = fsopen(type, FSOPEN_CLOEXEC);
	if (fs < 0)
		return kiwi_error(err, errno, "mount", "cannot open a %s filesystem for `%s`", type, m->destination);
	for (char **o = m->data; o && *o; o++) {
		char key[256];
		const char *eq = strchr(*o, '=');
		snprintf(key, sizeof(key), "%.*s", eq ? (int)(eq - *o) : (int)strlen(*o), *o);
		int r = eq ? fsconfig(fs, FSCONFIG_SET_STRING, key, eq + 1, 0)
			   : fsconfig(fs, FSCONFIG_SET_FLAG, key, NULL, 0);
		if (r < 0)
			return kiwi_error(err, errno, "mount", "%s at `%s` rejects option `%s`", type, m->destination, *o);
	}
	if ((m->sync && fsconfig(fs, FSCONFIG_SET_FLAG, "sync", NULL, 0) < 0) ||
	    (m->dirsync && fsconfig(fs, FSCONFIG_SET_FLAG, "dirsync", NULL, 0) < 0))
		return kiwi_error(err, errno, "mount", "%s at `%s` rejects sync or dirsync", type, m->destination);
	if (fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return kiwi_error(err, errno, "mount", "cannot create the %s filesystem for `%s`", type, m->destination);
	int mnt = fsmount(fs, FSMOUNT_CLOEXEC, 0);
	if (mnt < 0)
		return kiwi_error(err, errno, "mount", "cannot mount the %s filesystem for `%s`", type, m->destination);
	return mnt;
}

/* sysfs and cgroup2 need a network and a cgroup namespace of the user
 * namespace's own; without them, runc's fallback: a bind of the host's. */
static int mount_fs(int rootfd, const struct kiwi_oci_mount *m, kiwi_err *err)
{
	const char *type = !strcmp(m->type, "cgroup") ? "cgroup2" : m->type;
	/* Devices live on the container's /dev and its devpts, nowhere else. */
	bool dev_ok = !strcmp(m->destination, "/dev") || !strcmp(type, "devpts");
	_cleanup_close_ int tree = new_fs(m, type, err);
	bool recursive = false;
	if (tree < 0 && (!strcmp(type, "sysfs") || !strcmp(type, "cgroup2")) && (errno == EPERM || errno == EBUSY)) {
		tree = bind_tree(!strcmp(type, "sysfs") ? "/sys" : "/sys/fs/cgroup", true, err);
		recursive = true;
	}
	if (tree < 0 || set_attrs(tree, m, dev_ok ? 0 : MOUNT_ATTR_NODEV, recursive, err) < 0)
		return -1;
	_cleanup_close_ int target = ensure_in_root(rootfd, m->destination, true, err);
	if (target < 0)
		return -1;
	return attach(tree, target, m->destination, err);
}

/* /dev/null & co: binds of the host's nodes, which work in a user
 * namespace too, where mknod does not. Over a node the image has (inert:
 * the root is nodev) or an empty file made here; a symlink in the image's
 * /dev is refused, never followed (kiwi/mount.h). */
static int default_devices(int rootfd, kiwi_err *err)
{
	static const char *const links[][2] = {
		{ "fd", "/proc/self/fd" }, { "stdin", "/proc/self/fd/0" }, { "stdout", "/proc/self/fd/1" },
		{ "stderr", "/proc/self/fd/2" }, { "ptmx", "pts/ptmx" }, { "core", "/proc/kcore" },
	};
	_cleanup_close_ int dev = ensure_in_root(rootfd, "/dev", true, err);
	if (dev < 0)
		return -1;
	_cleanup_close_ int devdir = openat(dev, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (devdir < 0)
		return kiwi_error(err, errno, "mount", "cannot open the container's /dev");
	if (kiwi_mount_host_nodes(devdir, err) < 0)
		return -1;
	/* /dev/core only where runc puts it, and only as a link. */
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(links) - 1; i++)
		if (symlinkat(links[i][1], devdir, links[i][0]) < 0 && errno != EEXIST)
			return kiwi_error(err, errno, "mount", "cannot create /dev/%s", links[i][0]);
	return 0;
}

/* linux.devices: mknod as real root; in a user namespace the host's node
 * of the same number, bound. */
static int add_device(int rootfd, const struct kiwi_oci_device *d, bool in_userns, kiwi_err *err)
{
	_cleanup_close_ int target = -1;
	char slash_name[4096];
	snprintf(slash_name, sizeof(slash_name), "%s", d->path);
	char *base = strrchr(slash_name, '/');
	*base++ = '\0';
	_cleanup_close_ int parent = ensure_in_root(rootfd, slash_name[0] ? slash_name : "/", true, err);
	if (parent < 0)
		return -1;
	_cleanup_close_ int pdir = openat(parent, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pdir < 0)
		return kiwi_error(err, errno, "devices", "cannot open the parent of `%s`", d->path);
	mode_t type = d->type == 'b' ? S_IFBLK : d->type == 'p' ? S_IFIFO : S_IFCHR;
	dev_t num = makedev((unsigned)d->major, (unsigned)d->minor);
	if (!in_userns || d->type == 'p') {
		unlinkat(pdir, base, 0);
		if (mknodat(pdir, base, type | (d->mode & 07777), num) < 0)
			return kiwi_error(err, errno, "devices", "cannot create device `%s`", d->path);
		if (fchownat(pdir, base, d->uid, d->gid, AT_SYMLINK_NOFOLLOW) < 0 ||
		    fchmodat(pdir, base, d->mode & 07777, 0) < 0)
			return kiwi_error(err, errno, "devices", "cannot set the owner and mode of `%s`", d->path);
		return 0;
	}
	struct stat st;
	if (stat(d->path, &st) < 0 || (st.st_mode & S_IFMT) != type || st.st_rdev != num)
		return kiwi_error(err, EPERM, "devices",
				  "cannot create device `%s` in a user namespace: the host has no such node to bind", d->path);
	_cleanup_close_ int tree = bind_tree(d->path, false, err);
	if (tree < 0)
		return -1;
	/* The host's inode: the container uses the device, never changes its
	 * mode or owner (device I/O ignores the read-only flag). */
	struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC };
	if (mount_setattr(tree, "", AT_EMPTY_PATH, &ro, sizeof(ro)) < 0)
		return kiwi_error(err, errno, "devices", "cannot make the bind of `%s` read-only", d->path);
	target = openat(pdir, base, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (target >= 0)
		close(target);
	target = ensure_in_root(rootfd, d->path, false, err);
	if (target < 0)
		return -1;
	return attach(tree, target, d->path, err);
}

int kiwi_oci_prepare_rootfs(const struct kiwi_oci_config *cfg, const char *rootfs, bool in_userns,
			    const int *bind_trees, int *rootfd_out, kiwi_err *err)
{
	/* Nothing of what follows may propagate back to the host. */
	struct mount_attr slave = { .propagation = MS_SLAVE };
	if (mount_setattr(AT_FDCWD, "/", AT_RECURSIVE, &slave, sizeof(slave)) < 0)
		return kiwi_error(err, errno, "mount", "cannot make the mount namespace a slave of the host's");
	_cleanup_close_ int dirfd = open(rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return kiwi_error(err, errno, "rootfs", "cannot open rootfs `%s`", rootfs);
	_cleanup_close_ int rootfd = open_tree(dirfd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH);
	if (rootfd < 0)
		return kiwi_error(err, errno, "rootfs", "cannot clone rootfs `%s`", rootfs);
	struct mount_attr prop = { .propagation = cfg->rootfs_propagation ? cfg->rootfs_propagation : MS_PRIVATE };
	if (mount_setattr(rootfd, "", AT_EMPTY_PATH | AT_RECURSIVE, &prop, sizeof(prop)) < 0 && prop.propagation != MS_SHARED)
		return kiwi_error(err, errno, "rootfs", "cannot set the propagation of rootfs `%s`", rootfs);
	if (attach(rootfd, dirfd, "the rootfs", err) < 0)
		return -1;
	bool dev_bound = false;
	for (size_t i = 0; i < cfg->n_mounts; i++) {
		const struct kiwi_oci_mount *m = &cfg->mounts[i];
		if (!strcmp(m->destination, "/dev") && m->bind)
			dev_bound = true;
		if ((m->bind ? mount_bind(rootfd, cfg, m, bind_trees ? bind_trees[i] : -1, err) : mount_fs(rootfd, m, err)) < 0)
			return -1;
	}
	if (!dev_bound && default_devices(rootfd, err) < 0)
		return -1;
	for (size_t i = 0; i < cfg->n_devices; i++)
		if (add_device(rootfd, &cfg->devices[i], in_userns, err) < 0)
			return -1;
	/* A missing working directory is made, as runc makes it: before
	 * pivot_root makes the root read-only. */
	if (cfg->has_process) {
		_cleanup_close_ int cwd = ensure_in_root(rootfd, cfg->process.cwd, true, err);
		if (cwd < 0)
			return kiwi_error_wrap(err, "process.cwd");
	}
	*rootfd_out = TAKE_FD(rootfd);
	return 0;
}

int kiwi_oci_pivot(int rootfd, const struct kiwi_oci_config *cfg, struct kiwi_mask_source *masks, kiwi_err *err)
{
	/* Made while the host's /dev is in view: after pivot_root, /dev/null
	 * would be the image's, which may be a symlink to anything. */
	if (cfg->n_masked_paths && kiwi_mount_mask_source(masks, err) < 0)
		return -1;
	/* Device nodes in the image are inert (see the top of this file). */
	return kiwi_mount_pivot(rootfd, MOUNT_ATTR_NODEV | (cfg->root_readonly ? MOUNT_ATTR_RDONLY : 0), err);
}

static int write_sysctl(const char *key, const char *value, kiwi_err *err)
{
	char path[512];
	snprintf(path, sizeof(path), "/proc/sys/%s", key);
	for (char *c = path + 10; *c; c++)
		if (*c == '.')
			*c = '/';
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return kiwi_error(err, errno, "sysctl", "cannot open `%s` for sysctl `%s`", path, key);
	size_t len = strlen(value);
	if (write(fd, value, len) != (ssize_t)len)
		return kiwi_error(err, errno, "sysctl", "cannot set sysctl `%s` to `%s`", key, value);
	return 0;
}

/* After pivot_root: sysctls (while /proc/sys is still writable), then
 * the masked and read-only paths. */
int kiwi_oci_finish_rootfs(const struct kiwi_oci_config *cfg, struct kiwi_mask_source *masks, kiwi_err *err)
{
	for (size_t i = 0; i < cfg->n_sysctl; i++)
		if (write_sysctl(cfg->sysctl[2 * i], cfg->sysctl[2 * i + 1], err) < 0)
			return -1;
	for (size_t i = 0; i < cfg->n_masked_paths; i++)
		if (kiwi_mount_mask(AT_FDCWD, cfg->masked_paths[i], masks, err) < 0)
			return -1;
	for (size_t i = 0; i < cfg->n_readonly_paths; i++)
		if (kiwi_mount_make_readonly(AT_FDCWD, cfg->readonly_paths[i], err) < 0)
			return -1;
	return 0;
}
