/* SPDX-License-Identifier: Apache-2.0 */
/* The name gate's thread and its TCP side: see include/kiwi/proxy.h.
 * A connection goes HELLO (reading the first bytes until they name a
 * host) -> CONNECTING (to the address the sandbox asked for) -> HEAD
 * (the bytes read so far, sent on) -> RELAY (splice both ways through a
 * pipe each, so the payload never crosses user space). */
#include "proxy_int.h"
#include "kiwi/cleanup.h"
#include "kiwi/sni.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netfilter_ipv4.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HELLO_TIMEOUT_S 10
#define SPLICE_CHUNK (1 << 20)
/* Bigger pipes, fewer system calls per byte: with the default 64 KiB the
 * relay spent its time in splice and epoll_ctl (bench/RESULTS.md). */
#define PIPE_SIZE (1 << 20)

enum conn_state { HELLO, CONNECTING, HEAD, RELAY };

struct dir {
	int pipe[2];
	size_t in_pipe;
	bool eof, done;
};

struct conn {
	enum conn_state state;
	int client, server;
	struct tag ctag, stag;
	uint32_t cevents, sevents;  /* what epoll watches for on each now */
	uint32_t dst;
	uint16_t port;
	int64_t deadline;
	uint8_t *head;       /* HELLO, HEAD: the first bytes; HTTP: all the client's */
	size_t head_len, head_off;
	size_t pass;         /* HTTP: bytes at head's start framed and checked, to send */
	bool http;           /* plain HTTP: every request's Host is checked */
	struct kiwi_http_framer framer;
	char name[KIWI_SNI_NAME_MAX + 1];  /* the name let through */
	struct dir up, down; /* client -> server, server -> client */
	bool dead;           /* closed; freed after this round of events */
	struct conn *next_dead;
};

int64_t proxy_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

void proxy_audit(struct kiwi_proxy *p, const char *proto, uint32_t dst, uint16_t port, const char *name,
		 const char *rule)
{
	struct kiwi_proxy_event ev = { proto, dst, port, name, !strncmp(rule, "allowed", 7), rule };
	if (p->cfg.ops.audit)
		p->cfg.ops.audit(p->cfg.ops.arg, &ev);
}

/* ---- connections ---- */

static void conn_free(struct kiwi_proxy *p, struct conn *c, bool reset)
{
	if (reset) {
		/* a reset, not a FIN: the sandbox sees ECONNRESET, not an empty answer */
		struct linger l = { 1, 0 };
		setsockopt(c->client, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	}
	int fds[] = { c->client, c->server, c->up.pipe[0], c->up.pipe[1], c->down.pipe[0], c->down.pipe[1] };
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (fds[i] >= 0)
			close(fds[i]);   /* closing takes it out of the epoll set */
	for (size_t i = 0; i < p->n_conns; i++)
		if (p->conns[i] == c) {
			p->conns[i] = p->conns[--p->n_conns];
			break;
		}
	/* later events of this round may still point at it */
	c->dead = true;
	c->next_dead = p->dead;
	p->dead = c;
}

static void bury(struct kiwi_proxy *p)
{
	while (p->dead) {
		struct conn *c = p->dead;
		p->dead = c->next_dead;
		free(c->head);
		free(c);
	}
}

static void watch(struct kiwi_proxy *p, int fd, struct tag *t, uint32_t events, int op)
{
	struct epoll_event ev = { .events = events, .data.ptr = t };
	epoll_ctl(p->epfd, op, fd, &ev);
}

static void on_accept(struct kiwi_proxy *p)
{
	for (;;) {
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		int fd = accept4(p->listen, (struct sockaddr *)&from, &fl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		struct sockaddr_in orig;
		socklen_t ol = sizeof(orig);
		struct conn *c = NULL;
		/* the address the sandbox asked for, from conntrack's DNAT */
		if (ntohl(from.sin_addr.s_addr) != p->cfg.sandbox || p->n_conns == PROXY_MAX_CONNS ||
		    getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &orig, &ol) < 0 || !(c = calloc(1, sizeof(*c))) ||
		    !(c->head = malloc(KIWI_SNI_PEEK_MAX))) {
			free(c);
			close(fd);
			continue;
		}
		*c = (struct conn){ .state = HELLO, .client = fd, .server = -1, .dst = ntohl(orig.sin_addr.s_addr),
				    .port = ntohs(orig.sin_port), .deadline = proxy_now() + HELLO_TIMEOUT_S,
				    .head = c->head, .up.pipe = { -1, -1 }, .down.pipe = { -1, -1 } };
		c->ctag = (struct tag){ TAG_CLIENT, c };
		c->stag = (struct tag){ TAG_SERVER, c };
		p->conns[p->n_conns++] = c;
		watch(p, fd, &c->ctag, EPOLLIN, EPOLL_CTL_ADD);
	}
}

/* The name is known: is it on the list for this port, and was this
 * address given for it? */
const char *proxy_decide(struct kiwi_proxy *p, uint16_t port, uint32_t dst, int r, const char *name)
{
	if (r == KIWI_SNI_ECH)
		return "ech";
	if (r != KIWI_SNI_NAME)
		return "no_name";
	if (!p->cfg.ops.name_allowed(p->cfg.ops.arg, name, port))
		return "not_allowed";
	if (!proxy_was_given(p, name, dst))
		return "not_resolved";
	return "allowed:name";
}

static void start_connect(struct kiwi_proxy *p, struct conn *c)
{
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(c->port), .sin_addr = { htonl(c->dst) } };
	c->server = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->server < 0 || pipe2(c->up.pipe, O_NONBLOCK | O_CLOEXEC) < 0 ||
	    pipe2(c->down.pipe, O_NONBLOCK | O_CLOEXEC) < 0 ||
	    (connect(c->server, (struct sockaddr *)&to, sizeof(to)) < 0 && errno != EINPROGRESS)) {
		conn_free(p, c, true);
		return;
	}
	/* best effort: a smaller pipe is only slower */
	fcntl(c->up.pipe[1], F_SETPIPE_SZ, PIPE_SIZE);
	fcntl(c->down.pipe[1], F_SETPIPE_SZ, PIPE_SIZE);
	c->state = CONNECTING;
	watch(p, c->client, &c->ctag, 0, EPOLL_CTL_MOD);
	watch(p, c->server, &c->stag, EPOLLOUT, EPOLL_CTL_ADD);
	c->cevents = 0;
	c->sevents = EPOLLOUT;
}

static void on_hello(struct kiwi_proxy *p, struct conn *c)
{
	ssize_t n = read(c->client, c->head + c->head_len, KIWI_SNI_PEEK_MAX - c->head_len);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		conn_free(p, c, false);
		return;
	}
	c->head_len += (size_t)n;
	char name[KIWI_SNI_NAME_MAX + 1];
	enum kiwi_sni r = kiwi_sni_read(c->head, c->head_len, name);
	if (r == KIWI_SNI_MORE)
		return;
	const char *rule = proxy_decide(p, c->port, c->dst, (int)r, name);
	proxy_audit(p, "tcp", c->dst, c->port, r == KIWI_SNI_NAME ? name : NULL, rule);
	if (strcmp(rule, "allowed:name")) {
		conn_free(p, c, true);
		return;
	}
	c->http = c->head[0] != 0x16;   /* not a TLS handshake record */
	memcpy(c->name, name, sizeof(c->name));
	start_connect(p, c);
}

/* ---- relay ---- */

/* Moves what it can from src to dst through d's pipe; -1 on an error. */
static int pump(struct dir *d, int src, int dst)
{
	for (;;) {
		if (!d->in_pipe && !d->eof) {
			ssize_t n = splice(src, NULL, d->pipe[1], NULL, SPLICE_CHUNK, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
			if (n == 0)
				d->eof = true;
			else if (n > 0)
				d->in_pipe = (size_t)n;
			else
				return errno == EAGAIN ? 0 : -1;
		}
		if (d->in_pipe) {
			ssize_t n = splice(d->pipe[0], NULL, dst, NULL, d->in_pipe, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
			if (n < 0)
				return errno == EAGAIN ? 0 : -1;
			d->in_pipe -= (size_t)n;
			continue;
		}
		if (d->eof && !d->done) {
			d->done = true;
			shutdown(dst, SHUT_WR);
		}
		return 0;
	}
}

/* Plain HTTP, client to server: through the framer, in user space (an
 * upload costs a copy; downloads are still spliced). -1: reset. */
static int up_http(struct kiwi_proxy *p, struct conn *c)
{
	for (;;) {
		if (c->head_off < c->pass) {
			ssize_t n = send(c->server, c->head + c->head_off, c->pass - c->head_off, MSG_NOSIGNAL);
			if (n < 0)
				return errno == EAGAIN ? 0 : -1;
			c->head_off += (size_t)n;
			continue;
		}
		memmove(c->head, c->head + c->pass, c->head_len - c->pass);
		c->head_len -= c->pass;
		c->head_off = c->pass = 0;
		char other[KIWI_SNI_NAME_MAX + 1];
		enum kiwi_http_verdict v = kiwi_http_frame(&c->framer, c->head, c->head_len, c->name, &c->pass, other);
		if (v != KIWI_HTTP_OK) {
			proxy_audit(p, "tcp", c->dst, c->port, v == KIWI_HTTP_OTHER_HOST ? other : c->name,
				    v == KIWI_HTTP_OTHER_HOST ? "not_allowed" : "http_unframed");
			return -1;
		}
		if (c->pass)
			continue;
		if (c->up.eof) {
			/* a request cut short is not sent on */
			if (!c->up.done)
				shutdown(c->server, SHUT_WR);
			c->up.done = true;
			return 0;
		}
		if (c->head_len == KIWI_SNI_PEEK_MAX)
			return -1;
		ssize_t n = read(c->client, c->head + c->head_len, KIWI_SNI_PEEK_MAX - c->head_len);
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -1;
		c->up.eof = n == 0;
		c->head_len += (size_t)n;
	}
}

static void relay(struct kiwi_proxy *p, struct conn *c)
{
	int up = c->http ? up_http(p, c) : pump(&c->up, c->client, c->server);
	if (up < 0 || pump(&c->down, c->server, c->client) < 0) {
		conn_free(p, c, true);
		return;
	}
	if (c->up.done && c->down.done) {
		conn_free(p, c, false);
		return;
	}
	bool up_sending = c->http ? c->head_off < c->pass : c->up.in_pipe > 0;
	uint32_t up_rd = !c->up.eof && !up_sending ? EPOLLIN : 0, up_wr = up_sending ? EPOLLOUT : 0;
	uint32_t down_rd = !c->down.eof && !c->down.in_pipe ? EPOLLIN : 0, down_wr = c->down.in_pipe ? EPOLLOUT : 0;
	/* epoll_ctl only when the interest changes: most rounds it does not */
	uint32_t ce = up_rd | down_wr, se = down_rd | up_wr;
	if (ce != c->cevents)
		watch(p, c->client, &c->ctag, c->cevents = ce, EPOLL_CTL_MOD);
	if (se != c->sevents)
		watch(p, c->server, &c->stag, c->sevents = se, EPOLL_CTL_MOD);
}

static void on_server_ready(struct kiwi_proxy *p, struct conn *c)
{
	if (c->state == CONNECTING) {
		int soerr = 0;
		socklen_t l = sizeof(soerr);
		if (getsockopt(c->server, SOL_SOCKET, SO_ERROR, &soerr, &l) < 0 || soerr) {
			conn_free(p, c, true);
			return;
		}
		c->state = HEAD;
	}
	/* plain HTTP: the framer sends the head, request by request */
	while (!c->http && c->head_off < c->head_len) {
		ssize_t n = send(c->server, c->head + c->head_off, c->head_len - c->head_off, MSG_NOSIGNAL);
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			conn_free(p, c, true);
			return;
		}
		c->head_off += (size_t)n;
	}
	if (!c->http) {
		free(c->head);
		c->head = NULL;
	}
	c->state = RELAY;
	relay(p, c);
}

static void on_conn(struct kiwi_proxy *p, struct tag *t)
{
	struct conn *c = t->conn;
	if (c->dead)
		return;
	switch (c->state) {
	case HELLO:
		if (t->kind == TAG_CLIENT)
			on_hello(p, c);
		break;
	case CONNECTING:
	case HEAD:
		if (t->kind == TAG_SERVER)
			on_server_ready(p, c);
		break;
	case RELAY:
	default:
		relay(p, c);
		break;
	}
}

static void expire(struct kiwi_proxy *p, int64_t now)
{
	proxy_dns_expire(p, now);
	proxy_tls_expire(p, now);
	for (size_t i = p->n_conns; i-- > 0;) {
		struct conn *c = p->conns[i];
		if (c->state == HELLO && c->deadline <= now) {
			proxy_audit(p, "tcp", c->dst, c->port, NULL, "no_name");
			conn_free(p, c, true);
		}
	}
}

/* ---- the thread ---- */

static void *loop(void *arg)
{
	struct kiwi_proxy *p = arg;
	struct epoll_event ev[64];
	for (;;) {
		int n = epoll_wait(p->epfd, ev, 64, 1000);
		if (n < 0 && errno != EINTR)
			break;
		for (int i = 0; i < n; i++) {
			struct tag *t = ev[i].data.ptr;
			if (t->kind == TAG_STOP)
				return NULL;
			if (t->kind == TAG_DNS)
				proxy_on_dns(p);
			else if (t->kind == TAG_UPSTREAM)
				proxy_on_upstream(p);
			else if (t->kind == TAG_LISTEN)
				on_accept(p);
			else if (t->kind == TAG_QUEUE)
				proxy_on_queue(p);
			else
				on_conn(p, t);
		}
		expire(p, proxy_now());
		bury(p);
	}
	return NULL;
}

/* ---- life ---- */

/* A socket bound to addr:0 before addr exists on any device: the
 * gateway address comes with the veth, after this. */
static int bound(int type, uint32_t addr, uint16_t *port, kiwi_err *err)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr = { htonl(addr) } };
	socklen_t l = sizeof(sa);
	int one = 1;
	_cleanup_close_ int fd = socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_IP, IP_FREEBIND, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || getsockname(fd, (struct sockaddr *)&sa, &l) < 0 ||
	    (type == SOCK_STREAM && listen(fd, 128) < 0))
		return kiwi_error(err, errno, "egress", "cannot bind the name gate's %s socket",
				  type == SOCK_STREAM ? "TCP" : "DNS");
	*port = ntohs(sa.sin_port);
	return TAKE_FD(fd);
}

static int connected_upstream(uint32_t addr, kiwi_err *err)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(53), .sin_addr = { htonl(addr) } };
	_cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return kiwi_error(err, errno, "egress", "cannot reach the upstream resolver (--dns)");
	return TAKE_FD(fd);
}

int kiwi_proxy_open(const struct kiwi_proxy_config *c, struct kiwi_proxy **out, kiwi_err *err)
{
	*out = NULL;
	if (!c->upstream)
		return kiwi_error(err, 0, "egress", "host_allowlist needs a resolver to ask: give --dns, or a "
						    "nameserver in /etc/resolv.conf");
	struct kiwi_proxy *p = calloc(1, sizeof(*p));
	if (!p)
		return kiwi_error(err, ENOMEM, "egress", "out of memory");
	p->cfg = *c;
	p->dns = p->upstream = p->listen = p->stopfd = -1;
	p->epfd = epoll_create1(EPOLL_CLOEXEC);
	p->stopfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (p->epfd < 0 || p->stopfd < 0) {
		kiwi_error(err, errno, "egress", "cannot make the name gate's event loop");
		kiwi_proxy_close(p);
		return -1;
	}
	if ((p->dns = bound(SOCK_DGRAM, c->gateway, &p->dns_port, err)) < 0 ||
	    (p->listen = bound(SOCK_STREAM, c->gateway, &p->tcp_port, err)) < 0 ||
	    (p->upstream = connected_upstream(c->upstream, err)) < 0) {
		kiwi_proxy_close(p);
		return -1;
	}
	/* No queue to be had (no nfnetlink_queue in this kernel, every
	 * number taken): 443 stays on the proxy, as strict, only slower. */
	if (c->kernel_tls && proxy_tls_open(p, &p->no_queue) < 0)
		proxy_tls_close(p);
	int fds[] = { p->stopfd, p->dns, p->upstream, p->listen };
	enum tag_kind kinds[] = { TAG_STOP, TAG_DNS, TAG_UPSTREAM, TAG_LISTEN };
	for (int i = 0; i < 4; i++) {
		p->tags[i] = (struct tag){ kinds[i], NULL };
		watch(p, fds[i], &p->tags[i], EPOLLIN, EPOLL_CTL_ADD);
	}
	*out = p;
	return 0;
}

uint16_t kiwi_proxy_dns_port(const struct kiwi_proxy *p)
{
	return p->dns_port;
}

uint16_t kiwi_proxy_tcp_port(const struct kiwi_proxy *p)
{
	return p->tcp_port;
}

int kiwi_proxy_queue(const struct kiwi_proxy *p)
{
	return p->queue ? p->queue_num : -1;
}

const kiwi_err *kiwi_proxy_queue_error(const struct kiwi_proxy *p)
{
	return p->cfg.kernel_tls && !p->queue ? &p->no_queue : NULL;
}

int kiwi_proxy_start(struct kiwi_proxy *p, kiwi_err *err)
{
	/* every signal blocked in the thread: the launcher's signalfd gets
	 * them, and a SIGPIPE of a splice stays an EPIPE */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int r = pthread_create(&p->thread, NULL, loop, p);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r)
		return kiwi_error(err, r, "egress", "cannot start the name gate's thread");
	p->running = true;
	return 0;
}

void kiwi_proxy_close(struct kiwi_proxy *p)
{
	if (!p)
		return;
	if (p->running) {
		uint64_t one = 1;
		(void)!write(p->stopfd, &one, sizeof(one));
		pthread_join(p->thread, NULL);
	}
	while (p->n_conns)
		conn_free(p, p->conns[0], false);
	bury(p);
	proxy_tls_close(p);
	int fds[] = { p->epfd, p->stopfd, p->dns, p->upstream, p->listen };
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(p);
}
