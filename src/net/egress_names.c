/* SPDX-License-Identifier: Apache-2.0 */
/* host_allowlist by name: the name gate (proxy.c, proxy_tls.c,
 * resolver.c) wired to the policy, the address checks and the audit of
 * one sandbox. Linked into kiwi-run only: kiwi-helper(8) never runs a
 * gate (a caller's kiwi-run runs its own, unprivileged, proxy only). */
#include "egress_int.h"
#include "kiwi/proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kiwi_egress_gate {
	struct kiwi_egress *e;
	struct kiwi_proxy *proxy;
};

static bool port_allowed(const struct kiwi_egress_config *c, const struct kiwi_egress_host *h, uint16_t port)
{
	if (port == 0)
		return true;
	if (h->port)
		return h->port == port;
	if (!c->n_allow_ports)
		return port == 80 || port == 443;
	for (size_t i = 0; i < c->n_allow_ports; i++)
		if (c->allow_ports[i] == port)
			return true;
	return false;
}

static bool name_allowed(void *arg, const char *name, uint16_t port)
{
	const struct kiwi_egress_config *c = &((struct kiwi_egress_gate *)arg)->e->cfg;
	for (size_t i = 0; i < c->n_allow_hosts; i++) {
		const struct kiwi_egress_host *h = &c->allow_hosts[i];
		if (kiwi_egress_host_matches(h, name) && port_allowed(c, h, port))
			return true;
	}
	return false;
}

static const char *forbidden(void *arg, uint32_t a)
{
	const struct kiwi_egress *e = ((struct kiwi_egress_gate *)arg)->e;
	return kiwi_egress_forbidden(&e->cfg, e->host_addrs, e->n_host_addrs, a);
}

/* The gate's decisions, into the one audit (kiwi/egress.h). */
static void audit(void *arg, const struct kiwi_proxy_event *ev)
{
	struct kiwi_egress *e = ((struct kiwi_egress_gate *)arg)->e;
	uint32_t dst = htonl(ev->dst), src = htonl(e->block + 2);
	struct kiwi_egress_event out = {
		.family = 4,
		.proto = strcmp(ev->proto, "tcp") ? IPPROTO_UDP : IPPROTO_TCP,
		.port = ev->port,
		.allowed = ev->allowed,
		.rule = ev->rule,
		.name = ev->name,
	};
	memcpy(out.dst, &dst, 4);
	memcpy(out.src, &src, 4);
	kiwi_egress_audit_event(e, &out);
}

static int gate_start(struct kiwi_egress_gate *g, kiwi_err *err)
{
	return kiwi_proxy_start(g->proxy, err);
}

static void gate_close(struct kiwi_egress_gate *g)
{
	kiwi_proxy_close(g->proxy);
	free(g);
}

static void gate_unqueue(struct kiwi_egress_gate *g)
{
	kiwi_proxy_drop_queue(g->proxy);
}

static const struct egress_gate_ops gate_ops = { gate_start, gate_close, gate_unqueue };

int kiwi_egress_gate_attach(struct kiwi_egress *e, kiwi_err *err)
{
	bool names = false, tls = false;
	for (size_t i = 0; e->cfg.kind == KIWI_EGRESS_HOST_ALLOWLIST && i < e->cfg.n_allow_hosts; i++) {
		const struct kiwi_egress_host *h = &e->cfg.allow_hosts[i];
		bool name = !kiwi_egress_host_is_addr(h);
		names |= name;
		tls |= name && port_allowed(&e->cfg, h, KIWI_GATE_TLS_PORT);
	}
	if (!names || e->gate)
		return 0;
	struct kiwi_egress_gate *g = calloc(1, sizeof(*g));
	if (!g)
		return kiwi_error(err, ENOMEM, "egress", "out of memory");
	g->e = e;
	struct kiwi_proxy_config c = {
		.gateway = e->block + 1,
		.sandbox = e->block + 2,
		.upstream = kiwi_egress_upstream(&e->cfg),
		.ops = { name_allowed, forbidden, audit, g },
		/* Only with a table of our own (root): a shell of kiwi-helper's
		 * caller cannot give verdicts that mark conntrack entries. A
		 * queue number per pool block, so sandboxes do not collide. */
		.kernel_tls = tls && e->nft,
		.queue_first = (uint16_t)(e->block >> 2),
	};
	if (kiwi_proxy_open(&c, &g->proxy, err) < 0) {
		free(g);
		return -1;
	}
	e->gate = g;
	e->gate_ops = &gate_ops;
	e->gate_dns = kiwi_proxy_dns_port(g->proxy);
	e->gate_tcp = kiwi_proxy_tcp_port(g->proxy);
	int q = kiwi_proxy_queue(g->proxy);
	e->gate_kernel = q >= 0;
	e->gate_queue = q >= 0 ? (uint16_t)q : 0;
	const kiwi_err *no_queue = kiwi_proxy_queue_error(g->proxy);
	if (no_queue) {
		char why[KIWI_ERR_MSG_MAX + 64];
		kiwi_error_format(no_queue, why, sizeof(why));
		snprintf(e->tls_kernel_off, sizeof(e->tls_kernel_off), "no queue for the name gate: %.200s", why);
	}
	return 0;
}
