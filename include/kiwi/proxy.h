/* SPDX-License-Identifier: Apache-2.0 */
/* The name gate of host_allowlist: kiwi-run's own resolver and
 * transparent TCP proxy for one sandbox, on the host side of its veth,
 * run by a thread of kiwi-run (no privilege needed: it binds two
 * unprivileged ports on the gateway address; the sandbox's table
 * redirects its DNS and its TCP on allowed ports there).
 *
 * The resolver answers a name on the list by asking the upstream, and
 * refuses the whole answer when any address of it is forbidden; it
 * remembers which addresses it gave for which name, each until the
 * answer's TTL (bounded 30 s to 1 h) runs out. A name not on the list
 * gets NXDOMAIN. The proxy takes each TCP connection, reads the name it
 * carries (TLS server_name, HTTP Host), and connects on to the address
 * the sandbox asked for only when that name is on the list for that
 * port and the resolver gave that address for that very name. Every
 * decision is handed to ops.audit.
 *
 * The kernel path (kernel_tls, root runs only): TLS on port 443 is not
 * proxied. The sandbox's flow goes to the address it asked for and is
 * forwarded by the kernel; the table queues its packets to the gate
 * (nfnetlink_queue, kiwi/nfq.h) while the flow's conntrack mark says
 * unchecked: the SYN (let through only to an address the resolver gave
 * the sandbox; any other goes on to the proxy as before), then its
 * first segments, held until the ClientHello is whole. The same checks
 * decide; the verdict marks the flow allowed (the kernel forwards the
 * rest unseen) or refused (the table resets it). Setting the mark
 * needs CAP_NET_ADMIN in the host's namespace at each verdict, which a
 * rootless kiwi-run has not: there every port stays on the proxy. */
#ifndef KIWI_PROXY_H
#define KIWI_PROXY_H

#include <stdbool.h>
#include <stdint.h>

#include "kiwi/err.h"

#define KIWI_PROXY_TTL_MIN 30
#define KIWI_PROXY_TTL_MAX 3600

struct kiwi_proxy_event {
	const char *proto;   /* "udp" (a DNS query) or "tcp" */
	uint32_t dst;        /* host byte order; 0: none */
	uint16_t port;
	const char *name;    /* NULL: not known */
	bool allowed;
	/* allowed:name, not_allowed, no_name, ech, not_resolved,
	 * always_deny..., upstream_failed */
	const char *rule;
};

struct kiwi_proxy_ops {
	/* Is name on the list, on port (0: on any port)? */
	bool (*name_allowed)(void *arg, const char *name, uint16_t port);
	/* NULL when the sandbox may be sent addr, else why not (a rule class). */
	const char *(*forbidden)(void *arg, uint32_t addr);
	/* Called from the proxy's thread. */
	void (*audit)(void *arg, const struct kiwi_proxy_event *ev);
	void *arg;
};

/* The conntrack and packet mark bits the table and the kernel path share
 * (a verdict sets the packet's, the table copies it to the flow's). */
#define KIWI_GATE_MARK_MASK 0x30000000u
#define KIWI_GATE_UNCHECKED 0x10000000u
#define KIWI_GATE_ALLOWED 0x20000000u
#define KIWI_GATE_REFUSED 0x30000000u
/* TLS on this port takes the kernel path; a first payload that is not
 * a TLS handshake is refused there. */
#define KIWI_GATE_TLS_PORT 443

struct kiwi_proxy_config {
	uint32_t gateway;    /* host byte order: where both ports are bound */
	uint32_t sandbox;    /* the only peer served */
	uint32_t upstream;   /* the resolver asked, on port 53 */
	struct kiwi_proxy_ops ops;
	bool kernel_tls;     /* the kernel path for port 443 */
	uint16_t queue_first;  /* then: the queue number tried first */
};

struct kiwi_proxy;

/* Binds the two sockets (the gateway address need not exist yet). */
int kiwi_proxy_open(const struct kiwi_proxy_config *c, struct kiwi_proxy **out, kiwi_err *err);
uint16_t kiwi_proxy_dns_port(const struct kiwi_proxy *p);
uint16_t kiwi_proxy_tcp_port(const struct kiwi_proxy *p);
/* The queue the kernel path is bound to; -1: no kernel path. */
int kiwi_proxy_queue(const struct kiwi_proxy *p);
/* kernel_tls asked for and no queue bound (no nfnetlink_queue, every
 * number taken): why; NULL otherwise. */
const kiwi_err *kiwi_proxy_queue_error(const struct kiwi_proxy *p);
/* Unbinds and closes the queue, when the table will not use it (the
 * kernel refused the queue rule). Before kiwi_proxy_start only. */
void kiwi_proxy_drop_queue(struct kiwi_proxy *p);
/* Starts the thread. Only after the sandbox is cloned: a process with
 * threads must not clone3 a child that then allocates. */
int kiwi_proxy_start(struct kiwi_proxy *p, kiwi_err *err);
/* Stops the thread, closes every connection, frees p (NULL is fine). */
void kiwi_proxy_close(struct kiwi_proxy *p);

#endif
