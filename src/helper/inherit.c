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
#include "kiwi/cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define STEP "setup"
#define MiB (1024ull * 1024)

/* Ours, whatever the caller's: v, or where a hard limit cannot be raised
 * (below), at least min. RLIMIT_NPROC is not checked for a real uid of
 * root, which ours is after the drop; before it we fork nothing. */
#define INF RLIM_INFINITY
static const struct {
	int res;
	rlim_t v, min;
} limits[] = {
	{ RLIMIT_CPU, INF, INF },   /* our own budget is per session (serve.c) */
	{ RLIMIT_FSIZE, INF, INF },
	{ RLIMIT_DATA, INF, 256 * MiB },
	{ RLIMIT_STACK, 8 * MiB, 1 * MiB },
	{ RLIMIT_CORE, 0, 0 },
	{ RLIMIT_RSS, INF, 0 },
	{ RLIMIT_NPROC, INF, 0 },
	{ RLIMIT_NOFILE, 1024, 64 },
	{ RLIMIT_MEMLOCK, 8 * MiB, 0 },
	{ RLIMIT_AS, INF, 1024 * MiB },
	{ RLIMIT_LOCKS, INF, 0 },
	{ RLIMIT_SIGPENDING, 1024, 0 },
	{ RLIMIT_MSGQUEUE, 0, 0 },
	{ RLIMIT_NICE, 0, 0 },
	{ RLIMIT_RTPRIO, 0, 0 },
	{ RLIMIT_RTTIME, INF, 0 },   /* counts only under a real-time policy */
};

/* Without CAP_SYS_RESOURCE (some hosts cut it from the bounding set) a
 * hard limit cannot be raised: then the caller's hard limit serves when
 * it is at least min, and one below refuses the session before it makes
 * anything (at a hard RLIMIT_CPU the kernel sends SIGKILL, which nothing
 * can catch). */
static int set_limit(int res, rlim_t v, rlim_t min, kiwi_err *err)
{
	struct rlimit rl = { v, v }, cur;
	if (setrlimit(res, &rl) == 0)
		return 0;
	if (errno != EPERM || getrlimit(res, &cur) < 0)
		return kiwi_error(err, errno, STEP, "cannot set resource limit %d", res);
	if (cur.rlim_max != INF && cur.rlim_max < min)
		return kiwi_error(err, EPERM, STEP, "your hard resource limit %d (%llu) is below what the helper needs "
				  "and it cannot raise it here (no CAP_SYS_RESOURCE): refused", res,
				  (unsigned long long)cur.rlim_max);
	rl = (struct rlimit){ cur.rlim_max, cur.rlim_max };
	if (setrlimit(res, &rl) < 0)
		return kiwi_error(err, errno, STEP, "cannot set resource limit %d", res);
	return 0;
}

static int reset_limits(kiwi_err *err)
{
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(limits); i++)
		if (set_limit(limits[i].res, limits[i].v, limits[i].min, err) < 0)
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

/* struct sched_attr (linux/sched/types.h), which glibc does not wrap. */
struct helper_sched_attr {
	uint32_t size, policy;
	uint64_t flags;
	int32_t nice;
	uint32_t priority;
	uint64_t runtime, deadline, period;
	uint32_t util_min, util_max;
};
#define SCHED_FLAG_UTIL_CLAMP (0x20 | 0x40)   /* _MIN | _MAX */

/* SCHED_OTHER at nice 0, util clamps back to the defaults (-1 resets
 * them), the I/O class from the nice value, every CPU. */
static int reset_scheduling(kiwi_err *err)
{
	struct helper_sched_attr a = { .size = sizeof(a), .policy = SCHED_OTHER, .flags = SCHED_FLAG_UTIL_CLAMP,
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
