/* SPDX-License-Identifier: Apache-2.0 */
/* The audit of every connection attempt: nflog messages from the table's
 * log rules (each rule's prefix is its class) and events from the name
 * gate, folded into the verdict's bounded summaries and written as one
 * JSON line each to --egress-audit. The line format is in kiwi/egress.h.
 * The gate's thread audits too: audit_lock orders them. */
#include "egress_int.h"
#include "kiwi/cleanup.h"
#include "kiwi/nflog.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A flood must not fill the disk: past this, lines stop (counts go on). */
#define AUDIT_MAX_LINES 10000

static void count(struct egress_summary *s, const struct kiwi_egress_event *ev)
{
	size_t alen = ev->family == 6 ? 16 : 4;
	for (size_t i = 0; i < s->n; i++) {
		struct egress_dest *d = &s->v[i];
		/* the name is part of where: refusals of two names at one
		 * address (or of two DNS queries) are two entries */
		if (d->family == ev->family && d->proto == ev->proto && d->port == ev->port &&
		    !memcmp(d->dst, ev->dst, alen) && !strcmp(d->name, ev->name ? ev->name : "")) {
			d->count++;
			return;
		}
	}
	if (s->n == EGRESS_MAX_SUMMARY) {
		s->other++;
		return;
	}
	struct egress_dest *d = &s->v[s->n++];
	*d = (struct egress_dest){ .family = ev->family, .proto = ev->proto, .port = ev->port, .count = 1 };
	memcpy(d->dst, ev->dst, alen);
	snprintf(d->rule, sizeof(d->rule), "%s", ev->rule ? ev->rule : "not_allowed");
	snprintf(d->name, sizeof(d->name), "%s", ev->name ? ev->name : "");
}

static void write_time(kiwi_json_writer *w)
{
	char ts[40];
	struct timespec now;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	size_t n = strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(ts + n, sizeof(ts) - n, ".%06ldZ", now.tv_nsec / 1000);
	kiwi_jw_key(w, "time");
	kiwi_jw_string(w, ts);
}

static void write_line(struct kiwi_egress *e, const struct kiwi_egress_event *ev)
{
	if (e->audit_file < 0 || e->audit_lines > AUDIT_MAX_LINES)
		return;
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
	if (!w)
		return;
	kiwi_jw_open_object(w);
	write_time(w);
	if (e->audit_lines++ == AUDIT_MAX_LINES) {
		kiwi_jw_key(w, "truncated");
		kiwi_jw_bool(w, true);
	} else {
		kiwi_jw_key(w, "verdict");
		kiwi_jw_string(w, ev->allowed ? "allow" : "deny");
		kiwi_jw_key(w, "rule");
		kiwi_jw_string(w, ev->rule ? ev->rule : "not_allowed");
		kiwi_nflog_write_tuple(w, ev->family, ev->proto, ev->src, ev->dst, ev->port);
		kiwi_jw_key(w, "name");
		kiwi_jw_string(w, ev->name);
	}
	kiwi_jw_close_object(w);
	size_t len;
	const char *text = kiwi_jw_text(w, &len);
	char line[1024];
	if (len < sizeof(line)) {
		memcpy(line, text, len);
		line[len] = '\n';
		(void)!write(e->audit_file, line, len + 1);
	}
}

static void record(struct egress_ring *r, const struct kiwi_egress_event *ev)
{
	struct egress_event_copy *c = &r->v[r->seq++ % EGRESS_RING];
	c->ev = *ev;
	snprintf(c->rule, sizeof(c->rule), "%s", ev->rule ? ev->rule : "not_allowed");
	snprintf(c->name, sizeof(c->name), "%s", ev->name ? ev->name : "");
	c->ev.rule = c->rule;
	c->ev.name = ev->name ? c->name : NULL;
	if (ev->allowed)
		r->allowed++;
	else
		r->blocked++;
}

void kiwi_egress_audit_event(struct kiwi_egress *e, const struct kiwi_egress_event *ev)
{
	pthread_mutex_lock(&e->audit_lock);
	/* an allowed event without a port is the gate's DNS answer: a line,
	 * not a connection */
	if (!ev->allowed || ev->port) {
		count(ev->allowed ? &e->allowed : &e->blocked, ev);
		kiwi_net_attempts_add(&e->attempts, ev->family, ev->proto, ev->dst, ev->port);
		if (e->ring)
			record(e->ring, ev);
	}
	write_line(e, ev);
	pthread_mutex_unlock(&e->audit_lock);
}

/* ---- from the table's log ---- */

static bool is_host(const struct kiwi_egress *e, const struct kiwi_nflog_packet *p)
{
	if (p->family != 4)
		return false;
	uint32_t a = ntohl(*(const uint32_t *)(const void *)p->dst);
	for (size_t i = 0; i < e->n_host_addrs; i++)
		if (e->host_addrs[i] == a)
			return true;
	return false;
}

static bool in_pool(const struct kiwi_egress *e, const struct kiwi_nflog_packet *p)
{
	if (p->family == 6)
		return kiwi_in_cidr6(p->dst, e->pool6, EGRESS_POOL6_PREFIX);
	uint32_t a = ntohl(*(const uint32_t *)(const void *)p->dst);
	uint32_t mask = e->cfg.pool.prefix ? ~0u << (32 - e->cfg.pool.prefix) : 0;
	return (a & mask) == e->cfg.pool.addr;
}

/* The IPv4 address an IPv6 form carries (mapped, NAT64, 6to4), when it is
 * one that is never reachable: that is the better name for the deny. */
static const char *carried_ip4(const uint8_t *a, const char *form)
{
	const uint8_t *v4 = NULL;
	if (!strcmp(form, "ipv4_mapped") || !strcmp(form, "ipv4_translated") || !strcmp(form, "nat64") ||
	    !strcmp(form, "ipv4_compatible"))
		v4 = a + 12;
	else if (!strcmp(form, "6to4"))
		v4 = a + 2;
	const char *name = NULL;
	if (v4 && kiwi_egress_classify(4, v4, &name) == KIWI_ADDR_NEVER)
		return name;
	return form;
}

/* The precise class of a packet the table logged with a coarse one. */
static void name_rule(const struct kiwi_egress *e, const struct kiwi_nflog_packet *p, char *out, size_t size)
{
	const char *range = NULL;
	enum kiwi_addr_class k = kiwi_egress_classify(p->family, p->dst, &range);
	if (!strcmp(p->prefix, EGRESS_LOG_NEVER)) {
		if (k == KIWI_ADDR_NEVER)
			snprintf(out, size, "always_deny:%s", p->family == 6 ? carried_ip4(p->dst, range) : range);
		else if (in_pool(e, p))
			snprintf(out, size, "always_deny:sandbox_pool");
		else
			snprintf(out, size, "always_deny:host");
	} else if (!strcmp(p->prefix, EGRESS_LOG_SPECIAL)) {
		snprintf(out, size, "not_allowed:%s", range ? range : "special");
	} else if (!strcmp(p->prefix, "always_deny:host") && !is_host(e, p) && k == KIWI_ADDR_NEVER) {
		/* the host's input hook sees broadcast and multicast too */
		snprintf(out, size, "always_deny:%s", range);
	} else {
		snprintf(out, size, "%s", p->prefix[0] ? p->prefix : "not_allowed");
	}
}

static void on_packet(const struct kiwi_nflog_packet *p, void *arg)
{
	struct kiwi_egress *e = arg;
	char rule[EGRESS_RULE_MAX];
	name_rule(e, p, rule, sizeof(rule));
	struct kiwi_egress_event ev = { .family = p->family, .proto = p->proto, .port = p->port,
					.allowed = !strncmp(rule, "allowed:", 8), .rule = rule };
	memcpy(ev.src, p->src, sizeof(ev.src));
	memcpy(ev.dst, p->dst, sizeof(ev.dst));
	kiwi_egress_audit_event(e, &ev);
}

int kiwi_egress_audit_read(struct kiwi_egress *e, kiwi_err *err)
{
	int fd = kiwi_egress_audit_fd(e);
	return fd < 0 ? 0 : kiwi_nflog_drain_fd(fd, on_packet, e, &e->lost, err);
}

void kiwi_egress_write_verdict(const struct kiwi_egress *e, kiwi_json_writer *w)
{
	if (!e) {
		kiwi_egress_write_fields(w, NULL, NULL, 0, NULL, false, "", "");
		return;
	}
	pthread_mutex_lock((pthread_mutex_t *)&e->audit_lock);
	kiwi_egress_write_fields(w, &e->blocked, &e->allowed, e->lost, &e->attempts, e->ipv6_out, e->ipv6_off,
				 e->tls_kernel_off);
	pthread_mutex_unlock((pthread_mutex_t *)&e->audit_lock);
}

/* ---- one exec's window ---- */

void kiwi_egress_mark(struct kiwi_egress *e, struct kiwi_egress_mark *m)
{
	*m = (struct kiwi_egress_mark){ 0 };
	if (!e)
		return;
	pthread_mutex_lock(&e->audit_lock);
	if (!e->ring)
		e->ring = calloc(1, sizeof(*e->ring));
	if (e->ring)
		*m = (struct kiwi_egress_mark){ e->ring->seq, e->ring->allowed, e->ring->blocked, e->lost };
	pthread_mutex_unlock(&e->audit_lock);
}

/* The events after m still in the ring, counted as a run's; those the ring
 * no longer holds go to the *_other counts. */
static void fold(struct kiwi_egress_tally *t, const struct egress_ring *r, const struct kiwi_egress_mark *m)
{
	uint64_t from = m->seq, oldest = r->seq > EGRESS_RING ? r->seq - EGRESS_RING : 0;
	uint64_t allowed = 0, blocked = 0;
	if (from < oldest)
		from = oldest;
	for (uint64_t i = from; i < r->seq; i++) {
		const struct kiwi_egress_event *ev = &r->v[i % EGRESS_RING].ev;
		count(ev->allowed ? &t->allowed : &t->blocked, ev);
		kiwi_net_attempts_add(&t->attempts, ev->family, ev->proto, ev->dst, ev->port);
		*(ev->allowed ? &allowed : &blocked) += 1;
	}
	/* saturating: a mark is the client's word */
	uint64_t since_allowed = r->allowed >= m->allowed ? r->allowed - m->allowed : 0;
	uint64_t since_blocked = r->blocked >= m->blocked ? r->blocked - m->blocked : 0;
	uint64_t gone_allowed = since_allowed > allowed ? since_allowed - allowed : 0;
	uint64_t gone_blocked = since_blocked > blocked ? since_blocked - blocked : 0;
	t->allowed.other += gone_allowed;
	t->blocked.other += gone_blocked;
	t->attempts.total += gone_allowed + gone_blocked;
}

struct kiwi_egress_tally *kiwi_egress_tally_since(struct kiwi_egress *e, const struct kiwi_egress_mark *m)
{
	struct kiwi_egress_tally *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->magic = TALLY_MAGIC;
	if (!e)
		return t;
	t->ipv6 = e->ipv6_out;   /* could leave: the verdict's egress_ipv6 */
	snprintf(t->ipv6_off, sizeof(t->ipv6_off), "%s", e->ipv6_off);
	snprintf(t->tls_kernel_off, sizeof(t->tls_kernel_off), "%s", e->tls_kernel_off);
	pthread_mutex_lock(&e->audit_lock);
	t->lost = e->lost >= m->lost ? e->lost - m->lost : 0;
	if (e->ring && m->seq <= e->ring->seq)
		fold(t, e->ring, m);
	pthread_mutex_unlock(&e->audit_lock);
	return t;
}
