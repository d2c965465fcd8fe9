/* SPDX-License-Identifier: Apache-2.0 */
#include "kiwi/nflog.h"
#include "kiwi/nlmsg.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* Enough for the IP header and the first bytes of TCP or UDP. */
#define NFLOG_COPY 128
#define NFLOG_RCVBUF (1 << 20)

static int config(struct mnl_socket *nl, uint16_t group, uint8_t cmd)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = (uint32_t)time(NULL);
	struct nfgenmsg *nfg = mnl_nlmsg_put_extra_header(nlh, sizeof(*nfg));
	nfg->nfgen_family = AF_UNSPEC;
	nfg->version = NFNETLINK_V0;
	nfg->res_id = htons(group);
	struct nfulnl_msg_config_cmd c = { .command = cmd };
	mnl_attr_put(nlh, NFULA_CFG_CMD, sizeof(c), &c);
	struct nfulnl_msg_config_mode m = { .copy_range = htonl(NFLOG_COPY), .copy_mode = NFULNL_COPY_PACKET };
	mnl_attr_put(nlh, NFULA_CFG_MODE, sizeof(m), &m);
	/* The kernel batches 100 packets or 1 s by default: a verdict written
	 * right after the command would miss its last denied attempts. */
	mnl_attr_put_u32(nlh, NFULA_CFG_QTHRESH, htonl(1));
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return -1;
	ssize_t got = mnl_socket_recvfrom(nl, buf, sizeof(buf));
	if (got < 0)
		return -1;
	return mnl_cb_run(buf, (size_t)got, nlh->nlmsg_seq, mnl_socket_get_portid(nl), NULL, NULL) < 0 ? -1 : 0;
}

struct mnl_socket *kiwi_nflog_open(uint16_t group, kiwi_err *err)
{
	struct mnl_socket *nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
	if (!nl) {
		kiwi_error(err, errno, "nflog", "cannot open an nfnetlink socket");
		return NULL;
	}
	int fd = mnl_socket_get_fd(nl), size = NFLOG_RCVBUF;
	/* A sandbox that floods should cost it log lines, not us memory. */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0 || config(nl, group, NFULNL_CFG_CMD_BIND) < 0) {
		kiwi_error(err, errno, "nflog", "cannot bind log group %u", group);
		mnl_socket_close(nl);
		return NULL;
	}
	return nl;
}

static void parse_l4(struct kiwi_nflog_packet *p, const uint8_t *l4, size_t len)
{
	if ((p->proto == IPPROTO_TCP || p->proto == IPPROTO_UDP) && len >= 4)
		p->port = (uint16_t)(l4[2] << 8 | l4[3]);
}

/* The payload starts at the network header. Fragments after the first
 * carry no ports; IPv6 extension headers are not walked (the packet is
 * denied anyway, only the audit's port would be missing). */
static int parse_packet(struct kiwi_nflog_packet *p, const uint8_t *d, size_t len)
{
	memset(p, 0, sizeof(*p));
	if (len >= 20 && d[0] >> 4 == 4) {
		size_t ihl = (size_t)(d[0] & 0xf) * 4;
		p->family = 4;
		p->proto = d[9];
		memcpy(p->src, d + 12, 4);
		memcpy(p->dst, d + 16, 4);
		bool first = ((d[6] & 0x1f) << 8 | d[7]) == 0;
		if (first && ihl >= 20 && len > ihl)
			parse_l4(p, d + ihl, len - ihl);
		return 0;
	}
	if (len >= 40 && d[0] >> 4 == 6) {
		p->family = 6;
		p->proto = d[6];
		memcpy(p->src, d + 8, 16);
		memcpy(p->dst, d + 24, 16);
		parse_l4(p, d + 40, len - 40);
		return 0;
	}
	return -1;
}

struct drain {
	void (*fn)(const struct kiwi_nflog_packet *p, void *arg);
	void *arg;
};

static int on_message(const struct nlmsghdr *nlh, void *arg)
{
	const struct drain *d = arg;
	if (nlh->nlmsg_type != (NFNL_SUBSYS_ULOG << 8 | NFULNL_MSG_PACKET))
		return 0;
	const struct nlattr *attr, *payload = NULL, *prefix = NULL;
	mnl_attr_for_each(attr, nlh, sizeof(struct nfgenmsg)) {
		if (mnl_attr_get_type(attr) == NFULA_PAYLOAD)
			payload = attr;
		else if (mnl_attr_get_type(attr) == NFULA_PREFIX)
			prefix = attr;
	}
	struct kiwi_nflog_packet p;
	if (!payload || parse_packet(&p, mnl_attr_get_payload(payload), mnl_attr_get_payload_len(payload)) < 0)
		return 0;
	if (prefix) {
		/* the kernel sends it NUL-terminated; not trusted to be */
		size_t n = mnl_attr_get_payload_len(prefix);
		n = n < sizeof(p.prefix) ? n : sizeof(p.prefix) - 1;
		memcpy(p.prefix, mnl_attr_get_payload(prefix), n);
		p.prefix[n] = '\0';
	}
	d->fn(&p, d->arg);
	return 0;
}

int kiwi_nflog_drain_fd(int fd, void (*fn)(const struct kiwi_nflog_packet *p, void *arg), void *arg,
			unsigned *lost, kiwi_err *err)
{
	/* Aligned for the headers; the spare bytes at the end keep libmnl's
	 * attribute walk, which rounds a message's end up to 4, inside. */
	char buf[MNL_SOCKET_BUFFER_SIZE * 2 + NLMSG_ALIGNTO] __attribute__((aligned(8)));
	struct drain d = { fn, arg };
	for (;;) {
		ssize_t got = recv(fd, buf, sizeof(buf) - NLMSG_ALIGNTO, MSG_DONTWAIT);
		if (got < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return 0;
			if (errno == ENOBUFS) {
				(*lost)++;
				continue;
			}
			return kiwi_error(err, errno, "nflog", "cannot read the packet log");
		}
		if (kiwi_nlmsg_each(buf, (size_t)got, on_message, &d) < 0)
			return kiwi_error(err, errno, "nflog", "malformed packet log message");
	}
}

int kiwi_nflog_drain(struct mnl_socket *nl, void (*fn)(const struct kiwi_nflog_packet *p, void *arg),
		     void *arg, unsigned *lost, kiwi_err *err)
{
	return kiwi_nflog_drain_fd(mnl_socket_get_fd(nl), fn, arg, lost, err);
}

static const char *proto_name(uint8_t proto, char buf[8])
{
	switch (proto) {
	case IPPROTO_TCP: return "tcp";
	case IPPROTO_UDP: return "udp";
	case IPPROTO_ICMP: return "icmp";
	case IPPROTO_ICMPV6: return "icmpv6";
	default:
		snprintf(buf, 8, "%u", proto);
		return buf;
	}
}

void kiwi_nflog_write_tuple(kiwi_json_writer *w, uint8_t family, uint8_t proto, const uint8_t *src,
			    const uint8_t *dst, uint16_t port)
{
	char a[INET6_ADDRSTRLEN], pn[8];
	int af = family == 6 ? AF_INET6 : AF_INET;
	kiwi_jw_key(w, "proto");
	kiwi_jw_string(w, proto_name(proto, pn));
	if (src) {
		kiwi_jw_key(w, "src");
		kiwi_jw_string(w, inet_ntop(af, src, a, sizeof(a)));
	}
	kiwi_jw_key(w, "dst");
	kiwi_jw_string(w, inet_ntop(af, dst, a, sizeof(a)));
	kiwi_jw_key(w, "port");
	if (port)
		kiwi_jw_int(w, port);
	else
		kiwi_jw_null(w);
}
