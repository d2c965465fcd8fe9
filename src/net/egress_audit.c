/* SPDX-License-Identifier: Apache-2.0 */
/* The audit of denied packets: nflog messages folded into bounded
 * {proto, dst, port, count} entries for the verdict, and one JSON line
 * per packet for --egress-audit. */
#include "egress_int.h"
#include "kiwi/cleanup.h"
#include "kiwi/nflog.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A flood must not fill the disk: past this, lines stop (counts go on). */
#define AUDIT_MAX_LINES 10000

static void count(struct kiwi_egress *e, const struct kiwi_nflog_packet *p)
{
	size_t alen = p->family == 6 ? 16 : 4;
	for (size_t i = 0; i < e->n_blocked; i++) {
		struct egress_blocked *b = &e->blocked[i];
		if (b->family == p->family && b->proto == p->proto && b->port == p->port &&
		    !memcmp(b->dst, p->dst, alen)) {
			b->count++;
			return;
		}
	}
	if (e->n_blocked == EGRESS_MAX_BLOCKED) {
		e->blocked_other++;
		return;
	}
	struct egress_blocked *b = &e->blocked[e->n_blocked++];
	*b = (struct egress_blocked){ .family = p->family, .proto = p->proto, .port = p->port, .count = 1 };
	memcpy(b->dst, p->dst, alen);
}

static void write_line(struct kiwi_egress *e, const struct kiwi_nflog_packet *p)
{
	if (e->audit_file < 0 || e->audit_lines > AUDIT_MAX_LINES)
		return;
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
	if (!w)
		return;
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
	if (e->audit_lines++ == AUDIT_MAX_LINES) {
		kiwi_jw_key(w, "truncated");
		kiwi_jw_bool(w, true);
	} else {
		kiwi_jw_key(w, "action");
		kiwi_jw_string(w, "reject");
		kiwi_nflog_write_tuple(w, p->family, p->proto, p->src, p->dst, p->port);
	}
	kiwi_jw_close_object(w);
	size_t len;
	const char *text = kiwi_jw_text(w, &len);
	char line[512];
	if (len < sizeof(line)) {
		memcpy(line, text, len);
		line[len] = '\n';
		(void)!write(e->audit_file, line, len + 1);
	}
}

static void on_packet(const struct kiwi_nflog_packet *p, void *arg)
{
	count(arg, p);
	write_line(arg, p);
}

int kiwi_egress_audit_read(struct kiwi_egress *e, kiwi_err *err)
{
	if (!e || !e->nflog)
		return 0;
	return kiwi_nflog_drain(e->nflog, on_packet, e, &e->lost, err);
}

void kiwi_egress_write_verdict(const struct kiwi_egress *e, kiwi_json_writer *w)
{
	kiwi_jw_key(w, "egress_blocked");
	kiwi_jw_open_array(w);
	for (size_t i = 0; e && i < e->n_blocked; i++) {
		const struct egress_blocked *b = &e->blocked[i];
		kiwi_jw_open_object(w);
		kiwi_nflog_write_tuple(w, b->family, b->proto, NULL, b->dst, b->port);
		kiwi_jw_key(w, "count");
		kiwi_jw_int(w, (long long)b->count);
		kiwi_jw_close_object(w);
	}
	kiwi_jw_close_array(w);
	/* packets beyond the bound, and kernel drops when we fell behind */
	kiwi_jw_key(w, "egress_blocked_other");
	kiwi_jw_int(w, e ? (long long)(e->blocked_other + e->lost) : 0);
}
