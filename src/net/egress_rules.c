/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox's nftables table, on the host side of its veth V, owned by
 * kiwi-run's nfnetlink socket (see kiwi_egress_build_table). In nft
 * terms (sets: never, special, allow, ports, pins):
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
 *     goto deny }                              # the host itself, any address
 *   chain decide {
 *     meta nfproto != ipv4 goto deny           # no IPv6 egress at all
 *     ip saddr != SANDBOX goto deny            # no spoofed sources
 *     ip daddr @never goto deny
 *     meta l4proto != tcp meta l4proto != udp goto deny
 *     ip daddr RESOLVER th dport 53 accept     # with --dns
 *     th dport 53 goto deny
 *     <the kind's accept rules>
 *     goto deny }
 *   chain deny { counter log group G snaplen 128
 *     meta l4proto tcp reject with tcp reset
 *     reject with icmpx admin-prohibited }
 *   chain postrouting { type nat hook postrouting priority 100;
 *     ip saddr SANDBOX oif != V masquerade }
 *
 * host_allowlist with names adds the name gate's (kiwi/proxy.h) redirect,
 * and lets into the host only what it redirected:
 *   chain gate { type nat hook prerouting priority -100;
 *     iif != V accept;  meta nfproto != ipv4 accept
 *     ip daddr GW udp dport 53 dnat to GW:DNS_PORT
 *     ip daddr @never accept                   # (the gateway is in the pool)
 *     ip daddr . th dport @pins accept         # entries written as addresses
 *     tcp dport @name_ports dnat to GW:TCP_PORT }
 *   input, before its deny:  ct status dnat  to GW:DNS_PORT/udp, GW:TCP_PORT/tcp  accept
 */
#include "egress_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_nat.h>
#include <linux/netfilter/nf_tables.h>
#include <netinet/in.h>
#include <stdlib.h>

enum { SET_NEVER = 1, SET_SPECIAL, SET_ALLOW, SET_PORTS, SET_PINS, SET_NAME_PORTS };

#define CT_EST_REL (NF_CT_STATE_BIT(IP_CT_ESTABLISHED) | NF_CT_STATE_BIT(IP_CT_RELATED))
#define NAT_PRIO_DST (-100)
#define NFLOG_SNAPLEN 128

static const uint16_t default_ports[] = { 80, 443 };

/* NFT_TABLE_F_PERSIST (Linux 6.9), an enum older headers lack */
#define TABLE_F_PERSIST 0x4u

static void match_if(struct nftnl_rule *r, uint32_t key, uint32_t op, int ifindex)
{
	kiwi_nft_meta(r, key);
	kiwi_nft_cmp_u32(r, op, (uint32_t)ifindex);
}

static void match_ct_est_rel(struct nftnl_rule *r)
{
	kiwi_nft_ct_state(r);
	kiwi_nft_and(r, CT_EST_REL);
	kiwi_nft_cmp_u32(r, NFT_CMP_NEQ, 0);
}

static void load_daddr(struct nftnl_rule *r, uint32_t reg)
{
	kiwi_nft_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 16, 4, reg);
}

static void load_dport(struct nftnl_rule *r, uint32_t reg)
{
	kiwi_nft_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2, reg);
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
	load_daddr(r, NFT_REG_1);
	kiwi_nft_cmp_u32(r, NFT_CMP_EQ, htonl(addr));
	load_dport(r, NFT_REG_1);
	kiwi_nft_cmp(r, NFT_CMP_EQ, &(uint16_t){ htons(port) }, 2);
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
	RULE(n, "gate", { load_daddr(r, NFT_REG_1); kiwi_nft_lookup(r, NFT_REG_1, "never", SET_NEVER);
			  kiwi_nft_verdict(r, NF_ACCEPT, NULL); });
	if (e->n_pins)
		RULE(n, "gate", { load_daddr(r, NFT_REG32_00); load_dport(r, NFT_REG32_01);
				  kiwi_nft_lookup(r, NFT_REG32_00, "pins", SET_PINS); kiwi_nft_verdict(r, NF_ACCEPT, NULL); });
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

static void hook_chains(struct kiwi_nft *n, const struct kiwi_egress *e)
{
	int v = e->host_ifindex;
	kiwi_nft_add_chain(n, "inbound", "filter", NF_INET_FORWARD, 10);
	RULE(n, "inbound", { match_if(r, NFT_META_OIF, NFT_CMP_EQ, v); match_ct_est_rel(r);
			     kiwi_nft_verdict(r, NF_ACCEPT, NULL); });
	RULE(n, "inbound", { match_if(r, NFT_META_OIF, NFT_CMP_EQ, v); kiwi_nft_counter(r);
			     kiwi_nft_verdict(r, NF_DROP, NULL); });
	kiwi_nft_add_chain(n, "forward", "filter", NF_INET_FORWARD, 0);
	RULE(n, "forward", { match_if(r, NFT_META_IIF, NFT_CMP_NEQ, v); kiwi_nft_verdict(r, NF_ACCEPT, NULL); });
	RULE(n, "forward", { match_ct_est_rel(r); kiwi_nft_verdict(r, NF_ACCEPT, NULL); });
	RULE(n, "forward", { kiwi_nft_verdict(r, NFT_GOTO, "decide"); });

	kiwi_nft_add_chain(n, "input", "filter", NF_INET_LOCAL_IN, 0);
	RULE(n, "input", { match_if(r, NFT_META_IIF, NFT_CMP_NEQ, v); kiwi_nft_verdict(r, NF_ACCEPT, NULL); });
	RULE(n, "input", { match_ct_est_rel(r); kiwi_nft_verdict(r, NF_ACCEPT, NULL); });
	if (e->gate_tcp)
		gate_input(n, e);
	RULE(n, "input", { kiwi_nft_verdict(r, NFT_GOTO, "deny"); });

	kiwi_nft_add_chain(n, "postrouting", "nat", NF_INET_POST_ROUTING, 100);
	RULE(n, "postrouting", {
		kiwi_nft_meta(r, NFT_META_NFPROTO);
		kiwi_nft_cmp_u8(r, NFT_CMP_EQ, NFPROTO_IPV4);
		kiwi_nft_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 12, 4, NFT_REG_1);
		kiwi_nft_cmp_u32(r, NFT_CMP_EQ, htonl(e->block + 2));
		match_if(r, NFT_META_OIF, NFT_CMP_NEQ, v);
		kiwi_nft_masq(r);
	});
}

static void deny_chain(struct kiwi_nft *n, const struct kiwi_egress *e)
{
	kiwi_nft_add_chain(n, "deny", NULL, 0, 0);
	RULE(n, "deny", { kiwi_nft_counter(r); kiwi_nft_log(r, e->group, NFLOG_SNAPLEN); });
	RULE(n, "deny", {
		kiwi_nft_meta(r, NFT_META_L4PROTO);
		kiwi_nft_cmp_u8(r, NFT_CMP_EQ, IPPROTO_TCP);
		kiwi_nft_reject(r, NFT_REJECT_TCP_RST, 0);
	});
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

static int sets(struct kiwi_nft *n, const struct kiwi_egress *e, kiwi_err *err)
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
static void kind_rules(struct kiwi_nft *n, const struct kiwi_egress *e)
{
	const struct kiwi_egress_config *c = &e->cfg;
	bool ports = c->n_allow_ports || c->kind == KIWI_EGRESS_PUBLIC_INTERNET;
	switch (c->kind) {
	case KIWI_EGRESS_HOST_ALLOWLIST:
		RULE(n, "decide", {
			load_daddr(r, NFT_REG32_00);
			load_dport(r, NFT_REG32_01);
			kiwi_nft_lookup(r, NFT_REG32_00, "pins", SET_PINS);
			kiwi_nft_verdict(r, NF_ACCEPT, NULL);
		});
		return;
	case KIWI_EGRESS_PUBLIC_INTERNET:
	case KIWI_EGRESS_PRIVATE_NETWORK:
	default:
		break;
	}
	if (c->n_allow_cidrs)
		RULE(n, "decide", {
			load_daddr(r, NFT_REG_1);
			kiwi_nft_lookup(r, NFT_REG_1, "allow", SET_ALLOW);
			if (ports) {
				load_dport(r, NFT_REG_1);
				kiwi_nft_lookup(r, NFT_REG_1, "ports", SET_PORTS);
			}
			kiwi_nft_verdict(r, NF_ACCEPT, NULL);
		});
	if (c->kind != KIWI_EGRESS_PUBLIC_INTERNET)
		return;
	RULE(n, "decide", { load_daddr(r, NFT_REG_1); kiwi_nft_lookup(r, NFT_REG_1, "special", SET_SPECIAL);
			    kiwi_nft_verdict(r, NFT_GOTO, "deny"); });
	RULE(n, "decide", { load_dport(r, NFT_REG_1); kiwi_nft_lookup(r, NFT_REG_1, "ports", SET_PORTS);
			    kiwi_nft_verdict(r, NF_ACCEPT, NULL); });
}

static void policy_chain(struct kiwi_nft *n, const struct kiwi_egress *e)
{
	kiwi_nft_add_chain(n, "decide", NULL, 0, 0);
	RULE(n, "decide", { kiwi_nft_meta(r, NFT_META_NFPROTO); kiwi_nft_cmp_u8(r, NFT_CMP_NEQ, NFPROTO_IPV4);
			    kiwi_nft_verdict(r, NFT_GOTO, "deny"); });
	RULE(n, "decide", {
		kiwi_nft_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 12, 4, NFT_REG_1);
		kiwi_nft_cmp_u32(r, NFT_CMP_NEQ, htonl(e->block + 2));
		kiwi_nft_verdict(r, NFT_GOTO, "deny");
	});
	RULE(n, "decide", { load_daddr(r, NFT_REG_1); kiwi_nft_lookup(r, NFT_REG_1, "never", SET_NEVER);
			    kiwi_nft_verdict(r, NFT_GOTO, "deny"); });
	RULE(n, "decide", {
		kiwi_nft_meta(r, NFT_META_L4PROTO);
		kiwi_nft_cmp_u8(r, NFT_CMP_NEQ, IPPROTO_TCP);
		kiwi_nft_cmp_u8(r, NFT_CMP_NEQ, IPPROTO_UDP);
		kiwi_nft_verdict(r, NFT_GOTO, "deny");
	});
	/* host_allowlist: --dns is the gate's upstream, not the sandbox's */
	if (e->cfg.dns && e->cfg.kind != KIWI_EGRESS_HOST_ALLOWLIST)
		RULE(n, "decide", {
			load_daddr(r, NFT_REG_1);
			kiwi_nft_cmp_u32(r, NFT_CMP_EQ, htonl(e->cfg.dns));
			load_dport(r, NFT_REG_1);
			kiwi_nft_cmp(r, NFT_CMP_EQ, &(uint16_t){ htons(53) }, 2);
			kiwi_nft_verdict(r, NF_ACCEPT, NULL);
		});
	RULE(n, "decide", { load_dport(r, NFT_REG_1); kiwi_nft_cmp(r, NFT_CMP_EQ, &(uint16_t){ htons(53) }, 2);
			    kiwi_nft_verdict(r, NFT_GOTO, "deny"); });
	kind_rules(n, e);
	RULE(n, "decide", { kiwi_nft_verdict(r, NFT_GOTO, "deny"); });
}

static int build(const struct kiwi_egress *e, uint32_t flags, kiwi_err *err)
{
	_cleanup_nft_ struct kiwi_nft *n = kiwi_nft_begin(NFPROTO_INET, e->table, err);
	if (!n)
		return -1;
	kiwi_nft_add_table(n, flags);
	if (sets(n, e, err) < 0)
		return -1;
	/* Jump targets first: the kernel checks them as rules arrive. */
	deny_chain(n, e);
	policy_chain(n, e);
	hook_chains(n, e);
	if (e->gate_tcp)
		gate_chains(n, e);
	return kiwi_nft_commit(n, e->nft, err);
}

/* Owned by our nfnetlink socket, the table is skipped by a host's
 * `nft flush ruleset` (a firewall reload would otherwise remove every
 * running sandbox's filter) and no other process may delete it.
 * Persistent, it outlives a killed kiwi-run instead of vanishing a
 * moment before the sandbox dies, and kiwi-run gc removes it. Kernels
 * before 6.9 lack PERSIST: there the table is owned only. */
int kiwi_egress_build_table(struct kiwi_egress *e, kiwi_err *err)
{
	uint32_t flags = NFT_TABLE_F_OWNER | TABLE_F_PERSIST;
	int r = build(e, flags, err);
	if (r < 0 && (err->errnum == EOPNOTSUPP || err->errnum == EINVAL)) {
		flags = NFT_TABLE_F_OWNER;
		e->owned_only = true;
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
