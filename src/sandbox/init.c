/* SPDX-License-Identifier: Apache-2.0 */
#include "init.h"
#include "kiwi/sync.h"
#include "kiwi/caps.h"
#include <linux/capability.h>
#include "kiwi/debug.h"
#include "kiwi/fslayer.h"
#include "kiwi/keeper.h"
#include "kiwi/landlock.h"
#include "kiwi/cleanup.h"
#include "kiwi/mount.h"
#include "kiwi/net.h"
#include "kiwi/net_audit.h"
#include "kiwi/pty.h"
#include "kiwi/seccomp.h"
#include "kiwi/slice.h"
#include "kiwi/spawn.h"
#include "kiwi/userns.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static bool in_list(int fd, const int *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (list[i] == fd)
			return true;
	return false;
}

/* Closes every fd above 2 except the preserved ones (which lose
 * close-on-exec, to reach the command) and the kept ones (left as they
 * are). Allocation-free: it runs between fork and exec too. */
static int close_fds_except(const int *preserve, size_t n_preserve, const int *keep, size_t n_keep,
			    kiwi_err *err)
{
	unsigned lo = 3;
	for (;;) {
		unsigned next = ~0U;  /* the smallest fd to spare that is >= lo */
		for (size_t i = 0; i < n_preserve + n_keep; i++) {
			int fd = i < n_preserve ? preserve[i] : keep[i - n_preserve];
			if (fd >= (int)lo && (unsigned)fd < next)
				next = (unsigned)fd;
		}
		if (next > lo && syscall(SYS_close_range, lo, next - 1, 0) < 0)
			return kiwi_error(err, errno, "fds", "cannot close inherited file descriptors");
		if (next == ~0U)
			break;
		lo = next + 1;
	}
	for (size_t i = 0; i < n_preserve; i++)
		if (!in_list(preserve[i], keep, n_keep) && fcntl(preserve[i], F_SETFD, 0) < 0)
			return kiwi_error(err, errno, "fds", "cannot pass fd %d", preserve[i]);
	return 0;
}

/* Makes from onto fd to (0, 1 or 2) for the command. */
static int become_stdio(int from, int to, kiwi_err *err)
{
	if (from < 0 || from == to)
		return 0;
	if (dup2(from, to) < 0)
		return kiwi_error(err, errno, "fds", "cannot set up fd %d", to);
	return 0;
}

/* What the command's process tells pid 1 through the close-on-exec pipe:
 * the moment it execs, then, only if that failed, why. One write each, far
 * below PIPE_BUF, so neither is ever split. */
struct start_report {
	uint32_t failed;
	int64_t mono_ns;
	kiwi_err err;
};

/* The command's process, first thing after the fork: exec keeps ignored
 * signals ignored, and the caller's (nohup, a shell's background job) and
 * our own SIGPIPE must not reach the command; and a session of its own:
 * no controlling terminal to push input into. */
void kiwi_init_command_reset(void)
{
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	setsid();
	kiwi_slice_default();
}

/* Landlock, then the seccomp filter: from there on the filter judges
 * every call, execve included. */
int kiwi_init_command_restrict(const struct kiwi_sandbox_config *cfg, kiwi_err *err)
{
	if (cfg->landlock) {
		struct kiwi_landlock_rules rules = {
			.root_writable = cfg->rw_root, .binds = cfg->binds, .n_binds = cfg->n_binds,
		};
		if (kiwi_landlock_restrict(&rules, err) < 0)
			return -1;
	}
	if (cfg->seccomp && kiwi_seccomp_load(cfg->seccomp, err) < 0)
		return -1;
	return 0;
}

/* The rest, already without privileges: its working directory and program
 * are looked up with only the rights the command itself will have. The
 * restrictions come last unless they came first (restricted). */
_Noreturn void kiwi_init_command_exec(const struct kiwi_init_args *args, int errfd, bool restricted)
{
	const struct kiwi_sandbox_config *cfg = args->cfg;
	kiwi_err err = { 0 };
	/* No capability to drop here: pid 1 dropped them all before the fork,
	 * and empty sets, locked securebits and no_new_privs are inherited. */
	if (become_stdio(args->stdin_fd, 0, &err) < 0 || become_stdio(args->stdout_fd, 1, &err) < 0 ||
	    become_stdio(args->stderr_fd, 2, &err) < 0 ||
	    close_fds_except(cfg->preserve_fds, cfg->n_preserve_fds, &errfd, 1, &err) < 0)
		goto fail;
	/* --tty: the session's controlling terminal is the sandbox's own pty
	 * (fd 0 now), so that job control and ^C work inside. */
	if (cfg->tty && ioctl(0, TIOCSCTTY, 0) < 0) {
		kiwi_error(&err, errno, "tty", "cannot make the pseudo-terminal the controlling terminal");
		goto fail;
	}
	if (chdir(cfg->cwd) < 0) {
		kiwi_error(&err, errno, "cwd", "cannot enter working directory `%s`", cfg->cwd);
		goto fail;
	}
	if (!restricted && kiwi_init_command_restrict(cfg, &err) < 0)
		goto fail;
	environ = (char **)cfg->envp;
	/* The command's clock starts here, not when pid 1 next runs: wall_ms
	 * may include the exec itself, but never misses a moment of it. */
	struct start_report starting = { .mono_ns = kiwi_clock_ns(CLOCK_MONOTONIC) };
	(void)!write(errfd, &starting, sizeof(starting));
	execvp(cfg->argv[0], cfg->argv);
	kiwi_error(&err, errno, "exec", "cannot execute `%s`", cfg->argv[0]);
fail:
	kiwi_init_command_failed(errfd, &err);
}

_Noreturn void kiwi_init_command_failed(int errfd, const kiwi_err *err)
{
	struct start_report failed = { .failed = 1, .err = *err };
	(void)!write(errfd, &failed, sizeof(failed));
	_exit(127);
}

/* The arg_start, arg_end, env_start, env_end of /proc/self/stat (fields
 * 48 to 51), counted from the ')' that ends field 2, since the command
 * name may hold spaces. */
static bool memory_areas(unsigned long area[4])
{
	char stat[1024];
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, stat, sizeof(stat) - 1);
	close(fd);
	if (n <= 0)
		return false;
	stat[n] = '\0';
	char *p = strrchr(stat, ')');
	for (int field = 2; p && field < 48; field++)
		p = strchr(p + 1, ' ');
	return p && sscanf(p, " %lu %lu %lu %lu", &area[0], &area[1], &area[2], &area[3]) == 4;
}

/* Blanks the memory the kernel placed our arguments and environment in,
 * which /proc/1/cmdline and /proc/1/environ are read from: pid 1 is a copy
 * of kiwi-run, and they would show the host paths of the rootfs and of
 * bind sources, --env values and the caller's whole environment,
 * credentials included (environ is also closed by non-dumpable, but kept
 * out of reach all the same). Done first thing, before anything is forked:
 * nothing we use points into either (kiwi-run copied its arguments to the
 * heap, and the command's environment was built there). */
static void hide_inherited_memory(void)
{
	static const char title[] = "kiwi-init";
	unsigned long area[4];
	if (!memory_areas(area))
		return;
	if (area[3] > area[2] && area[3] - area[2] <= (1UL << 21))
		memset((void *)area[2], 0, area[3] - area[2]);
	if (area[1] <= area[0] || area[1] - area[0] > (1UL << 21))
		return;
	size_t len = area[1] - area[0];
	memset((void *)area[0], 0, len);
	memcpy((void *)area[0], title, len > sizeof(title) ? sizeof(title) : len - 1);
}

pid_t kiwi_init_fork_command(int *report, kiwi_err *err)
{
	int pipefd[2];
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return kiwi_error(err, errno, "exec", "cannot create a pipe");
	pid_t pid = fork();
	if (pid < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		return kiwi_error(err, errno, "exec", "cannot fork the command");
	}
	close(pipefd[pid == 0 ? 0 : 1]);
	*report = pipefd[pid == 0 ? 1 : 0];
	return pid;
}

pid_t kiwi_init_command_started(pid_t pid, int report, int64_t *exec_ns, kiwi_err *err)
{
	/* Reports until EOF, which comes with a successful exec; the last one
	 * says how it went. */
	struct start_report reports[2], *last = NULL;
	size_t got = 0;
	for (;;) {
		ssize_t n = read(report, (char *)reports + got, sizeof(reports) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
		if (got == sizeof(reports))
			break;
	}
	close(report);
	if (got >= sizeof(reports[0]) && got % sizeof(reports[0]) == 0)
		last = &reports[got / sizeof(reports[0]) - 1];
	if (last && !last->failed) {
		*exec_ns = last->mono_ns;
		return pid;
	}
	if (last)
		*err = last->err;
	else
		kiwi_error(err, EPROTO, "exec", "lost the command's start-up report");
	return -1;
}

/* Forks the command and waits until its exec succeeded or failed: a
 * close-on-exec pipe stays silent on success and carries the error
 * otherwise. */
static pid_t start_command(const struct kiwi_init_args *args, int64_t *exec_ns, kiwi_err *err)
{
	int report;
	pid_t pid = kiwi_init_fork_command(&report, err);
	if (pid == 0) {
		kiwi_init_command_reset();
		kiwi_init_command_exec(args, report, false);
	}
	return pid < 0 ? -1 : kiwi_init_command_started(pid, report, exec_ns, err);
}

pid_t kiwi_init_start_command(const struct kiwi_init_args *args, int64_t *exec_ns, kiwi_err *err)
{
	return start_command(args, exec_ns, err);
}

/* The layer's peak use and whether it ever filled, sampled by pid 1 while
 * the command runs and once more at its end: the one sign of the bound
 * reached that outlives the processes which met ENOSPC. */
struct disk_watch {
	int layer;
	uint64_t peak_kib;
	bool full;
	bool in_place;     /* layered binds were bound in place (kiwi_fslayer_holds_xattrs) */
};

/* Often enough to catch a fill that a command then cleans up, rarely
 * enough to cost nothing measurable. */
#define DISK_SAMPLE_MS 50

static void sample_disk(struct disk_watch *d)
{
	uint64_t used;
	bool full;
	if (d->layer < 0 || kiwi_fslayer_usage(d->layer, &used, &full) < 0)
		return;
	if (used > d->peak_kib)
		d->peak_kib = used;
	d->full |= full;
}

static void report_exit(int sock, int status, struct disk_watch *d)
{
	struct rusage ru;
	getrusage(RUSAGE_CHILDREN, &ru);
	sample_disk(d);
	struct kiwi_sync_msg m = {
		.type = KIWI_SYNC_EXIT,
		.value = status,
		.mono_ns = kiwi_clock_ns(CLOCK_MONOTONIC),
		.utime_us = (uint64_t)ru.ru_utime.tv_sec * 1000000 + (uint64_t)ru.ru_utime.tv_usec,
		.stime_us = (uint64_t)ru.ru_stime.tv_sec * 1000000 + (uint64_t)ru.ru_stime.tv_usec,
		.flags = (d->full ? KIWI_SYNC_DISK_FULL : 0) | (d->in_place ? KIWI_SYNC_BINDS_IN_PLACE : 0),
		.disk_used_kib = d->peak_kib,
	};
	kiwi_sync_send(sock, &m);
}

/* Pid 1's job once the command runs: reap every orphan, pass signals on,
 * and leave as soon as the command is gone. Leaving ends the pid
 * namespace, and the kernel kills whatever the command left behind. */
_Noreturn static void supervise(int sock, pid_t cmd, struct disk_watch *disk)
{
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0)
		_exit(1);
	struct pollfd pfd[2] = { { .fd = sock, .events = POLLIN }, { .fd = sfd, .events = POLLIN } };
	for (;;) {
		int status;
		pid_t p;
		while ((p = waitpid(-1, &status, WNOHANG)) > 0)
			if (p == cmd) {
				report_exit(sock, status, disk);
				_exit(0);
			}
		int n = poll(pfd, 2, disk->layer >= 0 ? DISK_SAMPLE_MS : -1);
		if (n < 0 && errno != EINTR)
			_exit(1);
		if (n == 0)
			sample_disk(disk);
		if (pfd[1].revents) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof(si)) > 0)
				;
		}
		if (pfd[0].revents) {
			struct kiwi_sync_msg m;
			int r = kiwi_sync_recv(sock, &m, MSG_DONTWAIT);
			if (r == 0 || (r < 0 && errno != EAGAIN))
				_exit(1);  /* the parent is gone: take the sandbox down */
			if (r > 0 && m.type == KIWI_SYNC_SIGNAL)
				kill(cmd, m.value);
			/* From pid 1, -1 means every other process of the
			 * namespace: daemons that left the command's session
			 * included, and none can slip out of the namespace. */
			if (r > 0 && m.type == KIWI_SYNC_KILL)
				kill(-1, m.value);
		}
	}
}


/* The audit's routes and table, and its log socket to the parent, which
 * reads it while the command runs and after (kiwi/net_audit.h). */
static int start_net_audit(int sock, kiwi_err *err)
{
	_cleanup_close_ int log = kiwi_net_audit_setup(err);
	if (log < 0)
		return -1;
	struct kiwi_sync_msg m = { .type = KIWI_SYNC_AUDIT_FD };
	if (kiwi_sync_send_fd(sock, &m, log) < 0)
		return kiwi_error(err, errno, "sync", "cannot pass the network audit's log to kiwi-run");
	return 0;
}

/* --tty: a pty in the sandbox's devpts; its master goes to the parent, its
 * slave becomes the command's stdin, stdout and stderr. */
static int open_terminal(int sock, struct kiwi_init_args *cmd_args, kiwi_err *err)
{
	int master = -1, slave = -1;
	if (kiwi_pty_open(&cmd_args->winsize, &master, &slave, err) < 0)
		return -1;
	struct kiwi_sync_msg m = { .type = KIWI_SYNC_PTY };
	int r = kiwi_sync_send_fd(sock, &m, master);
	close(master);
	if (r < 0) {
		close(slave);
		return kiwi_error(err, errno, "tty", "cannot pass the terminal to kiwi-run");
	}
	/* Closed with the rest above stdio once the command has it. */
	cmd_args->stdin_fd = cmd_args->stdout_fd = cmd_args->stderr_fd = slave;
	return 0;
}

/* The layer outlives the sandbox in kiwi-run's hands when a layered bind's
 * changes are to be landed or kept, and always for a session, whose
 * snapshot reads it while the session runs. */
static bool has_layered_binds(const struct kiwi_sandbox_config *cfg)
{
	bool layered = false;
	for (size_t i = 0; i < cfg->n_binds; i++)
		layered |= cfg->binds[i].layered && !cfg->binds[i].read_only;
	return layered;
}

static int send_layer(int sock, const struct kiwi_sandbox_config *cfg, struct disk_watch *d, kiwi_err *err)
{
	bool layered = has_layered_binds(cfg);
	if (!layered && !cfg->session)
		return 0;
	d->in_place = layered && !kiwi_fslayer_holds_xattrs(d->layer);
	if (!cfg->session && (cfg->ws_mode == KIWI_WS_DISCARD || d->in_place))
		return 0;
	int layer = d->layer;
	struct kiwi_sync_msg m = { .type = KIWI_SYNC_LAYER_FD, .flags = d->in_place ? KIWI_SYNC_BINDS_IN_PLACE : 0 };
	if (kiwi_sync_send_fd(sock, &m, layer) < 0)
		return kiwi_error(err, errno, "sync", "cannot pass the writable layer to kiwi-run");
	return 0;
}

/* Takes on uid and gid (kiwi/userns.h). A change of ids clears the
 * parent-death signal: armed again, so that kiwi-run's death still takes
 * the sandbox down (one dying in between is seen as the sync socket's EOF). */
static int become(const struct kiwi_init_args *args, uid_t uid, gid_t gid, kiwi_err *err)
{
	if (kiwi_userns_become(uid, gid, args->drop_groups, err) < 0)
		return -1;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	return 0;
}

/* With maps of its own the namespace may not map pid 1's ids (kiwi-run's,
 * root's 0): files it made would fail with EOVERFLOW. It takes on mapped
 * ids at once, 0 where mapped (the mounts are then root's inside), and
 * the command's before it drops its capabilities. */
static int become_setup_ids(const struct kiwi_init_args *args, kiwi_err *err)
{
	const struct kiwi_sandbox_config *cfg = args->cfg;
	const struct kiwi_idmap *m = cfg->idmap;
	uid_t uid = kiwi_idmap_maps(m->uid, m->n_uid, 0) ? 0 : cfg->uid;
	gid_t gid = kiwi_idmap_maps(m->gid, m->n_gid, 0) ? 0 : cfg->gid;
	return become(args, uid, gid, err);
}

/* Pid 1 needs no stdio of its own: errors go over the sync socket. */
static int drop_stdio(kiwi_err *err)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0)
		return kiwi_error(err, errno, "init", "cannot open /dev/null");
	for (int fd = 0; fd <= 2; fd++)
		if (dup2(null, fd) < 0) {
			close(null);
			return kiwi_error(err, errno, "init", "cannot drop pid 1's stdio");
		}
	close(null);
	return 0;
}

/* What the steps of pid 1 share. */
struct init_ctx {
	const struct kiwi_init_args *args;
	const struct kiwi_sandbox_config *cfg;
	uint32_t sync_flags;             /* of sync #1 (KIWI_SYNC_NEW_CGROUPNS) */
	struct kiwi_init_args cmd_args;  /* what the command's process gets */
	pid_t cmd;
	int64_t exec_ns;
	struct disk_watch disk;          /* the writable layer, watched while the command runs */
	struct kiwi_idmounts trees;      /* args->trees', with the rootfs's directory of our namespace */
	int rootfs_tree;                 /* the idmapped rootfs, from sync #1; -1: none */
	int session_cg;                  /* a session's cgroup, from before sync #1; -1: none */
	bool cgroupns_at_session;        /* our cgroup namespace's root is session_cg */
	pid_t cgroupns_child;            /* the child that made it, reaped before sync #2; 0: none */
	char cgroupns_note[96];          /* --debug: where that root is, and why */
	char note[160];                  /* --debug: the step's details */
};

/* --debug only: the details of the step that just ended. */
__attribute__((format(printf, 2, 3))) static void note(struct init_ctx *c, const char *fmt, ...)
{
	if (!c->cfg->debug)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->note, sizeof(c->note), fmt, ap);
	va_end(ap);
}

/* A session's cgroup namespace, rooted at the session's cgroup rather
 * than at pid 1's own leaf (<cgroup>/keeper), so that each exec's cgroup,
 * a sibling of the leaf, is inside it: under nsdelegate (systemd's cgroup2
 * mount, the VM lane) clone3(CLONE_INTO_CGROUP) of an exec's leader wants
 * its target there (kiwi/keeper.h). A namespace takes its root from the
 * cgroup its first process is in, and pid 1 is already in the leaf: a
 * child is cloned into the session's cgroup with a new cgroup namespace
 * (no move, no cgroup.procs write: the kernel checks pid 1's write right
 * on the session's cgroup.procs, which sandbox.c delegated), pid 1 joins
 * its namespace and lets it go. kiwi-run enables the session's
 * controllers for its children only after this (sync #2): the kernel
 * would refuse a process in a cgroup that hands them down, so the child
 * is reaped before sync #2 (reap_cgroupns_child), not here: waiting for
 * it to be scheduled and exit cost 0.1 to 3.5 ms of every create on a
 * loaded host (bench/RESULTS.md), while the mounts can be made meanwhile.
 * Where the clone is refused, the namespace is rooted at the leaf, as
 * before. */
static int cgroupns_at(struct init_ctx *c, kiwi_err *err)
{
	int gate[2];
	if (pipe2(gate, O_CLOEXEC) < 0)
		return kiwi_error(err, errno, "init", "cannot make a pipe");
	kiwi_err why = { 0 };
	int pidfd = -1;
	pid_t pid = kiwi_spawn_holder(CLONE_NEWCGROUP, c->session_cg, gate[0], gate[1], &pidfd, &why);
	close(gate[0]);
	int joined = pid > 0 ? setns(pidfd, CLONE_NEWCGROUP) : -1;
	int e = pid > 0 ? errno : why.errnum;
	close(gate[1]);
	if (pid > 0) {
		c->cgroupns_child = pid;
		close(pidfd);
	}
	kiwi_closep(&c->session_cg);
	if (joined == 0) {
		c->cgroupns_at_session = true;
		snprintf(c->cgroupns_note, sizeof(c->cgroupns_note), "the session's cgroup");
		return 0;
	}
	snprintf(c->cgroupns_note, sizeof(c->cgroupns_note), "the leaf (%s into the session's cgroup: %s)",
		 pid < 0 ? "clone3" : "setns", strerror(e));
	if (unshare(CLONE_NEWCGROUP) < 0)
		return kiwi_error(err, errno, "init", "cannot make a cgroup namespace at the sandbox's cgroup");
	return 0;
}

/* The child of cgroupns_at, gone once the gate closed: out of the
 * session's cgroup before kiwi-run hands its controllers down. */
static void reap_cgroupns_child(struct init_ctx *c)
{
	while (c->cgroupns_child > 0 && waitpid(c->cgroupns_child, NULL, 0) < 0 && errno == EINTR)
		;
	c->cgroupns_child = 0;
}

/* The ids to build with, then no way back in for the command: not
 * dumpable, and no fd of the caller's beyond stdio and what is passed on. */
static int seal_pid1(struct init_ctx *c, kiwi_err *err)
{
	const struct kiwi_init_args *args = c->args;
	const struct kiwi_sandbox_config *cfg = c->cfg;
	struct kiwi_idmounts *t = args->trees ? &c->trees : NULL;
	if (t) {
		*t = *args->trees;
		t->rootfs = c->rootfs_tree;  /* came with sync #1 */
	}
	size_t n_trees = t ? t->n + 2 : 0;
	int keep[6 + n_trees];
	keep[0] = args->sock, keep[1] = args->stdin_fd, keep[2] = args->stdout_fd, keep[3] = args->stderr_fd;
	/* The loop backend's filesystem, from kiwi-run: the layer to be. */
	keep[4] = cfg->disk_backend == KIWI_DISK_LOOP ? cfg->disk_fd : -1;
	keep[5] = cfg->restore_fd > 2 ? cfg->restore_fd : -1;
	for (size_t i = 0; i < n_trees; i++)
		keep[6 + i] = i == 0 ? t->rootfs_dir : i == 1 ? t->rootfs : t->binds[i - 2];
	/* Still CAP_SYS_ADMIN in our user namespace: /proc/self/cgroup reads
	 * "0::/" inside, as when clone3 put us into the cgroup. */
	if (c->session_cg >= 0) {
		if (cgroupns_at(c, err) < 0)
			return -1;
	} else if ((c->sync_flags & KIWI_SYNC_NEW_CGROUPNS) && unshare(CLONE_NEWCGROUP) < 0) {
		return kiwi_error(err, errno, "init", "cannot make a cgroup namespace at the sandbox's cgroup");
	}
	if (t) {
		t->rootfs_dir = keep[6] = open(cfg->rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (t->rootfs_dir < 0)
			return kiwi_error(err, errno, "rootfs", "cannot open `%s`", cfg->rootfs);
	}
	if (cfg->idmap && become_setup_ids(args, err) < 0)
		return -1;
	/* Not dumpable from now on (the maps needed /proc/<pid> open to the
	 * parent until here): /proc/1's environ, fds and exe stay closed to
	 * the command, whatever pid 1's capabilities are when it looks. */
	if (prctl(PR_SET_DUMPABLE, 0) < 0)
		return kiwi_error(err, errno, "init", "cannot make pid 1 non-dumpable");
	if (close_fds_except(cfg->preserve_fds, cfg->n_preserve_fds, keep, 6 + n_trees, err) < 0)
		return -1;
	note(c, "non-dumpable, %zu fd(s) passed on%s%s", cfg->n_preserve_fds,
	     c->cgroupns_note[0] ? ", cgroup namespace at " : "", c->cgroupns_note);
	return 0;
}

static int set_names_and_loopback(struct init_ctx *c, kiwi_err *err)
{
	const char *name = c->cfg->hostname;
	if (sethostname(name, strlen(name)) < 0)
		return kiwi_error(err, errno, "hostname", "cannot set hostname `%s`", name);
	if (kiwi_net_loopback_up(err) < 0)
		return -1;
	note(c, "hostname=%s lo up", name);
	return 0;
}

/* Returns 1 (nothing done) without --network audit. */
static int net_audit(struct init_ctx *c, kiwi_err *err)
{
	if (!c->cfg->net_audit)
		return 1;
	if (start_net_audit(c->args->sock, err) < 0)
		return -1;
	note(c, "packets out are logged and refused");
	return 0;
}

static int build_filesystem(struct init_ctx *c, kiwi_err *err)
{
	const struct kiwi_sandbox_config *cfg = c->cfg;
	const struct kiwi_idmounts *t = c->args->trees ? &c->trees : NULL;
	int r = kiwi_mount_rootfs(cfg, t, &c->disk.layer, err);
	if (cfg->restore_fd > 2)
		close(cfg->restore_fd);
	/* Attached or not, the host's trees are not the command's to hold. */
	for (size_t i = 0; t && i < t->n + 2; i++)
		close(i == 0 ? t->rootfs_dir : i == 1 ? t->rootfs : t->binds[i - 2]);
	if (r < 0 || send_layer(c->args->sock, cfg, &c->disk, err) < 0)
		return -1;
	note(c, "rootfs=%s %s, %zu bind(s), pivot_root", cfg->rootfs, cfg->rw_root ? "rw" : "ro", cfg->n_binds);
	return 0;
}

/* The whole sandbox is without capabilities (CAP_CHOWN aside, below)
 * from the command's first instruction on: pid 1 drops them before it
 * forks the command. --user: pid 1 takes on the command's ids first (after
 * the process bound), with the capabilities still held, which
 * kiwi_caps_drop_all_but() then clears. */
static int drop_privileges(struct init_ctx *c, kiwi_err *err)
{
	const struct kiwi_sandbox_config *cfg = c->cfg;
	/* Before --user's ids are taken on: pid 1 counts too, as the root
	 * of the namespace it is. */
	if (cfg->pids_rlimit > 0 &&
	    setrlimit(RLIMIT_NPROC, &(struct rlimit){ (rlim_t)cfg->pids_rlimit, (rlim_t)cfg->pids_rlimit }) < 0)
		return kiwi_error(err, errno, "init", "cannot set RLIMIT_NPROC to %lld", (long long)cfg->pids_rlimit);
	if (cfg->idmap && become(c->args, cfg->uid, cfg->gid, err) < 0)
		return -1;
	/* CAP_CHOWN alone, for a root command whose ids are kiwi's range: it
	 * reaches only ids the maps and the idmapped mounts hold. */
	uint32_t keep = cfg->idmounts && cfg->uid == 0 ? 1u << CAP_CHOWN : 0;
	if (kiwi_caps_drop_all_but(keep, err) < 0)
		return -1;
	note(c, keep ? "every capability dropped but CAP_CHOWN, no_new_privs" : "every capability dropped, no_new_privs");
	return 0;
}

static int start(struct init_ctx *c, kiwi_err *err)
{
	const struct kiwi_sandbox_config *cfg = c->cfg;
	if (cfg->session)
		return 1;  /* a session's pid 1 starts no command: execs come later */
	if (cfg->tty && open_terminal(c->args->sock, &c->cmd_args, err) < 0)
		return -1;
	c->cmd = start_command(&c->cmd_args, &c->exec_ns, err);
	if (c->cmd < 0)
		return -1;
	note(c, "%.64s (forked; cwd, %slandlock, %s, execve)", cfg->argv[0], cfg->landlock ? "" : "no ",
	     cfg->seccomp ? "seccomp" : "no seccomp");
	return 0;
}

/* Pid 1's steps between sync #1 and #2, in the only order that works:
 * the ids before files are made; the hostname and lo, and the audit's
 * table, while pid 1 holds CAP_SYS_ADMIN and CAP_NET_ADMIN over its
 * namespaces; the mounts before the capabilities go; the command last. */
static const struct init_step {
	const char *name;   /* its --debug line */
	int (*run)(struct init_ctx *c, kiwi_err *err);
} init_steps[] = {
	{ "close-fds", seal_pid1 },
	{ "uts-net", set_names_and_loopback },
	{ "net-audit", net_audit },
	{ "mount", build_filesystem },
	{ "caps", drop_privileges },
	{ "exec", start },
};

/* A session's witnesses for its end, sent before any exec can run: the
 * sandbox's procfs, whose root lists every process of the pid namespace
 * (none once pid 1 is gone), and the mount namespace's id, which stops
 * naming anything once the namespace is gone. destroy proves the end with
 * them instead of reading the namespaces of every process on the host. */
static void send_witness(int sock)
{
	_cleanup_close_ int proc = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct kiwi_sync_msg m = { .type = KIWI_SYNC_WITNESS, .ns_id = kiwi_mount_ns_id() };
	/* Our own link, which a rootless supervisor cannot read (we are
	 * not dumpable): without a namespace id, the scan needs it. */
	struct stat st;
	if (stat("/proc/self/ns/mnt", &st) == 0)
		m.ns_ino = (uint64_t)st.st_ino;
	if (proc >= 0)
		kiwi_sync_send_fd(sock, &m, proc);
}

/* Sync #1, and before it, from a caller without root, what kiwi-helper
 * made after clone: the disk layer and the binds' idmapped trees, each
 * taking the fd number the parent reserved for it (cfg->disk_fd, the
 * trees' binds), so the setup uses them as root's. A bind that got no
 * tree (the caller's rule has no bind operation) is bound as it is. A
 * session's cgroup may come too: *session_cg gets it. */
static int recv_maps_done(int sock, const struct kiwi_init_args *args, struct kiwi_sync_msg *m, int *fd,
			  int *session_cg)
{
	const struct kiwi_idmounts *t = args->trees;
	size_t n = t && !args->cfg->idmounts ? t->n : 0;  /* root's trees come at clone */
	bool got[n + 1];
	memset(got, 0, sizeof(got));
	for (;;) {
		if (kiwi_sync_recv_fd(sock, m, 0, fd) <= 0)
			return -1;
		if (m->type == KIWI_SYNC_MAPS_DONE)
			break;
		if (m->type == KIWI_SYNC_CGROUP_FD && *fd >= 0 && *session_cg < 0) {
			*session_cg = TAKE_FD(*fd);
			continue;
		}
		int target = -1;
		if (m->type == KIWI_SYNC_DISK_FD)
			target = args->cfg->disk_fd;
		else if (m->type == KIWI_SYNC_BIND_FD && m->value >= 0 && (size_t)m->value < n && !got[m->value])
			target = t->binds[m->value], got[m->value] = true;
		int r = *fd >= 0 && target >= 0 ? dup3(*fd, target, O_CLOEXEC) : -1;
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		if (r < 0)
			return -1;
	}
	for (size_t i = 0; i < n; i++)
		if (t->binds[i] >= 0 && !got[i]) {
			close(t->binds[i]);
			t->binds[i] = -1;
		}
	return 0;
}

_Noreturn void kiwi_init_main(const struct kiwi_init_args *args)
{
	struct init_ctx c = { .args = args, .cfg = args->cfg, .cmd_args = *args, .disk = { .layer = -1 }, .rootfs_tree = -1,
			      .session_cg = -1 };
	const struct kiwi_debug *dbg = c.cfg->debug;   /* fd 2 is still kiwi-run's (kiwi/debug.h) */
	int sock = args->sock;
	kiwi_err err = { 0 };
	struct kiwi_sync_msg m = { 0 };
	int64_t t = KIWI_DEBUG_NOW(dbg);

	/* If kiwi-run dies, so does the sandbox. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	hide_inherited_memory();
	/* SIGCHLD stays blocked for the signalfd; the forwarded signals were
	 * blocked by the parent before clone and stay so here. */
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);

	/* #1: wait for the parent to write our uid and gid maps. */
	if (recv_maps_done(sock, args, &m, &c.rootfs_tree, &c.session_cg) < 0)
		_exit(1);
	c.sync_flags = m.flags;
	KIWI_DEBUG(dbg, "init", t, "wait-maps", "released by kiwi-run (sync #1)");
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(init_steps); i++) {
		t = KIWI_DEBUG_NOW(dbg);
		int r = init_steps[i].run(&c, &err);
		if (r < 0)
			goto fail;
		if (r == 0)
			KIWI_DEBUG(dbg, "init", t, init_steps[i].name, "%s", c.note);
	}

	/* A session: ready once pid 1 holds nothing of the caller's; from
	 * here on it keeps the sandbox for the execs (kiwi/keeper.h). */
	if (c.cfg->session) {
		reap_cgroupns_child(&c);
		send_witness(sock);
		const int kept[] = { sock, c.disk.layer };
		if (close_fds_except(NULL, 0, kept, KIWI_ARRAY_SIZE(kept), &err) < 0 || drop_stdio(&err) < 0)
			goto fail;
		m = (struct kiwi_sync_msg){ .type = KIWI_SYNC_EXEC_OK, .mono_ns = kiwi_clock_ns(CLOCK_MONOTONIC),
					    .real_ns = kiwi_clock_ns(CLOCK_REALTIME),
					    .flags = c.cgroupns_at_session ? KIWI_SYNC_CGROUPNS_AT_SESSION : 0 };
		kiwi_sync_send(sock, &m);
		kiwi_keeper_main(args, c.disk.layer);
	}

	/* #2: tell the parent the command runs. */
	m = (struct kiwi_sync_msg){
		.type = KIWI_SYNC_EXEC_OK,
		.mono_ns = c.exec_ns,
		.real_ns = kiwi_clock_ns(CLOCK_REALTIME),
	};
	kiwi_sync_send(sock, &m);

	/* From now on pid 1 holds no fd but the sync socket and the layer:
	 * its stdio, which may be the caller's terminal, becomes /dev/null. */
	const int kept[] = { sock, c.disk.layer };
	if (close_fds_except(NULL, 0, kept, KIWI_ARRAY_SIZE(kept), &err) < 0 || drop_stdio(&err) < 0) {
		kill(c.cmd, SIGKILL);
		goto fail;
	}
	supervise(sock, c.cmd, &c.disk);

fail:
	m = (struct kiwi_sync_msg){ .type = KIWI_SYNC_ERROR, .err = err };
	kiwi_sync_send(sock, &m);
	_exit(1);
}
