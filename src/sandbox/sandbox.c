/* SPDX-License-Identifier: Apache-2.0 */
/* The launch sequence, parent side, top to bottom. The child side is
 * init.c; steps #1..#3 are mirrored there. */
#include "init.h"
#include "follow.h"
#include "kiwi/sync.h"
#include "kiwi/cleanup.h"
#include "kiwi/debug.h"
#include "kiwi/egress.h"
#include "kiwi/fds.h"
#include "kiwi/fslayer.h"
#include "kiwi/loopfs.h"
#include "kiwi/helper.h"
#include "kiwi/idmount.h"
#include "kiwi/keeper.h"
#include "kiwi/landlock.h"
#include "kiwi/output.h"
#include "kiwi/pty.h"
#include "kiwi/registry.h"
#include "kiwi/sandbox.h"
#include "kiwi/spawn.h"
#include "kiwi/userns.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/ioctl.h>
#include <sys/pidfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

static const int forwarded_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };

/* A tty session whose terminal went away (SIGHUP, SIGTERM, the caller's
 * terminal closed) is killed this long after the hangup unless
 * --kill-grace says otherwise: time for the shell to leave on its SIGHUP. */
#define TTY_HANGUP_GRACE_NS (2ULL * 1000000000ULL)

/* A passed fd reaches what it refers to. From a directory (or an O_PATH fd,
 * which may be one) `..` climbs into the host's tree above the rootfs, so
 * only non-directories cross into a sandbox. */
static int check_preserved_fd(int fd, kiwi_err *err)
{
	struct stat st;
	int flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fstat(fd, &st) < 0)
		return kiwi_error(err, errno, "fds", "fd %d to preserve is not open", fd);
	if (S_ISDIR(st.st_mode) || (flags & O_PATH))
		return kiwi_error(err, EPERM, "fds",
				  "fd %d is a %s: it would open the host's tree to the sandbox; bind the "
				  "directory with --bind instead", fd, S_ISDIR(st.st_mode) ? "directory" : "O_PATH fd");
	return 0;
}

/* The maps come from kiwi-helper(8) when we are not root and they map
 * more than our own ids (which anyone may map). */
static bool helper_writes_maps(const struct kiwi_sandbox_config *cfg)
{
	return cfg->idmap && geteuid() != 0 && !kiwi_idmap_is_own(cfg->idmap, getuid(), getgid());
}

/* Not root, --disk-backend loop: the layer comes from kiwi-helper(8). */
static bool helper_makes_disk(const struct kiwi_sandbox_config *cfg)
{
	return cfg->disk_backend == KIWI_DISK_LOOP && geteuid() != 0;
}

/* Root's own maps leave setgroups allowed, so that pid 1 drops the host's
 * supplementary groups: with 0 mapped elsewhere, root's gid 0 among them
 * would go on opening the host's group-accessible files, unseen. */
static bool drops_groups(const struct kiwi_sandbox_config *cfg)
{
	return cfg->idmap && geteuid() == 0;
}

/* --user names ids the maps hold: said here, before the kernel would
 * refuse them inside. */
static int check_user(const struct kiwi_sandbox_config *cfg, kiwi_err *err)
{
	const struct kiwi_idmap *m = cfg->idmap;
	if (!(m ? kiwi_idmap_maps(m->uid, m->n_uid, cfg->uid) : cfg->uid == 0))
		return kiwi_error(err, EINVAL, "user", "uid %u is not mapped in the sandbox (see --uidmap)",
				  (unsigned)cfg->uid);
	if (!(m ? kiwi_idmap_maps(m->gid, m->n_gid, cfg->gid) : cfg->gid == 0))
		return kiwi_error(err, EINVAL, "user", "gid %u is not mapped in the sandbox (see --gidmap)",
				  (unsigned)cfg->gid);
	return 0;
}

/* What can be checked cheaply before any namespace exists, so that the
 * common mistakes fail fast with a plain message. */
static int check_config(const struct kiwi_sandbox_config *cfg, kiwi_err *err)
{
	struct stat st;
	if (!cfg->session && (!cfg->argv || !cfg->argv[0] || !cfg->argv[0][0]))
		return kiwi_error(err, EINVAL, "args", "no command given (put it after `--`)");
	if (stat(cfg->rootfs, &st) < 0)
		return kiwi_error(err, errno, "rootfs", "cannot use rootfs `%s`", cfg->rootfs);
	if (!S_ISDIR(st.st_mode))
		return kiwi_error(err, ENOTDIR, "rootfs", "rootfs `%s` is not a directory", cfg->rootfs);
	for (size_t i = 0; i < cfg->n_binds; i++)
		if (stat(cfg->binds[i].source, &st) < 0)
			return kiwi_error(err, errno, "bind", "cannot use bind source `%s`",
					  cfg->binds[i].source);
	for (size_t i = 0; i < cfg->n_preserve_fds; i++)
		if (check_preserved_fd(cfg->preserve_fds[i], err) < 0)
			return -1;
	if (cfg->net_audit && cfg->egress)
		return kiwi_error(err, EINVAL, "network", "the network audit and egress exclude each other");
	return check_user(cfg, err);
}

void follow_arm_timer(struct follow *f, uint64_t ns)
{
	struct itimerspec its = {
		.it_value = { .tv_sec = (time_t)(ns / 1000000000), .tv_nsec = (long)(ns % 1000000000) },
	};
	if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
		its.it_value.tv_nsec = 1;
	timerfd_settime(f->timerfd, 0, &its, NULL);
}

void follow_send_to_init(struct follow *f, enum kiwi_sync_type type, int sig)
{
	struct kiwi_sync_msg m = { .type = type, .value = sig };
	kiwi_sync_send(f->sock, &m);
}

/* Ends the whole sandbox at once: cgroup.kill when it has a cgroup (pid 1
 * included, so the verdict's wall time then comes from our clock), else
 * SIGKILL from pid 1 to every other process of the namespace, after which
 * pid 1 reports the command's end as usual. */
void follow_kill(struct follow *f)
{
	if (f->killing)
		return;
	f->killing = true;
	if (f->cg && kiwi_cgroup_kill(f->cg, NULL) == 0)
		return;
	follow_send_to_init(f, KIWI_SYNC_KILL, SIGKILL);
}

static void stop_waiting(struct follow *f)
{
	kiwi_output_stop_waiting(&f->out);
	kiwi_output_stop_waiting(&f->errout);
}

void follow_fail_and_kill(struct follow *f, const kiwi_err *e)
{
	if (!f->failed) {
		*f->err = *e;
		f->failed = true;
	}
	follow_kill(f);
}

/* The pty's master, sent by pid 1 before it starts the command: from now
 * on its output is relayed like a pipe's and our stdin goes to it. Only
 * one, only when asked for, and only a real master is taken. */
static void on_pty(struct follow *f, int fd)
{
	kiwi_err e = { 0 };
	if (!f->cfg->tty || f->master >= 0 || !kiwi_pty_is_master(fd)) {
		close(fd);
		kiwi_error(&e, EPROTO, "tty", "the sandbox sent an unexpected file descriptor");
		follow_fail_and_kill(f, &e);
		return;
	}
	f->master = fd;
	f->out.read_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (f->out.read_fd < 0 || fcntl(fd, F_SETFL, O_NONBLOCK) < 0) {
		kiwi_error(&e, errno, "tty", "cannot relay the terminal");
		follow_fail_and_kill(f, &e);
		return;
	}
	kiwi_pty_input_init(&f->in, STDIN_FILENO, fd);
	/* The size set at clone may be stale by now. */
	struct winsize ws;
	kiwi_pty_caller_winsize(STDIN_FILENO, f->cfg->stdout_dest, &ws);
	ioctl(fd, TIOCSWINSZ, &ws);
	if (kiwi_term_raw(&f->term, STDIN_FILENO, &e) < 0)
		follow_fail_and_kill(f, &e);
}

/* The session's terminal goes away, as when a terminal window closes:
 * closing the master hangs the pty up, and the kernel sends SIGHUP to the
 * session inside. Whatever outlives it is killed after the grace. */
static void hang_up(struct follow *f)
{
	if (f->hung_up || f->master < 0)
		return;
	f->hung_up = true;
	kiwi_output_close(&f->out);
	close(TAKE_FD(f->master));
	f->in.done = true;
	f->in.len = f->in.off = 0;
	follow_arm_timer(f, f->cfg->kill_grace_ns ? f->cfg->kill_grace_ns : TTY_HANGUP_GRACE_NS);
}


static void on_message(struct follow *f, const struct kiwi_sync_msg *m)
{
	struct kiwi_sandbox_result *res = f->res;
	switch (m->type) {
	case KIWI_SYNC_EXEC_OK:
		KIWI_DEBUG(f->cfg->debug, "run", 0, "started", "the command runs (sync #2)");
		res->started = true;
		f->exec_mono = m->mono_ns;
		if (f->session && f->cg_leaf_fd >= 0 && follow_session_controllers(f, m->flags) < 0)
			break;
		if (f->session)
			follow_session_ready(f);
		else if (f->cfg->timeout_ns)
			follow_arm_timer(f, f->cfg->timeout_ns);
		break;
	case KIWI_SYNC_EXEC_BEGIN:
		if (f->session)
			follow_exec_count(f, m->value);
		break;
	case KIWI_SYNC_EXEC_END:
		if (f->session)
			follow_exec_ended(f, m->value, m->cgroup_id, m->flags & KIWI_SYNC_EXEC_REPORTED);
		break;
	case KIWI_SYNC_PURGED:
		if (f->session)
			follow_session_seal(f, m->value);
		break;
	case KIWI_SYNC_EXEC_WARMED:
		follow_warmed(f, m->value);
		break;
	case KIWI_SYNC_ERROR:
		*f->err = m->err;
		f->failed = true;
		break;
	case KIWI_SYNC_EXIT:
		f->exited = true;
		if (WIFSIGNALED(m->value))
			res->signal = WTERMSIG(m->value);
		else
			res->exit_code = WEXITSTATUS(m->value);
		res->wall_ns = m->mono_ns > f->exec_mono ? (uint64_t)(m->mono_ns - f->exec_mono) : 0;
		res->cpu_user_us = m->utime_us;
		res->cpu_sys_us = m->stime_us;
		res->disk_full = m->flags & KIWI_SYNC_DISK_FULL;
		res->disk_used_kib = m->disk_used_kib;
		res->binds_in_place = m->flags & KIWI_SYNC_BINDS_IN_PLACE;
		KIWI_DEBUG(f->cfg->debug, "run", 0, "exit", "the command ended: %s %d (sync #3)",
			   res->signal ? "signal" : "status", res->signal ? res->signal : res->exit_code);
		break;
	default:
		break;
	}
}

/* The timer first fires at the timeout: SIGTERM to all when a grace period
 * is asked for, else SIGKILL at once; the second time, after the grace. */
static void on_timer(struct follow *f)
{
	uint64_t ticks;
	if (read(f->timerfd, &ticks, sizeof(ticks)) < 0)
		return;
	/* The command ended in time; the reader has not taken its output
	 * by the deadline. */
	if (f->exited || f->init_gone) {
		stop_waiting(f);
		return;
	}
	if (f->session) {
		if (!f->killing)
			follow_session_timer(f);
		return;
	}
	if (f->hung_up) {
		follow_kill(f);
		return;
	}
	f->res->timed_out = true;
	if (f->cfg->kill_grace_ns && !f->grace_armed) {
		f->grace_armed = true;
		follow_send_to_init(f, KIWI_SYNC_KILL, SIGTERM);
		follow_arm_timer(f, f->cfg->kill_grace_ns);
		return;
	}
	follow_kill(f);
}

static void on_output(struct follow *f, struct kiwi_output *o)
{
	kiwi_err e = { 0 };
	if (kiwi_output_pump(o, &e) < 0 && !f->failed)
		follow_fail_and_kill(f, &e);
	if (o->truncated && f->cfg->output_limit_kill && !f->res->output_limit_hit) {
		f->res->output_limit_hit = true;
		follow_kill(f);
	}
}

/* The reader takes more: what waited goes, and the pipe is read again. */
static void on_writable(struct follow *f, struct kiwi_output *o)
{
	kiwi_err e = { 0 };
	if (kiwi_output_flush(o, &e) < 0 && !f->failed)
		follow_fail_and_kill(f, &e);
}

static void on_signal(struct follow *f)
{
	struct signalfd_siginfo si;
	while (read(f->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		int sig = (int)si.ssi_signo;
		if (sig == SIGWINCH && f->master >= 0) {
			struct winsize ws;
			kiwi_pty_caller_winsize(STDIN_FILENO, f->cfg->stdout_dest, &ws);
			ioctl(f->master, TIOCSWINSZ, &ws);
		} else if (f->cfg->tty && (sig == SIGHUP || sig == SIGTERM)) {
			/* Before the terminal is up there is no session to hang up. */
			if (f->master >= 0)
				hang_up(f);
			else
				follow_kill(f);
		} else if (f->session && sig != SIGWINCH) {
			follow_session_end(f, "signal");
		} else if (sig != SIGWINCH) {
			f->signalled = true;
			follow_send_to_init(f, KIWI_SYNC_SIGNAL, sig);
		}
	}
}

static void on_input(struct follow *f)
{
	if (kiwi_pty_input_read(&f->in) == KIWI_PTY_INPUT_HANGUP)
		hang_up(f);
}

static void on_init_gone(struct follow *f)
{
	siginfo_t info = { 0 };
	if (waitid(P_PIDFD, (id_t)f->pidfd, &info, WEXITED) < 0)
		return;
	f->init_gone = true;
	if (!f->exited && f->res->started)
		f->res->wall_ns = (uint64_t)(kiwi_clock_ns(CLOCK_MONOTONIC) - f->exec_mono);
	/* Pid 1 killed from outside (an OOM kill of the whole cgroup, a
	 * kill -9 by an operator): the namespace went with it. */
	if (info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED) {
		f->res->killed_whole = true;
		if (!f->exited)
			f->res->signal = info.si_status;
	}
}

/* A message from pid 1; the network audit's log socket may come with it. */
static int recv_message(struct follow *f, struct kiwi_sync_msg *m)
{
	int fd;
	int r = kiwi_sync_recv_fd(f->sock, m, MSG_DONTWAIT, &fd);
	if (fd >= 0 && r > 0 && m->type == KIWI_SYNC_AUDIT_FD && f->audit_fd < 0 && f->cfg->net_audit)
		f->audit_fd = TAKE_FD(fd);
	if (fd >= 0 && r > 0 && m->type == KIWI_SYNC_PTY)
		on_pty(f, TAKE_FD(fd));
	if (fd >= 0 && r > 0 && m->type == KIWI_SYNC_LAYER_FD && f->layer_fd < 0) {
		f->layer_fd = TAKE_FD(fd);
		f->layer_in_place = m->flags & KIWI_SYNC_BINDS_IN_PLACE;
	}
	if (fd >= 0 && r > 0 && m->type == KIWI_SYNC_WITNESS && f->session && f->session->procfs_fd < 0 &&
	    !f->res->started) {
		f->session->procfs_fd = TAKE_FD(fd);
		f->session->mntns_id = m->ns_id;
		f->session->mntns_ino = m->ns_ino;
	}
	if (fd >= 0)
		close(fd);
	return r;
}

static void read_audit(struct follow *f)
{
	if (f->audit_fd >= 0)
		kiwi_net_audit_drain(f->audit_fd, &f->res->net_attempts, NULL);
}

/* #2, #3: follow the sandbox until pid 1 is gone and both output pipes
 * (or the pty) are drained, so that nothing written before a kill is lost. */

/* The registry entry is made lazily, once the sandbox has lived
 * KIWI_REGISTER_DELAY_MS: measured, making it at once cost 3-5% of the
 * start of a short command on a loaded host (bench/RESULTS.md), and a
 * sandbox that ends sooner is not one a person lists or kills. Until then
 * poll waits with a timeout: no timer, no extra system call. */
#define KIWI_REGISTER_DELAY_MS 100

static int poll_timeout(struct follow *f)
{
	if (!f->register_at || f->init_gone)
		return -1;
	int64_t left = f->register_at - kiwi_clock_ns(CLOCK_MONOTONIC);
	if (left > 0)
		return (int)((left + 999999) / 1000000);
	/* Due: a failure leaves the sandbox running, unlisted, and is told
	 * at the end. */
	f->register_at = 0;
	if (follow_register(f, f->pid) < 0)
		f->res->registry_failed = true;
	return -1;
}

/* follow()'s poll slots. */
enum follow_slot {
	SLOT_SYNC,         /* messages from pid 1 */
	SLOT_SIGNAL,       /* signals to forward */
	SLOT_PIDFD,        /* pid 1's end */
	SLOT_TIMER,        /* --timeout, the grace, a hangup's grace */
	SLOT_STDOUT,       /* the command's output, while the buffer has room */
	SLOT_STDERR,
	SLOT_STDOUT_DEST,  /* our reader, while bytes wait for it */
	SLOT_STDERR_DEST,
	SLOT_EGRESS_AUDIT, /* --egress-audit's log */
	SLOT_NET_AUDIT,    /* the network audit's log */
	SLOT_TTY_IN,       /* --tty: our stdin, to the master */
	SLOT_TTY_MASTER,   /* --tty: the master, writable */
	SLOT_SESSION,      /* a session's clients (kiwi/keeper.h) */
	SLOT_CREATOR,      /* a session's `session create`, until it has left */
	SLOT_COUNT
};

static void fill_slots(struct follow *f, struct pollfd pfd[SLOT_COUNT])
{
	bool relay = f->master >= 0 && !f->init_gone;
	int fds[SLOT_COUNT] = {
		[SLOT_SYNC] = f->init_gone || f->sync_eof ? -1 : f->sock,
		[SLOT_SIGNAL] = f->sigfd,
		[SLOT_PIDFD] = f->init_gone ? -1 : f->pidfd,
		[SLOT_TIMER] = f->timerfd,
		[SLOT_STDOUT] = kiwi_output_wants_read(&f->out) ? f->out.read_fd : -1,
		[SLOT_STDERR] = kiwi_output_wants_read(&f->errout) ? f->errout.read_fd : -1,
		[SLOT_STDOUT_DEST] = kiwi_output_wants_write(&f->out) ? f->out.out_fd : -1,
		[SLOT_STDERR_DEST] = kiwi_output_wants_write(&f->errout) ? f->errout.out_fd : -1,
		[SLOT_EGRESS_AUDIT] = f->audited ? kiwi_egress_audit_fd(f->audited) : -1,
		[SLOT_NET_AUDIT] = f->audit_fd,
		[SLOT_TTY_IN] = relay && kiwi_pty_input_wants_read(&f->in) ? f->in.in_fd : -1,
		[SLOT_TTY_MASTER] = relay && kiwi_pty_input_wants_write(&f->in) ? f->master : -1,
		[SLOT_SESSION] = f->session && f->res->started && !f->init_gone ? f->session->listen_fd : -1,
		[SLOT_CREATOR] = f->creator_fd,
	};
	for (int i = 0; i < SLOT_COUNT; i++) {
		bool out = i == SLOT_STDOUT_DEST || i == SLOT_STDERR_DEST || i == SLOT_TTY_MASTER;
		pfd[i] = (struct pollfd){ .fd = fds[i], .events = out ? POLLOUT : POLLIN };
	}
}

/* Once pid 1 is gone, output still waiting for a stalled reader is
 * dropped when the run was ended for a reason (a bound, a failure, a
 * signal): else kiwi-run would outlive its own deadline. A command that
 * ended by itself has the rest passed on at the reader's pace, as cat's
 * would be. */
static bool ended_for_a_reason(const struct follow *f)
{
	return f->res->timed_out || f->res->output_limit_hit || f->killing || f->failed || f->signalled;
}

static int follow(struct follow *f)
{
	struct pollfd pfd[SLOT_COUNT];
	struct kiwi_sync_msg m;
	while (!f->init_gone || !kiwi_output_done(&f->out) || !kiwi_output_done(&f->errout)) {
		fill_slots(f, pfd);
		if (poll(pfd, SLOT_COUNT, poll_timeout(f)) < 0 && errno != EINTR)
			return kiwi_error(f->err, errno, "wait", "cannot wait for the sandbox");
		if (pfd[SLOT_STDOUT_DEST].revents)
			on_writable(f, &f->out);
		if (pfd[SLOT_STDERR_DEST].revents)
			on_writable(f, &f->errout);
		if (pfd[SLOT_STDOUT].revents)
			on_output(f, &f->out);
		if (pfd[SLOT_STDERR].revents)
			on_output(f, &f->errout);
		if (pfd[SLOT_SYNC].revents) {
			/* At EOF the socket stays readable while pid 1 is still
			 * exiting (its namespaces, its pid namespace's other
			 * processes): polled on, it would spin a CPU away from
			 * that exit, for milliseconds under load. */
			int r = recv_message(f, &m);
			if (r > 0)
				on_message(f, &m);
			else if (r == 0)
				f->sync_eof = true;
		}
		if (pfd[SLOT_TTY_IN].revents && f->master >= 0)
			on_input(f);
		if (pfd[SLOT_TTY_MASTER].revents && f->master >= 0)
			kiwi_pty_input_write(&f->in);
		if (pfd[SLOT_SIGNAL].revents)
			on_signal(f);
		if (pfd[SLOT_TIMER].revents)
			on_timer(f);
		if (pfd[SLOT_PIDFD].revents)
			on_init_gone(f);
		if (pfd[SLOT_EGRESS_AUDIT].revents)
			kiwi_egress_audit_read(f->audited, NULL);
		if (pfd[SLOT_NET_AUDIT].revents)
			read_audit(f);
		if (pfd[SLOT_SESSION].revents)
			follow_session_client(f);
		if (pfd[SLOT_CREATOR].revents)
			follow_creator_gone(f);
		if (f->init_gone) {
			/* Messages sent just before pid 1 left are still queued. */
			while (recv_message(f, &m) > 0)
				on_message(f, &m);
			if (ended_for_a_reason(f))
				stop_waiting(f);
		}
	}
	return 0;
}

static void finish(struct follow *f)
{
	struct kiwi_sandbox_result *res = f->res;
	if (f->audited)
		kiwi_egress_audit_read(f->audited, NULL);
	/* The kernel queued each attempt as it was made: all are here. */
	read_audit(f);
	if (f->cg) {
		kiwi_err e = { 0 };
		res->has_cgroup = true;
		snprintf(res->cgroup_name, sizeof(res->cgroup_name), "%s", kiwi_cgroup_name(f->cg));
		/* A session's execs have their own counts; its end has none. */
		if (!f->session && kiwi_cgroup_read_stats(f->cg, &res->cg, &e) == 0 && res->cg.cpu_usage_us) {
			/* cpu.stat saw every process, reaped or killed. */
			res->cpu_user_us = res->cg.cpu_user_us;
			res->cpu_sys_us = res->cg.cpu_system_us;
		}
	}
	res->stdout_bytes = f->out.bytes;
	res->stderr_bytes = f->errout.bytes;
	res->stdout_truncated = f->out.truncated;
	res->stderr_truncated = f->errout.truncated;
	res->output_stalled = f->out.stalled || f->errout.stalled;
	/* Two streams to one stalled reader stall together: the longer. */
	res->output_stalled_ns = f->out.stalled_ns > f->errout.stalled_ns ? f->out.stalled_ns : f->errout.stalled_ns;
	res->output_dropped = f->out.dropped + f->errout.dropped;
	/* A session's pid 1 runs no command: it leaves when told to. */
	if (!f->failed && !f->exited && !res->killed_whole && !(f->session && f->killing))
		f->failed = kiwi_error(f->err, 0, "init", "the sandbox's init ended without reporting the command") < 0;
}

/* Before #1, the maps written: kiwi-helper's disk layer, idmapped to the
 * sandbox's user namespace, to the sandbox, and here in place of the
 * reserved fd (kiwi_sandbox_run discards it at the end, as root's). */
static int send_disk(struct follow *f)
{
	int64_t t = KIWI_DEBUG_NOW(f->cfg->debug);
	uint64_t size = f->cfg->disk_bytes ? f->cfg->disk_bytes : KIWI_FSLAYER_DEFAULT_SIZE;
	_cleanup_close_ int mfd = -1;
	if (kiwi_helper_disk(f->res->helper, f->pidfd, size, &mfd, f->err) < 0)
		return -1;
	struct kiwi_sync_msg m = { .type = KIWI_SYNC_DISK_FD };
	if (dup3(mfd, f->cfg->disk_fd, O_CLOEXEC) < 0 || kiwi_sync_send_fd(f->sock, &m, mfd) < 0)
		return kiwi_error(f->err, errno, "disk", "cannot hand the disk layer to the sandbox");
	KIWI_DEBUG(f->cfg->debug, "run", t, "disk", "ext4 image of %llu bytes from kiwi-helper, idmapped",
		   (unsigned long long)size);
	return 0;
}

/* Before #1, the maps written: kiwi-helper's idmapped tree of each bind
 * the caller owns (reserve_helper_binds), to the sandbox. A rule without
 * the bind operation leaves them as they are, as before it existed. */
static int send_binds(struct follow *f)
{
	size_t last = 0;
	for (size_t i = 0; f->helper_binds && i < f->cfg->n_binds; i++)
		if (f->helper_binds[i])
			last = i;
	for (size_t i = 0; f->helper_binds && i < f->cfg->n_binds; i++) {
		if (!f->helper_binds[i])
			continue;
		const char *source = f->cfg->binds[i].source;
		int64_t t = KIWI_DEBUG_NOW(f->cfg->debug);
		_cleanup_close_ int src = open(source, O_PATH | O_CLOEXEC);
		if (src < 0)
			return kiwi_error(f->err, errno, "bind", "cannot use bind source `%s`", source);
		_cleanup_close_ int tree = -1;
		bool not_allowed = false;
		if (kiwi_helper_bind(f->res->helper, f->pidfd, src, i == last, &tree, &not_allowed, f->err) < 0) {
			if (!not_allowed)
				return kiwi_error_wrap(f->err, "bind source `%s`", source);
			*f->err = (kiwi_err){ 0 };
			KIWI_DEBUG(f->cfg->debug, "run", t, "bind", "binds as they are: kiwi-helper's rule for you has "
				   "no bind operation");
			return 0;
		}
		struct kiwi_sync_msg m = { .type = KIWI_SYNC_BIND_FD, .value = (int32_t)i };
		if (kiwi_sync_send_fd(f->sock, &m, tree) < 0)
			return kiwi_error(f->err, errno, "bind", "cannot hand bind source `%s` to the sandbox", source);
		KIWI_DEBUG(f->cfg->debug, "run", t, "bind", "%s idmapped by kiwi-helper: its owner is the sandbox's root",
			   source);
	}
	return 0;
}

/* #1: id maps and the network, then let the child go on. */
static int release_child(struct follow *f, pid_t pid)
{
	struct kiwi_sync_msg go = { .type = KIWI_SYNC_MAPS_DONE };
	const struct kiwi_debug *dbg = f->cfg->debug;
	int64_t t = KIWI_DEBUG_NOW(dbg);
	/* Before egress-attach: the helper's session binds to the sandbox
	 * on the first request naming it, whichever that is. */
	bool by_helper = helper_writes_maps(f->cfg);
	if (by_helper ? kiwi_helper_idmap(f->res->helper, f->pidfd, f->cfg->idmap, f->err) < 0
		      : kiwi_userns_write_maps(pid, f->cfg->idmap, !drops_groups(f->cfg), f->err) < 0)
		return -1;
	KIWI_DEBUG(dbg, "run", t, "maps", "uid/gid maps of pid %d written%s", (int)pid,
		   by_helper ? " by kiwi-helper" : "");
	if ((helper_makes_disk(f->cfg) && send_disk(f) < 0) || send_binds(f) < 0)
		return -1;
	t = KIWI_DEBUG_NOW(dbg);
	if (f->egress && kiwi_egress_setup(f->egress, pid, f->pidfd, f->err) < 0)
		return -1;
	if (f->egress)
		KIWI_DEBUG(dbg, "run", t, "egress", "veth into the sandbox, nftables table on the host");
	const char *tls_off = kiwi_egress_tls_kernel_off(f->egress);
	if (tls_off)
		KIWI_DEBUG(dbg, "run", 0, "egress", "TLS on 443 through the proxy, not the kernel path: %s", tls_off);
	bool helper_egress = f->res->helper && f->cfg->egress;
	if (helper_egress && kiwi_helper_egress_attach(f->res->helper, f->pidfd, f->err) < 0)
		return -1;
	if (helper_egress)
		KIWI_DEBUG(dbg, "run", t, "egress", "veth and table from kiwi-helper, sandbox end configured");
	if (kiwi_cgroup_adopted(f->cg)) {
		t = KIWI_DEBUG_NOW(dbg);
		if (kiwi_helper_cgroup_attach(f->res->helper, f->pidfd, f->err) < 0)
			return -1;
		go.flags |= KIWI_SYNC_NEW_CGROUPNS;
		KIWI_DEBUG(dbg, "run", t, "cgroup-attach", "kiwi-helper moved pid %d into %s", (int)pid,
			   kiwi_cgroup_name(f->cg));
	}
	/* Root's default: the rootfs through the sandbox's own map rides
	 * along (kiwi/idmount.h). */
	_cleanup_close_ int rootfs = -1;
	if (f->cfg->idmounts) {
		t = KIWI_DEBUG_NOW(dbg);
		rootfs = kiwi_idmount_rootfs(f->cfg->rootfs, pid, f->pidfd, f->err);
		if (rootfs < 0)
			return -1;
		KIWI_DEBUG(dbg, "run", t, "idmap-rootfs", "through pid %d's user namespace", (int)pid);
	}
	struct kiwi_sync_msg cgm = { .type = KIWI_SYNC_CGROUP_FD };
	if (f->cg_leaf_fd >= 0 && kiwi_sync_send_fd(f->sock, &cgm, kiwi_cgroup_fd(f->cg)) < 0)
		return kiwi_error(f->err, errno, "sync", "cannot hand the sandbox its cgroup");
	if ((rootfs >= 0 ? kiwi_sync_send_fd(f->sock, &go, rootfs) : kiwi_sync_send(f->sock, &go)) < 0)
		return kiwi_error(f->err, errno, "sync", "cannot signal the sandbox");
	return 0;
}

/* The sandbox's entry for `kiwi-run list` and `kill`. Made after clone, so
 * the sandbox never inherits its lock, and while the child builds itself. */
int follow_register(struct follow *f, pid_t pid)
{
	const struct kiwi_sandbox_config *cfg = f->cfg;
	struct kiwi_registry_entry e = {
		.pid = pid,
		.supervisor_pid = getpid(),
		.uid = geteuid(),
		.started_ns = (int64_t)f->res->started_at.tv_sec * 1000000000 + f->res->started_at.tv_nsec,
	};
	if (f->session)
		snprintf(e.id, sizeof(e.id), "%.*s", KIWI_REGISTRY_ID_LEN, f->session->id);
	else if (kiwi_registry_new_id(e.id, &f->res->registry_error) < 0)
		return -1;
	e.session = f->session != NULL;
	snprintf(e.phase, sizeof(e.phase), "%s", cfg->phase ? cfg->phase : "");
	snprintf(e.cgroup, sizeof(e.cgroup), "%s", f->cg ? kiwi_cgroup_name(f->cg) : "");
	snprintf(e.network, sizeof(e.network), "%s", cfg->egress ? "egress" : cfg->net_audit ? "audit" : "none");
	if (f->session)
		snprintf(e.command, sizeof(e.command), "(session)");
	else
		kiwi_registry_set_command(&e, cfg->argv);
	int64_t t = KIWI_DEBUG_NOW(cfg->debug);
	if (kiwi_registry_add(&e, &f->reg, &f->res->registry_error) < 0)
		return -1;
	KIWI_DEBUG(cfg->debug, "run", t, "registry", "id=%s (kiwi-run list, kill)", e.id);
	snprintf(f->res->id, sizeof(f->res->id), "%s", e.id);
	return 0;
}

/* A session with egress keeps its namespaces for the seal, opened while
 * pid 1 still runs with our credentials: once it has changed them (and
 * it never execs), the kernel lets only the host's root reach it through
 * its pid (ptrace's dumpable check), and a rootless seal would fail. */
static int open_session_ns(struct follow *f, pid_t pid)
{
	if (!f->session)
		return 0;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
	f->netns_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (f->cfg->egress) {
		snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
		f->userns_fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	if (f->netns_fd < 0 || (f->cfg->egress && f->userns_fd < 0))
		return kiwi_error(f->err, errno, "session", "cannot open the session's namespaces");
	return 0;
}

/* Not root, on a range kiwi-helper maps (helper_writes_maps): the binds
 * the caller owns get idmapped trees from the helper once the maps are
 * written (send_binds), so that their owner is the sandbox's root. pid 1
 * holds a reserved fd for each from clone on, which the tree takes.
 * Returns how many, or -1. */
static int reserve_helper_binds(struct follow *f, struct kiwi_idmounts *t)
{
	const struct kiwi_sandbox_config *cfg = f->cfg;
	f->helper_binds = calloc(cfg->n_binds, sizeof(bool));
	t->binds = malloc(cfg->n_binds * sizeof(int));
	if (!f->helper_binds || !t->binds)
		return kiwi_error(f->err, ENOMEM, "bind", "cannot allocate the binds");
	t->n = cfg->n_binds;
	int n = 0;
	for (size_t i = 0; i < cfg->n_binds; i++) {
		struct stat st;
		t->binds[i] = -1;
		if (stat(cfg->binds[i].source, &st) < 0 || st.st_uid != getuid() ||
		    !(S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)))
			continue;
		t->binds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (t->binds[i] < 0)
			return kiwi_error(f->err, errno, "bind", "cannot reserve the binds' fds");
		f->helper_binds[i] = true;
		n++;
	}
	return n;
}

/* Creates the sandbox and follows it to the end. */
static int spawn_and_follow(struct follow *f, const sigset_t *fwd)
{
	const struct kiwi_sandbox_config *cfg = f->cfg;
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		return kiwi_error(f->err, errno, "socketpair", "cannot create the sync socket");
	f->sock = sp[0];
	_cleanup_close_ int devnull = cfg->stdin_null && !cfg->tty ? open("/dev/null", O_RDONLY | O_CLOEXEC) : -1;
	struct kiwi_init_args args = {
		.cfg = cfg, .sock = sp[1], .stdin_fd = devnull,
		.stdout_fd = f->out.write_fd, .stderr_fd = f->errout.write_fd,
		.drop_groups = drops_groups(cfg),
	};
	int64_t t = KIWI_DEBUG_NOW(cfg->debug);
	_cleanup_(kiwi_idmounts_release) struct kiwi_idmounts trees = { .rootfs_dir = -1, .rootfs = -1 };
	if (cfg->idmounts) {
		if (kiwi_idmounts_make(cfg, &trees, f->err) < 0)
			return -1;
		args.trees = &trees;
		/* The command's stdout and stderr pipes are root's inside, as
		 * the caller's are rootless: /dev/stdout reopens them. */
		const int pipes[] = { f->out.write_fd, f->errout.write_fd };
		if (kiwi_idmount_give_pipes(pipes, KIWI_ARRAY_SIZE(pipes), cfg->idmap->uid[0].outside,
					    cfg->idmap->gid[0].outside, f->err) < 0)
			return -1;
		KIWI_DEBUG(cfg->debug, "run", t, "idmap", "%zu bind(s) idmapped onto %u:%u", trees.n,
			   cfg->idmap->uid[0].outside, cfg->idmap->gid[0].outside);
		t = KIWI_DEBUG_NOW(cfg->debug);
	} else if (helper_writes_maps(cfg) && cfg->n_binds) {
		int n = reserve_helper_binds(f, &trees);
		if (n < 0)
			return -1;
		if (n > 0)
			args.trees = &trees;
	}
	kiwi_pty_caller_winsize(STDIN_FILENO, cfg->stdout_dest, &args.winsize);
	/* A cgroup from kiwi-helper is not ours to clone into: the helper
	 * moves the sandbox in (release_child). */
	bool into = f->cg && !kiwi_cgroup_adopted(f->cg);
	int into_fd = f->cg_leaf_fd >= 0 ? f->cg_leaf_fd : kiwi_cgroup_fd(f->cg);
	/* A session's pid 1 makes its cgroup namespace itself, rooted at the
	 * session's cgroup rather than at its leaf (init.c, cgroupns_at). */
	uint64_t ns = KIWI_SANDBOX_NAMESPACES & ~(f->cg_leaf_fd >= 0 ? (uint64_t)CLONE_NEWCGROUP : 0);
	pid_t pid = kiwi_spawn(ns, into ? into_fd : -1, &f->pidfd, f->err);
	if (pid == 0) {
		close(f->sock);
		kiwi_init_main(&args);
	}
	if (pid > 0)
		KIWI_DEBUG(cfg->debug, "run", t, "clone3", "ns=user,mnt,pid,net,uts,ipc,cgroup%s%s pid=%d",
			   ns & CLONE_NEWCGROUP ? "" : "(by pid 1)", into ? " into-cgroup" : "", (int)pid);
	close(sp[1]);
	/* The holders were killed before the clone: reaped now, so that the
	 * sandbox is kiwi-run's only child from here on. */
	kiwi_idmounts_release(&trees);
	/* The sandbox holds the write ends now; ours would keep EOF away. */
	close(TAKE_FD(f->out.write_fd));
	close(TAKE_FD(f->errout.write_fd));
	if (pid < 0)
		return -1;
	f->sigfd = signalfd(-1, fwd, SFD_CLOEXEC | SFD_NONBLOCK);
	f->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (f->sigfd < 0 || f->timerfd < 0 || open_session_ns(f, pid) < 0 || release_child(f, pid) < 0) {
		if (!f->err->step[0])
			kiwi_error(f->err, errno, "wait", "cannot watch the sandbox");
		syscall(SYS_pidfd_send_signal, f->pidfd, SIGKILL, NULL, 0);
		siginfo_t info;
		waitid(P_PIDFD, (id_t)f->pidfd, &info, WEXITED);
		return -1;
	}
	f->pid = pid;
	if (!f->session)
		f->register_at = kiwi_clock_ns(CLOCK_MONOTONIC) + (int64_t)KIWI_REGISTER_DELAY_MS * 1000000;
	else
		follow_session_cloned(f);
	if (follow(f) < 0)
		return -1;
	finish(f);
	return f->failed ? -1 : 0;
}

/* The sandbox is gone (pid 1 and so every process of its namespace): its
 * layered binds' changes land on the host, or the layer is kept for the
 * caller (KIWI_WS_LAYER, until kiwi_sandbox_result_release). */
static int end_layer(const struct kiwi_sandbox_config *cfg, struct kiwi_sandbox_result *res, int layer,
		     bool in_place, kiwi_err *err)
{
	if (cfg->ws_mode == KIWI_WS_LAYER) {
		res->layer_fd = layer;
		res->has_layer = true;
		return 0;
	}
	_cleanup_close_ int owned = layer;
	/* A session's layer comes whatever its binds: nothing to land. */
	if (cfg->ws_mode == KIWI_WS_DISCARD || in_place)
		return 0;
	int64_t t = KIWI_DEBUG_NOW(cfg->debug);
	for (size_t i = 0; i < cfg->n_binds; i++) {
		const struct kiwi_bind *b = &cfg->binds[i];
		if (!b->layered || b->read_only)
			continue;
		char name[32];
		snprintf(name, sizeof(name), "bind%zu", i);
		_cleanup_close_ int dest = open(b->source, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dest < 0)
			return kiwi_error(err, errno, "workspace", "cannot open `%s` to land the changes", b->source);
		if (kiwi_fslayer_land(owned, name, dest, err) < 0)
			return -1;
		KIWI_DEBUG(cfg->debug, "run", t, "land", "changes to %s landed on %s", b->dest, b->source);
	}
	return 0;
}

/* The outside of the id pid 1 takes on inside: 0 where the map has it,
 * else --user's, as init.c's become_setup_ids picks; own when unmapped. */
static uint32_t pid1_outside(const struct kiwi_id_extent *m, size_t n, uint32_t user, uint32_t own)
{
	uint32_t inside = kiwi_idmap_maps(m, n, 0) ? 0 : user;
	for (size_t i = 0; i < n; i++)
		if (inside >= m[i].inside && inside - m[i].inside < m[i].count)
			return m[i].outside + (inside - m[i].inside);
	return own;
}

/* A session's pid 1 starts each exec's leader in the exec's own cgroup
 * with clone3(CLONE_INTO_CGROUP) (kiwi/keeper.h), and a child of its own
 * in this one for its cgroup namespace's root (init.c, cgroupns_at). The
 * kernel checks each as a write to cgroup.procs by pid 1's host fsuid, of
 * the target and of the common ancestor of pid 1's cgroup and the target:
 * this one. The group goes with the owner: the namespace's child is made
 * before pid 1 takes on its ids, as the caller's uid with the capabilities
 * of its own user namespace, which override the file's mode only where
 * the file's uid and gid are both mapped in it. So its
 * cgroup.procs alone is pid 1's (each exec's is given the same owner by
 * the exec client), never a limit file nor cgroup.subtree_control, and
 * the kernel keeps every move such a writer makes below this cgroup: out
 * of it or into another session's, the common ancestor is root's.
 * Where it cannot be given (a rootless map whose 0 is not the caller),
 * clone3 is refused and the exec falls back to the client's move, which
 * --debug of session exec reports with the errno. */
static void delegate_procs(const struct kiwi_sandbox_config *cfg, struct kiwi_cgroup *cg)
{
	const struct kiwi_idmap *m = cfg->idmap;  /* NULL: our own ids at 0 */
	uid_t uid = m ? pid1_outside(m->uid, m->n_uid, cfg->uid, geteuid()) : geteuid();
	gid_t gid = m ? pid1_outside(m->gid, m->n_gid, cfg->gid, getegid()) : getegid();
	kiwi_err e = { 0 };
	int64_t t = KIWI_DEBUG_NOW(cfg->debug);
	if (uid == geteuid())
		return;
	if (kiwi_cgroup_give_procs(cg, uid, gid, &e) < 0)
		KIWI_DEBUG(cfg->debug, "run", t, "cgroup-delegate", "%s: %s (execs will be moved in)", e.msg,
			   strerror(e.errnum));
	else
		KIWI_DEBUG(cfg->debug, "run", t, "cgroup-delegate", "%s/cgroup.procs to %u:%u (pid 1's)",
			   kiwi_cgroup_name(cg), (unsigned)uid, (unsigned)gid);
}

static int run_with_network(const struct kiwi_sandbox_config *cfg, struct kiwi_sandbox_result *res,
			    struct kiwi_cgroup *cg, kiwi_err *err);

/* Runs cfg with the cgroup and network already made. */
static int run_prepared(const struct kiwi_sandbox_config *cfg, struct kiwi_sandbox_result *res,
			struct kiwi_cgroup *cg, kiwi_err *err)
{
	struct follow f = { .cfg = cfg, .res = res, .err = err, .sock = -1, .pidfd = -1,
			    .sigfd = -1, .timerfd = -1, .cg = cg, .egress = res->egress,
			    /* through kiwi-helper: the caller's half, with the audit */
			    .audited = res->egress ? res->egress : kiwi_helper_egress(res->helper), .audit_fd = -1,
			    .master = -1, .layer_fd = -1, .session = cfg->session, .cg_leaf_fd = -1,
			    .seal_fd = -1, .userns_fd = -1, .netns_fd = -1, .sealed_audit_fd = -1, .creator_fd = -1 };
	/* A session's pid 1 lives in a leaf of its own, so that the session's
	 * cgroup can hand its controllers on to each exec's. */
	if (cfg->session && cg && !kiwi_cgroup_adopted(cg)) {
		f.cg_leaf_fd = kiwi_cgroup_open_leaf(cg, "keeper", err);
		if (f.cg_leaf_fd < 0)
			return -1;
		delegate_procs(cfg, cg);
	}
	uint64_t limit = cfg->output_limit ? cfg->output_limit : UINT64_MAX;
	if (cfg->tty) {
		/* The pty merges stdout and stderr: one stream, counted as
		 * stdout, read from the master once pid 1 sends it. */
		kiwi_output_init(&f.out, cfg->stdout_dest, limit);
		kiwi_output_init(&f.errout, -1, 0);
	} else if (kiwi_output_open(&f.out, cfg->stdout_dest, limit, err) < 0 ||
		   kiwi_output_open(&f.errout, cfg->stderr_dest, limit, err) < 0) {
		kiwi_output_close(&f.out);
		kiwi_output_close(&f.errout);
		return -1;
	}
	f.out.tail = cfg->stdout_tail;
	f.errout.tail = cfg->stderr_tail;

	/* Signals to forward are blocked from before clone until the end, so
	 * none is lost between creating the sandbox and listening for them.
	 * An ignored signal is dropped before it could wait in the signalfd,
	 * so one the caller ignored (a shell's background job ignores INT) is
	 * set to its default first: blocked, the default never acts. */
	sigset_t fwd, old;
	struct sigaction dfl = { .sa_handler = SIG_DFL }, saved[KIWI_ARRAY_SIZE(forwarded_signals)];
	sigemptyset(&fwd);
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(forwarded_signals); i++)
		sigaddset(&fwd, forwarded_signals[i]);
	if (cfg->tty)
		sigaddset(&fwd, SIGWINCH);  /* not forwarded: resizes the pty */
	sigprocmask(SIG_BLOCK, &fwd, &old);
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(forwarded_signals); i++)
		sigaction(forwarded_signals[i], &dfl, &saved[i]);
	int r = spawn_and_follow(&f, &fwd);
	/* Their directories go with the session's cgroup. */
	kiwi_cgroup_forget(f.warm_cg);
	follow_forget_exec_cgroups(&f);
	free(f.helper_binds);
	kiwi_registry_remove(f.reg);
	/* Before anything is printed, on every path: the signals that would
	 * end kiwi-run are blocked above and arrive here as a return. */
	kiwi_term_restore(&f.term);
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(forwarded_signals); i++)
		sigaction(forwarded_signals[i], &saved[i], NULL);
	sigprocmask(SIG_SETMASK, &old, NULL);

	kiwi_output_close(&f.out);
	kiwi_output_close(&f.errout);
	if (r == 0 && f.layer_fd >= 0 && end_layer(cfg, res, TAKE_FD(f.layer_fd), f.layer_in_place, err) < 0)
		r = -1;
	/* Pid 1's leaf is empty now: gone first, the session's cgroup goes
	 * at its first rmdir (kiwi_cgroup_destroy), where a child left would
	 * cost a kill, a wait and a walk of its children. */
	if (f.cg_leaf_fd >= 0)
		(void)unlinkat(kiwi_cgroup_fd(cg), "keeper", AT_REMOVEDIR);
	if (f.session)
		f.session->netns_fd = TAKE_FD(f.netns_fd);
	int fds[] = { f.sock, f.pidfd, f.sigfd, f.timerfd, f.audit_fd, f.master, f.layer_fd, f.cg_leaf_fd,
		      f.seal_fd, f.userns_fd, f.netns_fd, f.sealed_audit_fd, f.creator_fd };
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(fds); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return r;
}

/* The sandbox's cgroup: our own where the host delegates cgroups to us
 * (root, or a rootless caller under Delegate=yes). Else, with limits to
 * enforce, not root, and kiwi-helper(8) installed: one the helper makes
 * and moves the sandbox into after clone. Without limits a cgroup is only
 * a witness: a host that will not give one is no reason to fail. */
static int make_cgroup(const struct kiwi_sandbox_config *cfg, struct kiwi_sandbox_result *res, bool limited,
		       struct kiwi_cgroup **cg, kiwi_err *err)
{
	kiwi_err own = { 0 };
	if (kiwi_cgroup_create(cfg->cgroup_parent, &cfg->limits, cg, &own) == 0 || !limited)
		return 0;
	if (geteuid() == 0 || access(kiwi_helper_path(), X_OK) < 0) {
		*err = own;
		return -1;
	}
	char name[512];
	kiwi_err via = { 0 };
	if (kiwi_helper_cgroup_prepare(&res->helper, &cfg->limits, cfg->cgroup_parent, cfg->session != NULL, name,
				       sizeof(name), &via) == 0 &&
	    kiwi_cgroup_adopt(name, cg, &via) == 0)
		return 0;
	/* Both ways failed: the helper's reason first (the way meant for
	 * this caller), then ours, cut short if need be. */
	kiwi_error(err, via.errnum, "cgroup", "%s (and without the helper: %s)", via.msg, own.msg);
	return -1;
}

/* Whether the command's uid is the host's root, which RLIMIT_NPROC never
 * bounds (the kernel exempts it). */
static bool runs_as_host_root(const struct kiwi_sandbox_config *cfg)
{
	if (geteuid() != 0)
		return false;
	if (!cfg->idmap)
		return cfg->uid == 0;
	for (size_t i = 0; i < cfg->idmap->n_uid; i++) {
		const struct kiwi_id_extent *e = &cfg->idmap->uid[i];
		if (cfg->uid >= e->inside && cfg->uid - e->inside < e->count)
			return e->outside + (cfg->uid - e->inside) == 0;
	}
	return false;
}

/* One process bound, never two: RLIMIT_NPROC where the host has no
 * cgroup v2 pids controller, else pids.max alone, the one whose events
 * say it was hit (kiwi-run-verdict(5), bounds; with both, the rlimit,
 * counting every process of the uid, refuses a fork first and
 * pids_limit_hit stays false). */
static void choose_pids_bound(struct kiwi_sandbox_config *own)
{
	if (own->pids_rlimit <= 0 || own->limits.pids_max <= 0 || own->limits.pids_max == KIWI_CGROUP_MAX)
		return;
	if (kiwi_cgroup_unavailable(KIWI_CG_PIDS))
		own->limits.pids_max = -1;
	else
		own->pids_rlimit = 0;
}

static void note_bounds(const struct kiwi_sandbox_config *cfg, struct kiwi_sandbox_result *res)
{
	bool cgroup = res->has_cgroup && res->cg.pids_known && cfg->limits.pids_max > 0 &&
		      cfg->limits.pids_max != KIWI_CGROUP_MAX;
	bool rlimit = cfg->pids_rlimit > 0 && !runs_as_host_root(cfg);
	res->pids_bound = cgroup ? KIWI_PIDS_CGROUP : rlimit ? KIWI_PIDS_RLIMIT : KIWI_PIDS_UNBOUNDED;
	res->memory_bound = res->has_cgroup && res->cg.memory_known && cfg->limits.memory_max > 0 &&
			    cfg->limits.memory_max != KIWI_CGROUP_MAX;
}

/* The host's id for inside id in map; NULL map: the caller's own at 0. */
static uint32_t host_id(const struct kiwi_id_extent *map, size_t n, uint32_t inside, uint32_t own)
{
	for (size_t i = 0; i < n; i++)
		if (inside >= map[i].inside && inside - map[i].inside < map[i].count)
			return map[i].outside + (inside - map[i].inside);
	return own;
}

/* --disk-backend loop: the image's filesystem, mounted here (a user
 * namespace cannot mount ext4) and attached by the sandbox as its layer.
 * Its root belongs to the ids the sandbox's setup runs as (0 inside where
 * mapped), which make the layer's directories. */
static int make_disk(struct kiwi_sandbox_config *own, kiwi_err *err)
{
	if (own->disk_backend != KIWI_DISK_LOOP)
		return 0;
	/* Not root: kiwi-helper makes it after clone, once the sandbox's
	 * user namespace is there to idmap it to (release_child); the fd
	 * number it will take in both processes is reserved now. */
	if (geteuid() != 0) {
		if (own->disk_dir)
			return kiwi_error(err, EPERM, "disk", "--disk-dir is root's: kiwi-helper keeps the images it "
					  "makes in " KIWI_LOOPFS_DEFAULT_DIR);
		own->disk_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		return own->disk_fd < 0 ? kiwi_error(err, errno, "disk", "cannot reserve the disk's fd") : 0;
	}
	if (kiwi_loopfs_offered(err) < 0)
		return -1;
	int64_t t = KIWI_DEBUG_NOW(own->debug);
	const struct kiwi_idmap *m = own->idmap;
	uid_t uid = geteuid();
	gid_t gid = getegid();
	if (m) {
		uid = host_id(m->uid, m->n_uid, kiwi_idmap_maps(m->uid, m->n_uid, 0) ? 0 : own->uid, uid);
		gid = host_id(m->gid, m->n_gid, kiwi_idmap_maps(m->gid, m->n_gid, 0) ? 0 : own->gid, gid);
	}
	uint64_t size = own->disk_bytes ? own->disk_bytes : KIWI_FSLAYER_DEFAULT_SIZE;
	own->disk_fd = kiwi_loopfs_create(own->disk_dir, size, uid, gid, NULL, err);
	if (own->disk_fd < 0)
		return -1;
	KIWI_DEBUG(own->debug, "run", t, "disk", "ext4 image of %llu bytes on a loop device (autoclear), "
		   "root %u:%u", (unsigned long long)size, (unsigned)uid, (unsigned)gid);
	return 0;
}

int kiwi_sandbox_run(const struct kiwi_sandbox_config *caller_cfg, struct kiwi_sandbox_result *res,
		     kiwi_err *err)
{
	struct kiwi_sandbox_config own = *caller_cfg;
	choose_pids_bound(&own);
	const struct kiwi_sandbox_config *cfg = &own;
	*res = (struct kiwi_sandbox_result){ .exit_code = -1, .started_at = res->started_at };
	if (!res->started_at.tv_sec)
		clock_gettime(CLOCK_REALTIME, &res->started_at);
	res->net_audit = cfg->net_audit;
	res->disk_backend = cfg->disk_backend;
	res->network = cfg->egress ? "egress" : cfg->net_audit ? "audit" : "none";
	int64_t t = KIWI_DEBUG_NOW(cfg->debug);
	/* Root's default: kiwi's range, never the host's root (kiwi/idmount.h). */
	struct kiwi_idmap kiwi_range;
	if (geteuid() == 0 && !own.idmap && !own.host_root_map) {
		if (kiwi_idmount_default_map(&kiwi_range, err) < 0)
			return -1;
		own.idmap = &kiwi_range;
		own.idmounts = true;
	}
	if (check_config(cfg, err) < 0)
		return -1;
	KIWI_DEBUG(cfg->debug, "run", t, "check", "rootfs=%s, %zu bind(s), %zu fd(s)", cfg->rootfs,
		   cfg->n_binds, cfg->n_preserve_fds);
	if (make_disk(&own, err) < 0)
		return -1;
	/* Ours until the end: the sandbox holds the mount from clone on. */
	_cleanup_close_ int disk = cfg->disk_backend == KIWI_DISK_LOOP ? own.disk_fd : -1;
	/* Started before clone, so that a missing helper costs no sandbox;
	 * egress, when asked for too, shares the session. */
	if ((helper_writes_maps(cfg) || helper_makes_disk(cfg)) && kiwi_helper_start(&res->helper, err) < 0)
		return -1;

	/* The command's process applies the rules; the ABI is the kernel's. */
	res->landlock_abi = cfg->landlock ? kiwi_landlock_abi() : 0;
	struct kiwi_cgroup *cg = NULL;
	bool limited = kiwi_cgroup_limits_any(&cfg->limits);
	if (limited || cfg->own_cgroup) {
		/* Without limits a cgroup is only a witness: a host that will
		 * not give one is no reason to fail. */
		t = KIWI_DEBUG_NOW(cfg->debug);
		if (make_cgroup(cfg, res, limited, &cg, err) < 0)
			return -1;
		KIWI_DEBUG(cfg->debug, "run", t, "cgroup", "%s", cg ? kiwi_cgroup_name(cg) : "none (not offered)");
	}
	int r = run_with_network(cfg, res, cg, err);
	/* Landed or dropped: nothing of the image is worth writing back. */
	if (disk >= 0 && !res->has_layer)
		kiwi_loopfs_discard(disk);
	note_bounds(cfg, res);
	/* A cgroup that cannot go (a task stuck in the kernel) is a leak the
	 * caller must hear of, whatever the command did. */
	t = KIWI_DEBUG_NOW(cfg->debug);
	if (kiwi_cgroup_destroy(cg, &res->cleanup_error) < 0)
		res->cleanup_failed = true;
	if (cg)
		KIWI_DEBUG(cfg->debug, "run", t, "cgroup-remove", "%s", res->cleanup_failed ? "failed" : "done");
	return r;
}

/* Runs cfg with the egress network when it asks for one. */
static int run_with_network(const struct kiwi_sandbox_config *cfg, struct kiwi_sandbox_result *res,
			    struct kiwi_cgroup *cg, kiwi_err *err)
{
	if (!cfg->egress)
		return run_prepared(cfg, res, cg, err);

	/* The network's pinned /etc/hosts and /etc/resolv.conf come before the
	 * caller's binds, which may still replace them. */
	struct kiwi_egress_child net = { 0 };
	int64_t t = KIWI_DEBUG_NOW(cfg->debug);
	/* Not root: the veth and the host's table come from kiwi-helper(8). */
	if (geteuid() != 0 ? kiwi_helper_egress_prepare(&res->helper, cfg->egress, &net, err) < 0
			   : kiwi_egress_prepare(cfg->egress, &res->egress, &net, err) < 0 ||
				     kiwi_egress_gate_attach(res->egress, err) < 0)
		return -1;
	KIWI_DEBUG(cfg->debug, "run", t, "egress-prepare", "policy checked, names resolved, address leased");
	_cleanup_free_ struct kiwi_bind *binds = calloc(cfg->n_binds + 2, sizeof(*binds));
	if (!binds)
		return kiwi_error(err, ENOMEM, "egress", "cannot allocate the binds");
	binds[0] = (struct kiwi_bind){ .source = net.hosts_path, .dest = "/etc/hosts", .read_only = true };
	binds[1] = (struct kiwi_bind){ .source = net.resolv_path, .dest = "/etc/resolv.conf", .read_only = true };
	if (cfg->n_binds)  /* binds may be NULL when there are none */
		memcpy(binds + 2, cfg->binds, cfg->n_binds * sizeof(*binds));
	struct kiwi_sandbox_config with_net = *cfg;
	with_net.binds = binds;
	with_net.n_binds = cfg->n_binds + 2;
	return run_prepared(&with_net, res, cg, err);
}

int kiwi_sandbox_result_release(struct kiwi_sandbox_result *res, kiwi_err *err)
{
	if (res->has_layer)
		close(res->layer_fd);
	res->has_layer = false;
	free(TAKE_PTR(res->egress_tally));
	struct kiwi_egress *e = TAKE_PTR(res->egress);
	int r = kiwi_helper_stop(TAKE_PTR(res->helper), err);
	if (e && kiwi_egress_teardown(e, r < 0 ? NULL : err) < 0)
		r = -1;
	return r;
}

int kiwi_sandbox_exit_status(const struct kiwi_sandbox_result *res, const kiwi_err *err, bool failed)
{
	if (failed) {
		if (!strcmp(err->step, "exec"))
			return err->errnum == ENOENT || err->errnum == ENOTDIR ? 127 : 126;
		return 125;
	}
	if (res->signal)
		return 128 + res->signal;
	return res->exit_code;
}
