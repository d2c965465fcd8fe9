/* SPDX-License-Identifier: Apache-2.0 */
#include "kiwi/nft.h"
#include "kiwi/cleanup.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/xt_NFQUEUE.h>
#include <libnftnl/batch.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* nft's datatype numbers, kept in set metadata so that `nft list` shows
 * the sets readably; the kernel itself only checks key lengths. */
#define NFT_TYPE_IPV4_ADDR 7
#define NFT_TYPE_IPV6_ADDR 8
#define NFT_TYPE_INET_SERVICE 13
#define NFT_TYPE_BITS 6

/* Room every single message is guaranteed to have. */
#define MSG_ROOM 16384

struct kiwi_nft {
	char *buf;
	size_t len, cap;
	uint32_t seq;
	int family;
	bool oom;
	char table[64];
};

static bool reserve(struct kiwi_nft *n, size_t room)
{
	if (n->oom)
		return false;
	if (n->cap - n->len >= room)
		return true;
	size_t cap = n->cap * 2 > n->len + room ? n->cap * 2 : n->len + room;
	char *b = realloc(n->buf, cap);
	if (!b) {
		n->oom = true;
		return false;
	}
	memset(b + n->cap, 0, cap - n->cap);
	n->buf = b;
	n->cap = cap;
	return true;
}

static struct nlmsghdr *put_msg(struct kiwi_nft *n, uint16_t type, uint16_t flags, size_t room)
{
	if (!reserve(n, room))
		return NULL;
	return nftnl_nlmsg_build_hdr(n->buf + n->len, type, (uint16_t)n->family, flags | NLM_F_ACK,
				     n->seq++);
}

static void end_msg(struct kiwi_nft *n, struct nlmsghdr *nlh)
{
	n->len += NLMSG_ALIGN(nlh->nlmsg_len);
}

struct kiwi_nft *kiwi_nft_begin(int family, const char *table, kiwi_err *err)
{
	struct kiwi_nft *n = calloc(1, sizeof(*n));
	if (!n || !(n->buf = calloc(1, MSG_ROOM * 4))) {
		free(n);
		kiwi_error(err, ENOMEM, "nftables", "cannot allocate a batch");
		return NULL;
	}
	n->cap = MSG_ROOM * 4;
	n->family = family;
	n->seq = (uint32_t)time(NULL);
	snprintf(n->table, sizeof(n->table), "%s", table);
	struct nlmsghdr *nlh = nftnl_batch_begin(n->buf, n->seq++);
	n->len += NLMSG_ALIGN(nlh->nlmsg_len);
	return n;
}

void kiwi_nft_free(struct kiwi_nft *n)
{
	if (!n)
		return;
	free(n->buf);
	free(n);
}

static void table_msg(struct kiwi_nft *n, uint16_t type, uint16_t flags, uint32_t table_flags)
{
	struct nftnl_table *t = nftnl_table_alloc();
	if (!t) {
		n->oom = true;
		return;
	}
	nftnl_table_set_str(t, NFTNL_TABLE_NAME, n->table);
	nftnl_table_set_u32(t, NFTNL_TABLE_FAMILY, (uint32_t)n->family);
	if (table_flags)
		nftnl_table_set_u32(t, NFTNL_TABLE_FLAGS, table_flags);
	struct nlmsghdr *nlh = put_msg(n, type, flags, MSG_ROOM);
	if (nlh) {
		nftnl_table_nlmsg_build_payload(nlh, t);
		end_msg(n, nlh);
	}
	nftnl_table_free(t);
}

void kiwi_nft_add_table(struct kiwi_nft *n, uint32_t flags)
{
	table_msg(n, NFT_MSG_NEWTABLE, NLM_F_CREATE | NLM_F_EXCL, flags);
}

void kiwi_nft_del_table(struct kiwi_nft *n)
{
	table_msg(n, NFT_MSG_DELTABLE, 0, 0);
}

void kiwi_nft_add_chain(struct kiwi_nft *n, const char *chain, const char *type, int hook, int prio)
{
	struct nftnl_chain *c = nftnl_chain_alloc();
	if (!c) {
		n->oom = true;
		return;
	}
	nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, n->table);
	nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, chain);
	nftnl_chain_set_u32(c, NFTNL_CHAIN_FAMILY, (uint32_t)n->family);
	if (type) {
		nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, type);
		nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, (uint32_t)hook);
		nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, prio);
		nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, NF_ACCEPT);
	}
	struct nlmsghdr *nlh = put_msg(n, NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, MSG_ROOM);
	if (nlh) {
		nftnl_chain_nlmsg_build_payload(nlh, c);
		end_msg(n, nlh);
	}
	nftnl_chain_free(c);
}

static struct nftnl_set *new_set(struct kiwi_nft *n, const char *name, uint32_t id, uint32_t key_type,
				 uint32_t key_len, uint32_t flags)
{
	struct nftnl_set *s = nftnl_set_alloc();
	if (!s) {
		n->oom = true;
		return NULL;
	}
	nftnl_set_set_str(s, NFTNL_SET_TABLE, n->table);
	nftnl_set_set_str(s, NFTNL_SET_NAME, name);
	nftnl_set_set_u32(s, NFTNL_SET_FAMILY, (uint32_t)n->family);
	nftnl_set_set_u32(s, NFTNL_SET_ID, id);
	nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, key_type);
	nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, key_len);
	nftnl_set_set_u32(s, NFTNL_SET_FLAGS, flags | NFT_SET_CONSTANT);
	return s;
}

static void add_elem(struct nftnl_set *s, const void *key, uint32_t len, uint32_t flags)
{
	struct nftnl_set_elem *e = nftnl_set_elem_alloc();
	if (!e)
		return;  /* the element count check in commit_set catches this */
	nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, key, len);
	if (flags)
		nftnl_set_elem_set_u32(e, NFTNL_SET_ELEM_FLAGS, flags);
	nftnl_set_elem_add(s, e);
}

/* The set, then its elements (an empty set gets no element message: the
 * kernel refuses an empty element list). */
static void commit_set(struct kiwi_nft *n, struct nftnl_set *s, size_t elems)
{
	if (!s)
		return;
	struct nlmsghdr *nlh = put_msg(n, NFT_MSG_NEWSET, NLM_F_CREATE | NLM_F_EXCL, MSG_ROOM);
	if (nlh) {
		nftnl_set_nlmsg_build_payload(nlh, s);
		end_msg(n, nlh);
	}
	if (elems) {
		nlh = put_msg(n, NFT_MSG_NEWSETELEM, NLM_F_CREATE | NLM_F_EXCL, MSG_ROOM + elems * 64);
		if (nlh) {
			nftnl_set_elems_nlmsg_build_payload(nlh, s);
			end_msg(n, nlh);
		}
	}
	nftnl_set_free(s);
}

static int range_cmp(const void *a, const void *b)
{
	const struct kiwi_ip4_range *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

size_t kiwi_ip4_ranges_merge(struct kiwi_ip4_range *r, size_t count)
{
	if (!count)
		return 0;
	qsort(r, count, sizeof(*r), range_cmp);
	size_t out = 0;
	for (size_t i = 1; i < count; i++) {
		/* adjacent ranges merge too: the kernel refuses touching intervals */
		if (r[i].lo <= r[out].hi || r[i].lo - 1 == r[out].hi) {
			if (r[i].hi > r[out].hi)
				r[out].hi = r[i].hi;
		} else {
			r[++out] = r[i];
		}
	}
	return out + 1;
}

int kiwi_nft_add_ip4_set(struct kiwi_nft *n, const char *set, uint32_t id,
			 const struct kiwi_ip4_range *ranges, size_t count, kiwi_err *err)
{
	_cleanup_free_ struct kiwi_ip4_range *r = malloc((count ? count : 1) * sizeof(*r));
	if (!r)
		return kiwi_error(err, ENOMEM, "nftables", "cannot build set `%s`", set);
	memcpy(r, ranges, count * sizeof(*r));
	count = kiwi_ip4_ranges_merge(r, count);
	struct nftnl_set *s = new_set(n, set, id, NFT_TYPE_IPV4_ADDR, 4, NFT_SET_INTERVAL);
	if (!s)
		return kiwi_error(err, ENOMEM, "nftables", "cannot build set `%s`", set);
	/* As nft does: an interval end at 0 first, then each range as a start
	 * key and an end key one past it; a range reaching 255.255.255.255
	 * has no end key (it would wrap to 0). */
	size_t elems = 0;
	uint32_t zero = 0;
	if (count && r[0].lo != 0) {
		add_elem(s, &zero, 4, NFT_SET_ELEM_INTERVAL_END);
		elems++;
	}
	for (size_t i = 0; i < count; i++) {
		uint32_t lo = htonl(r[i].lo), end = htonl(r[i].hi + 1);
		add_elem(s, &lo, 4, 0);
		elems++;
		if (r[i].hi != UINT32_MAX) {
			add_elem(s, &end, 4, NFT_SET_ELEM_INTERVAL_END);
			elems++;
		}
	}
	commit_set(n, s, elems);
	return 0;
}

static int range6_cmp(const void *a, const void *b)
{
	const struct kiwi_ip6_range *x = a, *y = b;
	return memcmp(x->lo, y->lo, 16);
}

/* a + 1, in place; false when it wrapped (a was all ones). */
static bool inc6(uint8_t *a)
{
	for (int i = 15; i >= 0; i--)
		if (++a[i])
			return true;
	return false;
}

static size_t ip6_ranges_merge(struct kiwi_ip6_range *r, size_t count)
{
	if (!count)
		return 0;
	qsort(r, count, sizeof(*r), range6_cmp);
	size_t out = 0;
	for (size_t i = 1; i < count; i++) {
		uint8_t next[16];
		memcpy(next, r[out].hi, 16);
		bool wrapped = !inc6(next);
		/* overlapping or adjacent: one interval (the kernel refuses touching ones) */
		if (wrapped || memcmp(r[i].lo, next, 16) <= 0) {
			if (memcmp(r[i].hi, r[out].hi, 16) > 0)
				memcpy(r[out].hi, r[i].hi, 16);
		} else {
			r[++out] = r[i];
		}
	}
	return out + 1;
}

int kiwi_nft_add_ip6_set(struct kiwi_nft *n, const char *set, uint32_t id,
			 const struct kiwi_ip6_range *ranges, size_t count, kiwi_err *err)
{
	_cleanup_free_ struct kiwi_ip6_range *r = malloc((count ? count : 1) * sizeof(*r));
	if (!r)
		return kiwi_error(err, ENOMEM, "nftables", "cannot build set `%s`", set);
	memcpy(r, ranges, count * sizeof(*r));
	count = ip6_ranges_merge(r, count);
	struct nftnl_set *s = new_set(n, set, id, NFT_TYPE_IPV6_ADDR, 16, NFT_SET_INTERVAL);
	if (!s)
		return kiwi_error(err, ENOMEM, "nftables", "cannot build set `%s`", set);
	/* as for IPv4: an end at :: first unless a range starts there */
	static const uint8_t zero[16];
	size_t elems = 0;
	if (count && memcmp(r[0].lo, zero, 16)) {
		add_elem(s, zero, 16, NFT_SET_ELEM_INTERVAL_END);
		elems++;
	}
	for (size_t i = 0; i < count; i++) {
		add_elem(s, r[i].lo, 16, 0);
		elems++;
		uint8_t end[16];
		memcpy(end, r[i].hi, 16);
		if (inc6(end)) {
			add_elem(s, end, 16, NFT_SET_ELEM_INTERVAL_END);
			elems++;
		}
	}
	commit_set(n, s, elems);
	return 0;
}

void kiwi_nft_add_port_set(struct kiwi_nft *n, const char *set, uint32_t id, const uint16_t *ports,
			   size_t count)
{
	struct nftnl_set *s = new_set(n, set, id, NFT_TYPE_INET_SERVICE, 2, 0);
	for (size_t i = 0; s && i < count; i++) {
		uint16_t key = htons(ports[i]);
		add_elem(s, &key, 2, 0);
	}
	commit_set(n, s, count);
}

void kiwi_nft_add_pin_set(struct kiwi_nft *n, const char *set, uint32_t id, const uint32_t *addrs,
			  const uint16_t *ports, size_t count)
{
	/* A concatenation: each field padded to a 32-bit register. */
	struct nftnl_set *s = new_set(n, set, id, NFT_TYPE_IPV4_ADDR << NFT_TYPE_BITS | NFT_TYPE_INET_SERVICE,
				      8, 0);
	for (size_t i = 0; s && i < count; i++) {
		uint8_t key[8] = { 0 };
		uint32_t a = htonl(addrs[i]);
		uint16_t p = htons(ports[i]);
		memcpy(key, &a, 4);
		memcpy(key + 4, &p, 2);
		add_elem(s, key, 8, 0);
	}
	commit_set(n, s, count);
}

/* ---- rules ---- */

/* A rule short of one expression could match more than it says (a
 * missing cmp turns "accept these" into "accept all"), so an expression
 * that could not be allocated poisons the whole batch. */
static _Thread_local bool expr_failed;


struct nftnl_rule *kiwi_nft_rule(struct kiwi_nft *n, const char *chain)
{
	struct nftnl_rule *r = nftnl_rule_alloc();
	if (!r) {
		n->oom = true;
		return NULL;
	}
	nftnl_rule_set_str(r, NFTNL_RULE_TABLE, n->table);
	nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, chain);
	nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, (uint32_t)n->family);
	return r;
}

void kiwi_nft_add_rule(struct kiwi_nft *n, struct nftnl_rule *r)
{
	if (expr_failed) {
		n->oom = true;
		expr_failed = false;
	}
	if (!r)
		return;
	struct nlmsghdr *nlh = put_msg(n, NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND, MSG_ROOM);
	if (nlh) {
		nftnl_rule_nlmsg_build_payload(nlh, r);
		end_msg(n, nlh);
	}
	nftnl_rule_free(r);
}

static struct nftnl_expr *expr(struct nftnl_rule *r, const char *name)
{
	if (!r)
		return NULL;
	struct nftnl_expr *e = nftnl_expr_alloc(name);
	if (e)
		nftnl_rule_add_expr(r, e);
	else
		expr_failed = true;
	return e;
}

#define EXPR(r, name) struct nftnl_expr *e = expr(r, name); if (!e) return

void kiwi_nft_meta(struct nftnl_rule *r, uint32_t key)
{
	EXPR(r, "meta");
	nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
	nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, NFT_REG_1);
}

void kiwi_nft_ct(struct nftnl_rule *r, uint32_t key)
{
	EXPR(r, "ct");
	nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, key);
	nftnl_expr_set_u32(e, NFTNL_EXPR_CT_DREG, NFT_REG_1);
}

void kiwi_nft_ct_set(struct nftnl_rule *r, uint32_t key)
{
	EXPR(r, "ct");
	nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, key);
	nftnl_expr_set_u32(e, NFTNL_EXPR_CT_SREG, NFT_REG_1);
}

void kiwi_nft_ct_state(struct nftnl_rule *r)
{
	kiwi_nft_ct(r, NFT_CT_STATE);
}

void kiwi_nft_cmp(struct nftnl_rule *r, uint32_t op, const void *data, uint32_t len)
{
	EXPR(r, "cmp");
	nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
	nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len);
}

void kiwi_nft_cmp_u8(struct nftnl_rule *r, uint32_t op, uint8_t v)
{
	kiwi_nft_cmp(r, op, &v, 1);
}

void kiwi_nft_cmp_u32(struct nftnl_rule *r, uint32_t op, uint32_t v)
{
	kiwi_nft_cmp(r, op, &v, 4);
}

void kiwi_nft_bitwise(struct nftnl_rule *r, uint32_t mask, uint32_t xor)
{
	EXPR(r, "bitwise");
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, 4);
	nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, &mask, 4);
	nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, &xor, 4);
}

void kiwi_nft_and(struct nftnl_rule *r, uint32_t mask)
{
	kiwi_nft_bitwise(r, mask, 0);
}

void kiwi_nft_meta_set(struct nftnl_rule *r, uint32_t key)
{
	EXPR(r, "meta");
	nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
	nftnl_expr_set_u32(e, NFTNL_EXPR_META_SREG, NFT_REG_1);
}

void kiwi_nft_payload(struct nftnl_rule *r, uint32_t base, uint32_t offset, uint32_t len, uint32_t dreg)
{
	EXPR(r, "payload");
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, offset);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, dreg);
}

void kiwi_nft_lookup(struct nftnl_rule *r, uint32_t sreg, const char *set, uint32_t id)
{
	EXPR(r, "lookup");
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, sreg);
	nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, set);
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SET_ID, id);
}

void kiwi_nft_verdict(struct nftnl_rule *r, int verdict, const char *chain)
{
	EXPR(r, "immediate");
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)verdict);
	if (chain)
		nftnl_expr_set_str(e, NFTNL_EXPR_IMM_CHAIN, chain);
}

void kiwi_nft_counter(struct nftnl_rule *r)
{
	(void)expr(r, "counter");
}

void kiwi_nft_log(struct nftnl_rule *r, uint16_t group, uint32_t snaplen, const char *prefix)
{
	EXPR(r, "log");
	nftnl_expr_set_u16(e, NFTNL_EXPR_LOG_GROUP, group);
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOG_SNAPLEN, snaplen);
	if (prefix)
		nftnl_expr_set_str(e, NFTNL_EXPR_LOG_PREFIX, prefix);
}

void kiwi_nft_reject(struct nftnl_rule *r, uint32_t type, uint8_t code)
{
	EXPR(r, "reject");
	nftnl_expr_set_u32(e, NFTNL_EXPR_REJECT_TYPE, type);
	nftnl_expr_set_u8(e, NFTNL_EXPR_REJECT_CODE, code);
}

void kiwi_nft_queue(struct nftnl_rule *r, uint16_t num, bool compat)
{
	if (compat) {
		/* xtables' NFQUEUE revision 1 (queue, total): no bypass either */
		EXPR(r, "target");
		/* the expression takes the info and frees it */
		struct xt_NFQ_info_v1 *info = malloc(sizeof(*info));
		if (!info) {
			expr_failed = true;
			return;
		}
		*info = (struct xt_NFQ_info_v1){ .queuenum = num, .queues_total = 1 };
		nftnl_expr_set_str(e, NFTNL_EXPR_TG_NAME, "NFQUEUE");
		nftnl_expr_set_u32(e, NFTNL_EXPR_TG_REV, 1);
		nftnl_expr_set(e, NFTNL_EXPR_TG_INFO, info, sizeof(*info));
		return;
	}
	EXPR(r, "queue");
	nftnl_expr_set_u16(e, NFTNL_EXPR_QUEUE_NUM, num);
	nftnl_expr_set_u16(e, NFTNL_EXPR_QUEUE_TOTAL, 1);
	/* no NFT_QUEUE_FLAG_BYPASS: with nobody bound, the packet is dropped */
	nftnl_expr_set_u16(e, NFTNL_EXPR_QUEUE_FLAGS, 0);
}

void kiwi_nft_masq(struct nftnl_rule *r)
{
	(void)expr(r, "masq");
}

void kiwi_nft_dnat4(struct nftnl_rule *r, uint32_t addr, uint16_t port)
{
	struct nftnl_expr *a = expr(r, "immediate"), *p = expr(r, "immediate");
	if (!a || !p)
		return;
	nftnl_expr_set_u32(a, NFTNL_EXPR_IMM_DREG, NFT_REG32_02);
	nftnl_expr_set(a, NFTNL_EXPR_IMM_DATA, &addr, 4);
	nftnl_expr_set_u32(p, NFTNL_EXPR_IMM_DREG, NFT_REG32_03);
	nftnl_expr_set(p, NFTNL_EXPR_IMM_DATA, &port, 2);
	EXPR(r, "nat");
	nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_TYPE, NFT_NAT_DNAT);
	nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_FAMILY, NFPROTO_IPV4);
	nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_REG_ADDR_MIN, NFT_REG32_02);
	nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_REG_PROTO_MIN, NFT_REG32_03);
}

/* ---- talking to the kernel ---- */

void kiwi_nft_sock_closep(struct mnl_socket **nl)
{
	if (*nl)
		mnl_socket_close(*nl);
}

struct mnl_socket *kiwi_nft_open(kiwi_err *err)
{
	struct mnl_socket *nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
	if (!nl || mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		kiwi_error(err, errno, "nftables", "cannot open an nfnetlink socket");
		if (nl)
			mnl_socket_close(nl);
		return NULL;
	}
	return nl;
}

/* The kernel handles a batch inside sendmsg, so every answer is queued by
 * the time it returns: read until the socket is empty and keep the first
 * error. An aborted batch answers only up to the failed message. */
static int read_answers(struct mnl_socket *nl)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	int first = 0;
	for (;;) {
		ssize_t got = recv(mnl_socket_get_fd(nl), buf, sizeof(buf), MSG_DONTWAIT);
		if (got < 0) {
			if (errno == EAGAIN)
				break;
			return -1;
		}
		int left = (int)got;
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; mnl_nlmsg_ok(h, left);
		     h = mnl_nlmsg_next(h, &left)) {
			const struct nlmsgerr *e = mnl_nlmsg_get_payload(h);
			if (h->nlmsg_type == NLMSG_ERROR && e->error && !first)
				first = -e->error;
		}
	}
	errno = first;
	return first ? -1 : 0;
}

int kiwi_nft_commit(struct kiwi_nft *n, struct mnl_socket *sock, kiwi_err *err)
{
	if (n->oom || !reserve(n, MSG_ROOM))
		return kiwi_error(err, ENOMEM, "nftables", "cannot build the batch for table `%s`", n->table);
	struct nlmsghdr *nlh = nftnl_batch_end(n->buf + n->len, n->seq++);
	n->len += NLMSG_ALIGN(nlh->nlmsg_len);
	_cleanup_nft_sock_ struct mnl_socket *own = sock ? NULL : kiwi_nft_open(err);
	struct mnl_socket *nl = sock ? sock : own;
	if (!nl)
		return -1;
	if (mnl_socket_sendto(nl, n->buf, n->len) < 0 || read_answers(nl) < 0)
		return kiwi_error(err, errno, "nftables", "the kernel refused the batch for table `%s`",
				  n->table);
	return 0;
}

struct table_walk {
	const char *prefix;
	void (*fn)(const char *name, void *arg);
	void *arg;
};

static int table_cb(const struct nlmsghdr *nlh, void *data)
{
	const struct table_walk *w = data;
	struct nftnl_table *t = nftnl_table_alloc();
	if (!t)
		return MNL_CB_ERROR;
	if (nftnl_table_nlmsg_parse(nlh, t) == 0) {
		const char *name = nftnl_table_get_str(t, NFTNL_TABLE_NAME);
		if (name && !strncmp(name, w->prefix, strlen(w->prefix)))
			w->fn(name, w->arg);
	}
	nftnl_table_free(t);
	return MNL_CB_OK;
}

int kiwi_nft_tables_named(int family, const char *prefix, void (*fn)(const char *name, void *arg),
			  void *arg, kiwi_err *err)
{
	_cleanup_nft_sock_ struct mnl_socket *nl = kiwi_nft_open(err);
	if (!nl)
		return -1;
	char buf[MNL_SOCKET_BUFFER_SIZE];
	uint32_t seq = (uint32_t)time(NULL);
	struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETTABLE, (uint16_t)family, NLM_F_DUMP, seq);
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return kiwi_error(err, errno, "nftables", "cannot list tables");
	struct table_walk w = { prefix, fn, arg };
	for (;;) {
		ssize_t got = mnl_socket_recvfrom(nl, buf, sizeof(buf));
		if (got < 0)
			return kiwi_error(err, errno, "nftables", "cannot list tables");
		int r = mnl_cb_run(buf, (size_t)got, seq, mnl_socket_get_portid(nl), table_cb, &w);
		if (r < 0)
			return kiwi_error(err, errno, "nftables", "cannot list tables");
		if (r == MNL_CB_STOP)
			return 0;
	}
}
