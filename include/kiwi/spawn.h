/* SPDX-License-Identifier: Apache-2.0 */
/* clone3, called directly: new namespaces, a pidfd, optionally straight
 * into a cgroup, in one system call. */
#ifndef KIWI_SPAWN_H
#define KIWI_SPAWN_H

#include <sched.h>
#include <stdint.h>
#include <sys/types.h>

#include "kiwi/err.h"

#define KIWI_SANDBOX_NAMESPACES                                                        \
	(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWUTS |     \
	 CLONE_NEWIPC | CLONE_NEWCGROUP)

/* Like fork(): returns 0 in the child, the child's pid in the parent (with
 * *pidfd set), -1 with err set. cgroup_fd < 0 means "stay in ours". Only
 * ENOSYS would justify a fallback, and clone3 is older than every other
 * kernel feature kiwi-run needs, so there is none. */
/* ns_flags may hold other clone flags too (CLONE_PARENT: the child becomes
 * our sibling). */
pid_t kiwi_spawn(uint64_t ns_flags, int cgroup_fd, int *pidfd, kiwi_err *err);

/* A child that only holds what ns_flags made for it (a namespace to join
 * by *pidfd) until hold_r reads end of file, then exits; hold_w, the
 * other end, is closed in it. It never returns here. Where it can
 * (x86-64), it shares our memory (CLONE_VM) and runs a few instructions on
 * a stack of its own: no copy of our address space to make or tear down.
 * Elsewhere, a fork. Returns its pid, or -1 with err set. */
pid_t kiwi_spawn_holder(uint64_t ns_flags, int cgroup_fd, int hold_r, int hold_w, int *pidfd, kiwi_err *err);

#endif
