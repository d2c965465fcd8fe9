/* SPDX-License-Identifier: Apache-2.0 */
/* nfnetlink_queue: see include/kiwi/nfq.h. */
#include "kiwi/nfq.h"
#include "kiwi/nft.h"
#include "kiwi/nlmsg.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* Only a flow's first packets are queued (its handshake and its
 * ClientHello): copied whole, up to an IPv4 packet's size. */
#define NFQ_COPY 0xffff
#define NFQ_MAXLEN 1024
#define NFQ_RCVBUF (4 << 20)
#define NFQ_TRIES 64

static struct nlmsghdr *header(char *buf, uint16_t type, uint16_t num)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = (NFNL_SUBSYS_QUEUE << 8) | type;
	nlh->nlmsg_flags = NLM_F_REQUEST;
	struct nfgenmsg *nfg = mnl_nlmsg_put_extra_header(nlh, sizeof(*nfg));
	nfg->nfgen_family = AF_UNSPEC;
	nfg->version = NFNETLINK_V0;
	nfg->res_id = htons(num);
	return nlh;
}

/* 0, or the kernel's errno: EPERM when another socket holds the queue
 * (or we lack CAP_NET_ADMIN), EBUSY when we hold it already. */
static int bind_queue(struct mnl_socket *nl, uint16_t num)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = header(buf, NFQNL_MSG_CONFIG, num);
	nlh->nlmsg_flags |= NLM_F_ACK;
	nlh->nlmsg_seq = (uint32_t)time(NULL);
	struct nfqnl_msg_config_cmd cmd = { .command = NFQNL_CFG_CMD_BIND };
	mnl_attr_put(nlh, NFQA_CFG_CMD, sizeof(cmd), &cmd);
	struct nfqnl_msg_config_params params = { .copy_range = htonl(NFQ_COPY), .copy_mode = NFQNL_COPY_PACKET };
	mnl_attr_put(nlh, NFQA_CFG_PARAMS, sizeof(params), &params);
	mnl_attr_put_u32(nlh, NFQA_CFG_QUEUE_MAXLEN, htonl(NFQ_MAXLEN));
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return errno;
	ssize_t got = mnl_socket_recvfrom(nl, buf, sizeof(buf));
	if (got < 0)
		return errno;
	if (mnl_cb_run(buf, (size_t)got, nlh->nlmsg_seq, mnl_socket_get_portid(nl), NULL, NULL) < 0)
		return errno ? errno : EPROTO;
	return 0;
}

struct mnl_socket *kiwi_nfq_open(uint16_t first, uint16_t *num, kiwi_err *err)
{
	struct mnl_socket *nl = kiwi_nft_open(err);
	if (!nl) {
		kiwi_error_wrap(err, "the name gate's queue");
		return NULL;
	}
	int fd = mnl_socket_get_fd(nl), size = NFQ_RCVBUF, one = 1;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
	/* an overrun drops packets (the kernel's, fail closed), never the loop */
	setsockopt(fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &one, sizeof(one));
	int r = EPERM;
	/* another sandbox's (or program's) queue answers EPERM: try the next */
	for (unsigned i = 0; i < NFQ_TRIES && r == EPERM; i++) {
		*num = (uint16_t)(first + i);
		r = bind_queue(nl, *num);
	}
	if (r || fcntl(fd, F_SETFL, O_NONBLOCK) < 0) {
		kiwi_error(err, r ? r : errno, "egress", "cannot bind a queue for the name gate (tried %u from %u)",
			   NFQ_TRIES, first);
		mnl_socket_close(nl);
		return NULL;
	}
	return nl;
}

struct parse_ctx {
	void (*fn)(const struct kiwi_nfq_packet *pkt, void *arg);
	void *arg;
};

static int attr_cb(const struct nlattr *a, void *data)
{
	const struct nlattr **tb = data;
	uint16_t type = mnl_attr_get_type(a);
	if (type <= NFQA_MAX)
		tb[type] = a;
	return MNL_CB_OK;
}

static int packet_cb(const struct nlmsghdr *nlh, void *data)
{
	struct parse_ctx *c = data;
	if ((nlh->nlmsg_type & 0xff) != NFQNL_MSG_PACKET || (nlh->nlmsg_type >> 8) != NFNL_SUBSYS_QUEUE)
		return 0;
	const struct nlattr *tb[NFQA_MAX + 1] = { 0 };
	if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof(struct nfgenmsg)) ||
	    mnl_attr_parse(nlh, sizeof(struct nfgenmsg), attr_cb, tb) < 0)
		return -1;
	if (!tb[NFQA_PACKET_HDR] || mnl_attr_get_payload_len(tb[NFQA_PACKET_HDR]) < sizeof(struct nfqnl_msg_packet_hdr))
		return -1;
	struct nfqnl_msg_packet_hdr ph;
	memcpy(&ph, mnl_attr_get_payload(tb[NFQA_PACKET_HDR]), sizeof(ph));
	struct kiwi_nfq_packet p = { .id = ntohl(ph.packet_id) };
	if (tb[NFQA_MARK] && mnl_attr_get_payload_len(tb[NFQA_MARK]) >= 4)
		p.mark = ntohl(mnl_attr_get_u32(tb[NFQA_MARK]));
	if (tb[NFQA_PAYLOAD]) {
		p.data = mnl_attr_get_payload(tb[NFQA_PAYLOAD]);
		p.len = mnl_attr_get_payload_len(tb[NFQA_PAYLOAD]);
	}
	c->fn(&p, c->arg);
	return 0;
}

int kiwi_nfq_parse(const void *buf, size_t len, void (*fn)(const struct kiwi_nfq_packet *pkt, void *arg), void *arg)
{
	struct parse_ctx c = { fn, arg };
	return kiwi_nlmsg_each(buf, len, packet_cb, &c);
}

int kiwi_nfq_verdict(struct mnl_socket *nl, uint16_t num, uint32_t id, uint32_t verdict, bool with_mark,
		     uint32_t mark)
{
	char buf[256];
	struct nlmsghdr *nlh = header(buf, NFQNL_MSG_VERDICT, num);
	struct nfqnl_msg_verdict_hdr v = { .verdict = htonl(verdict), .id = htonl(id) };
	mnl_attr_put(nlh, NFQA_VERDICT_HDR, sizeof(v), &v);
	if (with_mark)
		mnl_attr_put_u32(nlh, NFQA_MARK, htonl(mark));
	return mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0 ? -1 : 0;
}

bool kiwi_tcp4_parse(const uint8_t *p, size_t len, struct kiwi_tcp4 *out)
{
	if (len < 20 || p[0] >> 4 != 4 || p[9] != IPPROTO_TCP)
		return false;
	size_t ihl = (size_t)(p[0] & 15) * 4, total = (size_t)p[2] << 8 | p[3];
	/* a fragment has no TCP header of its own to trust (conntrack
	 * reassembles before the table sees one, so none comes here) */
	if (ihl < 20 || total < ihl + 20 || total > len || ((p[6] & 0x3f) | p[7]))
		return false;
	const uint8_t *t = p + ihl;
	size_t doff = (size_t)(t[12] >> 4) * 4;
	if (doff < 20 || ihl + doff > total)
		return false;
	*out = (struct kiwi_tcp4){
		.saddr = (uint32_t)p[12] << 24 | (uint32_t)p[13] << 16 | (uint32_t)p[14] << 8 | p[15],
		.daddr = (uint32_t)p[16] << 24 | (uint32_t)p[17] << 16 | (uint32_t)p[18] << 8 | p[19],
		.sport = (uint16_t)(t[0] << 8 | t[1]),
		.dport = (uint16_t)(t[2] << 8 | t[3]),
		.seq = (uint32_t)t[4] << 24 | (uint32_t)t[5] << 16 | (uint32_t)t[6] << 8 | t[7],
		.flags = t[13],
		.payload = t + doff,
		.payload_len = total - ihl - doff,
	};
	return true;
}

enum kiwi_stream_take kiwi_stream_take(struct kiwi_stream_head *s, uint32_t seq, const uint8_t *data, size_t len)
{
	/* sequence space wraps: compare by signed distance */
	int32_t ahead = (int32_t)(seq - s->next);
	if (ahead > 0)
		return KIWI_STREAM_GAP;
	size_t skip = (size_t)-(int64_t)ahead;
	if (skip >= len)
		return KIWI_STREAM_DUP;   /* dropped: it never reaches the server */
	/* A retransmission with new bytes after old ones goes on whole: the
	 * old part must be the bytes checked, whichever copy the server
	 * keeps. */
	if (skip > s->len || memcmp(s->buf + s->len - skip, data, skip))
		return KIWI_STREAM_BAD;
	size_t add = len - skip;
	if (add > s->cap - s->len)
		return KIWI_STREAM_FULL;
	memcpy(s->buf + s->len, data + skip, add);
	s->len += add;
	s->next += (uint32_t)add;
	return KIWI_STREAM_TOOK;
}
