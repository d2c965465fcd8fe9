/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox's filesystem: rootfs, /proc, /dev, /tmp, /sys and binds,
 * built in the child's mount namespace, then pivot_root into it. */
#ifndef KIWI_MOUNT_H
#define KIWI_MOUNT_H

#include "kiwi/err.h"
#include "kiwi/sandbox.h"

/* Child side, in the new user and mount namespaces, before the command is
 * forked. Every target inside the rootfs is resolved from a rootfs fd with
 * openat2 and refuses symlinks, and every mount is attached through an fd
 * (fsmount/open_tree + move_mount), so a hostile rootfs cannot redirect a
 * mount elsewhere. Ends with the old root detached and cwd at "/". */
int kiwi_mount_rootfs(const struct kiwi_sandbox_config *cfg, kiwi_err *err);

#endif
