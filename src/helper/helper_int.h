/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-helper's modules: privileges (privs.c), the caller's sandbox
 * (sandbox.c), the operations (idmap.c, egress.c, cgroup_op.c) and quotas
 * (quota.c). */
#ifndef KIWI_HELPER_INT_H
#define KIWI_HELPER_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "kiwi/err.h"
#include "kiwi/helper.h"

/* ---- inherit.c ---- */

/* Every resource limit, signal disposition and the mask, the scheduling
 * policy, nice value, util clamps, I/O priority and CPU affinity, the
 * session, oom_score_adj, personality, timer slack and the prctl flags a
 * caller may have set, umask and cwd: set to our own values. As root,
 * first thing after the caller is known. */
int helper_reset_inherited(kiwi_err *err);
/* The helper's own cgroup, beside (never below) any subtree delegated
 * to a caller: HELPER_CGROUP at the root of the unified hierarchy, made
 * when missing, root's. Moves us there, as root, before anything is
 * made: the caller can then neither freeze nor throttle us (nor the
 * keepers we fork). */
#define HELPER_CGROUP "kiwi.helper"
int helper_leave_callers_cgroup(kiwi_err *err);

/* ---- privs.c ---- */

/* Capability bits (1ull << CAP_*) each operation needs. */
uint64_t helper_caps_for(unsigned ops);
/* The one switch from root to the caller, after the config is read:
 * securebits so uid changes no longer touch capabilities, the bounding
 * set cut to caps, then ruid = suid = 0 (so the caller cannot signal or
 * ptrace us, and can never make us leak by killing us) with euid = fsuid
 * the caller (every file opened as the caller, and the owner of the
 * caller's namespaces), caps the only capabilities left, no_new_privs,
 * not dumpable. */
int helper_drop_to_caller(uid_t uid, gid_t gid, uint64_t caps, kiwi_err *err);
/* Lowers the permitted set to caps (which can never grow again). */
int helper_caps_limit(uint64_t caps, kiwi_err *err);
/* Capabilities the cgroup operation holds but raises only between
 * helper_override_begin(caps) and _end() (as root, too).
 * CAP_DAC_OVERRIDE: the root of the cgroup hierarchy is mode 0555, so
 * making the subtree there needs it, and a delegated cgroup's files are
 * the caller's, so tearing it down (cgroup.kill, the cgroups the sandbox
 * nested) needs it: held until the cgroup is gone (this returns it).
 * CAP_SYS_NICE: moving the sandbox across cpusets (cgroup-attach). */
uint64_t helper_caps_cgroup_held(void);
/* CAP_SYS_ADMIN, which the disk and bind operations raise only between
 * helper_override_begin(caps) and _end(): to mount the image's ext4, to
 * clone a bind source, to idmap either, and at the end to shut the disk
 * down; held while the disk is, or bind is allowed. */
uint64_t helper_caps_mount(void);
int helper_override_begin(uint64_t caps, kiwi_err *err);
void helper_override_end(void);
/* euid 0 around the few steps that work in root's directories
 * (/run/kiwi): ruid and suid are 0 already, so no capability is needed
 * and none is gained. */
int helper_root_begin(kiwi_err *err);
void helper_root_end(void);

/* ---- sandbox.c: the caller's sandbox, from a pidfd ---- */

struct helper_sandbox {
	int pidfd;
	pid_t pid;
	int procfd;        /* /proc/<pid>, known to be that process */
	dev_t userns_dev;
	ino_t userns_ino;
};

#define HELPER_SANDBOX_INIT { .pidfd = -1, .procfd = -1 }

/* Checks that pidfd names a live process of the caller in a user
 * namespace the caller owns, a direct child of ours, and opens /proc/<pid>
 * race-free (the pidfd proves the pid was not reused). Takes pidfd. */
int helper_sandbox_open(int pidfd, uid_t caller, struct helper_sandbox *sb, kiwi_err *err);
/* Its process not yet reaped (so its pid is still its own)? */
bool helper_sandbox_alive(const struct helper_sandbox *sb);
/* The same process as sb (pid and user namespace)? */
bool helper_sandbox_same(const struct helper_sandbox *a, const struct helper_sandbox *b);
/* Its network namespace, checked to be owned by its user namespace. */
int helper_sandbox_netns(const struct helper_sandbox *sb, kiwi_err *err);
/* Its user namespace, checked to be the one it was bound with, the
 * process still alive. */
int helper_sandbox_userns(const struct helper_sandbox *sb, kiwi_err *err);
void helper_sandbox_close(struct helper_sandbox *sb);

/* ---- idmap.c ---- */

struct helper_idmap_allowed {
	uid_t uid;
	gid_t gid;
	struct kiwi_id_range uids[2 * KIWI_HELPER_MAX_RANGES];
	size_t n_uids;
	struct kiwi_id_range gids[2 * KIWI_HELPER_MAX_RANGES];
	size_t n_gids;
};

int helper_idmap(const struct helper_sandbox *sb, const struct kiwi_helper_request *req,
		 const struct helper_idmap_allowed *allowed, kiwi_err *err);

/* ---- quota.c ---- */

/* Takes one of max slots named kind for uid (a flock'd file under
 * /run/kiwi/helper, released when the process ends). Returns the lock fd. */
int helper_quota_take(const char *kind, uid_t uid, unsigned max, kiwi_err *err);

#endif
