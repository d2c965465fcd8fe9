/* SPDX-License-Identifier: Apache-2.0 */
/* What a setuid process inherits from its caller, set to values of our
 * own choosing while we are still root (kiwi-helper(8), INHERITED STATE).
 * The caller chose all of it, and some of it can end or starve us before
 * our teardown runs: an RLIMIT_CPU of one second kills with SIGXCPU, an
 * RLIMIT_FSIZE of zero with SIGXFSZ, a SCHED_IDLE policy, nice 19, an
 * idle I/O class, a CPU affinity or a util clamp starve us, an
 * oom_score_adj of 1000 makes us the OOM killer's first pick, a SIGCHLD
 * left ignored makes our own children unwaitable. What cannot be undone
 * (a seccomp filter, PR_SET_MDWE, a cut bounding set) is either harmless
 * to us or needs no_new_privs, which keeps the exec from making us root
 * at all: see kiwi-helper(8). */
#include "helper_int.h"
#include "kiwi/cgroup.h"
#include "kiwi/cleanup.h"
#include "kiwi/sched_attr.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#define STEP "setup"
#define MiB (1024ull * 1024)

/* Ours, whatever the caller's: v, or where a hard limit cannot be raised
 * (below), at least min. RLIMIT_NPROC is not checked for a real uid of
 * root, which ours is after the drop; before it we fork nothing. */
#define INF RLIM_INFINITY
#define L(res) res, #res
static const struct {
	int res;
	const char *name;
	rlim_t v, min;
} limits[] = {
	{ L(RLIMIT_CPU), INF, INF },   /* our own budget is per session (serve.c) */
	{ L(RLIMIT_FSIZE), INF, INF },
	{ L(RLIMIT_DATA), INF, 256 * MiB },
	{ L(RLIMIT_STACK), 8 * MiB, 1 * MiB },
	{ L(RLIMIT_CORE), 0, 0 },
	{ L(RLIMIT_RSS), INF, 0 },
	{ L(RLIMIT_NPROC), INF, 0 },
	{ L(RLIMIT_NOFILE), 1024, 64 },
	{ L(RLIMIT_MEMLOCK), 8 * MiB, 0 },
	{ L(RLIMIT_AS), INF, 1024 * MiB },
	{ L(RLIMIT_LOCKS), INF, 0 },
	{ L(RLIMIT_SIGPENDING), 1024, 0 },
	{ L(RLIMIT_MSGQUEUE), 0, 0 },
	{ L(RLIMIT_NICE), 0, 0 },
	{ L(RLIMIT_RTPRIO), 0, 0 },
	{ L(RLIMIT_RTTIME), INF, 0 },   /* counts only under a real-time policy */
};
#undef L

/* Raising a hard limit needs CAP_SYS_RESOURCE, which a setuid exec
 * gives only when it is in the bounding set (some hosts' containers cut
 * it): then the caller's hard limit serves when it is at least min, and
 * one below refuses the session before it makes anything (at a hard
 * RLIMIT_CPU the kernel sends SIGKILL, which nothing can catch). */
static int below_min(const char *name, rlim_t have, rlim_t min, kiwi_err *err)
{
	char need[48];
	if (min == INF)
		snprintf(need, sizeof(need), "unlimited");
	else
		snprintf(need, sizeof(need), "at least %llu", (unsigned long long)min);
	bool cut = prctl(PR_CAPBSET_READ, CAP_SYS_RESOURCE, 0, 0, 0) == 0;
	return kiwi_error(err, EPERM, STEP, "your hard %s is %llu and the helper needs it %s: %s; raise the hard "
			  "limit before starting kiwi-run", name, (unsigned long long)have, need,
			  cut ? "it cannot raise it, CAP_SYS_RESOURCE is not in this host's capability bounding set"
			      : "the kernel refused to raise it");
}

static int set_limit(int res, const char *name, rlim_t v, rlim_t min, kiwi_err *err)
{
	struct rlimit rl = { v, v }, cur;
	if (setrlimit(res, &rl) == 0)
		return 0;
	if (errno != EPERM || getrlimit(res, &cur) < 0)
		return kiwi_error(err, errno, STEP, "cannot set %s", name);
	if (cur.rlim_max != INF && cur.rlim_max < min)
		return below_min(name, cur.rlim_max, min, err);
	rl = (struct rlimit){ cur.rlim_max, cur.rlim_max };
	if (setrlimit(res, &rl) < 0)
		return kiwi_error(err, errno, STEP, "cannot set %s", name);
	return 0;
}

static int reset_limits(kiwi_err *err)
{
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(limits); i++)
		if (set_limit(limits[i].res, limits[i].name, limits[i].v, limits[i].min, err) < 0)
			return -1;
	return 0;
}

static int reset_signals(kiwi_err *err)
{
	static const int ignored[] = { SIGINT, SIGQUIT, SIGHUP, SIGTSTP, SIGTTIN, SIGTTOU, SIGPIPE, SIGXCPU, SIGXFSZ };
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);   /* fails only for numbers libc keeps for itself */
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(ignored); i++)
		signal(ignored[i], SIG_IGN);
	sigset_t none;
	sigemptyset(&none);
	if (sigprocmask(SIG_SETMASK, &none, NULL) < 0)
		return kiwi_error(err, errno, STEP, "cannot reset the signal mask");
	return 0;
}


/* SCHED_OTHER at nice 0, util clamps back to the defaults (-1 resets
 * them), the I/O class from the nice value, every CPU. */
static int reset_scheduling(kiwi_err *err)
{
	struct kiwi_sched_attr a = { .size = sizeof(a), .policy = SCHED_OTHER, .flags = KIWI_SCHED_FLAG_UTIL_CLAMP,
				       .util_min = UINT32_MAX, .util_max = UINT32_MAX };
	/* kernels without uclamp refuse the flags: then without them */
	if (syscall(SYS_sched_setattr, 0, &a, 0) < 0) {
		struct sched_param p = { 0 };
		if (sched_setscheduler(0, SCHED_OTHER, &p) < 0)
			return kiwi_error(err, errno, STEP, "cannot reset the scheduling policy");
	}
	if (setpriority(PRIO_PROCESS, 0, 0) < 0)
		return kiwi_error(err, errno, STEP, "cannot reset the nice value");
	/* IOPRIO_WHO_PROCESS, IOPRIO_CLASS_NONE: follow the nice value */
	if (syscall(SYS_ioprio_set, 1, 0, 0) < 0)
		return kiwi_error(err, errno, STEP, "cannot reset the I/O priority");
	cpu_set_t all;
	CPU_ZERO(&all);
	for (int c = 0; c < CPU_SETSIZE; c++)
		CPU_SET(c, &all);
	/* the kernel keeps the CPUs that exist (and our cpuset allows) */
	if (sched_setaffinity(0, sizeof(all), &all) < 0)
		return kiwi_error(err, errno, STEP, "cannot reset the CPU affinity");
	return 0;
}

static int write_self(const char *name, const char *text, kiwi_err *err)
{
	char path[64] = "/proc/self/";
	strcat(path, name);
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, text, strlen(text)) < 0)
		return kiwi_error(err, errno, STEP, "cannot write `%s`", path);
	return 0;
}

int helper_reset_inherited(kiwi_err *err)
{
	if (reset_limits(err) < 0 || reset_signals(err) < 0 || reset_scheduling(err) < 0)
		return -1;
	/* Out of the caller's session and process group: no terminal, no
	 * job control, and a scheduler autogroup of our own (the caller
	 * may have niced its own). Fails only for a process group leader. */
	setsid();
	/* Best effort: below the caller's own value needs CAP_SYS_RESOURCE,
	 * and systemd gives every user session 100. */
	write_self("oom_score_adj", "0", NULL);
	/* The kernel clears the dangerous personality flags for a setuid
	 * exec; the rest (UNAME26, ADDR_LIMIT_3GB...) go too. */
	if (personality(PER_LINUX) < 0)
		return kiwi_error(err, errno, STEP, "cannot reset the personality");
	if (prctl(PR_SET_TIMERSLACK, 0, 0, 0, 0) < 0 || prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0) < 0 ||
	    prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) < 0 || prctl(PR_SET_THP_DISABLE, 0, 0, 0, 0) < 0)
		return kiwi_error(err, errno, STEP, "cannot reset the process's prctl settings");
	/* The caller's umask would decide the modes of what we create in
	 * /run/kiwi (a 077 one: name files the sandbox cannot read). */
	umask(022);
	if (chdir("/") < 0)
		return kiwi_error(err, errno, STEP, "cannot change to /");
	return 0;
}

/* The caller's cgroup is the caller's to freeze (cgroup.freeze) or
 * throttle (cpu.max, memory.high, pids.max) wherever a subtree was
 * delegated to it, and cgroup v2 lets the owner of a subtree move any
 * process between its cgroups, ours too. So we move to a cgroup of our
 * own at the hierarchy's root, beside every delegated subtree: root's,
 * with no limits, and moving back out of it needs the root cgroup's
 * cgroup.procs. Named outside kiwi-* so no gc ever takes it for a
 * sandbox's. Our keepers are forked later and start in it; the
 * sandbox is the caller's child and never enters it. */
static bool find_hierarchy(char *out, size_t len)
{
	static const char *const init[] = { "/proc/1/root/sys/fs/cgroup", "/proc/1/root/sys/fs/cgroup/unified" };
	if (kiwi_cgroup_mount(out, len, NULL) == 0)
		return true;
	/* Our mount namespace is the caller's and may lack it (ip netns
	 * exec mounts a fresh /sys), while the caller still reaches init's
	 * through /proc/<pid>/root of a process of its own outside. */
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(init); i++) {
		struct statfs sf;
		if (statfs(init[i], &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC) {
			snprintf(out, len, "%s", init[i]);
			return true;
		}
	}
	return false;
}

int helper_leave_callers_cgroup(kiwi_err *err)
{
	char mount[PATH_MAX];
	/* no cgroup2 anywhere: no freezer for the caller either */
	if (!find_hierarchy(mount, sizeof(mount)))
		return 0;
	_cleanup_close_ int root = open(mount, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return kiwi_error(err, errno, STEP, "cannot open the cgroup hierarchy `%s`", mount);
	if (mkdirat(root, HELPER_CGROUP, 0755) < 0 && errno != EEXIST) {
		/* read-only for us is read-only for the caller too */
		if (errno == EROFS)
			return 0;
		return kiwi_error(err, errno, STEP, "cannot make the helper's cgroup `%s/%s`", mount, HELPER_CGROUP);
	}
	_cleanup_close_ int procs = openat(root, HELPER_CGROUP "/cgroup.procs", O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (procs < 0 && errno == EROFS)
		return 0;   /* made before the hierarchy went read-only: as above */
	struct stat dir, file;
	if (procs < 0 || fstat(procs, &file) < 0 || fstatat(root, HELPER_CGROUP, &dir, AT_SYMLINK_NOFOLLOW) < 0)
		return kiwi_error(err, errno, STEP, "cannot open `%s/%s/cgroup.procs`", mount, HELPER_CGROUP);
	if (dir.st_uid != 0 || file.st_uid != 0 || (dir.st_mode & 022) || (file.st_mode & 022))
		return kiwi_error(err, EPERM, STEP, "the helper's cgroup `%s/%s` is not root's alone: refused",
				  mount, HELPER_CGROUP);
	if (write(procs, "0", 1) != 1)
		return kiwi_error(err, errno, STEP, "cannot move out of your cgroup into `%s/%s`", mount, HELPER_CGROUP);
	return 0;
}
