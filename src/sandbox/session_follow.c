/* SPDX-License-Identifier: Apache-2.0 */
/* A session's part of what kiwi-run's side follows (follow.h): its
 * timer, each exec's cgroup (the first one's leader started ahead), its
 * clients, and verify's seal. sandbox.c's follow() calls in here. */
#include "follow.h"
#include "kiwi/cleanup.h"
#include "kiwi/debug.h"
#include "kiwi/fds.h"
#include "kiwi/keeper.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

static void cool_down(struct follow *f);

/* A session's one timer: the nearer of its idle and lifetime bounds. */
static void arm_session_timer(struct follow *f)
{
	const struct kiwi_session_hooks *s = f->session;
	int64_t now = kiwi_clock_ns(CLOCK_MONOTONIC), due = INT64_MAX;
	if (s->max_lifetime_ns)
		due = f->ready_at + (int64_t)s->max_lifetime_ns;
	if (s->idle_timeout_ns && f->execs == 0 && f->idle_since + (int64_t)s->idle_timeout_ns < due)
		due = f->idle_since + (int64_t)s->idle_timeout_ns;
	if (f->warm_cg && f->warm_until < due)
		due = f->warm_until;
	if (due == INT64_MAX) {
		struct itimerspec off = { 0 };
		timerfd_settime(f->timerfd, 0, &off, NULL);
		return;
	}
	follow_arm_timer(f, due > now ? (uint64_t)(due - now) : 1);
}

void follow_session_end(struct follow *f, const char *why)
{
	if (!f->session->end_reason)
		f->session->end_reason = why;
	follow_kill(f);
}

void follow_session_timer(struct follow *f)
{
	int64_t now = kiwi_clock_ns(CLOCK_MONOTONIC);
	const struct kiwi_session_hooks *s = f->session;
	if (f->warm_cg && now >= f->warm_until)
		cool_down(f);
	if (s->max_lifetime_ns && now >= f->ready_at + (int64_t)s->max_lifetime_ns)
		follow_session_end(f, "max_lifetime");
	else if (s->idle_timeout_ns && f->execs == 0 && now >= f->idle_since + (int64_t)s->idle_timeout_ns)
		follow_session_end(f, "idle_timeout");
	else
		arm_session_timer(f);
}

/* ---- a session's exec cgroups (kiwi/keeper.h) ----------------------- */

/* <session>/exec-<number>, its cgroup.procs given to pid 1's owner as the
 * session's is: the kernel asks pid 1 for that right when it starts the
 * exec's leader in it (clone3 CLONE_INTO_CGROUP). NULL: the exec has
 * none (no session cgroup, or none can be made: --debug says why). */
static struct kiwi_cgroup *make_exec_cgroup(struct follow *f, uint32_t *number)
{
	if (!f->cg)
		return NULL;
	const struct kiwi_debug *dbg = f->cfg->debug;
	int64_t t = KIWI_DEBUG_NOW(dbg);
	char leaf[32];
	struct kiwi_cgroup *cg = NULL;
	kiwi_err e = { 0 };
	uid_t owner = geteuid();
	if (getrandom(number, sizeof(*number), 0) != (ssize_t)sizeof(*number))
		return NULL;
	snprintf(leaf, sizeof(leaf), KIWI_EXEC_CGROUP_LEAF, *number);
	if (kiwi_cgroup_open_child(kiwi_cgroup_name(f->cg), leaf, &cg, &e) < 0)
		KIWI_DEBUG(dbg, "run", t, "exec-cgroup", "none: %s: %s", e.msg, strerror(e.errnum));
	else if (kiwi_cgroup_inherit_procs_owner(cg, &owner, &e) < 0)
		KIWI_DEBUG(dbg, "run", t, "exec-cgroup", "%s made; %s: %s", kiwi_cgroup_name(cg), e.msg,
			   strerror(e.errnum));
	return cg;
}

/* How long the first exec's leader and command wait for it: what they
 * save (bench/RESULTS.md) matters to a caller that execs as soon as create
 * returns; an idle session then costs the host two processes less. */
#define KIWI_WARM_FOR_NS (2 * 1000000000LL)

/* Unused in time: both killed with their cgroup (pid 1 reaps them), and
 * the session's execs start theirs when they come. */
static void cool_down(struct follow *f)
{
	int64_t t = KIWI_DEBUG_NOW(f->cfg->debug);
	kiwi_err e = { 0 };
	if (kiwi_cgroup_destroy(TAKE_PTR(f->warm_cg), &e) < 0)
		KIWI_DEBUG(f->cfg->debug, "run", t, "exec-warm", "%s: %s", e.msg, strerror(e.errnum));
	follow_send_to_init(f, KIWI_SYNC_EXEC_COOL, 0);
	f->warm_ready = false;
	f->warm_off = true;
}

/* The next exec's cgroup, and its leader started in it by pid 1, made
 * while no one waits (once the session is ready, and after each exec):
 * that exec then pays for neither the mkdir nor pid 1's clone3 of its
 * leader (bench/RESULTS.md). One at a time; an exec that comes meanwhile
 * gets a cgroup made for it, as without. */
static void warm_up(struct follow *f)
{
	if (!f->session || f->warm_cg || f->warm_off || f->killing || f->init_gone || f->sync_eof ||
	    f->seal_fd >= 0)
		return;
	f->warm_cg = make_exec_cgroup(f, &f->warm_number);
	struct kiwi_sync_msg m = { .type = KIWI_SYNC_EXEC_WARM };
	if (!f->warm_cg || kiwi_sync_send_fd(f->sock, &m, kiwi_cgroup_fd(f->warm_cg)) < 0) {
		kiwi_cgroup_destroy(TAKE_PTR(f->warm_cg), NULL);
		f->warm_off = true;
		return;
	}
	f->warm_until = kiwi_clock_ns(CLOCK_MONOTONIC) + KIWI_WARM_FOR_NS;
	arm_session_timer(f);
}

/* Pid 1's answer: its leader waits in the cgroup, or (an older kernel,
 * nsdelegate out of reach) it could not start one there: then no exec
 * of this session is warmed up again. */
void follow_warmed(struct follow *f, int why)
{
	if (!f->warm_cg)
		return;
	if (why == 0) {
		f->warm_ready = true;
		return;
	}
	KIWI_DEBUG(f->cfg->debug, "run", 0, "exec-warm", "off: no leader in %s: %s", kiwi_cgroup_name(f->warm_cg),
		   strerror(why));
	kiwi_cgroup_destroy(TAKE_PTR(f->warm_cg), NULL);
	f->warm_off = true;
}

/* An exec's connection goes on to pid 1. The client either brought the
 * exec's cgroup (client_cg) or asked for one: the warm one if it is
 * ready, else one made now; it hears which before anything else, and
 * removes it at the exec's end (the session's end takes what is left). */
static void pass_exec(struct follow *f, int conn, int client_cg, bool given)
{
	struct kiwi_sync_msg m = { .type = KIWI_SYNC_EXEC_CONN };
	int fds[2] = { conn, client_cg };
	size_t n = client_cg >= 0 ? 2 : 1;
	struct kiwi_cgroup *cg = NULL;
	uint32_t number = 0;
	if (given && f->warm_ready) {
		cg = TAKE_PTR(f->warm_cg);
		number = f->warm_number;
		f->warm_ready = false;
		m.flags = KIWI_SYNC_EXEC_WARMED_ONE;
	} else if (given) {
		cg = make_exec_cgroup(f, &number);
		fds[1] = cg ? kiwi_cgroup_fd(cg) : -1;
		n = cg ? 2 : 1;
	}
	bool removes = cg && f->n_exec_cgs < KIWI_ARRAY_SIZE(f->exec_cgs);
	struct kiwi_exec_msg said = {
		.type = KIWI_EXEC_CGROUP, .value = (int32_t)number,
		.flags = (cg ? KIWI_EXEC_CGROUP_MADE : 0) | (m.flags & KIWI_SYNC_EXEC_WARMED_ONE ? KIWI_EXEC_CGROUP_WARM : 0) |
			 (removes ? KIWI_EXEC_CGROUP_SESSION_REMOVES : 0),
	};
	if (!given || kiwi_exec_send(conn, &said, -1) == 0)
		kiwi_sync_send_fds(f->sock, &m, fds, n);
	struct stat st;
	if (removes && fstat(kiwi_cgroup_fd(cg), &st) == 0)
		f->exec_cgs[f->n_exec_cgs++] = (struct exec_cgroup){ .cg = cg, .id = (uint64_t)st.st_ino };
	else
		kiwi_cgroup_forget(cg);
}

/* Only an ended exec's cgroup is removed: another's may not have its
 * leader yet (pid 1 starts it after this), and an empty one would go from
 * under it. A kept exec's stays busy with what it left until that ends. */
static void remove_ended_exec_cgroups(struct follow *f)
{
	for (size_t i = 0; i < f->n_exec_cgs;) {
		struct exec_cgroup *e = &f->exec_cgs[i];
		if (!e->ended || (rmdir(kiwi_cgroup_path(e->cg)) < 0 && errno != ENOENT)) {
			i++;
			continue;
		}
		kiwi_cgroup_forget(e->cg);
		*e = f->exec_cgs[--f->n_exec_cgs];
	}
}

void follow_exec_ended(struct follow *f, int running, uint64_t cgroup, bool reported)
{
	follow_exec_count(f, running);
	for (size_t i = 0; cgroup && i < f->n_exec_cgs; i++) {
		if (f->exec_cgs[i].id != cgroup)
			continue;
		/* Killed or failed: its client reads the cgroup's counts (an
		 * OOM kill among them) and removes it; we only let go. */
		if (!reported) {
			kiwi_cgroup_forget(f->exec_cgs[i].cg);
			f->exec_cgs[i] = f->exec_cgs[--f->n_exec_cgs];
			break;
		}
		f->exec_cgs[i].ended = true;
	}
	remove_ended_exec_cgroups(f);
}

void follow_forget_exec_cgroups(struct follow *f)
{
	while (f->n_exec_cgs)
		kiwi_cgroup_forget(f->exec_cgs[--f->n_exec_cgs].cg);
}

/* Pid 1 is cloned and builds itself. The session's socket is made and
 * the session listed now (no lazy registration: it is made to be found),
 * while we only wait, not on create's time before the clone or once it is
 * ready; its clients wait in the listening queue until then (SLOT_SESSION
 * is polled from ready on). */
void follow_session_cloned(struct follow *f)
{
	f->session->init_pid = f->pid;
	kiwi_err e = { 0 };
	if (f->session->cloned && f->session->cloned(f->session->ctx, &e) < 0) {
		follow_fail_and_kill(f, &e);
	} else if (follow_register(f, f->pid) < 0) {
		e = f->res->registry_error;
		follow_fail_and_kill(f, &e);
	}
}

/* The session is ready: its creator hears of it. */
void follow_session_ready(struct follow *f)
{
	f->ready_at = f->idle_since = kiwi_clock_ns(CLOCK_MONOTONIC);
	arm_session_timer(f);
	/* The first exec's leader is started once `session create` (our
	 * parent, waiting for this) has left: its exit and the warm-up would
	 * share the CPU, on create's own time. */
	pid_t creator = getppid();
	f->creator_fd = creator > 1 ? (int)syscall(SYS_pidfd_open, creator, 0) : -1;
	f->session->ready(f->session->ctx, f->res);
	if (f->creator_fd < 0)
		warm_up(f);
}

void follow_creator_gone(struct follow *f)
{
	kiwi_closep(&f->creator_fd);
	warm_up(f);
}

/* Once pid 1 has made its cgroup namespace (init.c, cgroupns_at), the
 * session's cgroup, empty again, hands its controllers down to pid 1's
 * leaf and each exec's cgroup. */
int follow_session_controllers(struct follow *f, uint32_t flags)
{
	int64_t t = KIWI_DEBUG_NOW(f->cfg->debug);
	kiwi_err e = { 0 };
	if (kiwi_cgroup_enable_children(f->cg, &e) < 0) {
		follow_fail_and_kill(f, &e);
		return -1;
	}
	KIWI_DEBUG(f->cfg->debug, "run", t, "cgroup-children", "controllers on for %s's children; cgroup namespace at %s",
		   kiwi_cgroup_name(f->cg), flags & KIWI_SYNC_CGROUPNS_AT_SESSION ? "it" : "its leaf, keeper");
	return 0;
}

void follow_exec_count(struct follow *f, int running)
{
	f->execs = running > 0 ? running : 0;
	if (f->execs == 0)
		f->idle_since = kiwi_clock_ns(CLOCK_MONOTONIC);
	arm_session_timer(f);
}

/* Pid 1 killed every other process: now the network (once: nothing can
 * bring it back), then the answer. */
void follow_session_seal(struct follow *f, int reaped)
{
	struct kiwi_session_seal_reply r = { .ok = 1, .reaped = reaped };
	if (f->cfg->egress && !f->sealed &&
	    kiwi_egress_seal(f->audited, f->userns_fd, f->netns_fd, &f->sealed_audit_fd, &r.err) < 0)
		r.ok = 0;
	else
		f->sealed = true;
	/* `list` shows the network the sandbox has now: the audit a verify
	 * gets. It is gone whether or not the entry says so: a failure to
	 * say so fails no verify. */
	kiwi_err ignored;
	if (f->sealed)
		(void)kiwi_registry_set_sealed(f->reg, &ignored);
	if (f->seal_fd >= 0)
		(void)!send(f->seal_fd, &r, sizeof(r), MSG_NOSIGNAL);
	if (f->seal_fd >= 0)
		close(TAKE_FD(f->seal_fd));
}

/* Everything the kernel logged so far is read first: an exec that ended
 * has all its attempts in the tally. */
static void answer_tally(struct follow *f, int conn, const struct kiwi_egress_mark *since)
{
	struct kiwi_egress *e = f->cfg->egress ? f->audited : NULL;
	if (e)
		kiwi_egress_audit_read(e, NULL);
	struct kiwi_session_tally_reply r = { .sealed = f->sealed };
	kiwi_egress_mark(e, &r.mark);
	_cleanup_free_ struct kiwi_egress_tally *t = since ? kiwi_egress_tally_since(e, since) : NULL;
	r.has_tally = t != NULL;
	/* Sealed: the exec reads the network audit's log itself. */
	int audit = f->sealed ? f->sealed_audit_fd : -1;
	if (kiwi_send_fd(conn, &r, sizeof(r), audit) == (ssize_t)sizeof(r) && t)
		(void)!send(conn, t, kiwi_egress_tally_size(), MSG_NOSIGNAL);
}

/* An exec the seal forbids: answered as pid 1 answers a failed start. */
static bool refuse_exec(struct follow *f, int conn, char op)
{
	kiwi_err err = { 0 };
	if (f->seal_fd >= 0)
		kiwi_error(&err, EBUSY, KIWI_SESSION_STEP_SEALED, "session `%s` is being switched to verify: "
			   "no exec starts until it is", f->session->id);
	else if (f->sealed && op == KIWI_SESSION_OP_EXEC_BEFORE_VERIFY)
		kiwi_error(&err, EPERM, KIWI_SESSION_STEP_SEALED, "session `%s` has been through verify: its "
			   "network is gone for good, an install needs a new session", f->session->id);
	else
		return false;
	struct kiwi_exec_msg m = { .type = KIWI_EXEC_FAILED, .mono_ns = kiwi_clock_ns(CLOCK_MONOTONIC), .err = err };
	kiwi_exec_send(conn, &m, -1);
	return true;
}

/* A client of the session: only the session's owner (the directory the
 * socket is in is theirs alone; the peer's credentials are checked all the
 * same). One byte says what it wants: 'x' an exec, whose connection goes
 * on to pid 1, 's' a snapshot (the hook's), or 'd' the end, answered once
 * everything is removed. */
void follow_session_client(struct follow *f)
{
	_cleanup_close_ int conn = accept4(f->session->listen_fd, NULL, NULL, SOCK_CLOEXEC);
	if (conn < 0)
		return;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != geteuid())
		return;
	struct timeval tv = { .tv_sec = 2 };
	setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	union {
		char op[2];
		struct kiwi_session_tally_request tally;
	} req = { 0 };
	/* An exec may bring its own cgroup's directory (kiwi/keeper.h), for
	 * pid 1 to start the exec's leader in; the kernel checks pid 1's
	 * right to it when pid 1 uses it, so it is passed on as it came. */
	_cleanup_close_ int exec_cg = -1;
	ssize_t n = kiwi_recv_fd(conn, &req, sizeof(req), 0, &exec_cg);
	if (n < 1)
		return;
	char op = req.op[0];
	tv.tv_sec = 0;
	setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if ((op == 'x' || op == KIWI_SESSION_OP_EXEC_BEFORE_VERIFY) && !f->killing) {
		if (!refuse_exec(f, conn, op))
			pass_exec(f, conn, exec_cg, n == 2 && req.op[1] == KIWI_SESSION_EXEC_CGROUP_FROM_SESSION);
	} else if (op == 's' && f->session->snapshot && !f->killing) {
		f->session->snapshot(f->session->ctx, conn, f->layer_fd, f->cg);
	} else if (op == KIWI_SESSION_OP_TALLY) {
		answer_tally(f, conn, n == (ssize_t)sizeof(req.tally) && req.tally.has_since ? &req.tally.since : NULL);
	} else if (op == KIWI_SESSION_OP_SEAL && !f->killing && f->seal_fd < 0) {
		f->seal_fd = TAKE_FD(conn);
		follow_send_to_init(f, KIWI_SYNC_PURGE, 0);
	} else if (op == 'd') {
		if (f->session->destroy_fd < 0)
			f->session->destroy_fd = TAKE_FD(conn);
		follow_session_end(f, "destroy");
	}
}
