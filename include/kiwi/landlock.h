/* SPDX-License-Identifier: Apache-2.0 */
/* Landlock: a second wall around the filesystem, under the mounts. The
 * mounts say what exists and whether it is read-only; Landlock says what
 * the command may do with it, and it holds even where a mount would allow
 * more (procfs is mounted read-write; a file a mask missed). */
#ifndef KIWI_LANDLOCK_H
#define KIWI_LANDLOCK_H

#include <stdbool.h>
#include <stddef.h>

#include "kiwi/err.h"
#include "kiwi/sandbox.h"

/* What the command may touch, as paths of its own root (after pivot_root):
 *   /          read and execute (everything, when root_writable)
 *   /tmp, /dev/shm            read, write, create, remove, rename
 *   /dev       read and write the nodes there, ioctl on them
 *   each bind  read and execute; also write when it is not read-only
 * A path that does not exist is skipped. Network and signal scoping are
 * left alone: loopback servers and signals inside the sandbox keep working. */
struct kiwi_landlock_rules {
	bool root_writable;
	const struct kiwi_bind *binds;
	size_t n_binds;
};

/* The highest Landlock ABI the kernel offers, 0 when it has none (not
 * built, or disabled at boot). */
int kiwi_landlock_abi(void);

/* Child side, after pivot_root and once no_new_privs is set (the kernel
 * demands it), before the seccomp filter: restricts the calling process
 * and everything it execs, for good. Uses every right the kernel's ABI
 * knows (best effort on older kernels). Allocation-free.
 * Returns the ABI enforced (> 0), 0 when the kernel lacks Landlock (the
 * sandbox runs without it; say so in the verdict), -1 with err set. */
int kiwi_landlock_restrict(const struct kiwi_landlock_rules *rules, kiwi_err *err);

#endif
