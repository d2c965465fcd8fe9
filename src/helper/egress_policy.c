/* SPDX-License-Identifier: Apache-2.0 */
/* The admin's bounds on a caller's egress request (kiwi-helper.json(5)):
 * a mode alone does not bound where packets go, since allow-cidr opens
 * private ranges, allow-host pins any name's answers (private ones too,
 * once an allow-cidr covers them) and dns names a resolver; through the
 * veth that traffic is forwarded and masqueraded, where an admin's
 * per-uid OUTPUT rules never see it. Pure code. */
#include "kiwi/helper.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static uint32_t mask_of(uint8_t prefix)
{
	return prefix ? ~0u << (32 - prefix) : 0;
}

static bool overlap(const struct kiwi_cidr4 *a, const struct kiwi_cidr4 *b)
{
	uint32_t m = mask_of(a->prefix < b->prefix ? a->prefix : b->prefix);
	return (a->addr & m) == (b->addr & m);
}

static bool within(const struct kiwi_cidr4 *inner, const struct kiwi_cidr4 *outer)
{
	return inner->prefix >= outer->prefix && (inner->addr & mask_of(outer->prefix)) == outer->addr;
}

/* An exact name (any case), or "*.suffix" for the names below suffix. */
static bool host_matches(const char *pattern, const char *name)
{
	if (!strncmp(pattern, "*.", 2)) {
		size_t n = strlen(name), p = strlen(pattern + 1);
		return n > p && !strcasecmp(name + n - p, pattern + 1);
	}
	return !strcasecmp(pattern, name);
}

static const char *ip4(uint32_t a, char buf[INET_ADDRSTRLEN])
{
	struct in_addr in = { htonl(a) };
	return inet_ntop(AF_INET, &in, buf, INET_ADDRSTRLEN);
}

static int refuse(const struct kiwi_helper_rule *r, const char *what, const char *key, const char *path,
		  kiwi_err *err)
{
	return kiwi_error(err, EPERM, "policy", "%s is outside your rule's \"%s\" (rule %zu in %s): refused", what,
			  key, r->index, path);
}

static int check_cidrs(const struct kiwi_helper_rule *r, const struct kiwi_egress_config *c, const char *path,
		       kiwi_err *err)
{
	const struct kiwi_helper_egress_rule *e = &r->egress;
	char a[INET_ADDRSTRLEN], what[64];
	for (size_t i = 0; i < c->n_allow_cidrs; i++) {
		const struct kiwi_cidr4 *x = &c->allow_cidrs[i];
		snprintf(what, sizeof(what), "allow-cidr %s/%u", ip4(x->addr, a), x->prefix);
		bool inside = !e->has_within;
		for (size_t k = 0; k < e->n_within; k++)
			inside |= within(x, &e->within[k]);
		if (!inside)
			return refuse(r, what, "allow_cidr_within", path, err);
		for (size_t k = 0; k < e->n_never; k++)
			if (overlap(x, &e->never[k]))
				return refuse(r, what, "allow_cidr_never", path, err);
	}
	return 0;
}

int kiwi_helper_egress_check(const struct kiwi_helper_rule *r, const struct kiwi_egress_config *c,
			     const char *path, kiwi_err *err)
{
	const struct kiwi_helper_egress_rule *e = &r->egress;
	char what[KIWI_EGRESS_NAME_MAX + 32], a[INET_ADDRSTRLEN];
	if (check_cidrs(r, c, path, err) < 0)
		return -1;
	for (size_t i = 0; i < c->n_allow_hosts && e->hosts_bound != KIWI_HELPER_BOUND_ANY; i++) {
		bool ok = false;
		for (size_t k = 0; k < e->n_hosts; k++)
			ok |= host_matches(e->hosts[k], c->allow_hosts[i].name);
		snprintf(what, sizeof(what), "allow-host %s", c->allow_hosts[i].name);
		if (!ok)
			return refuse(r, what, "allow_host", path, err);
	}
	if (c->dns && e->dns_bound != KIWI_HELPER_BOUND_ANY) {
		bool ok = false;
		for (size_t k = 0; k < e->n_dns; k++)
			ok |= e->dns[k] == c->dns;
		snprintf(what, sizeof(what), "dns %s", ip4(c->dns, a));
		if (!ok)
			return refuse(r, what, "dns", path, err);
	}
	return 0;
}
