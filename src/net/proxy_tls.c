/* SPDX-License-Identifier: Apache-2.0 */
/* The name gate's kernel path for TLS (include/kiwi/proxy.h): no second
 * TCP connection, the flow forwarded by the kernel like a direct one;
 * only its first packets come here, queued by the table while its
 * conntrack mark says unchecked (egress_rules.c). A flow is
 *   (none) -SYN to a given address-> HELLO -ClientHello whole-> ALLOWED
 *                                          \-refused, or 10 s-> REFUSED
 *   HELLO -FIN or RST before any byte-> ENDED
 * A verdict that decides a flow is NF_REPEAT with the packet mark
 * (KIWI_GATE_*): the table's first rules copy it into the flow's
 * conntrack mark, so no conntrack netlink (nf_conntrack_netlink) is
 * needed; every other packet is accepted or dropped as it is. */
#include "proxy_int.h"
#include "kiwi/nfq.h"
#include "kiwi/sni.h"

#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#define HELLO_TIMEOUT_S 10
/* A decided flow is kept this long for the packets queued before its
 * mark was set (they come within moments), then its slot is free. */
#define DECIDED_KEEP_S 2
/* Segments held per flow until its ClientHello is whole: a 16 KiB
 * record is a dozen at a 1500-byte MTU. */
#define MAX_HELD 32
#define QUEUE_BUF (128 * 1024)

enum flow_state { HELLO, ALLOWED, REFUSED, ENDED };

struct tls_flow {
	enum flow_state state;
	uint16_t sport, dport;
	uint32_t dst;
	int64_t deadline;    /* HELLO: refused then; otherwise forgotten then */
	struct kiwi_stream_head head;
	uint32_t held[MAX_HELD];
	uint32_t held_mark;  /* the first held packet's mark, kept as it was */
	size_t n_held;
};

static void verdict(struct kiwi_proxy *p, uint32_t id, uint32_t v)
{
	/* a failed verdict leaves the packet queued until the socket
	 * closes, then dropped: fail closed */
	kiwi_nfq_verdict(p->queue, p->queue_num, id, v, false, 0);
}

/* NF_REPEAT with the flow's new mark: the table's first rule copies it. */
static void mark(struct kiwi_proxy *p, uint32_t id, uint32_t pkt_mark, uint32_t flow_mark)
{
	kiwi_nfq_verdict(p->queue, p->queue_num, id, NF_REPEAT, true, (pkt_mark & ~KIWI_GATE_MARK_MASK) | flow_mark);
}

static struct tls_flow **find(struct kiwi_proxy *p, const struct kiwi_tcp4 *t)
{
	for (size_t i = 0; i < PROXY_MAX_FLOWS; i++) {
		struct tls_flow *f = p->flows[i];
		if (f && f->sport == t->sport && f->dst == t->daddr && f->dport == t->dport)
			return &p->flows[i];
	}
	return NULL;
}

static void forget(struct tls_flow **slot)
{
	free((*slot)->head.buf);
	free(*slot);
	*slot = NULL;
}

/* A free slot, else the one of a decided flow decided longest ago (its
 * stragglers are long through), else NULL: every flow is still saying
 * its name. */
static struct tls_flow **free_slot(struct kiwi_proxy *p)
{
	struct tls_flow **oldest = NULL;
	for (size_t i = 0; i < PROXY_MAX_FLOWS; i++) {
		struct tls_flow *f = p->flows[i];
		if (!f)
			return &p->flows[i];
		if (f->state != HELLO && (!oldest || f->deadline < (*oldest)->deadline))
			oldest = &p->flows[i];
	}
	if (oldest)
		forget(oldest);
	return oldest;
}

/* A SYN of no flow we know: the kernel path when the resolver gave the
 * sandbox this address; otherwise (or no room) on to the proxy, which
 * checks and audits it as it always did. */
static void on_syn(struct kiwi_proxy *p, const struct kiwi_nfq_packet *pkt, const struct kiwi_tcp4 *t)
{
	struct tls_flow **slot = free_slot(p);
	struct tls_flow *f = NULL;
	if (!slot || !proxy_addr_given(p, t->daddr) || !(f = calloc(1, sizeof(*f))) ||
	    !(f->head.buf = malloc(KIWI_SNI_PEEK_MAX))) {
		free(f);
		verdict(p, pkt->id, NF_ACCEPT);
		return;
	}
	f->state = HELLO;
	f->sport = t->sport;
	f->dport = t->dport;
	f->dst = t->daddr;
	f->deadline = proxy_now() + HELLO_TIMEOUT_S;
	f->head.next = t->seq + 1;
	f->head.cap = KIWI_SNI_PEEK_MAX;
	*slot = f;
	mark(p, pkt->id, pkt->mark, KIWI_GATE_UNCHECKED);
}

/* Decided: the held segments go on in order (the first carries the
 * flow's mark), or the first resets the flow and the rest are dropped. */
static void decide(struct kiwi_proxy *p, struct tls_flow *f, const char *rule, const char *name)
{
	bool ok = !strcmp(rule, "allowed:name");
	proxy_audit(p, "tcp", f->dst, f->dport, name, rule);
	for (size_t i = 0; i < f->n_held; i++) {
		if (i == 0)
			mark(p, f->held[0], f->held_mark, ok ? KIWI_GATE_ALLOWED : KIWI_GATE_REFUSED);
		else
			verdict(p, f->held[i], ok ? NF_ACCEPT : NF_DROP);
	}
	f->n_held = 0;
	f->state = ok ? ALLOWED : REFUSED;
	f->deadline = proxy_now() + DECIDED_KEEP_S;
	free(f->head.buf);
	f->head.buf = NULL;
}

static void on_payload(struct kiwi_proxy *p, struct tls_flow *f, const struct kiwi_nfq_packet *pkt,
		       const struct kiwi_tcp4 *t)
{
	enum kiwi_stream_take r = kiwi_stream_take(&f->head, t->seq, t->payload, t->payload_len);
	if (r == KIWI_STREAM_DUP || r == KIWI_STREAM_GAP) {
		/* the sender sends it again: the held copy, or the missing one first */
		verdict(p, pkt->id, NF_DROP);
		return;
	}
	if (!f->n_held)
		f->held_mark = pkt->mark;
	f->held[f->n_held++] = pkt->id;
	char name[KIWI_SNI_NAME_MAX + 1];
	enum kiwi_sni s = r == KIWI_STREAM_TOOK ? kiwi_sni_tls(f->head.buf, f->head.len, name) : KIWI_SNI_BAD;
	if (s == KIWI_SNI_MORE && f->n_held < MAX_HELD)
		return;
	/* on 443 only TLS: plain HTTP there is not read (no_name) */
	decide(p, f, proxy_decide(p, f->dport, f->dst, (int)s, name), s == KIWI_SNI_NAME ? name : NULL);
}

static void on_packet(const struct kiwi_nfq_packet *pkt, void *arg)
{
	struct kiwi_proxy *p = arg;
	struct kiwi_tcp4 t;
	/* only the sandbox's TCP is queued: anything else is not let through */
	if (!kiwi_tcp4_parse(pkt->data, pkt->len, &t) || t.saddr != p->cfg.sandbox) {
		verdict(p, pkt->id, NF_DROP);
		return;
	}
	struct tls_flow **slot = find(p, &t);
	bool syn = (t.flags & (TH_SYN | TH_ACK)) == TH_SYN;
	if (syn && t.payload_len) {
		/* data in a SYN (TCP Fast Open) would reach the server
		 * unchecked: a new flow goes to the proxy, which has no Fast
		 * Open and takes its bytes only after the handshake */
		verdict(p, pkt->id, slot ? NF_DROP : NF_ACCEPT);
		return;
	}
	if (slot && syn && (*slot)->state != HELLO)
		forget(slot);   /* the same ports again: a new connection */
	if (!slot || !*slot) {
		if (syn)
			on_syn(p, pkt, &t);
		else if (t.payload_len)
			mark(p, pkt->id, pkt->mark, KIWI_GATE_REFUSED);   /* of no flow checked */
		else
			verdict(p, pkt->id, NF_ACCEPT);
		return;
	}
	struct tls_flow *f = *slot;
	switch (f->state) {
	case ALLOWED:
		verdict(p, pkt->id, NF_ACCEPT);   /* queued before the flow was marked */
		return;
	case REFUSED:
		mark(p, pkt->id, pkt->mark, KIWI_GATE_REFUSED);
		return;
	case ENDED:
		if (t.payload_len)
			mark(p, pkt->id, pkt->mark, KIWI_GATE_REFUSED);
		else
			verdict(p, pkt->id, NF_ACCEPT);
		return;
	case HELLO:
	default:
		break;
	}
	if (t.payload_len) {
		on_payload(p, f, pkt, &t);
	} else if ((t.flags & (TH_FIN | TH_RST)) && f->n_held) {
		verdict(p, pkt->id, NF_DROP);   /* not before the bytes held: sent again later */
	} else {
		if (t.flags & (TH_FIN | TH_RST)) {
			f->state = ENDED;
			f->deadline = proxy_now() + DECIDED_KEEP_S;
		}
		verdict(p, pkt->id, NF_ACCEPT);   /* the handshake's ACK, a SYN sent again */
	}
}

void proxy_on_queue(struct kiwi_proxy *p)
{
	for (;;) {
		ssize_t n = recv(mnl_socket_get_fd(p->queue), p->queue_buf, QUEUE_BUF, MSG_DONTWAIT);
		if (n <= 0)
			return;
		kiwi_nfq_parse(p->queue_buf, (size_t)n, on_packet, p);
	}
}

void proxy_tls_expire(struct kiwi_proxy *p, int64_t now)
{
	for (size_t i = 0; p->queue && i < PROXY_MAX_FLOWS; i++) {
		struct tls_flow *f = p->flows[i];
		if (!f || f->deadline > now)
			continue;
		if (f->state != HELLO) {
			forget(&p->flows[i]);
			continue;
		}
		/* as the proxy does: no name in time. With nothing held, the
		 * flow's next packet is reset. */
		decide(p, f, "no_name", NULL);
	}
}

int proxy_tls_open(struct kiwi_proxy *p, kiwi_err *err)
{
	/* malloc's alignment serves the headers; the spare bytes keep
	 * libmnl's attribute walk, which rounds a message's end up to 4,
	 * inside */
	if (!(p->queue_buf = malloc(QUEUE_BUF + 8)))
		return kiwi_error(err, ENOMEM, "egress", "out of memory");
	if (!(p->queue = kiwi_nfq_open(p->cfg.queue_first, &p->queue_num, err)))
		return -1;
	p->tags[4] = (struct tag){ TAG_QUEUE, NULL };
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &p->tags[4] };
	if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, mnl_socket_get_fd(p->queue), &ev) < 0)
		return kiwi_error(err, errno, "egress", "cannot watch the name gate's queue");
	return 0;
}

void proxy_tls_close(struct kiwi_proxy *p)
{
	for (size_t i = 0; i < PROXY_MAX_FLOWS; i++)
		if (p->flows[i])
			forget(&p->flows[i]);
	/* unbinds the queue: what the table still queues is dropped */
	if (p->queue)
		mnl_socket_close(p->queue);
	p->queue = NULL;
	free(p->queue_buf);
	p->queue_buf = NULL;
}

void kiwi_proxy_drop_queue(struct kiwi_proxy *p)
{
	/* out of the loop's set by hand: a child cloned before this holds
	 * a copy of the socket until it execs, and epoll forgets a file
	 * only at its last close */
	if (p->queue)
		epoll_ctl(p->epfd, EPOLL_CTL_DEL, mnl_socket_get_fd(p->queue), NULL);
	proxy_tls_close(p);
}
