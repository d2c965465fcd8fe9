/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-run's side of kiwi-helper(8): start it on a socketpair, send the
 * egress and cgroup requests, and do the part of the setup that needs no privilege
 * (the sandbox's end of the veth, from inside the namespaces we own). */
#include "kiwi/cleanup.h"
#include "kiwi/helper.h"
#include "kiwi/fds.h"
#include "kiwi/json.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef KIWI_HELPER_PATH
#error "KIWI_HELPER_PATH (where meson installs kiwi-helper) is set by meson"
#endif

#define STEP "helper"

struct kiwi_helper {
	pid_t pid;
	int sock;
	bool egress;                     /* egress-prepare answered */
	struct kiwi_egress_child child;
	/* host_allowlist by name: our own name gate (the helper only
	 * redirects to it); NULL: none */
	struct kiwi_egress *gate;
	int answer_fd;                   /* an fd the last answer brought; -1: none */
	char refused_step[KIWI_ERR_STEP_MAX]; /* the step of the last refusal, as the helper named it */
};

const char *kiwi_helper_path(void)
{
	const char *p = getenv("KIWI_HELPER");
	return p && *p ? p : KIWI_HELPER_PATH;
}

static void exec_helper(const char *path, int sock)
{
	char *argv[] = { (char *)path, NULL }, *envp[] = { NULL };
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	/* Its answers carry its errors: its stderr would print them twice. */
	if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0 ||
	    dup2(sock, KIWI_HELPER_FD) < 0)
		_exit(127);
	close_range(KIWI_HELPER_FD + 1, ~0u, 0);
	execve(path, argv, envp);
	_exit(127);
}

int kiwi_helper_start(struct kiwi_helper **out, kiwi_err *err)
{
	if (*out)
		return 0;
	const char *path = kiwi_helper_path();
	if (access(path, X_OK) < 0)
		return kiwi_error(err, errno, STEP, "`%s`: this needs root or the setuid helper kiwi-helper, "
						    "installed and configured (see kiwi-helper(8))", path);
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		return kiwi_error(err, errno, STEP, "cannot create the helper's socket");
	pid_t pid = fork();
	if (pid == 0)
		exec_helper(path, sp[1]);
	close(sp[1]);
	if (pid < 0) {
		close(sp[0]);
		return kiwi_error(err, errno, STEP, "cannot start `%s`", path);
	}
	struct kiwi_helper *h = calloc(1, sizeof(*h));
	if (!h) {
		close(sp[0]);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return kiwi_error(err, ENOMEM, STEP, "out of memory");
	}
	*h = (struct kiwi_helper){ .pid = pid, .sock = sp[0], .answer_fd = -1 };
	*out = h;
	return 0;
}

/* The helper's teardown is bounded (a cgroup that will not empty is
 * given up on after 10 s), so a wait past this means it is stuck. */
#define HELPER_STOP_TIMEOUT_MS 30000

int kiwi_helper_stop(struct kiwi_helper *h, kiwi_err *err)
{
	if (!h)
		return 0;
	kiwi_egress_teardown(h->gate, NULL);
	if (h->answer_fd >= 0)
		close(h->answer_fd);
	close(h->sock);
	/* It removes the veth, the table and the cgroup, then exits. The
	 * caller cannot kill it (its real uid is root): wait, but not for
	 * ever; it goes on cleaning up without us. */
	_cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, h->pid, 0);
	struct pollfd p = { .fd = pidfd, .events = POLLIN };
	int ready = pidfd < 0 ? 1 : 0;
	while (!ready && (ready = poll(&p, 1, HELPER_STOP_TIMEOUT_MS)) < 0 && errno == EINTR)
		ready = 0;
	pid_t pid = h->pid;
	free(h);
	if (ready == 0)
		return kiwi_error(err, ETIMEDOUT, STEP, "kiwi-helper (pid %d) has not finished its cleanup "
			  "after %d s; left to finish on its own", (int)pid, HELPER_STOP_TIMEOUT_MS / 1000);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	/* Its teardown ends in exit 0. 1 (it refused to start) and 127 (it
	 * could not be run) were told as the answer to the first request;
	 * anything else (125: it stopped rather than stay root) or a signal
	 * may have left what it made. */
	if (WIFSIGNALED(status))
		return kiwi_error(err, 0, STEP, "kiwi-helper (pid %d) was killed by signal %d before its cleanup "
			  "ended; `kiwi-run gc` and the next helper session collect what it left", (int)pid,
			  WTERMSIG(status));
	if (WIFEXITED(status) && WEXITSTATUS(status) && WEXITSTATUS(status) != 1 && WEXITSTATUS(status) != 127)
		return kiwi_error(err, 0, STEP, "kiwi-helper (pid %d) ended its cleanup with exit status %d; "
			  "`kiwi-run gc` and the next helper session collect what it left", (int)pid,
			  WEXITSTATUS(status));
	return 0;
}

/* A request costs the helper milliseconds, the slowest (egress-prepare
 * resolving --allow-host names) a resolver's timeouts: a wait past this
 * means it is stuck, and kiwi-run, which waits with its signals blocked,
 * must not hang with it. */
#define HELPER_ANSWER_TIMEOUT_MS 30000

/* Until the answer is there to read, HELPER_ANSWER_TIMEOUT_MS at most. */
static int wait_answer(int sock, kiwi_err *err)
{
	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		long long left = HELPER_ANSWER_TIMEOUT_MS - ((now.tv_sec - start.tv_sec) * 1000LL +
							     (now.tv_nsec - start.tv_nsec) / 1000000);
		struct pollfd p = { .fd = sock, .events = POLLIN };
		int r = left > 0 ? poll(&p, 1, (int)left) : 0;
		if (r > 0)
			return 0;
		if (r == 0)
			return kiwi_error(err, ETIMEDOUT, STEP, "kiwi-helper `%s` did not answer within %d s",
					  kiwi_helper_path(), HELPER_ANSWER_TIMEOUT_MS / 1000);
		if (errno != EINTR)
			return kiwi_error(err, errno, STEP, "cannot wait for kiwi-helper's answer");
	}
}

/* One answer into buf, and the fd it may bring into h->answer_fd. */
static ssize_t recv_answer(struct kiwi_helper *h, char *buf)
{
	int fds[KIWI_MAX_PASSED_FDS];
	size_t n_fds = 0;
	ssize_t n = kiwi_recv_fds(h->sock, buf, KIWI_HELPER_MSG_MAX, MSG_DONTWAIT, fds, &n_fds);
	for (size_t i = 0; i < n_fds; i++) {
		if (i == 0 && n_fds == 1) {
			if (h->answer_fd >= 0)
				close(h->answer_fd);
			h->answer_fd = fds[0];
		} else {
			close(fds[i]); /* an answer brings one fd or none */
		}
	}
	return n;
}

/* Sends one request with n fds and reads its answer; a refusal becomes
 * err, in the helper's words. */
static kiwi_json *exchange_fds(struct kiwi_helper *h, const char *req, size_t len, const int *fds, size_t n_fds,
			       kiwi_err *err)
{
	/* A helper that refused to start has answered already and gone:
	 * the send may fail, the answer is still there to read. */
	h->refused_step[0] = '\0';
	kiwi_send_fds(h->sock, req, len, fds, n_fds);
	if (wait_answer(h->sock, err) < 0)
		return NULL;
	_cleanup_free_ char *buf = malloc(KIWI_HELPER_MSG_MAX);
	ssize_t n = buf ? recv_answer(h, buf) : -1;
	if (n <= 0) {
		kiwi_error(err, n < 0 ? errno : EPIPE, STEP, "kiwi-helper `%s` ended without answering "
			   "(not installed setuid root?)", kiwi_helper_path());
		return NULL;
	}
	kiwi_json *j = kiwi_json_parse(buf, (size_t)n, err);
	bool ok = false;
	if (j && kiwi_json_bool(kiwi_json_get(j, "ok"), &ok) && ok)
		return j;
	if (j) {
		long long e = 0;
		const char *msg = kiwi_json_string(kiwi_json_get(j, "error"));
		const char *step = kiwi_json_string(kiwi_json_get(j, "step"));
		kiwi_json_int(kiwi_json_get(j, "errno"), &e);
		snprintf(h->refused_step, sizeof(h->refused_step), "%s", step ? step : "");
		kiwi_error(err, (int)e, STEP, "kiwi-helper refused: %s: %s", step ? step : "?", msg ? msg : "?");
		kiwi_json_free(j);
	}
	return NULL;
}

kiwi_json *kiwi_helper_exchange(struct kiwi_helper *h, const char *req, size_t len, int fd, kiwi_err *err)
{
	return exchange_fds(h, req, len, &fd, fd >= 0, err);
}

/* A request's writer, its "op" written. NULL: out of memory. */
static kiwi_json_writer *request_open(const char *op)
{
	kiwi_json_writer *w = kiwi_jw_new(false);
	if (w) {
		kiwi_jw_open_object(w);
		kiwi_jw_key(w, "op");
		kiwi_jw_string(w, op);
	}
	return w;
}

/* Closes the request, sends it (with fd when >= 0) and returns the
 * helper's "ok" answer; NULL with err set otherwise. */
static kiwi_json *request_send(struct kiwi_helper *h, kiwi_json_writer *w, int fd, kiwi_err *err)
{
	kiwi_jw_close_object(w);
	size_t len;
	const char *text = kiwi_jw_text(w, &len);
	if (!text) {
		kiwi_error(err, ENOMEM, STEP, "out of memory");
		return NULL;
	}
	return kiwi_helper_exchange(h, text, len, fd, err);
}

static const char *ip4(uint32_t a, char buf[INET_ADDRSTRLEN])
{
	struct in_addr in = { htonl(a) };
	return inet_ntop(AF_INET, &in, buf, INET_ADDRSTRLEN);
}

/* The config in the keys of the flags it came from. */
static void write_egress(kiwi_json_writer *w, const struct kiwi_egress_config *c)
{
	static const char *const kinds[] = { "public_internet", "private_network", "host_allowlist" };
	char s[INET_ADDRSTRLEN + 8], a[INET_ADDRSTRLEN];
	kiwi_jw_key(w, "egress");
	kiwi_jw_string(w, kinds[c->kind]);
	kiwi_jw_key(w, "allow-cidr");
	kiwi_jw_open_array(w);
	for (size_t i = 0; i < c->n_allow_cidrs; i++) {
		snprintf(s, sizeof(s), "%s/%u", ip4(c->allow_cidrs[i].addr, a), c->allow_cidrs[i].prefix);
		kiwi_jw_string(w, s);
	}
	for (size_t i = 0; i < c->n_allow_cidrs6; i++) {
		char a6[INET6_ADDRSTRLEN], s6[INET6_ADDRSTRLEN + 8];
		snprintf(s6, sizeof(s6), "%s/%u", inet_ntop(AF_INET6, c->allow_cidrs6[i].addr, a6, sizeof(a6)),
			 c->allow_cidrs6[i].prefix);
		kiwi_jw_string(w, s6);
	}
	kiwi_jw_close_array(w);
	kiwi_jw_key(w, "allow-host");
	kiwi_jw_open_array(w);
	for (size_t i = 0; i < c->n_allow_hosts; i++) {
		char host[KIWI_EGRESS_NAME_MAX + 8];
		const struct kiwi_egress_host *h = &c->allow_hosts[i];
		snprintf(host, sizeof(host), h->port ? "%s:%u" : "%s", h->name, h->port);
		kiwi_jw_string(w, host);
	}
	kiwi_jw_close_array(w);
	kiwi_jw_key(w, "allow-port");
	kiwi_jw_open_array(w);
	for (size_t i = 0; i < c->n_allow_ports; i++) {
		snprintf(s, sizeof(s), "%u", c->allow_ports[i]);
		kiwi_jw_string(w, s);
	}
	kiwi_jw_close_array(w);
	if (c->dns) {
		kiwi_jw_key(w, "dns");
		kiwi_jw_string(w, ip4(c->dns, a));
	}
}

/* What only root may ask for, said before the helper is started. */
static int check_unprivileged(const struct kiwi_egress_config *c, kiwi_err *err)
{
	struct kiwi_egress_config d;
	kiwi_egress_config_init(&d);
	if (c->pool.addr != d.pool.addr || c->pool.prefix != d.pool.prefix)
		return kiwi_error(err, EPERM, "egress", "--egress-pool needs root: through the helper, the pool "
							 "is the admin's");
	return 0;
}

static int child_of(const kiwi_json *j, struct kiwi_egress_child *child, kiwi_err *err)
{
	long long addr, gw, prefix;
	const char *ifname = kiwi_json_string(kiwi_json_get(j, "ifname"));
	const char *hosts = kiwi_json_string(kiwi_json_get(j, "hosts"));
	const char *resolv = kiwi_json_string(kiwi_json_get(j, "resolv"));
	if (!kiwi_json_int(kiwi_json_get(j, "addr"), &addr) || !kiwi_json_int(kiwi_json_get(j, "gateway"), &gw) ||
	    !kiwi_json_int(kiwi_json_get(j, "prefix"), &prefix) || !ifname || !hosts || !resolv)
		return kiwi_error(err, EPROTO, STEP, "kiwi-helper's answer to egress-prepare is incomplete");
	*child = (struct kiwi_egress_child){ .addr = (uint32_t)addr, .gateway = (uint32_t)gw, .prefix = (uint8_t)prefix };
	snprintf(child->ifname, sizeof(child->ifname), "%s", ifname);
	snprintf(child->hosts_path, sizeof(child->hosts_path), "%s", hosts);
	snprintf(child->resolv_path, sizeof(child->resolv_path), "%s", resolv);
	/* IPv6 when the helper gives it: both addresses and a /126 or none */
	const char *a6 = kiwi_json_string(kiwi_json_get(j, "addr6"));
	const char *g6 = kiwi_json_string(kiwi_json_get(j, "gateway6"));
	long long p6;
	if (a6 || g6) {
		if (!a6 || !g6 || !kiwi_json_int(kiwi_json_get(j, "prefix6"), &p6) || p6 < 1 || p6 > 128 ||
		    inet_pton(AF_INET6, a6, child->addr6) != 1 || inet_pton(AF_INET6, g6, child->gateway6) != 1)
			return kiwi_error(err, EPROTO, STEP, "kiwi-helper's answer to egress-prepare has a bad IPv6 part");
		child->prefix6 = (uint8_t)p6;
	}
	const char *off = kiwi_json_string(kiwi_json_get(j, "ipv6_off"));
	snprintf(child->ipv6_off, sizeof(child->ipv6_off), "%s", off ? off : "");
	return 0;
}

int kiwi_helper_egress_prepare(struct kiwi_helper **hp, const struct kiwi_egress_config *c,
			       struct kiwi_egress_child *child, kiwi_err *err)
{
	if (kiwi_egress_config_check(c, err) < 0 || check_unprivileged(c, err) < 0)
		return -1;
	_cleanup_jw_ kiwi_json_writer *w = request_open("egress-prepare");
	if (!w)
		return kiwi_error(err, ENOMEM, STEP, "out of memory");
	write_egress(w, c);
	if (kiwi_helper_start(hp, err) < 0)
		return -1;
	struct kiwi_helper *h = *hp;
	_cleanup_json_ kiwi_json *j = request_send(h, w, -1, err);
	if (!j || child_of(j, &h->child, err) < 0)
		return -1;
	h->egress = true;
	*child = h->child;
	/* The name gate is ours, unprivileged, never the helper's; the
	 * helper's table redirects to the ports it bound. */
	if (kiwi_egress_shell(c, &h->child, &h->gate, err) < 0 || kiwi_egress_gate_attach(h->gate, err) < 0)
		return -1;
	/* the audit: the sandbox's log socket, read here as root's kiwi-run
	 * reads its own */
	kiwi_egress_adopt_log(h->gate, h->answer_fd);
	h->answer_fd = -1;
	return 0;
}

struct kiwi_egress *kiwi_helper_egress(const struct kiwi_helper *h)
{
	return h ? h->gate : NULL;
}

static int setup_inside(void *child, int *fd, kiwi_err *err)
{
	(void)fd;
	return kiwi_egress_setup_inside(child, err);
}

int kiwi_helper_egress_attach(struct kiwi_helper *h, int pidfd, kiwi_err *err)
{
	uint16_t dns, tcp;
	char req[96];
	kiwi_egress_gate_ports(h->gate, &dns, &tcp);
	int len = dns ? snprintf(req, sizeof(req), "{\"op\":\"egress-attach\",\"gate_dns\":%u,\"gate_tcp\":%u}",
				 dns, tcp)
		      : snprintf(req, sizeof(req), "{\"op\":\"egress-attach\"}");
	_cleanup_json_ kiwi_json *j = kiwi_helper_exchange(h, req, (size_t)len, pidfd, err);
	long long host_ifindex;
	if (!j)
		return -1;
	if (!kiwi_json_int(kiwi_json_get(j, "host_ifindex"), &host_ifindex))
		return kiwi_error(err, EPROTO, STEP, "kiwi-helper's answer to egress-attach has no host_ifindex");
	if (kiwi_egress_run_inside(pidfd, -1, setup_inside, &h->child, NULL, err) < 0)
		return -1;
	/* the gate's thread last: configure_inside forks */
	return kiwi_egress_wait_host((int)host_ifindex, err) < 0 ? -1 : kiwi_egress_gate_start(h->gate, err);
}

static void write_map(kiwi_json_writer *w, const char *key, const struct kiwi_id_extent *m, size_t n)
{
	kiwi_jw_key(w, key);
	kiwi_jw_open_array(w);
	for (size_t i = 0; i < n; i++) {
		kiwi_jw_open_array(w);
		kiwi_jw_int(w, m[i].inside);
		kiwi_jw_int(w, m[i].outside);
		kiwi_jw_int(w, m[i].count);
		kiwi_jw_close_array(w);
	}
	kiwi_jw_close_array(w);
}

int kiwi_helper_idmap(struct kiwi_helper *h, int pidfd, const struct kiwi_idmap *m, kiwi_err *err)
{
	_cleanup_jw_ kiwi_json_writer *w = request_open("idmap");
	if (!w)
		return kiwi_error(err, ENOMEM, STEP, "out of memory");
	write_map(w, "uid_map", m->uid, m->n_uid);
	write_map(w, "gid_map", m->gid, m->n_gid);
	_cleanup_json_ kiwi_json *j = request_send(h, w, pidfd, err);
	return j ? 0 : -1;
}

/* The limits in the keys the helper reads; io.max and raw files are
 * refused before the helper is asked. */
static void write_limits(kiwi_json_writer *w, const struct kiwi_cgroup_limits *l)
{
	char text[32];
	const struct { const char *key; int64_t v; } sizes[] = {
		{ "memory", l->memory_max }, { "memory_swap", l->memory_swap_max }, { "pids", l->pids_max },
	};
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(sizes); i++) {
		if (sizes[i].v < 0)
			continue;
		kiwi_jw_key(w, sizes[i].key);
		if (sizes[i].v == KIWI_CGROUP_MAX)
			kiwi_jw_string(w, "max");
		else
			kiwi_jw_int(w, sizes[i].v);
	}
	if (l->cpu_quota_us >= 0) {
		if (l->cpu_quota_us == KIWI_CGROUP_MAX) {
			snprintf(text, sizeof(text), "max");
		} else {
			/* 5 decimals: exact for the 100000 us period --cpus uses */
			int64_t period = l->cpu_period_us > 0 ? l->cpu_period_us : KIWI_CGROUP_CPU_PERIOD_US;
			int64_t v = (int64_t)((__int128)l->cpu_quota_us * 100000 / period);
			snprintf(text, sizeof(text), "%lld.%05lld", (long long)(v / 100000), (long long)(v % 100000));
		}
		kiwi_jw_key(w, "cpus");
		kiwi_jw_string(w, text);
	}
	const struct { const char *key; int v; } weights[] = {
		{ "io_weight", l->io_weight }, { "cpu_weight", l->cpu_weight },
	};
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(weights); i++)
		if (weights[i].v > 0) {
			kiwi_jw_key(w, weights[i].key);
			kiwi_jw_int(w, weights[i].v);
		}
}

int kiwi_helper_cgroup_prepare(struct kiwi_helper **hp, const struct kiwi_cgroup_limits *l, const char *parent,
			       bool session, char *name, size_t len, kiwi_err *err)
{
	if (l->io_max || l->unified)
		return kiwi_error(err, EPERM, "cgroup", "io.max and raw cgroup files need root: kiwi-helper sets "
							 "only memory, swap, pids, cpus and weights");
	_cleanup_jw_ kiwi_json_writer *w = request_open("cgroup-prepare");
	if (!w)
		return kiwi_error(err, ENOMEM, STEP, "out of memory");
	write_limits(w, l);
	if (parent) {
		kiwi_jw_key(w, "parent");
		kiwi_jw_string(w, parent);
	}
	if (session) {
		kiwi_jw_key(w, "session");
		kiwi_jw_bool(w, true);
	}
	if (kiwi_helper_start(hp, err) < 0)
		return -1;
	_cleanup_json_ kiwi_json *j = request_send(*hp, w, -1, err);
	if (!j)
		return -1;
	const char *path = kiwi_json_string(kiwi_json_get(j, "path"));
	if (!path || strlen(path) >= len)
		return kiwi_error(err, EPROTO, STEP, "kiwi-helper's answer to cgroup-prepare has no path");
	snprintf(name, len, "%s", path);
	return 0;
}

int kiwi_helper_cgroup_attach(struct kiwi_helper *h, int pidfd, kiwi_err *err)
{
	static const char req[] = "{\"op\":\"cgroup-attach\"}";
	_cleanup_json_ kiwi_json *j = kiwi_helper_exchange(h, req, sizeof(req) - 1, pidfd, err);
	return j ? 0 : -1;
}

int kiwi_helper_disk(struct kiwi_helper *h, int pidfd, uint64_t size, int *mfd, kiwi_err *err)
{
	char req[64];
	int len = snprintf(req, sizeof(req), "{\"op\":\"disk\",\"size\":%llu}", (unsigned long long)size);
	_cleanup_json_ kiwi_json *j = kiwi_helper_exchange(h, req, (size_t)len, pidfd, err);
	if (!j)
		return -1;
	if (h->answer_fd < 0)
		return kiwi_error(err, EPROTO, STEP, "kiwi-helper's answer to disk brought no mount");
	*mfd = h->answer_fd;
	h->answer_fd = -1;
	return 0;
}

int kiwi_helper_bind(struct kiwi_helper *h, int pidfd, int source, bool last, int *tree, bool *not_allowed,
		     kiwi_err *err)
{
	const char *req = last ? "{\"op\":\"bind\",\"last\":true}" : "{\"op\":\"bind\"}";
	const int fds[] = { pidfd, source };
	*not_allowed = false;
	_cleanup_json_ kiwi_json *j = exchange_fds(h, req, strlen(req), fds, 2, err);
	if (!j) {
		/* a rule without the operation: its own step (serve.c) */
		*not_allowed = !strcmp(h->refused_step, KIWI_HELPER_STEP_NOT_IN_RULE);
		return -1;
	}
	if (h->answer_fd < 0)
		return kiwi_error(err, EPROTO, STEP, "kiwi-helper's answer to bind brought no tree");
	*tree = h->answer_fd;
	h->answer_fd = -1;
	return 0;
}
