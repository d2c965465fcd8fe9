/* SPDX-License-Identifier: Apache-2.0 */
/* Opening a path inside a root directory, as if that directory were "/":
 * symlinks (absolute ones included) and ".." never leave it. openat2 with
 * RESOLVE_IN_ROOT does it in the kernel; where openat2 is missing (Linux
 * < 5.6, or hidden by a seccomp filter) the same walk is done here, one
 * component at a time, never following a final symlink by accident. */
#ifndef KIWI_ROOTFS_RESOLVE_H
#define KIWI_ROOTFS_RESOLVE_H

/* flags: open(2) flags (O_CLOEXEC is added). path "" is the root. Returns
 * an fd or -1 with errno set. */
int kiwi_resolve_in_root(int root_fd, const char *path, int flags);

#endif
