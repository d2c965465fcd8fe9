/* SPDX-License-Identifier: Apache-2.0 */
/* The name gate's resolver: the sandbox's queries in, the upstream's
 * answers checked, and the table of which addresses were given for
 * which name until when. See include/kiwi/proxy.h. */
#include "proxy_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>

#define QUERY_TIMEOUT_S 3

static uint32_t clamp_ttl(uint32_t ttl)
{
	return ttl < KIWI_PROXY_TTL_MIN ? KIWI_PROXY_TTL_MIN : ttl > KIWI_PROXY_TTL_MAX ? KIWI_PROXY_TTL_MAX : ttl;
}

bool proxy_was_given(const struct kiwi_proxy *p, const char *name, uint32_t addr)
{
	int64_t now = proxy_now();
	for (size_t i = 0; i < p->n_given; i++)
		if (p->given[i].addr == addr && p->given[i].expires > now && !strcmp(p->given[i].name, name))
			return true;
	return false;
}

bool proxy_addr_given(const struct kiwi_proxy *p, uint32_t addr)
{
	int64_t now = proxy_now();
	for (size_t i = 0; i < p->n_given; i++)
		if (p->given[i].addr == addr && p->given[i].expires > now)
			return true;
	return false;
}

static void forget_expired(struct kiwi_proxy *p, int64_t now)
{
	size_t out = 0;
	for (size_t i = 0; i < p->n_given; i++)
		if (p->given[i].expires > now)
			p->given[out++] = p->given[i];
	p->n_given = out;
}

/* Remembers every address of the answer, or none. */
static bool remember(struct kiwi_proxy *p, const char *name, const struct kiwi_dns_answer *a, uint32_t ttl)
{
	int64_t now = proxy_now();
	forget_expired(p, now);
	size_t fresh = 0;
	for (size_t k = 0; k < a->n_addrs; k++)
		fresh += !proxy_was_given(p, name, a->addrs[k]);
	if (p->n_given + fresh > PROXY_MAX_GIVEN)
		return false;
	for (size_t k = 0; k < a->n_addrs; k++) {
		struct given *g = NULL;
		for (size_t i = 0; i < p->n_given && !g; i++)
			if (p->given[i].addr == a->addrs[k] && !strcmp(p->given[i].name, name))
				g = &p->given[i];
		if (!g) {
			g = &p->given[p->n_given++];
			memcpy(g->name, name, sizeof(g->name));
			g->addr = a->addrs[k];
		}
		g->expires = now + ttl;
	}
	return true;
}

/* The unexpired addresses given for name, and the least time left. */
static size_t cached(const struct kiwi_proxy *p, const char *name, uint32_t *addrs, uint32_t *ttl)
{
	int64_t now = proxy_now();
	size_t n = 0;
	for (size_t i = 0; i < p->n_given && n < KIWI_DNS_MAX_ADDRS; i++) {
		const struct given *g = &p->given[i];
		if (g->expires <= now || strcmp(g->name, name))
			continue;
		uint32_t left = (uint32_t)(g->expires - now);
		if (!n || left < *ttl)
			*ttl = left;
		addrs[n++] = g->addr;
	}
	return n;
}

static void reply(struct kiwi_proxy *p, const struct kiwi_dns_query *q, uint16_t port, uint8_t rcode,
		  const uint32_t *addrs, size_t n, uint32_t ttl)
{
	uint8_t buf[512];
	size_t len = kiwi_dns_build_reply(buf, sizeof(buf), q, rcode, addrs, n, ttl);
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr = { htonl(p->cfg.sandbox) } };
	if (len)
		(void)!sendto(p->dns, buf, len, MSG_DONTWAIT, (struct sockaddr *)&to, sizeof(to));
}

static void ask_upstream(struct kiwi_proxy *p, const struct kiwi_dns_query *q, uint16_t port)
{
	struct pending *slot = NULL;
	for (size_t i = 0; i < PROXY_MAX_PENDING && !slot; i++)
		if (!p->pending[i].used)
			slot = &p->pending[i];
	uint16_t id;
	uint8_t buf[512];
	size_t len;
	if (!slot || getrandom(&id, sizeof(id), 0) != sizeof(id) ||
	    !(len = kiwi_dns_build_query(buf, sizeof(buf), id, q->name, KIWI_DNS_TYPE_A)) ||
	    send(p->upstream, buf, len, MSG_DONTWAIT) < 0) {
		reply(p, q, port, KIWI_DNS_SERVFAIL, NULL, 0, 0);
		return;
	}
	*slot = (struct pending){ .used = true, .id = id, .deadline = proxy_now() + QUERY_TIMEOUT_S, .q = *q,
				  .peer_port = port };
}

static void on_query(struct kiwi_proxy *p, const struct kiwi_dns_query *q, uint16_t port)
{
	if (!p->cfg.ops.name_allowed(p->cfg.ops.arg, q->name, 0)) {
		proxy_audit(p, "udp", p->cfg.gateway, 53, q->name, "not_allowed");
		reply(p, q, port, KIWI_DNS_NXDOMAIN, NULL, 0, 0);
		return;
	}
	/* IPv4 only here: other types of an allowed name have no data */
	if (q->qtype != KIWI_DNS_TYPE_A || q->qclass != 1) {
		reply(p, q, port, KIWI_DNS_NOERROR, NULL, 0, 0);
		return;
	}
	uint32_t addrs[KIWI_DNS_MAX_ADDRS], ttl = 0;
	size_t n = cached(p, q->name, addrs, &ttl);
	if (n)
		reply(p, q, port, KIWI_DNS_NOERROR, addrs, n, ttl);
	else
		ask_upstream(p, q, port);
}

void proxy_on_dns(struct kiwi_proxy *p)
{
	uint8_t buf[1024];
	struct sockaddr_in from;
	for (;;) {
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(p->dns, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
		if (n < 0)
			return;
		struct kiwi_dns_query q;
		/* only the sandbox is served; a malformed query gets nothing */
		if (ntohl(from.sin_addr.s_addr) != p->cfg.sandbox || kiwi_dns_parse_query(buf, (size_t)n, &q) < 0)
			continue;
		on_query(p, &q, ntohs(from.sin_port));
	}
}

/* The upstream's answer to a pending query, checked whole. */
static void answered(struct kiwi_proxy *p, struct pending *w, const struct kiwi_dns_answer *a)
{
	const struct kiwi_dns_query *q = &w->q;
	if (a->rcode || a->truncated) {
		reply(p, q, w->peer_port, a->rcode ? a->rcode : KIWI_DNS_SERVFAIL, NULL, 0, 0);
		return;
	}
	for (size_t i = 0; i < a->n_addrs; i++) {
		const char *why = p->cfg.ops.forbidden(p->cfg.ops.arg, a->addrs[i]);
		if (why) {
			/* one forbidden address refuses the whole answer */
			proxy_audit(p, "udp", a->addrs[i], 0, q->name, why);
			reply(p, q, w->peer_port, KIWI_DNS_REFUSED, NULL, 0, 0);
			return;
		}
	}
	uint32_t ttl = clamp_ttl(a->ttl);
	if (!remember(p, q->name, a, ttl)) {
		reply(p, q, w->peer_port, KIWI_DNS_SERVFAIL, NULL, 0, 0);
		return;
	}
	for (size_t i = 0; i < a->n_addrs; i++)
		proxy_audit(p, "udp", a->addrs[i], 0, q->name, "allowed:name");
	reply(p, q, w->peer_port, KIWI_DNS_NOERROR, a->addrs, a->n_addrs, ttl);
}

void proxy_on_upstream(struct kiwi_proxy *p)
{
	uint8_t buf[4096];
	for (;;) {
		ssize_t n = recv(p->upstream, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0)
			return;
		if (n < 2)
			continue;
		uint16_t id = (uint16_t)(buf[0] << 8 | buf[1]);
		for (size_t i = 0; i < PROXY_MAX_PENDING; i++) {
			struct pending *w = &p->pending[i];
			struct kiwi_dns_answer a;
			if (!w->used || w->id != id ||
			    kiwi_dns_parse_answer(buf, (size_t)n, id, w->q.name, KIWI_DNS_TYPE_A, &a) < 0)
				continue;
			w->used = false;
			answered(p, w, &a);
			break;
		}
	}
}

void proxy_dns_expire(struct kiwi_proxy *p, int64_t now)
{
	for (size_t i = 0; i < PROXY_MAX_PENDING; i++) {
		struct pending *w = &p->pending[i];
		if (w->used && w->deadline <= now) {
			w->used = false;
			proxy_audit(p, "udp", p->cfg.upstream, 53, w->q.name, "upstream_failed");
			reply(p, &w->q, w->peer_port, KIWI_DNS_SERVFAIL, NULL, 0, 0);
		}
	}
}
