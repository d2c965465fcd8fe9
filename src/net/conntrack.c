/* SPDX-License-Identifier: Apache-2.0 */
/* Connection tracking, spoken through ctnetlink (kiwi/conntrack.h). A
 * sandbox's flows leave conntrack entries in the host's table that would
 * outlive it: up to nf_conntrack_tcp_timeout_established (5 days) for a
 * flow nobody closed, each counting against nf_conntrack_max, and each
 * moving a later sandbox's flow from the same source port to another port
 * at the masquerade. At the sandbox's end they are dumped (the kernel
 * filters them by source where it can, Linux 5.8) and deleted one by one:
 * ctnetlink flushes by mark or zone, never by address. */
#include "kiwi/conntrack.h"
#include "kiwi/cleanup.h"
#include "kiwi/nft.h"

#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define STEP "conntrack"
/* A tuple attribute as the kernel sends it: addresses, ports, protocol. */
#define TUPLE_MAX 256
/* The kernel's CTA_FILTER_F_CTA_IP_SRC (nf_conntrack_netlink.c), which no
 * uapi header names: match the original direction's source address. */
#define FILTER_IP_SRC (1u << 0)

struct entry {
	uint16_t len;
	bool has_zone;
	uint16_t zone;            /* as sent: big-endian */
	unsigned char tuple[TUPLE_MAX];
};

struct found {
	int family;
	const void *addr;
	size_t addr_len;
	struct entry *v;
	size_t n, max;
	bool oom;
};

/* Whether the original tuple's source is the address asked about. Each
 * level is walked, not parsed into a table: a kernel newer than our
 * headers may send attributes past their MAX. */
static bool from_source(const struct nlattr *orig, const struct found *f)
{
	uint16_t want = f->family == AF_INET ? CTA_IP_V4_SRC : CTA_IP_V6_SRC;
	const struct nlattr *t, *a;
	mnl_attr_for_each_nested(t, orig) {
		if (mnl_attr_get_type(t) != CTA_TUPLE_IP)
			continue;
		mnl_attr_for_each_nested(a, t)
			if (mnl_attr_get_type(a) == want)
				return mnl_attr_get_payload_len(a) == f->addr_len &&
				       !memcmp(mnl_attr_get_payload(a), f->addr, f->addr_len);
	}
	return false;
}

/* Room for one more entry; false when out of memory. */
static bool grow(struct found *f)
{
	if (f->n < f->max)
		return true;
	size_t max = f->max ? f->max * 2 : 16;
	struct entry *v = realloc(f->v, max * sizeof(*v));
	if (!v)
		return false;
	f->v = v;
	f->max = max;
	return true;
}

static int keep_entry(const struct nlmsghdr *nlh, void *data)
{
	struct found *f = data;
	const struct nlattr *a, *orig = NULL, *zone = NULL;
	mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg)) {
		if (mnl_attr_get_type(a) == CTA_TUPLE_ORIG)
			orig = a;
		else if (mnl_attr_get_type(a) == CTA_ZONE && mnl_attr_get_payload_len(a) == 2)
			zone = a;
	}
	if (!orig || orig->nla_len > TUPLE_MAX || !from_source(orig, f))
		return MNL_CB_OK;
	if (!grow(f)) {
		f->oom = true;
		return MNL_CB_STOP;
	}
	struct entry *e = &f->v[f->n++];
	e->len = orig->nla_len;
	memcpy(e->tuple, orig, orig->nla_len);
	e->has_zone = zone;
	e->zone = zone ? mnl_attr_get_u16(zone) : 0;
	return MNL_CB_OK;
}

static struct nlmsghdr *ct_header(char *buf, uint8_t type, uint16_t flags, int family, uint32_t seq)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = (NFNL_SUBSYS_CTNETLINK << 8) | type;
	nlh->nlmsg_flags = NLM_F_REQUEST | flags;
	nlh->nlmsg_seq = seq;
	struct nfgenmsg *g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
	g->nfgen_family = (uint8_t)family;
	g->version = NFNETLINK_V0;
	return nlh;
}

/* The kernel's own filter: the original source alone. */
static void put_filter(struct nlmsghdr *nlh, const struct found *f)
{
	struct nlattr *filter = mnl_attr_nest_start(nlh, CTA_FILTER);
	mnl_attr_put_u32(nlh, CTA_FILTER_ORIG_FLAGS, FILTER_IP_SRC);
	mnl_attr_put_u32(nlh, CTA_FILTER_REPLY_FLAGS, 0);
	mnl_attr_nest_end(nlh, filter);
	struct nlattr *orig = mnl_attr_nest_start(nlh, CTA_TUPLE_ORIG);
	struct nlattr *ip = mnl_attr_nest_start(nlh, CTA_TUPLE_IP);
	mnl_attr_put(nlh, f->family == AF_INET ? CTA_IP_V4_SRC : CTA_IP_V6_SRC, f->addr_len, f->addr);
	mnl_attr_nest_end(nlh, ip);
	mnl_attr_nest_end(nlh, orig);
}

/* One dump: 0, or -1 with errno (the kernel's answer to the request). */
static int dump(struct mnl_socket *nl, struct found *f, bool filtered)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	uint32_t seq = (uint32_t)time(NULL);
	struct nlmsghdr *nlh = ct_header(buf, IPCTNL_MSG_CT_GET, NLM_F_DUMP, f->family, seq);
	if (filtered)
		put_filter(nlh, f);
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return -1;
	unsigned portid = mnl_socket_get_portid(nl);
	for (;;) {
		ssize_t got = mnl_socket_recvfrom(nl, buf, sizeof(buf));
		if (got < 0)
			return -1;
		int r = mnl_cb_run(buf, (size_t)got, seq, portid, keep_entry, f);
		if (r < 0)
			return -1;
		if (r == MNL_CB_STOP)
			return f->oom ? (errno = ENOMEM, -1) : 0;
	}
}

/* Deletes one entry by its original tuple; one gone meanwhile is fine. */
static int forget(struct mnl_socket *nl, const struct entry *e, int family, uint32_t seq)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = ct_header(buf, IPCTNL_MSG_CT_DELETE, NLM_F_ACK, family, seq);
	memcpy(mnl_nlmsg_put_extra_header(nlh, MNL_ALIGN(e->len)), e->tuple, e->len);
	if (e->has_zone)
		mnl_attr_put_u16(nlh, CTA_ZONE, e->zone);
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return -1;
	ssize_t got = mnl_socket_recvfrom(nl, buf, sizeof(buf));
	if (got < 0 || mnl_cb_run(buf, (size_t)got, seq, mnl_socket_get_portid(nl), NULL, NULL) < 0)
		return errno == ENOENT ? 0 : -1;
	return 0;
}

/* What a kernel without ctnetlink (or conntrack) answers. */
static bool no_ctnetlink(int e)
{
	return e == EINVAL || e == EOPNOTSUPP || e == EPROTONOSUPPORT || e == ENOENT;
}

static void found_release(struct found *f)
{
	free(f->v);
}

int kiwi_ct_forget_source(int family, const void *addr, unsigned *forgotten, kiwi_err *err)
{
	*forgotten = 0;
	_cleanup_nft_sock_ struct mnl_socket *nl = kiwi_nft_open(err);
	if (!nl)
		return -1;
	_cleanup_(found_release) struct found f = { .family = family, .addr = addr,
						    .addr_len = family == AF_INET ? 4 : 16 };
	int r = dump(nl, &f, true);
	if (r < 0 && no_ctnetlink(errno)) {   /* before Linux 5.8: no filter, ours alone */
		f.n = 0;
		r = dump(nl, &f, false);
		if (r < 0 && no_ctnetlink(errno))
			return 0;
	}
	if (r < 0)
		return kiwi_error(err, errno, STEP, "cannot list the sandbox's connection-tracking entries");
	for (size_t i = 0; i < f.n; i++) {
		if (forget(nl, &f.v[i], family, (uint32_t)i + 1) < 0)
			return kiwi_error(err, errno, STEP, "cannot delete a connection-tracking entry of the sandbox");
		(*forgotten)++;
	}
	return 0;
}
