/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by proxy.c (the thread, its loop, the TCP side) and resolver.c
 * (the DNS side and the names it gave). Everything here is touched by
 * the proxy's thread only, once it runs. */
#ifndef KIWI_PROXY_INT_H
#define KIWI_PROXY_INT_H

#include "kiwi/dns.h"
#include "kiwi/proxy.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define PROXY_MAX_GIVEN 1024
#define PROXY_MAX_PENDING 64
#define PROXY_MAX_CONNS 256

/* What the epoll data points at. */
enum tag_kind { TAG_STOP, TAG_DNS, TAG_UPSTREAM, TAG_LISTEN, TAG_CLIENT, TAG_SERVER, TAG_QUEUE };
struct tag {
	enum tag_kind kind;
	struct conn *conn;
};

struct given {
	char name[KIWI_DNS_NAME_MAX + 1];
	uint32_t addr;
	int64_t expires;     /* CLOCK_MONOTONIC, s */
};

struct pending {
	bool used;
	uint16_t id;         /* ours, to the upstream */
	int64_t deadline;    /* CLOCK_MONOTONIC, s */
	struct kiwi_dns_query q;   /* the sandbox's */
	uint16_t peer_port;
};

#define PROXY_MAX_FLOWS 256

struct mnl_socket;
struct tls_flow;

struct kiwi_proxy {
	struct kiwi_proxy_config cfg;
	int epfd, stopfd, dns, upstream, listen;
	uint16_t dns_port, tcp_port;
	struct tag tags[5];  /* stop, dns, upstream, listen, queue */
	/* the kernel path (proxy_tls.c): NULL, none */
	struct mnl_socket *queue;
	uint16_t queue_num;
	char *queue_buf;     /* what one recv of it gives */
	kiwi_err no_queue;   /* kernel_tls asked for, no queue had: why */
	struct tls_flow *flows[PROXY_MAX_FLOWS];
	pthread_t thread;
	bool running;
	struct given given[PROXY_MAX_GIVEN];
	size_t n_given;
	struct pending pending[PROXY_MAX_PENDING];
	struct conn *conns[PROXY_MAX_CONNS];
	size_t n_conns;
	struct conn *dead;   /* closed this round, freed at its end */
};

int64_t proxy_now(void);
void proxy_audit(struct kiwi_proxy *p, const char *proto, uint32_t dst, uint16_t port, const char *name,
		 const char *rule);
/* Why a connection naming name (r: what its first bytes said) to
 * dst:port is refused, or "allowed:name". */
const char *proxy_decide(struct kiwi_proxy *p, uint16_t port, uint32_t dst, int r, const char *name);
/* proxy_tls.c: the kernel path */
int proxy_tls_open(struct kiwi_proxy *p, kiwi_err *err);
void proxy_on_queue(struct kiwi_proxy *p);
void proxy_tls_expire(struct kiwi_proxy *p, int64_t now);
void proxy_tls_close(struct kiwi_proxy *p);
/* resolver.c */
void proxy_on_dns(struct kiwi_proxy *p);
void proxy_on_upstream(struct kiwi_proxy *p);
void proxy_dns_expire(struct kiwi_proxy *p, int64_t now);
/* True when the resolver gave addr for name and that is not over. */
bool proxy_was_given(const struct kiwi_proxy *p, const char *name, uint32_t addr);
/* The same for any name. */
bool proxy_addr_given(const struct kiwi_proxy *p, uint32_t addr);

#endif
