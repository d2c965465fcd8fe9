/* SPDX-License-Identifier: Apache-2.0 */
/* The audit: denied packets (nflog messages) and the name gate's
 * decisions, folded into bounded {proto, dst, port, [name,] count}
 * entries for the verdict, and one JSON line each for --egress-audit.
 * The gate's thread writes too: audit_lock orders them. */
#include "egress_int.h"
#include "kiwi/cleanup.h"
#include "kiwi/nflog.h"
#include "kiwi/proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A flood must not fill the disk: past this, lines stop (counts go on). */
#define AUDIT_MAX_LINES 10000

static void count(struct kiwi_egress *e, uint8_t family, uint8_t proto, const uint8_t *dst, uint16_t port,
		  const char *name)
{
	size_t alen = family == 6 ? 16 : 4;
	name = name ? name : "";
	for (size_t i = 0; i < e->n_blocked; i++) {
		struct egress_blocked *b = &e->blocked[i];
		if (b->family == family && b->proto == proto && b->port == port && !memcmp(b->dst, dst, alen) &&
		    !strcmp(b->name, name)) {
			b->count++;
			return;
		}
	}
	if (e->n_blocked == EGRESS_MAX_BLOCKED) {
		e->blocked_other++;
		return;
	}
	struct egress_blocked *b = &e->blocked[e->n_blocked++];
	*b = (struct egress_blocked){ .family = family, .proto = proto, .port = port, .count = 1 };
	memcpy(b->dst, dst, alen);
	snprintf(b->name, sizeof(b->name), "%s", name);
}

/* A line's start: {"time":..., and whether the cap is reached (then the
 * line says "truncated" and is the last). NULL: no line to write. */
static kiwi_json_writer *line_begin(struct kiwi_egress *e, bool *last)
{
	if (e->audit_file < 0 || e->audit_lines > AUDIT_MAX_LINES)
		return NULL;
	kiwi_json_writer *w = kiwi_jw_new(false);
	if (!w)
		return NULL;
	char ts[40];
	struct timespec now;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	size_t n = strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(ts + n, sizeof(ts) - n, ".%06ldZ", now.tv_nsec / 1000);
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "time");
	kiwi_jw_string(w, ts);
	*last = e->audit_lines++ == AUDIT_MAX_LINES;
	if (*last) {
		kiwi_jw_key(w, "truncated");
		kiwi_jw_bool(w, true);
	}
	return w;
}

static void line_end(struct kiwi_egress *e, kiwi_json_writer *w)
{
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

static void write_line(struct kiwi_egress *e, const struct kiwi_nflog_packet *p)
{
	bool last;
	_cleanup_jw_ kiwi_json_writer *w = line_begin(e, &last);
	if (!w)
		return;
	if (!last) {
		kiwi_jw_key(w, "action");
		kiwi_jw_string(w, "reject");
		kiwi_nflog_write_tuple(w, p->family, p->proto, p->src, p->dst, p->port);
	}
	line_end(e, w);
}

static void on_packet(const struct kiwi_nflog_packet *p, void *arg)
{
	struct kiwi_egress *e = arg;
	pthread_mutex_lock(&e->audit_lock);
	count(e, p->family, p->proto, p->dst, p->port, NULL);
	write_line(e, p);
	pthread_mutex_unlock(&e->audit_lock);
}

/* The name gate's decisions: a DNS answer given or refused, a connection
 * let through or reset; denied ones are counted like denied packets. */
void kiwi_egress_audit_event(struct kiwi_egress *e, const struct kiwi_proxy_event *ev)
{
	uint8_t dst[16] = { 0 }, src[4];
	uint32_t d = htonl(ev->dst), s = htonl(e->block + 2);
	uint8_t proto = strcmp(ev->proto, "tcp") ? IPPROTO_UDP : IPPROTO_TCP;
	memcpy(dst, &d, 4);
	memcpy(src, &s, 4);
	pthread_mutex_lock(&e->audit_lock);
	if (!ev->allowed)
		count(e, 4, proto, dst, ev->port, ev->name);
	bool last;
	_cleanup_jw_ kiwi_json_writer *w = line_begin(e, &last);
	if (w && !last) {
		kiwi_jw_key(w, "action");
		kiwi_jw_string(w, ev->allowed ? "accept" : "reject");
		kiwi_nflog_write_tuple(w, 4, proto, src, dst, ev->port);
		kiwi_jw_key(w, "name");
		if (ev->name)
			kiwi_jw_string(w, ev->name);
		else
			kiwi_jw_null(w);
		kiwi_jw_key(w, "rule");
		kiwi_jw_string(w, ev->rule);
	}
	if (w)
		line_end(e, w);
	pthread_mutex_unlock(&e->audit_lock);
}

int kiwi_egress_audit_read(struct kiwi_egress *e, kiwi_err *err)
{
	if (!e || !e->nflog)
		return 0;
	return kiwi_nflog_drain(e->nflog, on_packet, e, &e->lost, err);
}

void kiwi_egress_write_verdict(const struct kiwi_egress *e, kiwi_json_writer *w)
{
	if (e)
		pthread_mutex_lock((pthread_mutex_t *)&e->audit_lock);
	kiwi_jw_key(w, "egress_blocked");
	kiwi_jw_open_array(w);
	for (size_t i = 0; e && i < e->n_blocked; i++) {
		const struct egress_blocked *b = &e->blocked[i];
		kiwi_jw_open_object(w);
		kiwi_nflog_write_tuple(w, b->family, b->proto, NULL, b->dst, b->port);
		if (b->name[0]) {
			kiwi_jw_key(w, "name");
			kiwi_jw_string(w, b->name);
		}
		kiwi_jw_key(w, "count");
		kiwi_jw_int(w, (long long)b->count);
		kiwi_jw_close_object(w);
	}
	kiwi_jw_close_array(w);
	/* packets beyond the bound, and kernel drops when we fell behind */
	kiwi_jw_key(w, "egress_blocked_other");
	kiwi_jw_int(w, e ? (long long)(e->blocked_other + e->lost) : 0);
	if (e)
		pthread_mutex_unlock((pthread_mutex_t *)&e->audit_lock);
}
