/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox's nftables table, on the host side of its veth V, owned by
 * kiwi-run's nfnetlink socket (see kiwi_egress_build_table). In nft
 * terms (sets: never, special, allow, ports, pins; the same with a 6 for
 * IPv6). Every decision logs to the audit's group with its class as the
 * prefix (`log "C"` below), so the audit holds allowed and denied
 * attempts alike, each once per connection (established packets never
 * reach decide):
 *
 *   chain forward { type filter hook forward priority 0; policy accept;
 *     iif != V accept                          # not ours
 *     ct state established,related accept
 *     goto decide }
 *   chain inbound { type filter hook forward priority 10; policy accept;
 *     oif V ct state established,related accept
 *     oif V counter drop }                     # nothing new into a sandbox
 *   (every sandbox's egress chain runs before any sandbox's inbound
 *   chain, so a sandbox knocking at another is rejected, fast and
 *   audited, by its own table rather than dropped by the other's)
 *   chain input { type filter hook input priority 0; policy accept;
 *     iif != V accept
 *     ct state established,related accept      # answers to the host's own calls
 *     icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert } accept
 *     ip6 daddr ff02::/16 meta l4proto icmpv6 drop   # MLD: not an attempt
 *     log "always_deny:host" goto deny }       # the host itself, any address
 *   chain decide {
 *     meta nfproto ipv4 goto decide4
 *     meta nfproto ipv6 goto decide6
 *     log "not_allowed:protocol" goto deny }
 *   chain decide4 {
 *     ip saddr != SANDBOX log "always_deny:spoofed_source" goto deny
 *     ip daddr @never log "always_deny" goto deny
 *     meta l4proto != tcp meta l4proto != udp log "not_allowed:protocol" goto deny
 *     ip daddr RESOLVER th dport 53 log "allowed:dns" accept   # with --dns
 *     th dport 53 log "not_allowed:dns" goto deny
 *     <the kind's accept rules, each with log "allowed:...">
 *     log "not_allowed" goto deny }
 *   chain decide6 { the same in IPv6, without DNS or pins }
 *   chain deny {
 *     meta l4proto tcp reject with tcp reset
 *     reject with icmpx admin-prohibited }
 *   chain noroute6 { type filter hook prerouting priority 0;   # only when no IPv6 may leave
 *     iif != V accept;  meta nfproto != ipv6 accept
 *     ip6 daddr GW6 accept;  ip6 daddr ff02::/16 accept
 *     goto decide6 }                           # which then denies everything
 *   chain postrouting { type nat hook postrouting priority 100;
 *     ip saddr SANDBOX oif != V masquerade
 *     ip6 saddr SANDBOX6 oif != V masquerade }
 *
 * Before 6.9 (owned, not persistent) forward, inbound and input first
 * set the guard's mark on V's packets (meta mark set mark | M), and the
 * host's guard table drops what comes through without it:
 *   table inet kiwiguard {   # one per host, not owned
 *     chain forward { type filter hook forward priority 50; policy accept;
 *       iifname "kiwi*" mark & M == 0 counter drop
 *       iifname "kiwi*" meta mark set mark & ~M
 *       oifname "kiwi*" mark & M == 0 counter drop
 *       oifname "kiwi*" meta mark set mark & ~M }
 *     chain input { type filter hook input priority 50; policy accept;
 *       the two iifname rules } }
 *
 * host_allowlist with names adds the name gate's (kiwi/proxy.h) redirect,
 * and lets into the host only what it redirected (the gate audits its
 * own decisions):
 *   chain gate { type nat hook prerouting priority -100;
 *     iif != V accept;  meta nfproto != ipv4 accept
 *     ip daddr GW udp dport 53 dnat to GW:DNS_PORT
 *     ip daddr @never accept                   # (the gateway is in the pool)
 *     ip daddr . th dport @pins accept         # entries written as addresses
 *     tcp dport @name_ports dnat to GW:TCP_PORT }
 *   input, before its deny:  ct status dnat  to GW:DNS_PORT/udp, GW:TCP_PORT/tcp  accept
 *
 * and, for a root run with a name allowed on 443, the gate's kernel path
 * for TLS there (proxy_tls.c; G is a flow's gate state in ct mark bits
 * KIWI_GATE_MARK_MASK: unchecked U, allowed A, refused R):
 *   chain gateq { type filter hook prerouting priority -150;
 *     iif != V accept;  ct mark & M == A accept;  meta nfproto != ipv4 accept
 *     meta mark & M == A  ct mark set ct mark & ~M | A  meta mark set mark & ~M  accept
 *     (the same for R and for U: the gate's verdicts, NF_REPEAT with a mark)
 *     ct mark & M == U queue num Q             # no bypass: nobody bound, dropped
 *     ip daddr @never accept;  ip daddr . th dport @pins accept
 *     tcp dport 443 ct state new ct status & dnat == 0 queue num Q }
 *   gate, before its TCP dnat:  ct mark & M == U accept
 *   forward, before established:  ct mark & M == R goto deny
 *   decide4, after the pins:  ct mark & M == U accept   # the gate audits the flow
 *
 * "always_deny" and "not_allowed:special" are coarse: the audit names the
 * range from the address (always_deny:metadata, not_allowed:documentation).
 */
#include "egress_int.h"
#include "kiwi/proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_nat.h>
#include <linux/netfilter/nf_tables.h>
#include <netinet/icmp6.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SET_NEVER = 1, SET_SPECIAL, SET_ALLOW, SET_PORTS, SET_PINS, SET_NEVER6, SET_SPECIAL6, SET_ALLOW6,
       SET_NAME_PORTS };

#define CT_EST_REL (NF_CT_STATE_BIT(IP_CT_ESTABLISHED) | NF_CT_STATE_BIT(IP_CT_RELATED))
#define NAT_PRIO_DST (-100)
#define NFLOG_SNAPLEN 128
/* after conntrack (-200), before NAT (-100) */
#define GATE_QUEUE_PRIO (-150)

static const uint16_t default_ports[] = { 80, 443 };

/* NFT_TABLE_F_PERSIST (Linux 6.9), an enum older headers lack */
#define TABLE_F_PERSIST 0x4u

/* Where each family keeps what the rules read. */
struct fam {
	uint8_t nfproto;
	uint32_t saddr, daddr, alen;   /* payload offsets and the address length */
	const uint8_t *self;           /* the sandbox's address, network order */
	const char *never, *special, *allow, *chain;
	uint32_t never_id, special_id, allow_id;
	size_t n_allow;
	bool public_ok;                /* public destinations may leave this way */
};

static void match_if(struct nftnl_rule *r, uint32_t key, uint32_t op, int ifindex)
{
	kiwi_nft_meta(r, key);
	kiwi_nft_cmp_u32(r, op, (uint32_t)ifindex);
}

static void match_l4(struct nftnl_rule *r, uint8_t proto)
{
	kiwi_nft_meta(r, NFT_META_L4PROTO);
	kiwi_nft_cmp_u8(r, NFT_CMP_EQ, proto);
}

static void match_ct_est_rel(struct nftnl_rule *r)
{
	kiwi_nft_ct_state(r);
	kiwi_nft_and(r, CT_EST_REL);
	kiwi_nft_cmp_u32(r, NFT_CMP_NEQ, 0);
}

static void load_daddr(struct nftnl_rule *r, const struct fam *f, uint32_t reg)
{
	kiwi_nft_payload(r, NFT_PAYLOAD_NETWORK_HEADER, f->daddr, f->alen, reg);
}

static void load_dport(struct nftnl_rule *r, uint32_t reg)
{
	kiwi_nft_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2, reg);
}

static void load_daddr4(struct nftnl_rule *r, uint32_t reg)
{
	kiwi_nft_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 16, 4, reg);
}

/* A rule of one match list and a verdict, appended to chain. */
#define RULE(n, chain, ...)                                          \
	do {                                                         \
		struct nftnl_rule *r = kiwi_nft_rule(n, chain);      \
		__VA_ARGS__;                                         \
		kiwi_nft_add_rule(n, r);                             \
	} while (0)

static void match_ct_dnat(struct nftnl_rule *r)
{
	kiwi_nft_ct(r, NFT_CT_STATUS);
	kiwi_nft_and(r, IPS_DST_NAT);
	kiwi_nft_cmp_u32(r, NFT_CMP_NEQ, 0);
}

static void match_to_port(struct nftnl_rule *r, uint8_t proto, uint32_t addr, uint16_t port)
{
	kiwi_nft_meta(r, NFT_META_L4PROTO);
	kiwi_nft_cmp_u8(r, NFT_CMP_EQ, proto);
	load_daddr4(r, NFT_REG_1);
	kiwi_nft_cmp_u32(r, NFT_CMP_EQ, htonl(addr));
	load_dport(r, NFT_REG_1);
	kiwi_nft_cmp(r, NFT_CMP_EQ, &(uint16_t){ htons(port) }, 2);
}

/* reg 1 = the flow's gate state (KIWI_GATE_*), compared with state */
static void match_ct_gate(struct nftnl_rule *r, uint32_t op, uint32_t state)
{
	kiwi_nft_ct(r, NFT_CT_MARK);
	kiwi_nft_and(r, KIWI_GATE_MARK_MASK);
	kiwi_nft_cmp_u32(r, op, state);
}

/* A verdict's packet mark, state, into the flow's conntrack mark; the
 * packet's own mark as it was. */
static void gate_mark_rule(struct kiwi_nft *n, uint32_t state)
{
	RULE(n, "gateq", {
		kiwi_nft_meta(r, NFT_META_MARK);
		kiwi_nft_and(r, KIWI_GATE_MARK_MASK);
		kiwi_nft_cmp_u32(r, NFT_CMP_EQ, state);
		kiwi_nft_ct(r, NFT_CT_MARK);
		kiwi_nft_bitwise(r, ~KIWI_GATE_MARK_MASK, state);
		kiwi_nft_ct_set(r, NFT_CT_MARK);
		kiwi_nft_meta(r, NFT_META_MARK);
		kiwi_nft_bitwise(r, ~KIWI_GATE_MARK_MASK, 0);
		kiwi_nft_meta_set(r, NFT_META_MARK);
		kiwi_nft_verdict(r, NF_ACCEPT, NULL);
	});
}

/* The kernel path of the name gate (kiwi/proxy.h), before NAT decides:
 * a new TCP flow to port 443 (not to a never-range, not pinned) and
 * then every packet of a flow still unchecked go to the gate's queue.
 * The gate's verdicts come back here (NF_REPEAT with the packet mark).
 * The queue has no bypass: with the gate gone they are dropped. */
static void gate_queue_chain(struct kiwi_nft *n, const struct kiwi_egress *e)
{
	uint16_t q = e->gate_queue;
	kiwi_nft_add_chain(n, "gateq", "filter", NF_INET_PRE_ROUTING, GATE_QUEUE_PRIO);
	RULE(n, "gateq", { match_if(r, NFT_META_IIF, NFT_CMP_NEQ, e->host_ifindex); kiwi_nft_verdict(r, NF_ACCEPT, NULL); });
	/* the rest of an allowed flow: one rule, as little as direct costs
	 * (a verdict's marked packet is of a flow not yet allowed) */
	RULE(n, "gateq", { match_ct_gate(r, NFT_CMP_EQ, KIWI_GATE_ALLOWED); kiwi_nft_verdict(r, NF_ACCEPT, NULL); });
	RULE(n, "gateq", { kiwi_nft_meta(r, NFT_META_NFPROTO); kiwi_nft_cmp_u8(r, NFT_CMP_NEQ, NFPROTO_IPV4);
			   kiwi_nft_verdict(r, NF_ACCEPT, NULL); });
	gate_mark_rule(n, KIWI_GATE_ALLOWED);
	gate_mark_rule(n, KIWI_GATE_REFUSED);
	gate_mark_rule(n, KIWI_GATE_UNCHECKED);
	RULE(n, "gateq", { match_ct_gate(r, NFT_CMP_EQ, KIWI_GATE_UNCHECKED); kiwi_nft_queue(r, q, e->queue_compat); });
	RULE(n, "gateq", { load_daddr4(r, NFT_REG_1); kiwi_nft_lookup(r, NFT_REG_1, "never", SET_NEVER);
			   kiwi_nft_verdict(r, NF_ACCEPT, NULL); });
	if (e->n_pins)
		RULE(n, "gateq", { load_daddr4(r, NFT_REG32_00); load_dport(r, NFT_REG32_01);
				   kiwi_nft_lookup(r, NFT_REG32_00, "pins", SET_PINS); kiwi_nft_verdict(r, NF_ACCEPT, NULL); });
	RULE(n, "gateq", {
		match_l4(r, IPPROTO_TCP);
		load_dport(r, NFT_REG_1);
		kiwi_nft_cmp(r, NFT_CMP_EQ, &(uint16_t){ htons(KIWI_GATE_TLS_PORT) }, 2);
		kiwi_nft_ct_state(r);
		kiwi_nft_cmp_u32(r, NFT_CMP_EQ, NF_CT_STATE_BIT(IP_CT_NEW));
		/* a SYN sent again of a flow the gate gave the proxy: NAT is bound */
		kiwi_nft_ct(r, NFT_CT_STATUS);
		kiwi_nft_and(r, IPS_DST_NAT);
		kiwi_nft_cmp_u32(r, NFT_CMP_EQ, 0);
		kiwi_nft_queue(r, q, e->queue_compat);
	});
}

/* host_allowlist: the sandbox's DNS to the gateway and its TCP on the
 * names' ports go to the name gate; never-ranges and pinned addresses
 * are left alone (the forward chain decides them, and audits). The
 * input chain then lets in only what was redirected to the gate. */
static void gate_chains(struct kiwi_nft *n, const struct kiwi_egress *e)
{
	uint32_t gw = e->block + 1;
	uint16_t dns = e->gate_dns, tcp = e->gate_tcp;
	kiwi_nft_add_chain(n, "gate", "nat", NF_INET_PRE_ROUTING, NAT_PRIO_DST);
	RULE(n, "gate", { match_if(r, NFT_META_IIF, NFT_CMP_NEQ, e->host_ifindex); kiwi_nft_verdict(r, NF_ACCEPT, NULL); });
	RULE(n, "gate", { kiwi_nft_meta(r, NFT_META_NFPROTO); kiwi_nft_cmp_u8(r, NFT_CMP_NEQ, NFPROTO_IPV4);
			  kiwi_nft_verdict(r, NF_ACCEPT, NULL); });
	RULE(n, "gate", { match_to_port(r, IPPROTO_UDP, gw, 53); kiwi_nft_dnat4(r, htonl(gw), htons(dns)); });
	/* the pool, and so the gateway, is in never */
	RULE(n, "gate", { load_daddr4(r, NFT_REG_1); kiwi_nft_lookup(r, NFT_REG_1, "never", SET_NEVER);
			  kiwi_nft_verdict(r, NF_ACCEPT, NULL); });
	if (e->n_pins)
		RULE(n, "gate", { load_daddr4(r, NFT_REG32_00); load_dport(r, NFT_REG32_01);
				  kiwi_nft_lookup(r, NFT_REG32_00, "pins", SET_PINS); kiwi_nft_verdict(r, NF_ACCEPT, NULL); });
	/* the kernel path's flows go where they were sent */
	if (e->gate_kernel)
		RULE(n, "gate", { match_ct_gate(r, NFT_CMP_EQ, KIWI_GATE_UNCHECKED); kiwi_nft_verdict(r, NF_ACCEPT, NULL); });
	RULE(n, "gate", {
		kiwi_nft_meta(r, NFT_META_L4PROTO);
		kiwi_nft_cmp_u8(r, NFT_CMP_EQ, IPPROTO_TCP);
		load_dport(r, NFT_REG_1);
		kiwi_nft_lookup(r, NFT_REG_1, "name_ports", SET_NAME_PORTS);
		kiwi_nft_dnat4(r, htonl(gw), htons(tcp));
	});
}

/* Into the host: only what the gate chain redirected to the gate. */
static void gate_input(struct kiwi_nft *n, const struct kiwi_egress *e)
{
	uint32_t gw = e->block + 1;
	uint16_t dns = e->gate_dns, tcp = e->gate_tcp;
	RULE(n, "input", { match_if(r, NFT_META_IIF, NFT_CMP_EQ, e->host_ifindex); match_ct_dnat(r);
			   match_to_port(r, IPPROTO_UDP, gw, dns); kiwi_nft_verdict(r, NF_ACCEPT, NULL); });
	RULE(n, "input", { match_if(r, NFT_META_IIF, NFT_CMP_EQ, e->host_ifindex); match_ct_dnat(r);
			   match_to_port(r, IPPROTO_TCP, gw, tcp); kiwi_nft_verdict(r, NF_ACCEPT, NULL); });
}

/* The audit's line, then the verdict. */
static void deny_as(struct nftnl_rule *r, const struct kiwi_egress *e, const char *class)
{
	kiwi_nft_log(r, e->group, NFLOG_SNAPLEN, class);
	kiwi_nft_verdict(r, NFT_GOTO, "deny");
}

static void allow_as(struct nftnl_rule *r, const struct kiwi_egress *e, const char *class)
{
	kiwi_nft_log(r, e->group, NFLOG_SNAPLEN, class);
	kiwi_nft_verdict(r, NF_ACCEPT, NULL);
}

/* Link-level IPv6 control between the sandbox and its gateway:
 * neighbour discovery is answered, MLD reports are dropped unlogged. */
static void input_ipv6_control(struct kiwi_nft *n, int v)
{
	for (uint8_t type = ND_NEIGHBOR_SOLICIT; type <= ND_NEIGHBOR_ADVERT; type++)
		RULE(n, "input", { match_if(r, NFT_META_IIF, NFT_CMP_EQ, v); match_l4(r, IPPROTO_ICMPV6);
				   kiwi_nft_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 0, 1, NFT_REG_1);
				   kiwi_nft_cmp_u8(r, NFT_CMP_EQ, type); kiwi_nft_verdict(r, NF_ACCEPT, NULL); });
	RULE(n, "input", {
		match_if(r, NFT_META_IIF, NFT_CMP_EQ, v);
		match_l4(r, IPPROTO_ICMPV6);
		kiwi_nft_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 24, 2, NFT_REG_1);
		kiwi_nft_cmp(r, NFT_CMP_EQ, &(uint16_t){ htons(0xff02) }, 2);
		kiwi_nft_verdict(r, NF_DROP, NULL);
	});
}

static void masquerade(struct kiwi_nft *n, const struct fam *f, int v)
{
	RULE(n, "postrouting", {
		kiwi_nft_meta(r, NFT_META_NFPROTO);
		kiwi_nft_cmp_u8(r, NFT_CMP_EQ, f->nfproto);
		kiwi_nft_payload(r, NFT_PAYLOAD_NETWORK_HEADER, f->saddr, f->alen, NFT_REG_1);
		kiwi_nft_cmp(r, NFT_CMP_EQ, f->self, f->alen);
		match_if(r, NFT_META_OIF, NFT_CMP_NEQ, v);
		kiwi_nft_masq(r);
	});
}

/* reg 1 = the packet's mark with the guard's bit set (xor M) or
 * cleared (xor 0) */
static void guard_mark(struct nftnl_rule *r, uint32_t xor)
{
	kiwi_nft_meta(r, NFT_META_MARK);
	kiwi_nft_bitwise(r, ~EGRESS_GUARD_MARK, xor);
	kiwi_nft_meta_set(r, NFT_META_MARK);
}

static void hook_chains(struct kiwi_nft *n, const struct kiwi_egress *e, const struct fam *f4,
			const struct fam *f6)
{
	int v = e->host_ifindex;
	bool guarded = e->owned_only;
	kiwi_nft_add_chain(n, "inbound", "filter", NF_INET_FORWARD, 10);
	if (guarded)
		RULE(n, "inbound", { match_if(r, NFT_META_OIF, NFT_CMP_EQ, v); guard_mark(r, EGRESS_GUARD_MARK); });
	RULE(n, "inbound", { match_if(r, NFT_META_OIF, NFT_CMP_EQ, v); match_ct_est_rel(r);
			     kiwi_nft_verdict(r, NF_ACCEPT, NULL); });
	RULE(n, "inbound", { match_if(r, NFT_META_OIF, NFT_CMP_EQ, v); kiwi_nft_counter(r);
			     kiwi_nft_verdict(r, NF_DROP, NULL); });
	kiwi_nft_add_chain(n, "forward", "filter", NF_INET_FORWARD, 0);
	RULE(n, "forward", { match_if(r, NFT_META_IIF, NFT_CMP_NEQ, v); kiwi_nft_verdict(r, NF_ACCEPT, NULL); });
	if (guarded)
		RULE(n, "forward", { guard_mark(r, EGRESS_GUARD_MARK); });
	/* a flow the gate refused: reset, as often as the sandbox tries */
	if (e->gate_kernel)
		RULE(n, "forward", { match_ct_gate(r, NFT_CMP_EQ, KIWI_GATE_REFUSED); kiwi_nft_verdict(r, NFT_GOTO, "deny"); });
	RULE(n, "forward", { match_ct_est_rel(r); kiwi_nft_verdict(r, NF_ACCEPT, NULL); });
	RULE(n, "forward", { kiwi_nft_verdict(r, NFT_GOTO, "decide"); });

	kiwi_nft_add_chain(n, "input", "filter", NF_INET_LOCAL_IN, 0);
	RULE(n, "input", { match_if(r, NFT_META_IIF, NFT_CMP_NEQ, v); kiwi_nft_verdict(r, NF_ACCEPT, NULL); });
	if (guarded)
		RULE(n, "input", { guard_mark(r, EGRESS_GUARD_MARK); });
	RULE(n, "input", { match_ct_est_rel(r); kiwi_nft_verdict(r, NF_ACCEPT, NULL); });
	if (e->gate_tcp)
		gate_input(n, e);
	if (e->ipv6)
		input_ipv6_control(n, v);
	RULE(n, "input", { deny_as(r, e, "always_deny:host"); });

	kiwi_nft_add_chain(n, "postrouting", "nat", NF_INET_POST_ROUTING, 100);
	masquerade(n, f4, v);
	if (e->ipv6)
		masquerade(n, f6, v);
}

static void deny_chain(struct kiwi_nft *n)
{
	kiwi_nft_add_chain(n, "deny", NULL, 0, 0);
	RULE(n, "deny", { kiwi_nft_counter(r); match_l4(r, IPPROTO_TCP); kiwi_nft_reject(r, NFT_REJECT_TCP_RST, 0); });
	RULE(n, "deny", { kiwi_nft_reject(r, NFT_REJECT_ICMPX_UNREACH, NFT_REJECT_ICMPX_ADMIN_PROHIBITED); });
}

static struct kiwi_ip4_range cidr_range(const struct kiwi_cidr4 *c)
{
	uint32_t host = c->prefix >= 32 ? 0 : ~0u >> c->prefix;  /* >> 32 is undefined */
	return (struct kiwi_ip4_range){ c->addr, c->addr | host };
}

/* Every port some allowed name may be reached on: those go to the gate. */
static void name_port_set(struct kiwi_nft *n, const struct kiwi_egress *e)
{
	const struct kiwi_egress_config *c = &e->cfg;
	uint16_t ports[KIWI_EGRESS_MAX_HOSTS + KIWI_EGRESS_MAX_PORTS];
	size_t count = 0;
	for (size_t i = 0; i < c->n_allow_hosts; i++) {
		const struct kiwi_egress_host *h = &c->allow_hosts[i];
		const uint16_t *p = h->port ? &h->port : c->n_allow_ports ? c->allow_ports : default_ports;
		size_t np = h->port ? 1 : c->n_allow_ports ? c->n_allow_ports : 2;
		for (size_t k = 0; !kiwi_egress_host_is_addr(h) && k < np; k++) {
			bool dup = false;
			for (size_t j = 0; j < count; j++)
				dup |= ports[j] == p[k];
			if (!dup)
				ports[count++] = p[k];
		}
	}
	kiwi_nft_add_port_set(n, "name_ports", SET_NAME_PORTS, ports, count);
}

static int sets4(struct kiwi_nft *n, const struct kiwi_egress *e, kiwi_err *err)
{
	const struct kiwi_egress_config *c = &e->cfg;
	struct kiwi_ip4_range r[EGRESS_NEVER_RANGES + 1 + EGRESS_MAX_HOST_ADDRS];
	size_t count = kiwi_egress_never_ranges(r);
	r[count++] = cidr_range(&c->pool);
	for (size_t i = 0; i < e->n_host_addrs; i++)
		r[count++] = (struct kiwi_ip4_range){ e->host_addrs[i], e->host_addrs[i] };
	if (kiwi_nft_add_ip4_set(n, "never", SET_NEVER, r, count, err) < 0)
		return -1;
	if (c->kind == KIWI_EGRESS_PUBLIC_INTERNET) {
		struct kiwi_ip4_range s[EGRESS_SPECIAL_RANGES];
		if (kiwi_nft_add_ip4_set(n, "special", SET_SPECIAL, s, kiwi_egress_special_ranges(s), err) < 0)
			return -1;
	}
	if (c->kind != KIWI_EGRESS_HOST_ALLOWLIST && c->n_allow_cidrs) {
		struct kiwi_ip4_range a[KIWI_EGRESS_MAX_CIDRS];
		for (size_t i = 0; i < c->n_allow_cidrs; i++)
			a[i] = cidr_range(&c->allow_cidrs[i]);
		if (kiwi_nft_add_ip4_set(n, "allow", SET_ALLOW, a, c->n_allow_cidrs, err) < 0)
			return -1;
	}
	return 0;
}

static int sets6(struct kiwi_nft *n, const struct kiwi_egress *e, kiwi_err *err)
{
	const struct kiwi_egress_config *c = &e->cfg;
	struct kiwi_ip6_range r[EGRESS_NEVER_RANGES6 + 1];
	size_t count = kiwi_egress_never_ranges6(r);
	kiwi_cidr6_bounds(e->pool6, EGRESS_POOL6_PREFIX, r[count].lo, r[count].hi);
	count++;
	if (kiwi_nft_add_ip6_set(n, "never6", SET_NEVER6, r, count, err) < 0)
		return -1;
	if (c->kind == KIWI_EGRESS_PUBLIC_INTERNET) {
		struct kiwi_ip6_range s[EGRESS_SPECIAL_RANGES6];
		if (kiwi_nft_add_ip6_set(n, "special6", SET_SPECIAL6, s, kiwi_egress_special_ranges6(s), err) < 0)
			return -1;
	}
	if (c->kind != KIWI_EGRESS_HOST_ALLOWLIST && c->n_allow_cidrs6) {
		struct kiwi_ip6_range a[KIWI_EGRESS_MAX_CIDRS];
		for (size_t i = 0; i < c->n_allow_cidrs6; i++)
			kiwi_cidr6_bounds(c->allow_cidrs6[i].addr, c->allow_cidrs6[i].prefix, a[i].lo, a[i].hi);
		if (kiwi_nft_add_ip6_set(n, "allow6", SET_ALLOW6, a, c->n_allow_cidrs6, err) < 0)
			return -1;
	}
	return 0;
}

static int sets(struct kiwi_nft *n, const struct kiwi_egress *e, kiwi_err *err)
{
	const struct kiwi_egress_config *c = &e->cfg;
	if (sets4(n, e, err) < 0 || (e->ipv6 && sets6(n, e, err) < 0))
		return -1;
	if (c->n_allow_ports)
		kiwi_nft_add_port_set(n, "ports", SET_PORTS, c->allow_ports, c->n_allow_ports);
	else if (c->kind == KIWI_EGRESS_PUBLIC_INTERNET)
		kiwi_nft_add_port_set(n, "ports", SET_PORTS, default_ports, 2);
	if (c->kind == KIWI_EGRESS_HOST_ALLOWLIST)
		kiwi_nft_add_pin_set(n, "pins", SET_PINS, e->pin_addrs, e->pin_ports, e->n_pins);
	if (e->gate_tcp)
		name_port_set(n, e);
	return 0;
}

/* The kind's accept rules, between the DNS rules and the final deny. */
static void kind_rules(struct kiwi_nft *n, const struct kiwi_egress *e, const struct fam *f)
{
	const struct kiwi_egress_config *c = &e->cfg;
	bool ports = c->n_allow_ports || c->kind == KIWI_EGRESS_PUBLIC_INTERNET;
	if (c->kind == KIWI_EGRESS_HOST_ALLOWLIST) {
		if (f->nfproto == NFPROTO_IPV4)
			RULE(n, f->chain, {
				load_daddr(r, f, NFT_REG32_00);
				load_dport(r, NFT_REG32_01);
				kiwi_nft_lookup(r, NFT_REG32_00, "pins", SET_PINS);
				allow_as(r, e, "allowed:name");
			});
		/* the gate let this SYN through and audits the flow itself */
		if (f->nfproto == NFPROTO_IPV4 && e->gate_kernel)
			RULE(n, f->chain, { match_ct_gate(r, NFT_CMP_EQ, KIWI_GATE_UNCHECKED);
					    kiwi_nft_verdict(r, NF_ACCEPT, NULL); });
		return;
	}
	if (f->n_allow)
		RULE(n, f->chain, {
			load_daddr(r, f, NFT_REG_1);
			kiwi_nft_lookup(r, NFT_REG_1, f->allow, f->allow_id);
			if (ports) {
				load_dport(r, NFT_REG_1);
				kiwi_nft_lookup(r, NFT_REG_1, "ports", SET_PORTS);
			}
			allow_as(r, e, "allowed:cidr");
		});
	if (f->n_allow && ports)
		RULE(n, f->chain, { load_daddr(r, f, NFT_REG_1); kiwi_nft_lookup(r, NFT_REG_1, f->allow, f->allow_id);
				    deny_as(r, e, "not_allowed:port"); });
	if (c->kind != KIWI_EGRESS_PUBLIC_INTERNET)
		return;
	RULE(n, f->chain, { load_daddr(r, f, NFT_REG_1); kiwi_nft_lookup(r, NFT_REG_1, f->special, f->special_id);
			    deny_as(r, e, EGRESS_LOG_SPECIAL); });
	if (!f->public_ok) {
		RULE(n, f->chain, { deny_as(r, e, "not_allowed:no_ipv6_route"); });
		return;
	}
	RULE(n, f->chain, { load_dport(r, NFT_REG_1); kiwi_nft_lookup(r, NFT_REG_1, "ports", SET_PORTS);
			    allow_as(r, e, "allowed:public"); });
	RULE(n, f->chain, { deny_as(r, e, "not_allowed:port"); });
}

static void family_chain(struct kiwi_nft *n, const struct kiwi_egress *e, const struct fam *f)
{
	kiwi_nft_add_chain(n, f->chain, NULL, 0, 0);
	RULE(n, f->chain, {
		kiwi_nft_payload(r, NFT_PAYLOAD_NETWORK_HEADER, f->saddr, f->alen, NFT_REG_1);
		kiwi_nft_cmp(r, NFT_CMP_NEQ, f->self, f->alen);
		deny_as(r, e, "always_deny:spoofed_source");
	});
	RULE(n, f->chain, { load_daddr(r, f, NFT_REG_1); kiwi_nft_lookup(r, NFT_REG_1, f->never, f->never_id);
			    deny_as(r, e, EGRESS_LOG_NEVER); });
	RULE(n, f->chain, {
		kiwi_nft_meta(r, NFT_META_L4PROTO);
		kiwi_nft_cmp_u8(r, NFT_CMP_NEQ, IPPROTO_TCP);
		kiwi_nft_cmp_u8(r, NFT_CMP_NEQ, IPPROTO_UDP);
		deny_as(r, e, "not_allowed:protocol");
	});
	/* host_allowlist: --dns is the gate's upstream, not the sandbox's */
	if (e->cfg.dns && e->cfg.kind != KIWI_EGRESS_HOST_ALLOWLIST && f->nfproto == NFPROTO_IPV4)
		RULE(n, f->chain, {
			load_daddr(r, f, NFT_REG_1);
			kiwi_nft_cmp_u32(r, NFT_CMP_EQ, htonl(e->cfg.dns));
			load_dport(r, NFT_REG_1);
			kiwi_nft_cmp(r, NFT_CMP_EQ, &(uint16_t){ htons(53) }, 2);
			allow_as(r, e, "allowed:dns");
		});
	RULE(n, f->chain, { load_dport(r, NFT_REG_1); kiwi_nft_cmp(r, NFT_CMP_EQ, &(uint16_t){ htons(53) }, 2);
			    deny_as(r, e, "not_allowed:dns"); });
	kind_rules(n, e, f);
	RULE(n, f->chain, { deny_as(r, e, "not_allowed"); });
}

static void policy_chains(struct kiwi_nft *n, const struct kiwi_egress *e, const struct fam *f4,
			  const struct fam *f6)
{
	family_chain(n, e, f4);
	if (e->ipv6)
		family_chain(n, e, f6);
	kiwi_nft_add_chain(n, "decide", NULL, 0, 0);
	RULE(n, "decide", { kiwi_nft_meta(r, NFT_META_NFPROTO); kiwi_nft_cmp_u8(r, NFT_CMP_EQ, NFPROTO_IPV4);
			    kiwi_nft_verdict(r, NFT_GOTO, f4->chain); });
	if (e->ipv6)
		RULE(n, "decide", { kiwi_nft_meta(r, NFT_META_NFPROTO); kiwi_nft_cmp_u8(r, NFT_CMP_EQ, NFPROTO_IPV6);
				    kiwi_nft_verdict(r, NFT_GOTO, f6->chain); });
	RULE(n, "decide", { deny_as(r, e, "not_allowed:protocol"); });
}

/* IPv6 that may not leave at all (no route on the host, no CIDR): decided
 * before routing, which would refuse it unseen (no route) or never
 * forward it, so each attempt is still audited with its class. Only the
 * link's own traffic (to the gateway, link-scope multicast) goes on to
 * the input chain; decide6 has no accept rule then. */
static void noroute6_chain(struct kiwi_nft *n, const struct kiwi_egress *e, const struct fam *f6)
{
	int v = e->host_ifindex;
	kiwi_nft_add_chain(n, "noroute6", "filter", NF_INET_PRE_ROUTING, 0);
	RULE(n, "noroute6", { match_if(r, NFT_META_IIF, NFT_CMP_NEQ, v); kiwi_nft_verdict(r, NF_ACCEPT, NULL); });
	RULE(n, "noroute6", { kiwi_nft_meta(r, NFT_META_NFPROTO); kiwi_nft_cmp_u8(r, NFT_CMP_NEQ, NFPROTO_IPV6);
			      kiwi_nft_verdict(r, NF_ACCEPT, NULL); });
	RULE(n, "noroute6", { load_daddr(r, f6, NFT_REG_1); kiwi_nft_cmp(r, NFT_CMP_EQ, e->host6, 16);
			      kiwi_nft_verdict(r, NF_ACCEPT, NULL); });
	RULE(n, "noroute6", { kiwi_nft_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 24, 2, NFT_REG_1);
			      kiwi_nft_cmp(r, NFT_CMP_EQ, &(uint16_t){ htons(0xff02) }, 2);
			      kiwi_nft_verdict(r, NF_ACCEPT, NULL); });
	RULE(n, "noroute6", { kiwi_nft_verdict(r, NFT_GOTO, f6->chain); });
}

/* The kernel refused the queue rule in both forms: the table is built
 * without it, so the gate's queue would be bound for nothing. */
static void refused_queue(struct kiwi_egress *e, const kiwi_err *why)
{
	char text[KIWI_ERR_MSG_MAX + 64];
	kiwi_error_format(why, text, sizeof(text));
	snprintf(e->tls_kernel_off, sizeof(e->tls_kernel_off),
		 "the kernel refused the queue rule (neither nft's queue nor xtables' NFQUEUE): %.150s", text);
	if (e->gate)
		e->gate_ops->unqueue(e->gate);
	e->gate_queue = 0;
}

static int build(const struct kiwi_egress *e, uint32_t flags, kiwi_err *err)
{
	uint32_t self4 = htonl(e->block + 2);
	const struct fam f4 = { NFPROTO_IPV4, 12, 16, 4, (const uint8_t *)&self4, "never", "special", "allow",
				"decide4", SET_NEVER, SET_SPECIAL, SET_ALLOW, e->cfg.n_allow_cidrs, true };
	const struct fam f6 = { NFPROTO_IPV6, 8, 24, 16, e->sandbox6, "never6", "special6", "allow6",
				"decide6", SET_NEVER6, SET_SPECIAL6, SET_ALLOW6,
				e->ipv6_out ? e->cfg.n_allow_cidrs6 : 0, e->ipv6_out && e->host_ipv6 };
	_cleanup_nft_ struct kiwi_nft *n = kiwi_nft_begin(NFPROTO_INET, e->table, err);
	if (!n)
		return -1;
	kiwi_nft_add_table(n, flags);
	if (sets(n, e, err) < 0)
		return -1;
	/* Jump targets first: the kernel checks them as rules arrive. */
	deny_chain(n);
	policy_chains(n, e, &f4, &f6);
	hook_chains(n, e, &f4, &f6);
	if (e->ipv6 && !e->ipv6_out)
		noroute6_chain(n, e, &f6);
	if (e->gate_tcp)
		gate_chains(n, e);
	if (e->gate_kernel)
		gate_queue_chain(n, e);
	if (e->gate_kernel && e->cfg.test_queue_refused)
		return kiwi_error(err, ENOENT, "nftables", "the queue rule refused (test_queue_refused)");
	return kiwi_nft_commit(n, e->nft, err);
}

/* A kiwi veth's end, by name: the guard cannot know their indexes. */
static void match_kiwi_if(struct nftnl_rule *r, uint32_t key)
{
	kiwi_nft_meta(r, key);
	kiwi_nft_cmp(r, NFT_CMP_EQ, EGRESS_VETH_PREFIX, sizeof(EGRESS_VETH_PREFIX) - 1);
}

static void guard_rules(struct kiwi_nft *n, const char *chain, uint32_t key)
{
	RULE(n, chain, { match_kiwi_if(r, key); kiwi_nft_meta(r, NFT_META_MARK); kiwi_nft_and(r, EGRESS_GUARD_MARK);
			 kiwi_nft_cmp_u32(r, NFT_CMP_EQ, 0); kiwi_nft_counter(r); kiwi_nft_verdict(r, NF_DROP, NULL); });
	RULE(n, chain, { match_kiwi_if(r, key); guard_mark(r, 0); });
}

/* The guard (EGRESS_GUARD_TABLE), made once for the host in one batch:
 * when it exists it is whole. After every sandbox table's chains. */
#define GUARD_PRIO 50
static int ensure_guard(struct mnl_socket *sock, kiwi_err *err)
{
	_cleanup_nft_ struct kiwi_nft *n = kiwi_nft_begin(NFPROTO_INET, EGRESS_GUARD_TABLE, err);
	if (!n)
		return -1;
	kiwi_nft_add_table(n, 0);
	kiwi_nft_add_chain(n, "forward", "filter", NF_INET_FORWARD, GUARD_PRIO);
	guard_rules(n, "forward", NFT_META_IIFNAME);
	guard_rules(n, "forward", NFT_META_OIFNAME);
	kiwi_nft_add_chain(n, "input", "filter", NF_INET_LOCAL_IN, GUARD_PRIO);
	guard_rules(n, "input", NFT_META_IIFNAME);
	if (kiwi_nft_commit(n, sock, err) < 0 && err->errnum != EEXIST)
		return -1;
	return 0;
}

/* Owned by our nfnetlink socket, the table is skipped by a host's
 * `nft flush ruleset` (a firewall reload would otherwise remove every
 * running sandbox's filter) and no other process may delete it.
 * Persistent, it outlives a killed kiwi-run instead of vanishing a
 * moment before the sandbox dies, and kiwi-run gc removes it. Kernels
 * before 6.9 lack PERSIST: there the table is owned only, and the guard
 * stops the veth's traffic once the table is gone. */
int kiwi_egress_build_table(struct kiwi_egress *e, kiwi_err *err)
{
	uint32_t flags = NFT_TABLE_F_OWNER | TABLE_F_PERSIST;
	int r = build(e, flags, err);
	if (r < 0 && (err->errnum == EOPNOTSUPP || err->errnum == EINVAL)) {
		flags = NFT_TABLE_F_OWNER;
		e->owned_only = true;
		if (ensure_guard(e->nft, err) < 0)
			return -1;
		r = build(e, flags, err);
	}
	if (r < 0 && err->errnum == ENOENT && e->gate_kernel && !e->queue_compat) {
		/* no nft queue expression in this kernel: xtables' target */
		e->queue_compat = true;
		r = build(e, flags, err);
	}
	if (r < 0 && (err->errnum == ENOENT || err->errnum == EOPNOTSUPP || err->errnum == EINVAL) && e->gate_kernel) {
		/* neither: TLS on 443 stays on the proxy, as strict, only slower;
		 * said in the verdict, and the queue bound for it let go */
		refused_queue(e, err);
		e->gate_kernel = false;
		r = build(e, flags, err);
	}
	if (r < 0 && err->errnum == EEXIST) {
		/* a dead run's, left for gc, whose block we now hold */
		if (kiwi_egress_delete_table(e->table, NULL, err) < 0)
			return -1;
		r = build(e, flags, err);
	}
	return r;
}

int kiwi_egress_delete_table(const char *table, struct mnl_socket *sock, kiwi_err *err)
{
	_cleanup_nft_ struct kiwi_nft *n = kiwi_nft_begin(NFPROTO_INET, table, err);
	if (!n)
		return -1;
	kiwi_nft_del_table(n);
	if (kiwi_nft_commit(n, sock, err) < 0 && err->errnum != ENOENT)
		return -1;
	return 0;
}
