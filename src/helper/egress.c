/* SPDX-License-Identifier: Apache-2.0 */
/* The egress operations: the egress module (src/net/egress.c) does the work,
 * exactly as for a root kiwi-run; here are only the checks a caller's
 * request must pass first: the mode allowed by the rule, a policy that
 * opens no address of this host, the veth quota. Then the veth's peer
 * goes into the network namespace of the caller's checked sandbox, and
 * a keeper (kiwi_egress_keep) holds the table for as long as the veth
 * lives: the filter fails closed whatever ends the helper. */
#include "serve.h"
#include "kiwi/cleanup.h"
#include "kiwi/rtnl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>

#define STEP "egress"
#define MAX_HOST_ADDRS 1024

static const char *ip4(uint32_t a, char buf[INET_ADDRSTRLEN])
{
	struct in_addr in = { htonl(a) };
	return inet_ntop(AF_INET, &in, buf, INET_ADDRSTRLEN);
}

/* An --allow-cidr that holds an address of this host would open the
 * host's own services to the sandbox (the table refuses them anyway:
 * this says so plainly instead). */
static int check_host_addresses(const struct kiwi_egress_config *c, kiwi_err *err)
{
	static uint32_t addrs[MAX_HOST_ADDRS];
	size_t n = 0;
	_cleanup_rtnl_ struct mnl_socket *nl = kiwi_rtnl_open(err);
	if (!nl || kiwi_rtnl_addrs4(nl, addrs, MAX_HOST_ADDRS, &n, err) < 0)
		return -1;
	char a[INET_ADDRSTRLEN], b[INET_ADDRSTRLEN];
	for (size_t i = 0; i < c->n_allow_cidrs; i++) {
		const struct kiwi_cidr4 *r = &c->allow_cidrs[i];
		uint32_t mask = r->prefix ? ~0u << (32 - r->prefix) : 0;
		for (size_t k = 0; k < n; k++)
			if ((addrs[k] & mask) == r->addr)
				return kiwi_error(err, EPERM, "policy",
						  "allow-cidr %s/%u holds %s, an address of this host: refused",
						  ip4(r->addr, a), r->prefix, ip4(addrs[k], b));
	}
	return 0;
}

int helper_egress_prepare(struct helper_session *s, const struct kiwi_egress_config *c,
			  struct kiwi_egress_child *child, kiwi_err *err)
{
	static const char *const kinds[] = { "public_internet", "private_network", "host_allowlist" };
	if (s->egress)
		return kiwi_error(err, EEXIST, STEP, "this helper already prepared a network");
	if (!(s->rule.egress_kinds & (1u << c->kind)))
		return kiwi_error(err, EPERM, "policy", "egress mode %s is not allowed by your rule's \"egress\" (rule %zu in "
				  "%s)", kinds[c->kind], s->rule.index, KIWI_HELPER_CONFIG);
	if (kiwi_helper_egress_check(&s->rule, c, KIWI_HELPER_CONFIG, err) < 0 || check_host_addresses(c, err) < 0)
		return -1;
	/* root's directories: the quota's and the egress module's
	 * (/run/kiwi), and the pool's locks there */
	if (helper_root_begin(err) < 0)
		return -1;
	/* What dead sessions left (their keeper killed too) goes first:
	 * their tables, veths and pool blocks, none of them locked. */
	unsigned collected;
	kiwi_egress_gc(&collected, NULL);
	s->veth_slot = helper_quota_take("veths", s->uid, s->rule.max_veths, err);
	int r = s->veth_slot < 0 ? -1 : kiwi_egress_prepare(c, &s->egress, child, err);
	helper_root_end();
	return r;
}

/* Is a socket of uid bound on addr:port in this network namespace, in
 * state st (/proc/net/tcp, udp: local address and port in hex, the
 * address as the kernel's big-endian word read natively)? */
static bool bound_by(const char *table, uint32_t addr, uint16_t port, unsigned st, uid_t uid)
{
	FILE *f = fopen(table, "re");
	char line[512];
	bool found = false;
	/* the first line is the header */
	if (!f || !fgets(line, sizeof(line), f))
		goto out;
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned la, lp, state;
		unsigned long owner;
		found = sscanf(line, " %*u: %8X:%4X %*X:%*X %2X %*X:%*X %*X:%*X %*X %lu", &la, &lp, &state, &owner) == 4 &&
			la == htonl(addr) && lp == port && state == st && owner == uid;
	}
out:
	if (f)
		fclose(f);
	return found;
}

/* The caller's name gate: the table will send the sandbox's DNS and TCP
 * to these ports of the gateway, so they must be the caller's own
 * sockets there (a listening TCP one, a UDP one), not some service of
 * the host's that the sandbox must never reach. */
static int check_gate(struct helper_session *s, uint16_t dns, uint16_t tcp, kiwi_err *err)
{
	uint32_t gw = kiwi_egress_gateway(s->egress);
	if (!dns || !tcp || !bound_by("/proc/net/udp", gw, dns, 0x07, s->uid) ||
	    !bound_by("/proc/net/tcp", gw, tcp, 0x0A, s->uid))
		return kiwi_error(err, EPERM, "request", "egress-attach: gate ports %u and %u are not your own sockets "
				  "on the gateway address", dns, tcp);
	kiwi_egress_set_gate(s->egress, dns, tcp);
	return 0;
}

int helper_egress_attach(struct helper_session *s, uint16_t gate_dns, uint16_t gate_tcp, kiwi_err *err)
{
	if (!s->egress)
		return kiwi_error(err, EINVAL, STEP, "egress-attach before egress-prepare");
	if (s->attached)
		return kiwi_error(err, EEXIST, STEP, "the sandbox already has its veth");
	if ((gate_dns || gate_tcp) && check_gate(s, gate_dns, gate_tcp, err) < 0)
		return -1;
	_cleanup_close_ int ns = helper_sandbox_netns(&s->sb, err);
	if (ns < 0)
		return -1;
	/* root for net.ipv4.ip_forward, which only root may write */
	if (helper_root_begin(err) < 0)
		return -1;
	int r = kiwi_egress_setup_host(s->egress, ns, err);
	/* The keeper holds the filter, the pool block and the quota slots
	 * for as long as the veth lives, whatever ends us: euid 0 so that
	 * it may remove the name files in /run/kiwi/egress. */
	if (r == 0)
		r = kiwi_egress_keep(s->egress, (int[]){ s->sandbox_slot, s->veth_slot }, 2, err);
	helper_root_end();
	s->attached = r == 0;
	return r;
}

void helper_egress_teardown(struct helper_session *s)
{
	if (!s->egress)
		return;
	if (helper_root_begin(NULL) < 0)
		return;
	kiwi_egress_teardown(TAKE_PTR(s->egress), NULL);
	helper_root_end();
}
