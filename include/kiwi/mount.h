/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox's filesystem: rootfs, /proc, /dev, /tmp, /sys and binds,
 * built in the child's mount namespace, then pivot_root into it. */
#ifndef KIWI_MOUNT_H
#define KIWI_MOUNT_H

#include <stdint.h>

#include "kiwi/err.h"
#include "kiwi/sandbox.h"

/* Child side, in the new user and mount namespaces, before the command is
 * forked. Every target inside the rootfs is resolved from a rootfs fd with
 * openat2 and refuses symlinks, and every mount is attached through an fd
 * (fsmount/open_tree + move_mount), so a hostile rootfs cannot redirect a
 * mount elsewhere. Ends with the old root detached and cwd at "/". */
int kiwi_mount_rootfs(const struct kiwi_sandbox_config *cfg, kiwi_err *err);

/* Pieces shared with the OCI runtime's rootfs (src/oci/rootfs.c). name is
 * relative to the mount dirfd is the root of, or absolute with AT_FDCWD. */
/* Creates dev/<name> below devfd and binds the host's /dev/<name> on it,
 * nosuid and noexec. */
int kiwi_mount_bind_host_node(int devfd, const char *name, kiwi_err *err);
/* Makes name a read-only (nosuid, nodev, noexec) bind of itself; a path
 * this kernel does not have is fine. */
int kiwi_mount_make_readonly(int mntfd, const char *name, kiwi_err *err);
/* Hides name: an empty read-only tmpfs over a directory, the null device
 * over anything else; a missing path is fine. */
int kiwi_mount_mask(int mntfd, const char *name, kiwi_err *err);
/* pivot_root into rootfd, the old root detached at once, cwd "/", and the
 * new root's mount given root_attrs (MOUNT_ATTR_*). */
int kiwi_mount_pivot(int rootfd, uint64_t root_attrs, kiwi_err *err);

#endif
