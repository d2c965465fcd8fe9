/* SPDX-License-Identifier: Apache-2.0 */
/* `session exec`, the client's side (kiwi/keeper.h has the protocol): the
 * command runs as a child of an exec leader inside the session; its output
 * comes here through pipes (or a pty), and its end, with its own cgroup's
 * counts, becomes a run's result. */
#include "kiwi/session.h"
#include "kiwi/cgroup.h"
#include "kiwi/cleanup.h"
#include "kiwi/debug.h"
#include "kiwi/idmount.h"
#include "kiwi/keeper.h"
#include "kiwi/net_audit.h"
#include "kiwi/output.h"
#include "kiwi/pty.h"
#include "kiwi/sync.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };

struct client {
	const struct kiwi_session_exec *x;
	struct kiwi_sandbox_result *res;
	kiwi_err *err;
	int conn, timerfd, sigfd, master;
	int leader;                /* the leader's pidfd */
	struct kiwi_output out, errout;
	struct kiwi_cgroup *cg;    /* the exec's own, below the session's; NULL: none */
	struct kiwi_term term;
	struct kiwi_pty_input in;
	int64_t exec_mono;
	int64_t asked_ns;          /* --debug: when the request went */
	bool exited, conn_gone, killing, grace_armed, failed, killed_whole;
	bool session_removes;      /* the cgroup goes with the leader, by the supervisor */
};

/* The leader's pid as this (the host's) pid namespace sees it: a pidfd's
 * fdinfo says it in the reader's procfs. */
static pid_t pidfd_host_pid(int pidfd)
{
	char path[64], text[512];
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, text, sizeof(text) - 1) : -1;
	if (n <= 0)
		return -1;
	text[n] = '\0';
	const char *p = strstr(text, "\nPid:");
	return p ? (pid_t)atoi(p + 5) : -1;
}

/* The exec's own cgroup, so that its memory, OOM kills and pids are its
 * own: <session>/exec-<number>, which the session's supervisor made (or
 * made ahead, with the exec's leader already waiting in it) and names
 * first thing (KIWI_EXEC_CGROUP, kiwi/keeper.h). A session without a
 * cgroup, or a supervisor older than this, gives none: the leader still
 * ends the exec's tree, as a subreaper. */
static void take_own_cgroup(struct client *c, const struct kiwi_registry_entry *e, const struct kiwi_exec_msg *m)
{
	const struct kiwi_debug *dbg = c->x->debug;
	if (c->cg || !(m->flags & KIWI_EXEC_CGROUP_MADE) || !e->cgroup[0]) {
		KIWI_DEBUG(dbg, "run", 0, "exec-cgroup", "none of its own: the session has none to give");
		return;
	}
	int64_t t = KIWI_DEBUG_NOW(dbg);
	char leaf[32];
	kiwi_err why = { 0 };
	snprintf(leaf, sizeof(leaf), KIWI_EXEC_CGROUP_LEAF, (uint32_t)m->value);
	if (kiwi_cgroup_open_made(e->cgroup, leaf, &c->cg, &why) < 0) {
		KIWI_DEBUG(dbg, "run", t, "exec-cgroup", "none of its own: %s: %s", why.msg, strerror(why.errnum));
		return;
	}
	c->session_removes = m->flags & KIWI_EXEC_CGROUP_SESSION_REMOVES;
	KIWI_DEBUG(dbg, "run", t, "exec-cgroup", "%s, %s%s", kiwi_cgroup_name(c->cg),
		   m->flags & KIWI_EXEC_CGROUP_WARM ? "its leader started ahead in it" : "made for it",
		   c->session_removes ? "; the session removes it after the leader" : "");
}

/* Once READY came: the leader was born in the exec's cgroup, or (pid 1
 * could not, or is older than this) it is moved in now, before GO,
 * through cgroup.procs, which waits for the cgroup core's fork lock as a
 * writer. Either way --debug says which, and why clone3 was refused: an
 * EPERM here is a delegation gone wrong, never to be hidden. */
static void enter_own_cgroup(struct client *c, const struct kiwi_exec_msg *ready, int pidfd)
{
	if (!c->cg)
		return;
	const struct kiwi_debug *dbg = c->x->debug;
	if (ready->flags & KIWI_EXEC_IN_CGROUP) {
		KIWI_DEBUG(dbg, "run", c->asked_ns, "exec-cgroup", "leader born in %s (clone3 CLONE_INTO_CGROUP)%s",
			   kiwi_cgroup_name(c->cg), ready->flags & KIWI_EXEC_GOING ? ", command started without GO" : "");
		return;
	}
	int64_t t = KIWI_DEBUG_NOW(dbg);
	const char *why = ready->value ? strerror(ready->value) : "not tried by the session's pid 1";
	kiwi_err e = { 0 };
	pid_t pid = pidfd_host_pid(pidfd);
	if (pid > 0 && kiwi_cgroup_enter(c->cg, pid, &e) == 0) {
		KIWI_DEBUG(dbg, "run", t, "exec-cgroup", "leader moved into %s through cgroup.procs (clone3 into it: %s)",
			   kiwi_cgroup_name(c->cg), why);
		return;
	}
	KIWI_DEBUG(dbg, "run", t, "exec-cgroup", "none of its own (clone3 into it: %s; then %s: %s)", why,
		   pid > 0 ? e.msg : "the leader's pid", strerror(pid > 0 ? e.errnum : ESRCH));
	kiwi_cgroup_destroy(TAKE_PTR(c->cg), NULL);
}

static int fail(struct client *c, const kiwi_err *e)
{
	if (!c->failed) {
		*c->err = *e;
		c->failed = true;
	}
	return -1;
}

static void send_kill(struct client *c, int sig)
{
	struct kiwi_exec_msg m = { .type = KIWI_EXEC_KILL, .value = sig };
	kiwi_exec_send(c->conn, &m, -1);
}

/* The whole exec at once: its cgroup where it has one (the leader too: it
 * cannot be stopped by the command in the way), else the leader's kill of
 * its tree. */
static void kill_exec(struct client *c)
{
	if (c->killing)
		return;
	c->killing = true;
	if (c->cg && kiwi_cgroup_kill(c->cg, NULL) == 0)
		return;
	send_kill(c, SIGKILL);
}

static void arm(struct client *c, uint64_t ns)
{
	struct itimerspec its = { .it_value = { .tv_sec = (time_t)(ns / 1000000000),
						.tv_nsec = (long)(ns % 1000000000) } };
	if (!its.it_value.tv_sec && !its.it_value.tv_nsec)
		its.it_value.tv_nsec = 1;
	timerfd_settime(c->timerfd, 0, &its, NULL);
}

static void on_timer(struct client *c)
{
	uint64_t ticks;
	if (read(c->timerfd, &ticks, sizeof(ticks)) < 0)
		return;
	c->res->timed_out = true;
	if (c->x->kill_grace_ns && !c->grace_armed) {
		c->grace_armed = true;
		send_kill(c, SIGTERM);
		arm(c, c->x->kill_grace_ns);
		return;
	}
	kill_exec(c);
}

static void on_leader(struct client *c)
{
	struct kiwi_exec_msg m;
	int fd, r = kiwi_exec_recv(c->conn, &m, MSG_DONTWAIT, &fd);
	if (fd >= 0)
		close(fd);
	if (r < 0 && errno == EAGAIN)
		return;
	if (r <= 0) {
		/* The leader gone without a word (killed by the command: same
		 * user): nothing can follow the command now, so it ends with
		 * what it started, instead of holding our pipes open. */
		c->conn_gone = true;
		if (!c->exited && c->cg) {
			c->killed_whole = true;
			kill_exec(c);
		}
		return;
	}
	if (m.type == KIWI_EXEC_EXIT) {
		c->exited = true;
		c->conn_gone = true;
		if (WIFSIGNALED(m.value))
			c->res->signal = WTERMSIG(m.value);
		else
			c->res->exit_code = WEXITSTATUS(m.value);
		c->res->wall_ns = m.mono_ns > c->exec_mono ? (uint64_t)(m.mono_ns - c->exec_mono) : 0;
		c->res->cpu_user_us = m.utime_us;
		c->res->cpu_sys_us = m.stime_us;
		c->res->disk_full = m.disk_full;
		c->res->disk_used_kib = m.disk_used_kib;
		c->res->disk_backend = (int)m.disk_backend;
	}
}

static void on_signal(struct client *c)
{
	struct signalfd_siginfo si;
	while (read(c->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if ((int)si.ssi_signo == SIGWINCH && c->master >= 0) {
			struct winsize ws;
			kiwi_pty_caller_winsize(STDIN_FILENO, c->x->stdout_dest, &ws);
			ioctl(c->master, TIOCSWINSZ, &ws);
		} else if ((int)si.ssi_signo != SIGWINCH) {
			send_kill(c, (int)si.ssi_signo);
		}
	}
}

static void on_output(struct client *c, struct kiwi_output *o)
{
	kiwi_err e = { 0 };
	if (kiwi_output_pump(o, &e) < 0)
		fail(c, &e);
	if (o->truncated && c->x->output_limit_kill && !c->res->output_limit_hit) {
		c->res->output_limit_hit = true;
		kill_exec(c);
	}
}

/* Until the leader has reported (or is gone) and the output is drained.
 * Background processes a kept exec leaves hold its pipes open: once the
 * leader has reported, what is there is taken and the rest left. */
enum { S_CONN, S_OUT, S_ERR, S_OUT_DEST, S_ERR_DEST, S_TIMER, S_SIGNAL, S_TTY_IN, S_TTY_MASTER, S_COUNT };

static void on_writable(struct client *c, struct kiwi_output *o)
{
	kiwi_err e = { 0 };
	if (kiwi_output_flush(o, &e) < 0)
		fail(c, &e);
}

static int relay(struct client *c)
{
	while (!c->conn_gone || !kiwi_output_done(&c->out) || !kiwi_output_done(&c->errout)) {
		if (c->conn_gone && c->x->keep_background) {
			/* What the exec wrote is in the pipes now; what stays
			 * open is the kept processes'. */
			kiwi_output_stop_waiting(&c->out);
			kiwi_output_stop_waiting(&c->errout);
			if (c->out.read_fd >= 0)
				on_output(c, &c->out);
			if (c->errout.read_fd >= 0)
				on_output(c, &c->errout);
			break;
		}
		bool tty = c->master >= 0 && !c->conn_gone;
		struct pollfd pfd[S_COUNT] = {
			[S_CONN] = { .fd = c->conn_gone ? -1 : c->conn, .events = POLLIN },
			[S_OUT] = { .fd = kiwi_output_wants_read(&c->out) ? c->out.read_fd : -1, .events = POLLIN },
			[S_ERR] = { .fd = kiwi_output_wants_read(&c->errout) ? c->errout.read_fd : -1, .events = POLLIN },
			[S_OUT_DEST] = { .fd = kiwi_output_wants_write(&c->out) ? c->out.out_fd : -1, .events = POLLOUT },
			[S_ERR_DEST] = { .fd = kiwi_output_wants_write(&c->errout) ? c->errout.out_fd : -1,
					 .events = POLLOUT },
			[S_TIMER] = { .fd = c->timerfd, .events = POLLIN },
			[S_SIGNAL] = { .fd = c->sigfd, .events = POLLIN },
			[S_TTY_IN] = { .fd = tty && kiwi_pty_input_wants_read(&c->in) ? c->in.in_fd : -1, .events = POLLIN },
			[S_TTY_MASTER] = { .fd = tty && kiwi_pty_input_wants_write(&c->in) ? c->master : -1,
					   .events = POLLOUT },
		};
		if (poll(pfd, S_COUNT, -1) < 0 && errno != EINTR)
			return kiwi_error(c->err, errno, "exec", "cannot wait for the exec");
		if (pfd[S_OUT_DEST].revents)
			on_writable(c, &c->out);
		if (pfd[S_ERR_DEST].revents)
			on_writable(c, &c->errout);
		if (pfd[S_OUT].revents)
			on_output(c, &c->out);
		if (pfd[S_ERR].revents)
			on_output(c, &c->errout);
		if (pfd[S_CONN].revents)
			on_leader(c);
		if (pfd[S_TIMER].revents)
			on_timer(c);
		if (pfd[S_SIGNAL].revents)
			on_signal(c);
		if (pfd[S_TTY_IN].revents && kiwi_pty_input_read(&c->in) == KIWI_PTY_INPUT_HANGUP)
			kill_exec(c);
		if (pfd[S_TTY_MASTER].revents)
			kiwi_pty_input_write(&c->in);
	}
	return 0;
}

/* Sends the request; with --tty the leader answers with the pty's master
 * first. Then READY and its pidfd: the exec's cgroup, and GO. */
/* The supervisor refuses an exec (kiwi/sandbox.h) with a KIWI_EXEC_FAILED
 * and closes the connection; the request it left unread makes the first
 * receive here fail with ECONNRESET before the refusal, which is still
 * queued behind it. */
static void take_refusal(struct client *c)
{
	struct kiwi_exec_msg m;
	int fd = -1;
	if (kiwi_exec_recv(c->conn, &m, MSG_DONTWAIT, &fd) > 0 && m.type == KIWI_EXEC_FAILED)
		*c->err = m.err;
	kiwi_closep(&fd);
}

static int start(struct client *c, const struct kiwi_registry_entry *e)
{
	const struct kiwi_session_exec *x = c->x;
	struct winsize ws = { 0 };
	if (x->tty)
		kiwi_pty_caller_winsize(STDIN_FILENO, x->stdout_dest, &ws);
	struct kiwi_exec_request r = {
		.flags = (x->keep_background ? KIWI_EXEC_KEEP_BACKGROUND : 0) | (x->tty ? KIWI_EXEC_TTY : 0) |
			 KIWI_EXEC_GO_IF_MOVED | KIWI_EXEC_UNTIL_CLOSED,
		.argv = (char **)x->argv, .envp = (char **)x->envp, .cwd = x->cwd ? x->cwd : "/",
		.fds = { x->tty || isatty(STDIN_FILENO) ? -1 : STDIN_FILENO, c->out.write_fd, c->errout.write_fd },
		.rows = ws.ws_row, .cols = ws.ws_col,
	};
	/* A root session on kiwi's range (kiwi/idmount.h): its root gets our
	 * pipes, which /dev/stdout reopens, as a run's does. */
	uint32_t uid, gid;
	if (geteuid() == 0 && kiwi_idmount_root_of(e->pid, &uid, &gid) == 0 && uid != 0 &&
	    kiwi_idmount_give_pipes(&r.fds[1], 2, uid, gid, c->err) < 0)
		return -1;
	c->asked_ns = KIWI_DEBUG_NOW(x->debug);
	if (kiwi_exec_send_request(c->conn, &r, c->err) < 0) {
		take_refusal(c);
		return -1;
	}
	kiwi_closep(&c->out.write_fd);
	kiwi_closep(&c->errout.write_fd);
	struct kiwi_exec_msg m;
	int fd = -1;
	bool saw_cgroup = false;
	for (;;) {
		int got = kiwi_exec_recv(c->conn, &m, 0, &fd);
		if (got <= 0) {
			kiwi_error(c->err, got < 0 ? errno : EPIPE, "exec", "the session ended the exec before it began");
			take_refusal(c);
			return -1;
		}
		if (m.type == KIWI_EXEC_FAILED) {
			kiwi_closep(&fd);
			*c->err = m.err;
			return -1;
		}
		if (m.type == KIWI_EXEC_CGROUP && fd < 0 && !saw_cgroup) {
			saw_cgroup = true;
			take_own_cgroup(c, e, &m);
			continue;
		}
		if (m.type == KIWI_EXEC_PTY && x->tty && c->master < 0 && fd >= 0 && kiwi_pty_is_master(fd)) {
			c->master = TAKE_FD(fd);
			continue;
		}
		if (m.type == KIWI_EXEC_READY && fd >= 0)
			break;
		kiwi_closep(&fd);
		return kiwi_error(c->err, EPROTO, "exec", "an unexpected message from the session");
	}
	c->leader = fd;
	uint32_t ready_flags = m.flags;
	/* Going without GO with our cgroup not its birthplace: the command
	 * would start outside it, which we never let happen unsaid. */
	if ((m.flags & KIWI_EXEC_GOING) && c->cg && !(m.flags & KIWI_EXEC_IN_CGROUP)) {
		send_kill(c, SIGKILL);
		return kiwi_error(c->err, EPROTO, "exec", "the session started the exec outside the exec's cgroup");
	}
	enter_own_cgroup(c, &m, c->leader);
	m = (struct kiwi_exec_msg){ .type = KIWI_EXEC_GO };
	if (!(ready_flags & KIWI_EXEC_GOING) && kiwi_exec_send(c->conn, &m, -1) < 0)
		return kiwi_error(c->err, errno, "exec", "cannot start the exec");
	int got = kiwi_exec_recv(c->conn, &m, 0, &fd);
	kiwi_closep(&fd);
	if (got > 0 && m.type == KIWI_EXEC_FAILED) {
		*c->err = m.err;
		return -1;
	}
	if (got <= 0 || m.type != KIWI_EXEC_STARTED)
		return kiwi_error(c->err, EPROTO, "exec", "the session did not start the command");
	c->res->started = true;
	c->exec_mono = m.mono_ns;
	return 0;
}

/* --tty: the pty's output is one stream, and our terminal goes raw. */
static int start_tty(struct client *c)
{
	c->out.read_fd = fcntl(c->master, F_DUPFD_CLOEXEC, 3);
	if (c->out.read_fd < 0 || fcntl(c->master, F_SETFL, O_NONBLOCK) < 0 ||
	    fcntl(c->out.read_fd, F_SETFL, O_NONBLOCK) < 0)
		return kiwi_error(c->err, errno, "tty", "cannot relay the terminal");
	kiwi_pty_input_init(&c->in, STDIN_FILENO, c->master);
	return kiwi_term_raw(&c->term, STDIN_FILENO, c->err);
}

/* The exec's cgroup's counts. An OOM kill there ends its whole group,
 * the leader with the command: that is the exec's end, not a failure. */
static void read_cgroup(struct client *c)
{
	struct kiwi_sandbox_result *res = c->res;
	res->has_cgroup = true;
	snprintf(res->cgroup_name, sizeof(res->cgroup_name), "%s", kiwi_cgroup_name(c->cg));
	if (kiwi_cgroup_read_stats(c->cg, &res->cg, NULL) == 0 && res->cg.cpu_usage_us) {
		res->cpu_user_us = res->cg.cpu_user_us;
		res->cpu_sys_us = res->cg.cpu_system_us;
	}
	if (!c->exited && res->cg.oom_killed)
		c->killed_whole = true;
}

static void finish(struct client *c)
{
	struct kiwi_sandbox_result *res = c->res;
	if (c->cg)
		read_cgroup(c);
	/* Started, and its leader gone without a word: the cgroup took it
	 * with the command (our kill, an OOM), or something outside the exec
	 * did: the session's end (destroy, its timeouts, its pid 1 killed),
	 * verify's switch, a kill of the leader. The command was killed with
	 * it (its cgroup goes below), so that is what the verdict says. */
	if (!c->exited && !c->failed && res->started) {
		res->signal = SIGKILL;
		res->killed_whole = c->killed_whole || !c->killing;
		if (c->exec_mono)
			res->wall_ns = (uint64_t)(kiwi_clock_ns(CLOCK_MONOTONIC) - c->exec_mono);
	}
	res->stdout_bytes = c->out.bytes;
	res->stderr_bytes = c->errout.bytes;
	res->stdout_truncated = c->out.truncated;
	res->stderr_truncated = c->errout.truncated;
	if (!c->cg)
		return;
	/* Kept: what it left runs on in its cgroup, removed with the session.
	 * Or the leader reported the end of everything the exec started: the
	 * session removes the cgroup once pid 1 has reaped the leader, which
	 * stays until we close (KIWI_EXEC_UNTIL_CLOSED), so neither its exit
	 * nor the rmdir is on our time. A leader gone without a word may have
	 * left the command running: that one we end and remove ourselves. */
	if (c->x->keep_background || (c->session_removes && c->exited)) {
		kiwi_cgroup_forget(TAKE_PTR(c->cg));
		return;
	}
	/* The leader has reported and leaves once we close: then the cgroup
	 * is empty and goes at the first rmdir, not after a kill and a wait. */
	kiwi_closep(&c->conn);
	struct pollfd gone = { .fd = c->leader, .events = POLLIN };
	if (c->leader >= 0)
		poll(&gone, 1, 1000);
	if (kiwi_cgroup_destroy(TAKE_PTR(c->cg), &res->cleanup_error) < 0)
		res->cleanup_failed = true;
}

static int open_streams(struct client *c)
{
	uint64_t limit = c->x->output_limit ? c->x->output_limit : UINT64_MAX;
	if (c->x->tty) {
		kiwi_output_init(&c->out, c->x->stdout_dest, limit);
		kiwi_output_init(&c->errout, -1, 0);
	} else if (kiwi_output_open(&c->out, c->x->stdout_dest, limit, c->err) < 0 ||
		   kiwi_output_open(&c->errout, c->x->stderr_dest, limit, c->err) < 0) {
		return -1;
	}
	c->out.tail = c->x->stdout_tail;
	c->errout.tail = c->x->stderr_tail;
	return 0;
}

static int run_exec(struct client *c, const struct kiwi_registry_entry *e)
{
	if (open_streams(c) < 0)
		return -1;
	c->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (c->timerfd < 0 || start(c, e) < 0 || (c->master >= 0 && start_tty(c) < 0)) {
		if (c->timerfd < 0)
			kiwi_error(c->err, errno, "exec", "cannot make a timer");
		if (c->cg)
			kiwi_cgroup_destroy(TAKE_PTR(c->cg), NULL);
		return -1;
	}
	if (c->x->timeout_ns)
		arm(c, c->x->timeout_ns);
	int r = relay(c);
	finish(c);
	return r < 0 || c->failed ? -1 : 0;
}

int kiwi_session_exec(const struct kiwi_registry_entry *e, const struct kiwi_session_exec *x,
		      struct kiwi_sandbox_result *res, kiwi_err *err)
{
	struct timespec at = res->started_at;
	*res = (struct kiwi_sandbox_result){ .exit_code = -1, .started_at = at };
	/* Asked for first: the session starts the exec's leader while we set
	 * up our end. Its command waits for our request (sent once the tally
	 * below is marked), so no attempt of it comes before the mark. */
	const char op[2] = { x->before_verify ? KIWI_SESSION_OP_EXEC_BEFORE_VERIFY : 'x',
			     KIWI_SESSION_EXEC_CGROUP_FROM_SESSION };
	int conn = kiwi_session_request(e, op, sizeof(op), err);
	if (conn < 0)
		return -1;
	/* The session's network, pinned at create: its kind, for the verdict,
	 * and with egress the attempts made while the exec ran. */
	static const char *const kinds[] = { "egress", "audit", "none" };
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(kinds); i++)
		if (!strcmp(e->network, kinds[i]))
			res->network = kinds[i];
	struct kiwi_session_tally_reply before = { 0 };
	kiwi_err ignored = { 0 };
	_cleanup_close_ int audit = -1;
	bool marked = res->network == kinds[0] && kiwi_session_tally(e, NULL, &before, NULL, &audit, &ignored) == 0;
	/* Sealed by phase verify: no way out, the audit sees what is tried
	 * (what an earlier exec tried is dropped first). */
	struct kiwi_net_attempts earlier = { 0 };
	if (marked && before.sealed)
		res->network = audit >= 0 && kiwi_net_audit_drain(audit, &earlier, NULL) == 0 ? "audit" : "none";
	if (!at.tv_sec)
		clock_gettime(CLOCK_REALTIME, &res->started_at);
	struct client c = { .x = x, .res = res, .err = err, .conn = conn, .timerfd = -1, .sigfd = -1, .master = -1,
			    .leader = -1 };
	kiwi_output_init(&c.out, -1, 0);
	kiwi_output_init(&c.errout, -1, 0);
	/* Signals for the command are blocked from here to the end and read
	 * from a signalfd, so none is lost while the exec starts. */
	sigset_t fwd, old;
	sigemptyset(&fwd);
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(forwarded); i++)
		sigaddset(&fwd, forwarded[i]);
	if (x->tty)
		sigaddset(&fwd, SIGWINCH);
	sigprocmask(SIG_BLOCK, &fwd, &old);
	c.sigfd = signalfd(-1, &fwd, SFD_CLOEXEC | SFD_NONBLOCK);
	int r = c.sigfd < 0 ? kiwi_error(err, errno, "exec", "cannot watch signals") : run_exec(&c, e);
	struct kiwi_session_tally_reply after;
	if (marked && !before.sealed && res->started)
		kiwi_session_tally(e, &before.mark, &after, &res->egress_tally, NULL, &ignored);
	if (res->network == kinds[1] && audit >= 0 && res->started)
		res->net_audit = kiwi_net_audit_drain(audit, &res->net_attempts, NULL) == 0;
	kiwi_term_restore(&c.term);
	sigprocmask(SIG_SETMASK, &old, NULL);
	kiwi_output_close(&c.out);
	kiwi_output_close(&c.errout);
	int fds[] = { c.conn, c.timerfd, c.sigfd, c.master, c.leader };
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(fds); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return r;
}

/* Waits for what the leader says next, skipping nothing: READY, STARTED,
 * EXIT, or FAILED with its error. */
static int expect(int conn, enum kiwi_exec_type want, struct kiwi_exec_msg *m, kiwi_err *err)
{
	int fd, got = kiwi_exec_recv(conn, m, 0, &fd);
	kiwi_closep(&fd);
	if (got > 0 && m->type == KIWI_EXEC_FAILED) {
		*err = m->err;
		return -1;
	}
	if (got <= 0 || m->type != want)
		return kiwi_error(err, got < 0 ? errno : EPROTO, "cp", "the session broke off the copy");
	return 0;
}

int kiwi_session_copy(const struct kiwi_registry_entry *e, bool in, const char *inside, int fd, mode_t mode,
		      kiwi_err *err)
{
	if (inside[0] != '/')
		return kiwi_error(err, EINVAL, "cp", "`%s`: give the path in the session from its root (/...)", inside);
	char *argv[] = { (char *)inside, NULL }, *envp[] = { NULL };
	struct kiwi_exec_request r = {
		.flags = in ? KIWI_EXEC_COPY_IN : KIWI_EXEC_COPY_OUT, .argv = argv, .envp = envp, .cwd = "",
		.fds = { in ? fd : -1, in ? -1 : fd, -1 }, .mode = mode,
	};
	_cleanup_close_ int conn = kiwi_session_connect(e, 'x', err);
	if (conn < 0 || kiwi_exec_send_request(conn, &r, err) < 0)
		return -1;
	struct kiwi_exec_msg m;
	if (expect(conn, KIWI_EXEC_READY, &m, err) < 0)
		return -1;
	m = (struct kiwi_exec_msg){ .type = KIWI_EXEC_GO };
	if (kiwi_exec_send(conn, &m, -1) < 0)
		return kiwi_error(err, errno, "cp", "cannot start the copy");
	if (expect(conn, KIWI_EXEC_STARTED, &m, err) < 0 || expect(conn, KIWI_EXEC_EXIT, &m, err) < 0)
		return -1;
	return 0;
}
