/* SPDX-License-Identifier: Apache-2.0 */
/* The verdict's egress fields, and a session exec's tally of them as it
 * crosses the session's socket (kiwi/egress.h): apart from the audit so
 * that the fuzz target of the tally's reader needs nothing else. */
#include "egress_int.h"
#include "kiwi/nflog.h"

#include <stdlib.h>
#include <string.h>

static void write_summary(kiwi_json_writer *w, const char *key, const struct egress_summary *s)
{
	kiwi_jw_key(w, key);
	kiwi_jw_open_array(w);
	for (size_t i = 0; s && i < s->n; i++) {
		const struct egress_dest *d = &s->v[i];
		kiwi_jw_open_object(w);
		kiwi_nflog_write_tuple(w, d->family, d->proto, NULL, d->dst, d->port);
		kiwi_jw_key(w, "rule");
		kiwi_jw_string(w, d->rule);
		if (d->name[0]) {
			kiwi_jw_key(w, "name");
			kiwi_jw_string(w, d->name);
		}
		kiwi_jw_key(w, "count");
		kiwi_jw_int(w, (long long)d->count);
		kiwi_jw_close_object(w);
	}
	kiwi_jw_close_array(w);
}

void kiwi_egress_write_fields(kiwi_json_writer *w, const struct egress_summary *blocked,
			      const struct egress_summary *allowed, uint64_t lost, const struct kiwi_net_attempts *attempts,
			      bool ipv6, const char *ipv6_off, const char *tls_kernel_off)
{
	write_summary(w, "egress_blocked", blocked);
	/* beyond the bound, and the kernel's drops when we fell behind (an
	 * attempt lost that way was most likely denied: a flood is) */
	kiwi_jw_key(w, "egress_blocked_other");
	kiwi_jw_int(w, (long long)((blocked ? blocked->other : 0) + lost));
	write_summary(w, "egress_allowed", allowed);
	kiwi_jw_key(w, "egress_allowed_other");
	kiwi_jw_int(w, allowed ? (long long)allowed->other : 0);
	kiwi_jw_key(w, "egress_ipv6");
	kiwi_jw_bool(w, ipv6);
	if (!ipv6 && ipv6_off[0]) {
		kiwi_jw_key(w, "egress_ipv6_off");
		kiwi_jw_string(w, ipv6_off);
	}
	/* a fallback is said, never silent: as strict, only slower */
	if (tls_kernel_off[0]) {
		kiwi_jw_key(w, "egress_tls_kernel_off");
		kiwi_jw_string(w, tls_kernel_off);
	}
	/* egress and the network audit are one mechanism: the audit's fields,
	 * every attempt allowed or denied */
	struct kiwi_net_attempts none = { 0 };
	kiwi_net_audit_write_verdict(w, attempts ? attempts : &none);
}

size_t kiwi_egress_tally_size(void)
{
	return sizeof(struct kiwi_egress_tally);
}

static void terminate(struct egress_summary *s)
{
	if (s->n > EGRESS_MAX_SUMMARY)
		s->n = EGRESS_MAX_SUMMARY;
	for (size_t i = 0; i < s->n; i++) {
		s->v[i].rule[sizeof(s->v[i].rule) - 1] = '\0';
		s->v[i].name[sizeof(s->v[i].name) - 1] = '\0';
		if (s->v[i].family != 6)
			s->v[i].family = 4;
	}
}

struct kiwi_egress_tally *kiwi_egress_tally_load(const void *buf, size_t len)
{
	if (len != sizeof(struct kiwi_egress_tally))
		return NULL;
	struct kiwi_egress_tally *t = malloc(sizeof(*t));
	if (!t)
		return NULL;
	memcpy(t, buf, sizeof(*t));
	if (t->magic != TALLY_MAGIC) {
		free(t);
		return NULL;
	}
	t->ipv6_off[sizeof(t->ipv6_off) - 1] = '\0';
	t->tls_kernel_off[sizeof(t->tls_kernel_off) - 1] = '\0';
	terminate(&t->blocked);
	terminate(&t->allowed);
	if (t->attempts.n > KIWI_NET_AUDIT_KEEP)
		t->attempts.n = KIWI_NET_AUDIT_KEEP;
	for (size_t i = 0; i < t->attempts.n; i++)
		if (t->attempts.first[i].family != 6)
			t->attempts.first[i].family = 4;
	return t;
}

void kiwi_egress_write_tally(const struct kiwi_egress_tally *t, kiwi_json_writer *w)
{
	kiwi_egress_write_fields(w, &t->blocked, &t->allowed, t->lost, &t->attempts, t->ipv6, t->ipv6_off,
				 t->tls_kernel_off);
}
