/* SPDX-License-Identifier: Apache-2.0 */
/* The network audit, in the sandbox's own network namespace. In nft and
 * ip terms:
 *
 *   ip addr add 192.0.0.8/32 dev lo
 *   ip route add default dev lo;  ip -6 route add default dev lo
 *   table inet kiwi_audit {
 *     chain output { type filter hook output priority 0; policy accept;
 *       ip daddr 127.0.0.0/8 accept            # the sandbox itself
 *       ip daddr 192.0.0.8 accept
 *       ip6 daddr ::1 accept
 *       log group 1 snaplen 128                # everything else: an attempt
 *       meta l4proto tcp reject with tcp reset
 *       reject with icmpx admin-prohibited } }
 *
 * Routes over lo rather than a dummy device: this host's kernel (6.18)
 * has no dummy driver at all, the 6.1 VM lane's loads it as a module, and
 * lo is in every network namespace. A packet routed over lo that got past
 * the chain would come back in on lo and be dropped as not ours; it never
 * gets that far, and no device leads anywhere else in the first place.
 * The resets and ICMP errors the chain sends go to the sandbox's own
 * addresses, so the chain's first rules let them through.
 *
 * The table has no owner (pid 1's nfnetlink socket closes before the
 * command runs) and no persist flag: it lives exactly as long as the
 * namespace. The command cannot touch it: pid 1 drops every capability
 * before the command starts. */
#include "kiwi/net_audit.h"
#include "kiwi/cleanup.h"
#include "kiwi/nflog.h"
#include "kiwi/nft.h"
#include "kiwi/rtnl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#define AUDIT_TABLE "kiwi_audit"
#define AUDIT_GROUP 1
#define AUDIT_SNAPLEN 128
/* lo is always the first device of a network namespace. */
#define LOOPBACK_IFINDEX 1

/* The fd of nl, kept open, with libmnl's wrapper freed. */
static int keep_fd(struct mnl_socket *nl, kiwi_err *err)
{
	int fd = fcntl(mnl_socket_get_fd(nl), F_DUPFD_CLOEXEC, 3);
	mnl_socket_close(nl);
	if (fd < 0)
		return kiwi_error(err, errno, "netaudit", "cannot keep a netlink socket");
	return fd;
}

#define RULE(n, ...)                                                 \
	do {                                                         \
		struct nftnl_rule *r = kiwi_nft_rule(n, "output");   \
		__VA_ARGS__;                                         \
		kiwi_nft_add_rule(n, r);                             \
	} while (0)

static void match_family(struct nftnl_rule *r, uint8_t nfproto)
{
	kiwi_nft_meta(r, NFT_META_NFPROTO);
	kiwi_nft_cmp_u8(r, NFT_CMP_EQ, nfproto);
}

static void output_chain(struct kiwi_nft *n)
{
	static const struct in6_addr lo6 = IN6ADDR_LOOPBACK_INIT;
	kiwi_nft_add_chain(n, "output", "filter", NF_INET_LOCAL_OUT, 0);
	RULE(n, {
		match_family(r, NFPROTO_IPV4);
		kiwi_nft_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 16, 4, NFT_REG_1);
		kiwi_nft_and(r, htonl(0xff000000));
		kiwi_nft_cmp_u32(r, NFT_CMP_EQ, htonl(0x7f000000));
		kiwi_nft_verdict(r, NF_ACCEPT, NULL);
	});
	RULE(n, {
		match_family(r, NFPROTO_IPV4);
		kiwi_nft_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 16, 4, NFT_REG_1);
		kiwi_nft_cmp_u32(r, NFT_CMP_EQ, htonl(KIWI_NET_AUDIT_SRC4));
		kiwi_nft_verdict(r, NF_ACCEPT, NULL);
	});
	RULE(n, {
		match_family(r, NFPROTO_IPV6);
		kiwi_nft_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 24, 16, NFT_REG_1);
		kiwi_nft_cmp(r, NFT_CMP_EQ, &lo6, sizeof(lo6));
		kiwi_nft_verdict(r, NF_ACCEPT, NULL);
	});
	RULE(n, { kiwi_nft_log(r, AUDIT_GROUP, AUDIT_SNAPLEN, NULL); });
	RULE(n, {
		kiwi_nft_meta(r, NFT_META_L4PROTO);
		kiwi_nft_cmp_u8(r, NFT_CMP_EQ, IPPROTO_TCP);
		kiwi_nft_reject(r, NFT_REJECT_TCP_RST, 0);
	});
	RULE(n, { kiwi_nft_reject(r, NFT_REJECT_ICMPX_UNREACH, NFT_REJECT_ICMPX_ADMIN_PROHIBITED); });
}

/* Closing an nfnetlink socket right after a commit waits for an RCU grace
 * period (see kiwi_nft_open()), 10-20 ms on the command's start. So the
 * socket stays open as *parked: pid 1 closes every fd it holds once the
 * command runs. */
static int build_table(int *parked, kiwi_err *err)
{
	_cleanup_nft_ struct kiwi_nft *n = kiwi_nft_begin(NFPROTO_INET, AUDIT_TABLE, err);
	if (!n)
		return -1;
	kiwi_nft_add_table(n, 0);
	output_chain(n);
	_cleanup_nft_sock_ struct mnl_socket *nl = kiwi_nft_open(err);
	if (!nl || kiwi_nft_commit(n, nl, err) < 0)
		return -1;
	*parked = keep_fd(TAKE_PTR(nl), err);
	return *parked < 0 ? -1 : 0;
}

int kiwi_net_audit_setup(kiwi_err *err)
{
	__attribute__((cleanup(kiwi_rtnl_closep))) struct mnl_socket *rtnl = kiwi_rtnl_open(err);
	if (!rtnl)
		return kiwi_error_wrap(err, "network audit");
	/* No IPv6 in this kernel (ipv6.disable=1): an IPv6 socket cannot even
	 * be made, so there is nothing to route. */
	bool ipv6 = access("/proc/sys/net/ipv6", F_OK) == 0;
	if (kiwi_rtnl_default_via(rtnl, LOOPBACK_IFINDEX, KIWI_NET_AUDIT_SRC4, ipv6, err) < 0)
		return kiwi_error_wrap(err, "network audit");
	/* The log's reader exists before the first rule that logs. */
	struct mnl_socket *log = kiwi_nflog_open(AUDIT_GROUP, err);
	if (!log)
		return kiwi_error_wrap(err, "network audit");
	_cleanup_close_ int log_fd = keep_fd(log, err);
	int parked = -1;
	if (log_fd < 0 || build_table(&parked, err) < 0)
		return kiwi_error_wrap(err, "network audit");
	(void)parked;  /* closed with the rest of pid 1's fds, after exec */
	return TAKE_FD(log_fd);
}

/* ---- parent side ---- */

void kiwi_net_attempts_add(struct kiwi_net_attempts *a, uint8_t family, uint8_t proto, const uint8_t *dst,
			   uint16_t port)
{
	size_t alen = family == 6 ? 16 : 4;
	a->total++;
	for (size_t i = 0; i < a->n; i++) {
		struct kiwi_net_attempt *t = &a->first[i];
		if (t->family == family && t->proto == proto && t->port == port && !memcmp(t->dst, dst, alen)) {
			t->count++;
			return;
		}
	}
	if (a->n == KIWI_NET_AUDIT_KEEP)
		return;
	struct kiwi_net_attempt *t = &a->first[a->n++];
	*t = (struct kiwi_net_attempt){ .family = family, .proto = proto, .port = port, .count = 1 };
	memcpy(t->dst, dst, alen);
}

static void tally(const struct kiwi_nflog_packet *p, void *arg)
{
	kiwi_net_attempts_add(arg, p->family, p->proto, p->dst, p->port);
}

int kiwi_net_audit_drain(int fd, struct kiwi_net_attempts *a, kiwi_err *err)
{
	unsigned lost = 0;
	int r = kiwi_nflog_drain_fd(fd, tally, a, &lost, err);
	a->lost += lost;
	/* Each drop lost one or more attempts: at least one each. */
	a->total += lost;
	return r;
}

void kiwi_net_audit_write_verdict(kiwi_json_writer *w, const struct kiwi_net_attempts *a)
{
	kiwi_jw_key(w, "network_attempted");
	kiwi_jw_bool(w, a->total > 0);
	kiwi_jw_key(w, "network_attempt_count");
	kiwi_jw_int(w, (long long)a->total);
	kiwi_jw_key(w, "network_attempts");
	kiwi_jw_open_array(w);
	for (size_t i = 0; i < a->n; i++) {
		const struct kiwi_net_attempt *t = &a->first[i];
		kiwi_jw_open_object(w);
		kiwi_nflog_write_tuple(w, t->family, t->proto, NULL, t->dst, t->port);
		kiwi_jw_key(w, "count");
		kiwi_jw_int(w, (long long)t->count);
		kiwi_jw_close_object(w);
	}
	kiwi_jw_close_array(w);
}
