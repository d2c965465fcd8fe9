/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox's filesystem: rootfs, /proc, /dev, /tmp, /sys and binds,
 * built in the child's mount namespace, then pivot_root into it. */
#ifndef KIWI_MOUNT_H
#define KIWI_MOUNT_H

#include <stdbool.h>
#include <stdint.h>

#include "kiwi/err.h"
#include "kiwi/sandbox.h"

/* Child side, in the new user and mount namespaces, before the command is
 * forked. Every target inside the rootfs is resolved from a rootfs fd with
 * openat2 and refuses symlinks, and every mount is attached through an fd
 * (fsmount/open_tree + move_mount), so a hostile rootfs cannot redirect a
 * mount elsewhere. Ends with the old root detached and cwd at "/", and
 * *layer holding the root of the writable layer (kiwi/fslayer.h). trees:
 * the idmapped rootfs and binds kiwi-run made (kiwi/idmount.h), or NULL. */
struct kiwi_idmounts;
int kiwi_mount_rootfs(const struct kiwi_sandbox_config *cfg, const struct kiwi_idmounts *trees, int *layer,
		      kiwi_err *err);
/* A new, still detached, filesystem instance; opts are key/value pairs
 * (value "": a flag). */
int kiwi_mount_new_fs(const char *fstype, const char *const *opts, unsigned attrs, kiwi_err *err);

/* Pieces shared with the OCI runtime's rootfs (src/oci/rootfs.c). name is
 * relative to the mount dirfd is the root of, or absolute with AT_FDCWD. */

enum {
	KIWI_ENSURE_DIR = 1 << 0,     /* the last component is a directory, else a file */
	KIWI_ENSURE_FOLLOW = 1 << 1,  /* symlinks are followed inside the rootfs, else refused */
};
/* Opens path inside the rootfs (rootfd its root: ".." and symlinks stay
 * inside) as an O_PATH fd, creating what is missing: parents as
 * directories, the last component as flags say. Iterative, so a path of
 * any depth costs pid 1 no stack. what names the path in errors. */
int kiwi_mount_ensure(int rootfd, const char *path, unsigned flags, const char *what, kiwi_err *err);
/* Binds each of the host's /dev/{null,zero,full,random,urandom,tty},
 * checked to be that device, read-only (device I/O still works; chmod,
 * chown and utime of the host's inode do not), nosuid and noexec, onto
 * <name> below devfd: an empty file created there, or what is there if it
 * is a file or a device node. Anything else there (a symlink) is refused,
 * never followed; a mount already there (an OCI bind) is left alone. */
int kiwi_mount_host_nodes(int devfd, kiwi_err *err);
/* Makes name a read-only (nosuid, nodev, noexec) bind of itself; a path
 * this kernel does not have is fine. */
int kiwi_mount_make_readonly(int mntfd, const char *name, kiwi_err *err);

/* What masks a file: the host's null device, cloned by kiwi-run while the
 * host's tree is still in view (before pivot_root), checked to be 1:3 and
 * read-only; never looked up in the image. One source serves any number
 * of masks. */
struct kiwi_mask_source {
	int fd;
	bool attached;   /* already over a masked file (kiwi_mount_mask) */
};
int kiwi_mount_mask_source(struct kiwi_mask_source *src, kiwi_err *err);
void kiwi_mount_mask_source_close(struct kiwi_mask_source *src);
/* Hides name: an empty read-only tmpfs over a directory, the mask source
 * over anything else; a missing path is fine. */
int kiwi_mount_mask(int mntfd, const char *name, struct kiwi_mask_source *src, kiwi_err *err);
/* pivot_root into rootfd, the old root detached at once, cwd "/", and the
 * new root's mount given root_attrs (MOUNT_ATTR_*). */
int kiwi_mount_pivot(int rootfd, uint64_t root_attrs, kiwi_err *err);

/* The calling process's mount namespace's 64-bit id (never reused), or 0
 * where the kernel has none to give (before Linux 6.10). */
uint64_t kiwi_mount_ns_id(void);
/* Whether the mount namespace of that id still exists (listmount(2)):
 * 1, 0 (gone: no process is in it and nothing holds it), or -1 where the
 * kernel cannot tell (before Linux 6.11, or id 0). */
int kiwi_mount_ns_exists(uint64_t id);

#endif
