/* SPDX-License-Identifier: Apache-2.0 */
/* Idmapped mounts (mount_setattr MOUNT_ATTR_IDMAP) for a root caller's
 * sandbox whose root is an unprivileged host id: kiwi's own range from
 * /etc/subuid and /etc/subgid (kiwi-run(1), ID MAPPING). The rootfs is
 * seen through the sandbox's own map, so the image's root-owned files are
 * root's inside; each bind through a map of its owner alone onto the
 * sandbox's root, so the caller's files are root's inside and what the
 * sandbox's root writes there is the owner's on the host, while no other
 * host id can be written through it.
 *
 * Parent side, as root: idmapping a mount of a host filesystem needs
 * CAP_SYS_ADMIN over that filesystem's user namespace, which pid 1 never
 * has. The binds' trees are made before clone and inherited by pid 1,
 * the rootfs's after clone (through the sandbox's own namespace) and sent
 * with sync #1; pid 1 attaches them (mount.c). They are detached mounts,
 * gone with their last fd. */
#ifndef KIWI_IDMOUNT_H
#define KIWI_IDMOUNT_H

#include <stddef.h>

#include "kiwi/err.h"
#include "kiwi/sandbox.h"
#include "kiwi/userns.h"

/* The default map of a root caller: 0..65535 inside onto the first range
 * of KIWI_SUBID_OWNER in /etc/subuid and /etc/subgid holding as many. A
 * missing range is EPERM, naming the fix. */
int kiwi_idmount_default_map(struct kiwi_idmap *m, kiwi_err *err);

/* The rootfs seen through the sandbox's own user namespace (pid's, whose
 * maps are written; pidfd proves it is still that process): made after
 * clone, it needs no process of its own. Sent to pid 1 with sync #1. */
int kiwi_idmount_rootfs(const char *rootfs, pid_t pid, int pidfd, kiwi_err *err);

struct kiwi_idmounts {
	/* The rootfs's directory (O_PATH), where pid 1 mounts the trees and
	 * the layer: opened by pid 1 itself (a mount point must be of its
	 * namespace) while it is still the host's root, since on kiwi's range
	 * it may not look up a path below a directory only root may enter. */
	int rootfs_dir;
	int rootfs;      /* kiwi_idmount_rootfs()'s, once pid 1 has it; else -1 */
	/* One per cfg->binds[i], recursive, through its owner's map. Not
	 * root, on a range kiwi-helper maps: the reserved fds of the binds
	 * the caller owns, which kiwi-helper's trees take before sync #1
	 * (not recursive then), -1 for the others; rootfs is -1. */
	int *binds;
	size_t n;
	/* The children the maps were made in, killed at once but reaped only
	 * by kiwi_idmounts_release, after the sandbox's clone: waiting for
	 * each to die at once cost a busy host's start milliseconds. */
	int *holders;    /* pidfds */
	size_t n_holders;
};

/* Makes the binds' trees of cfg (root, cfg->idmap the sandbox's map). A
 * filesystem that cannot be idmapped is EOPNOTSUPP, in one line naming it
 * and --host-root-map. */
int kiwi_idmounts_make(const struct kiwi_sandbox_config *cfg, struct kiwi_idmounts *out, kiwi_err *err);
/* The pipes among fds (the command's stdout and stderr, which
 * /dev/stdout reopens through /proc) given to the host ids uid and gid:
 * the sandbox's root's. Anything else is left alone. */
int kiwi_idmount_give_pipes(const int *fds, size_t n, uint32_t uid, uint32_t gid, kiwi_err *err);
/* The host ids of pid's user namespace's root (uid_map and gid_map's
 * inside 0); -1 when it maps none, or pid is gone. */
int kiwi_idmount_root_of(pid_t pid, uint32_t *uid, uint32_t *gid);

/* Closes the trees. */
void kiwi_idmounts_close(struct kiwi_idmounts *t);
/* The same, and reaps the holders (once pid 1 holds its copies). */
void kiwi_idmounts_release(struct kiwi_idmounts *t);

#endif
