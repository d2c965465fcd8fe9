/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-helper's session: receive a request (JSON plus fds), check it,
 * run it, answer; end when the caller's socket closes (kiwi-run exited or
 * was killed) or the sandbox's process ends, and remove what was made. */
#include "serve.h"
#include "kiwi/fds.h"
#include "kiwi/cleanup.h"
#include "kiwi/json.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct message {
	char text[KIWI_HELPER_MSG_MAX + 1];
	size_t len;
	int fds[KIWI_HELPER_MAX_FDS];
	size_t n_fds;
};

static void close_fds(struct message *m)
{
	for (size_t i = 0; i < m->n_fds; i++)
		if (m->fds[i] >= 0)
			close(m->fds[i]);
	m->n_fds = 0;
}

/* With fd >= 0 riding along (SCM_RIGHTS). */
static void send_answer_fd(int sock, kiwi_json_writer *w, int fd)
{
	size_t len;
	const char *text = kiwi_jw_text(w, &len);
	if (text)
		kiwi_send_fds(sock, text, len, &fd, fd >= 0);
}

static void send_answer(int sock, kiwi_json_writer *w)
{
	send_answer_fd(sock, w, -1);
}

void helper_answer_error(int sock, const kiwi_err *err)
{
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
	if (!w)
		return;
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "ok");
	kiwi_jw_bool(w, false);
	kiwi_jw_key(w, "step");
	kiwi_jw_string(w, err->step);
	kiwi_jw_key(w, "errno");
	kiwi_jw_int(w, err->errnum);
	kiwi_jw_key(w, "error");
	kiwi_jw_string(w, err->msg);
	kiwi_jw_close_object(w);
	send_answer(sock, w);
}

/* log_fd: egress-prepare's audit log (the sandbox's NFLOG group), handed
 * to the caller, which reads its own sandbox's attempts from it. The
 * socket carries no privilege: every nfnetlink command on it needs
 * CAP_NET_ADMIN of the sender too, which the caller lacks. */
static void answer_ok(int sock, const struct kiwi_egress_child *child, int host_ifindex, const char *cgroup,
		      int log_fd)
{
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
	if (!w)
		return;
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "ok");
	kiwi_jw_bool(w, true);
	if (cgroup[0]) {
		kiwi_jw_key(w, "path");
		kiwi_jw_string(w, cgroup);
	}
	if (host_ifindex > 0) {
		kiwi_jw_key(w, "host_ifindex");
		kiwi_jw_int(w, host_ifindex);
	}
	if (child) {
		const struct { const char *key; long long v; } nums[] = {
			{ "addr", child->addr }, { "gateway", child->gateway }, { "prefix", child->prefix },
		};
		for (size_t i = 0; i < KIWI_ARRAY_SIZE(nums); i++) {
			kiwi_jw_key(w, nums[i].key);
			kiwi_jw_int(w, nums[i].v);
		}
		kiwi_jw_key(w, "ifname");
		kiwi_jw_string(w, child->ifname);
		kiwi_jw_key(w, "hosts");
		kiwi_jw_string(w, child->hosts_path);
		kiwi_jw_key(w, "resolv");
		kiwi_jw_string(w, child->resolv_path);
		if (child->prefix6) {
			char a[INET6_ADDRSTRLEN];
			kiwi_jw_key(w, "addr6");
			kiwi_jw_string(w, inet_ntop(AF_INET6, child->addr6, a, sizeof(a)));
			kiwi_jw_key(w, "gateway6");
			kiwi_jw_string(w, inet_ntop(AF_INET6, child->gateway6, a, sizeof(a)));
			kiwi_jw_key(w, "prefix6");
			kiwi_jw_int(w, child->prefix6);
		}
		if (child->ipv6_off[0]) {
			kiwi_jw_key(w, "ipv6_off");
			kiwi_jw_string(w, child->ipv6_off);
		}
	}
	kiwi_jw_close_object(w);
	send_answer_fd(sock, w, log_fd);
}

/* 1: a message; 0: the caller is gone; -1: a broken message (err). */
static int receive(struct message *m, kiwi_err *err)
{
	union {
		char buf[CMSG_SPACE(KIWI_HELPER_MAX_FDS * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { m->text, KIWI_HELPER_MSG_MAX };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			     .msg_controllen = sizeof(ctl.buf) };
	ssize_t n = recvmsg(KIWI_HELPER_FD, &mh, MSG_CMSG_CLOEXEC);
	if (n <= 0)
		return n < 0 && errno == EINTR ? kiwi_error(err, EINTR, "request", "interrupted") : 0;
	m->len = (size_t)n;
	m->text[m->len] = '\0';
	m->n_fds = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k && m->n_fds < KIWI_HELPER_MAX_FDS; i++)
			memcpy(&m->fds[m->n_fds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
	}
	if (mh.msg_flags & MSG_TRUNC)
		return kiwi_error(err, E2BIG, "request", "larger than %d bytes", KIWI_HELPER_MSG_MAX);
	if (mh.msg_flags & MSG_CTRUNC)
		return kiwi_error(err, E2BIG, "request", "more than %d fds", KIWI_HELPER_MAX_FDS);
	return 1;
}

bool helper_wait_request(void)
{
	static struct message m;
	kiwi_err err;
	int r = receive(&m, &err);
	close_fds(&m);
	return r != 0;
}

/* The request's pidfd names the session's sandbox (binding the session
 * to it on first use). Takes the fd. */
static int bind_sandbox_with(struct helper_session *s, struct message *m, size_t want, kiwi_err *err)
{
	if (m->n_fds != want)
		return kiwi_error(err, EINVAL, "request", "send exactly %s (got %zu fds)",
				  want == 1 ? "one fd, the sandbox's pidfd" : "two fds, the sandbox's pidfd and the source",
				  m->n_fds);
	if (s->sandbox_ended)
		return kiwi_error(err, ESRCH, "request", "this helper's sandbox has ended");
	struct helper_sandbox sb;
	int fd = TAKE_FD(m->fds[0]);
	if (helper_sandbox_open(fd, s->uid, &sb, err) < 0) {
		helper_sandbox_close(&sb);
		return -1;
	}
	if (s->sb.pidfd < 0) {
		s->sb = sb;
		return 0;
	}
	bool same = helper_sandbox_same(&s->sb, &sb);
	helper_sandbox_close(&sb);
	return same ? 0 : kiwi_error(err, EPERM, "request", "this helper already serves another sandbox");
}

static int bind_sandbox(struct helper_session *s, struct message *m, kiwi_err *err)
{
	return bind_sandbox_with(s, m, 1, err);
}

/* What a successful request answers besides "ok". */
struct result {
	bool with_child;
	struct kiwi_egress_child child;  /* egress-prepare */
	int host_ifindex;                /* egress-attach */
	char cgroup[KIWI_HELPER_SUBTREE_MAX + 32];  /* cgroup-prepare */
	int disk;                        /* disk, bind: the mount, sent and closed */
};

/* An operation done for good: it is refused from now on, and the
 * capabilities only it needed go. */
static int done(struct helper_session *s, enum kiwi_helper_op op, kiwi_err *err)
{
	s->ops_left &= ~(unsigned)op;
	/* what tears the cgroup and the disk down stays while they are */
	return helper_caps_limit(helper_caps_for(s->ops_left) | (s->cg ? helper_caps_cgroup_held() : 0) |
				 (s->disk_mnt >= 0 ? helper_caps_mount() : 0), err);
}

static int run_request(struct helper_session *s, struct message *m, struct result *res, kiwi_err *err)
{
	struct kiwi_helper_request req;
	if (kiwi_helper_request_parse(m->text, m->len, &req, err) < 0)
		return -1;
	if (!(s->rule.ops & req.op))
		return kiwi_error(err, EPERM, KIWI_HELPER_STEP_NOT_IN_RULE, "%s is not allowed for you by the helper config",
				  kiwi_helper_op_name(req.op));
	if (!(s->ops_left & req.op))
		return kiwi_error(err, EEXIST, "request", "%s was done already", kiwi_helper_op_name(req.op));
	switch (req.op) {
	case KIWI_HELPER_OP_IDMAP:
		if (bind_sandbox(s, m, err) < 0 || helper_idmap(&s->sb, &req, &s->ids, err) < 0)
			return -1;
		/* A map is written once: CAP_SETGID goes for good, CAP_SETUID
		 * too unless egress still needs it. */
		return done(s, KIWI_HELPER_OP_IDMAP, err);
	case KIWI_HELPER_OP_EGRESS_PREPARE:
		if (m->n_fds)
			return kiwi_error(err, EINVAL, "request", "egress-prepare takes no fd");
		res->with_child = true;
		return helper_egress_prepare(s, &req.egress, &res->child, err);
	case KIWI_HELPER_OP_EGRESS_ATTACH:
		if (bind_sandbox(s, m, err) < 0 || helper_egress_attach(s, req.gate_dns, req.gate_tcp, err) < 0)
			return -1;
		res->host_ifindex = kiwi_egress_host_ifindex(s->egress);
		return 0;
	case KIWI_HELPER_OP_CGROUP_PREPARE:
		if (m->n_fds)
			return kiwi_error(err, EINVAL, "request", "cgroup-prepare takes no fd");
		if (helper_cgroup_prepare(s, &req, res->cgroup, sizeof(res->cgroup), err) < 0)
			return -1;
		return done(s, KIWI_HELPER_OP_CGROUP_PREPARE, err);
	case KIWI_HELPER_OP_CGROUP_ATTACH:
		if (bind_sandbox(s, m, err) < 0 || helper_cgroup_attach(s, err) < 0)
			return -1;
		/* delegated: CAP_CHOWN goes for good */
		return done(s, KIWI_HELPER_OP_CGROUP_ATTACH, err);
	case KIWI_HELPER_OP_DISK:
		if (bind_sandbox(s, m, err) < 0 || (res->disk = helper_disk(s, &req, err)) < 0)
			return -1;
		return done(s, KIWI_HELPER_OP_DISK, err);
	case KIWI_HELPER_OP_BIND:
		/* One per bind: done for good with the one the caller says is
		 * its last. Nothing of a bind's needs CAP_SYS_ADMIN afterwards
		 * (the clone is the caller's fd), so it goes then. */
		if (bind_sandbox_with(s, m, 2, err) < 0 || (res->disk = helper_bind(s, m->fds[1], err)) < 0)
			return -1;
		return req.last ? done(s, KIWI_HELPER_OP_BIND, err) : 0;
	default:
		return kiwi_error(err, EINVAL, "request", "unknown op");
	}
}

static void handle(struct helper_session *s, struct message *m)
{
	kiwi_err err = { 0 };
	struct result res = { .disk = -1 };
	int r = run_request(s, m, &res, &err);
	close_fds(m);
	if (r < 0)
		helper_answer_error(KIWI_HELPER_FD, &err);
	else
		answer_ok(KIWI_HELPER_FD, res.with_child ? &res.child : NULL, res.host_ifindex, res.cgroup,
			  res.with_child ? kiwi_egress_audit_fd(s->egress) : res.disk);
	if (res.disk >= 0)
		close(res.disk);
}

/* kiwi-run sends at most five requests per session and each costs
 * milliseconds; a caller that keeps the helper busy past this (malformed
 * requests included) loses the session rather than our time. The CPU
 * bound is loose for the VM lane's emulated CPU. */
#define MAX_REQUESTS 64
#define MAX_CPU_NS (10ll * 1000 * 1000 * 1000)

static int check_budget(struct helper_session *s, kiwi_err *err)
{
	struct timespec t = { 0 };
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	if (++s->requests > MAX_REQUESTS || (long long)t.tv_sec * 1000000000 + t.tv_nsec > MAX_CPU_NS)
		return kiwi_error(err, EDQUOT, "budget", "this session's budget (%d requests, %lld s of CPU) is spent: "
				  "the helper tears the sandbox's network and cgroup down and exits", MAX_REQUESTS,
				  MAX_CPU_NS / 1000000000);
	return 0;
}

int helper_serve(struct helper_session *s)
{
	static struct message m;
	for (;;) {
		struct pollfd p[2] = { { .fd = KIWI_HELPER_FD, .events = POLLIN }, { .fd = s->sandbox_ended ? -1 : s->sb.pidfd, .events = POLLIN } };
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents) {   /* the sandbox ended */
			/* Its cgroup stays until kiwi-run, which reads the
			 * verdict from it, lets the session go; so does its
			 * disk, from which kiwi-run lands the workspace. */
			if (!s->cg && s->disk_mnt < 0)
				break;
			helper_egress_teardown(s);
			s->sandbox_ended = true;
			continue;
		}
		if (!p[0].revents)
			continue;
		kiwi_err err = { 0 };
		int r = receive(&m, &err);
		if (r == 0)
			break;
		if (check_budget(s, &err) < 0) {
			close_fds(&m);
			helper_answer_error(KIWI_HELPER_FD, &err);
			break;
		}
		if (r < 0) {
			close_fds(&m);
			helper_answer_error(KIWI_HELPER_FD, &err);
			continue;
		}
		handle(s, &m);
	}
	helper_egress_teardown(s);
	helper_sandbox_close(&s->sb);
	helper_disk_teardown(s);
	helper_cgroup_teardown(s);
	return 0;
}
