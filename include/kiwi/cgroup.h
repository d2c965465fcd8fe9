/* SPDX-License-Identifier: Apache-2.0 */
/* One cgroup v2 cgroup per sandbox: created with its limits before clone3
 * (the child starts inside it through CLONE_INTO_CGROUP), read for the
 * verdict after the command ends, removed on every path. Only the unified
 * hierarchy is ever touched: a v1 or hybrid host gets one clear error. */
#ifndef KIWI_CGROUP_H
#define KIWI_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "kiwi/err.h"

/* "max" (no ceiling, but the controller still accounts) in any int64 field. */
#define KIWI_CGROUP_MAX INT64_MAX
#define KIWI_CGROUP_CPU_PERIOD_US 100000

struct kiwi_cgroup_limits {
	int64_t memory_max;        /* bytes; -1 = not set */
	int64_t memory_swap_max;   /* bytes; -1 = not set (then 0 when memory_max is set) */
	int64_t pids_max;          /* -1 = not set */
	int64_t cpu_quota_us;      /* -1 = not set; with cpu_period_us, from --cpus 1.5 -> 150000/100000 */
	int64_t cpu_period_us;
	int cpu_weight;            /* 0 = not set; 1..10000 (cpu.weight) */
	int io_weight;             /* 0 = not set; 1..10000 */
	const char *io_max;        /* NULL or "MAJ:MIN rbps=... wbps=..." lines, passed through after validation */
	/* NULL, or FILE, VALUE pairs then NULL (OCI linux.resources.unified):
	 * written as given to the cgroup's own interface files, last. */
	const char *const *unified;
};

/* Every field "not set". */
#define KIWI_CGROUP_LIMITS_INIT                                                            \
	{ .memory_max = -1, .memory_swap_max = -1, .pids_max = -1, .cpu_quota_us = -1,     \
	  .cpu_period_us = -1, .io_weight = 0, .io_max = NULL }

/* Parsers for the CLI and the policy file (sizes: kiwi_parse_size in
 * kiwi/units.h, whose "max" is KIWI_CGROUP_MAX too). CPUs: "1.5" gives
 * 150000/100000, "max" gives KIWI_CGROUP_MAX. Each fails (step "parse")
 * with a message naming the value; the caller wraps it with the flag. */
int kiwi_parse_cpus(const char *s, int64_t *quota_us, int64_t *period_us, kiwi_err *err);
/* A pids.max value: a positive count or "max". */
int kiwi_parse_pids(const char *s, int64_t *out, kiwi_err *err);
/* Checks io_max lines ("MAJ:MIN key=value..." with rbps wbps riops wiops). */
int kiwi_cgroup_check_io_max(const char *lines, kiwi_err *err);
bool kiwi_cgroup_limits_any(const struct kiwi_cgroup_limits *l);

/* The controllers the limits need, as KIWI_CG_* bits, and their names. */
enum {
	KIWI_CG_CPU = 1 << 0,
	KIWI_CG_IO = 1 << 1,
	KIWI_CG_MEMORY = 1 << 2,
	KIWI_CG_PIDS = 1 << 3,
};
unsigned kiwi_cgroup_needed(const struct kiwi_cgroup_limits *l);
const char *kiwi_cgroup_controller_name(unsigned bit);
/* Of need, the controllers the unified hierarchy's root does not offer
 * (on a hybrid host: those bound to cgroup v1); all of need without cgroup2. */
unsigned kiwi_cgroup_unavailable(unsigned need);

struct kiwi_cgroup;

/* Creates <parent>/kiwi-<random> with the limits written. parent is a path
 * in the unified hierarchy ("/kiwi.slice", "jobs/a") or an absolute path
 * under its mount (any other /sys/... path is refused); it is created when
 * missing. NULL: as root
 * <mount>/kiwi.slice, rootless a "kiwi" cgroup beside the caller's own
 * (inside the subtree delegated to it). Controllers are enabled only in
 * cgroups kiwi-run creates and in the first existing one it attaches to.
 * The object holds an O_DIRECTORY|O_CLOEXEC fd of the new cgroup, for
 * CLONE_INTO_CGROUP, with flock(LOCK_SH) on it for the object's lifetime:
 * the mark kiwi_cgroup_gc() respects. */
int kiwi_cgroup_create(const char *parent, const struct kiwi_cgroup_limits *l,
		       struct kiwi_cgroup **out, kiwi_err *err);
/* An OCI container's cgroup (linux.cgroupsPath, a path as for parent
 * above): exactly path, made with its parents when missing (*made says
 * whether the leaf was; made_top, PATH_MAX bytes, gets the absolute path
 * of the highest cgroup made, "" when none), with the controllers the
 * limits need enabled in every cgroup on the way down, as runc and crun
 * do, and the limits written. Never locked nor named kiwi-*, so gc
 * leaves it alone: it outlives kiwi-run. */
int kiwi_cgroup_open_path(const char *path, const struct kiwi_cgroup_limits *l, bool *made, char *made_top,
			  struct kiwi_cgroup **out, kiwi_err *err);
/* rmdir from (absolute) and each parent up to top included, while they
 * are empty; nothing unless top is from or one of its parents, on cgroup2. */
void kiwi_cgroup_remove_parents(const char *from, const char *top);
/* A cgroup kiwi-helper(8) made and delegated to us, by its name in the
 * unified hierarchy ("/kiwi.slice/kiwi-..."): opened and locked like our
 * own. It is the helper's: kiwi_cgroup_destroy() kills and waits for what
 * is in it and removes what the sandbox nested below it, but leaves the
 * cgroup itself to the helper. Not for CLONE_INTO_CGROUP (see
 * kiwi_cgroup_adopted()): the helper moves the sandbox in. */
int kiwi_cgroup_adopt(const char *name, struct kiwi_cgroup **out, kiwi_err *err);
bool kiwi_cgroup_adopted(const struct kiwi_cgroup *cg);
/* Sessions (kiwi-run-session(1)): <cg>/<leaf> made; an O_DIRECTORY fd of
 * it, for CLONE_INTO_CGROUP. */
int kiwi_cgroup_open_leaf(struct kiwi_cgroup *cg, const char *leaf, kiwi_err *err);
/* cg's controllers enabled for its children, cg no OOM group of its own:
 * while no process is in cg itself (cgroup v2 hands controllers down only
 * from cgroups without processes of their own). */
int kiwi_cgroup_enable_children(struct kiwi_cgroup *cg, kiwi_err *err);
/* <name>/<leaf> (name in the unified hierarchy) made, opened, not locked,
 * one OOM group (memory.oom.group, where memory is on): kiwi_cgroup_destroy()
 * kills what is in it and removes it. */
int kiwi_cgroup_open_child(const char *name, const char *leaf, struct kiwi_cgroup **out, kiwi_err *err);
/* A child made by someone else (a session's supervisor): opened, not made
 * and not written to. */
int kiwi_cgroup_open_made(const char *name, const char *leaf, struct kiwi_cgroup **out, kiwi_err *err);
/* Moves pid into cg (cgroup.procs). */
int kiwi_cgroup_enter(struct kiwi_cgroup *cg, pid_t pid, kiwi_err *err);
/* Delegation of cgroup.procs alone (a session's pid 1 starts each exec's
 * leader in the exec's cgroup, kiwi/keeper.h): the file is given to uid and gid,
 * never the limit files nor cgroup.subtree_control. A writer of
 * cgroup.procs moves a process only between cgroups whose common
 * ancestor's cgroup.procs it may write too, so what is given below one
 * cgroup keeps its moves below it. */
int kiwi_cgroup_give_procs(struct kiwi_cgroup *cg, uid_t uid, gid_t gid, kiwi_err *err);
/* Gives cg's cgroup.procs the owner and group of its parent's, when that
 * owner is not us; *owner gets that owner. */
int kiwi_cgroup_inherit_procs_owner(struct kiwi_cgroup *cg, uid_t *owner, kiwi_err *err);
/* Where the unified hierarchy is mounted (/sys/fs/cgroup when it is
 * cgroup2, else the first cgroup2 mount). ENOENT when nowhere. */
int kiwi_cgroup_mount(char *out, size_t len, kiwi_err *err);
/* The one reader of /proc/self/mountinfo for cgroups: the first cgroup2
 * mount point (octal escapes undone; "" when none) and, when v1 is not
 * NULL, whether any cgroup v1 hierarchy is mounted. */
int kiwi_cgroup_hierarchies(char *v2, size_t len, bool *v1, kiwi_err *err);
/* The one reader of /proc/PID/cgroup (pid 0: this process): the path of
 * its "0::" line, relative to the reader's cgroup namespace. ENOENT when
 * it has none (a cgroup v1 host). */
int kiwi_cgroup_of(pid_t pid, char *out, size_t len, kiwi_err *err);
/* Frees the object and leaves the cgroup as it is. */
void kiwi_cgroup_forget(struct kiwi_cgroup *cg);
/* Kills what is in the cgroup at path (absolute), waits, removes it and
 * any below; a missing one is fine. */
int kiwi_cgroup_remove_path(const char *path, kiwi_err *err);
int kiwi_cgroup_fd(const struct kiwi_cgroup *cg);
const char *kiwi_cgroup_path(const struct kiwi_cgroup *cg);   /* absolute path of the cgroup dir */
/* The path inside the unified hierarchy ("/kiwi.slice/kiwi-..."), for the verdict. */
const char *kiwi_cgroup_name(const struct kiwi_cgroup *cg);
int kiwi_cgroup_kill(struct kiwi_cgroup *cg, kiwi_err *err);   /* cgroup.kill=1 */
/* cgroup.freeze: with frozen, returns once every task of the cgroup has
 * stopped (or fails, thawed again, when they do not within 2 s). */
int kiwi_cgroup_freeze(struct kiwi_cgroup *cg, bool frozen, kiwi_err *err);

struct kiwi_cgroup_stats {
	bool oom_killed; uint64_t oom_kills;          /* memory.events oom_kill (and oom_group_kill) */
	bool peak_known; uint64_t peak_memory_kib;    /* memory.peak; false on kernels without it */
	bool pids_limit_hit;                           /* pids.events max > 0 */
	/* Whether memory.events and pids.events were there: a controller
	 * that is off (a hybrid host's v1 ones) cannot tell. */
	bool memory_known, pids_known;
	uint64_t cpu_usage_us, cpu_user_us, cpu_system_us;  /* cpu.stat */
};
/* Reads what the controllers counted; files of controllers not enabled
 * leave their fields zero. */
int kiwi_cgroup_read_stats(struct kiwi_cgroup *cg, struct kiwi_cgroup_stats *st, kiwi_err *err);

/* Kills what is left, waits (bounded) until nothing is left, removes the
 * cgroup and any the sandbox made below it, frees. NULL-safe; frees even
 * when it fails. */
int kiwi_cgroup_destroy(struct kiwi_cgroup *cg, kiwi_err *err);

/* Under parent (NULL = the default above), removes every kiwi-* cgroup
 * whose owner is gone (no flock held on it), killing its processes first.
 * With the default parent, a system without cgroup2 has nothing to collect. */
int kiwi_cgroup_gc(const char *parent, unsigned *removed, kiwi_err *err);

/* ---- helpers, exposed for the unit tests ---- */
/* Value of "key N" in a flat-keyed file's text (memory.events, cpu.stat). */
bool kiwi_cgroup_keyed(const char *text, const char *key, uint64_t *out);
/* One line of /proc/self/mountinfo: true when it is a cgroup2 mount, its
 * mount point (escapes undone) in v2; sets *v1 (when not NULL) on a v1 one. */
bool kiwi_cgroup_mountinfo_line(const char *line, char *v2, size_t len, bool *v1);
/* /proc/PID/cgroup's text: true when it has a "0::" line, its path in out. */
bool kiwi_cgroup_v2_line(const char *text, char *out, size_t len);
/* Formats a limit for its file: "max" or the number. */
void kiwi_cgroup_format_limit(int64_t v, char *buf, size_t len);

static inline void kiwi_cgroup_destroyp(struct kiwi_cgroup **cg)
{
	kiwi_cgroup_destroy(*cg, NULL);
}
#define _cleanup_cgroup_ __attribute__((cleanup(kiwi_cgroup_destroyp)))

#endif
