/* SPDX-License-Identifier: Apache-2.0 */
/* nftables through libnftnl: a batch of table, chain, set and rule messages
 * built in memory and committed in one sendmsg, which the kernel applies
 * all or nothing. Never the nft command. The rule helpers add one
 * expression each, so a rule reads like its `nft` listing. */
#ifndef KIWI_NFT_H
#define KIWI_NFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiwi/err.h"

struct mnl_socket;
struct nftnl_rule;
struct kiwi_nft;

/* A range of IPv4 addresses, host byte order, both ends included. */
struct kiwi_ip4_range {
	uint32_t lo, hi;
};

/* A range of IPv6 addresses, network order, both ends included. */
struct kiwi_ip6_range {
	uint8_t lo[16], hi[16];
};

struct kiwi_nft *kiwi_nft_begin(int family, const char *table, kiwi_err *err);
void kiwi_nft_free(struct kiwi_nft *n);
static inline void kiwi_nft_freep(struct kiwi_nft **n)
{
	kiwi_nft_free(*n);
}
#define _cleanup_nft_ __attribute__((cleanup(kiwi_nft_freep)))

/* flags: NFT_TABLE_F_* (0: none). Fails with EEXIST on an existing table. */
void kiwi_nft_add_table(struct kiwi_nft *n, uint32_t flags);
void kiwi_nft_del_table(struct kiwi_nft *n);
/* A base chain when type is not NULL (hook, priority, policy accept),
 * else a regular chain to jump to. */
void kiwi_nft_add_chain(struct kiwi_nft *n, const char *chain, const char *type, int hook, int prio);
/* An IPv4 interval set holding the ranges (sorted and merged here). */
int kiwi_nft_add_ip4_set(struct kiwi_nft *n, const char *set, uint32_t id,
			 const struct kiwi_ip4_range *r, size_t count, kiwi_err *err);
/* The same for IPv6. */
int kiwi_nft_add_ip6_set(struct kiwi_nft *n, const char *set, uint32_t id,
			 const struct kiwi_ip6_range *r, size_t count, kiwi_err *err);
/* A set of inet_service (ports), or of ipv4_addr . inet_service pairs. */
void kiwi_nft_add_port_set(struct kiwi_nft *n, const char *set, uint32_t id,
			   const uint16_t *ports, size_t count);
void kiwi_nft_add_pin_set(struct kiwi_nft *n, const char *set, uint32_t id,
			  const uint32_t *addrs, const uint16_t *ports, size_t count);

/* Sorts and merges ranges in place; returns the new count. */
size_t kiwi_ip4_ranges_merge(struct kiwi_ip4_range *r, size_t count);

/* ---- rules: start one, add expressions, hand it to the batch ---- */
struct nftnl_rule *kiwi_nft_rule(struct kiwi_nft *n, const char *chain);
void kiwi_nft_add_rule(struct kiwi_nft *n, struct nftnl_rule *r);

void kiwi_nft_meta(struct nftnl_rule *r, uint32_t key);          /* -> reg 1 */
void kiwi_nft_ct_state(struct nftnl_rule *r);                    /* -> reg 1 */
void kiwi_nft_ct(struct nftnl_rule *r, uint32_t key);            /* NFT_CT_*, -> reg 1 */
void kiwi_nft_ct_set(struct nftnl_rule *r, uint32_t key);        /* NFT_CT_MARK... from reg 1 */
/* reg 1 (len bytes) compared with data: NFT_CMP_EQ, NFT_CMP_NEQ... */
void kiwi_nft_cmp(struct nftnl_rule *r, uint32_t op, const void *data, uint32_t len);
void kiwi_nft_cmp_u8(struct nftnl_rule *r, uint32_t op, uint8_t v);
void kiwi_nft_cmp_u32(struct nftnl_rule *r, uint32_t op, uint32_t v);
/* reg 1 &= mask, for flag tests: then cmp NEQ 0. */
void kiwi_nft_and(struct nftnl_rule *r, uint32_t mask);
/* reg 1 = (reg 1 & mask) ^ xor: mask ~B, xor B sets bit B; xor 0 clears it. */
void kiwi_nft_bitwise(struct nftnl_rule *r, uint32_t mask, uint32_t xor);
/* The meta key (NFT_META_MARK...) set from reg 1. */
void kiwi_nft_meta_set(struct nftnl_rule *r, uint32_t key);
void kiwi_nft_payload(struct nftnl_rule *r, uint32_t base, uint32_t offset, uint32_t len, uint32_t dreg);
void kiwi_nft_lookup(struct nftnl_rule *r, uint32_t sreg, const char *set, uint32_t id);
void kiwi_nft_verdict(struct nftnl_rule *r, int verdict, const char *chain);
void kiwi_nft_counter(struct nftnl_rule *r);
/* prefix (NULL: none) reaches the reader with each packet: its class. */
void kiwi_nft_log(struct nftnl_rule *r, uint16_t group, uint32_t snaplen, const char *prefix);
void kiwi_nft_reject(struct nftnl_rule *r, uint32_t type, uint8_t code);
void kiwi_nft_masq(struct nftnl_rule *r);
/* To nfnetlink_queue num, without bypass: dropped while nobody is bound.
 * compat: through xtables' NFQUEUE target (nft_compat), for kernels
 * built without nft's own queue expression (CONFIG_NFT_QUEUE). */
void kiwi_nft_queue(struct nftnl_rule *r, uint16_t num, bool compat);
/* dnat to addr:port (both network byte order), through registers 2 and 3 */
void kiwi_nft_dnat4(struct nftnl_rule *r, uint32_t addr, uint16_t port);

/* An nfnetlink socket to commit on. Closing one soon after a commit
 * blocks for an RCU grace period (10-20 ms: the kernel flushes the
 * committed transactions' destruction first), so a caller that cares
 * keeps it open and closes it later. */
struct mnl_socket *kiwi_nft_open(kiwi_err *err);
void kiwi_nft_sock_closep(struct mnl_socket **nl);
#define _cleanup_nft_sock_ __attribute__((cleanup(kiwi_nft_sock_closep)))
/* Sends the batch on sock (NULL: a socket of its own) and waits for the
 * kernel's answer. */
int kiwi_nft_commit(struct kiwi_nft *n, struct mnl_socket *sock, kiwi_err *err);

/* Calls fn for every table of this family whose name starts with prefix. */
int kiwi_nft_tables_named(int family, const char *prefix, void (*fn)(const char *name, void *arg),
			  void *arg, kiwi_err *err);

#endif
