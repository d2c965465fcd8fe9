/* SPDX-License-Identifier: Apache-2.0 */
/* nfnetlink_queue over libmnl, for the name gate's kernel path (see
 * kiwi/proxy.h): one queue bound per sandbox, packets copied whole, a
 * verdict per packet. No fail-open flag and no bypass: while nothing is
 * bound to the queue (the socket closed, kiwi-run gone), the kernel
 * drops what the table queues. The parsers (the netlink messages, the
 * IPv4/TCP header, the ClientHello's bytes in sequence order) are pure
 * code over bytes, fuzzed by fuzz_nfq. */
#ifndef KIWI_NFQ_H
#define KIWI_NFQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiwi/err.h"

struct mnl_socket;

/* Binds a queue: first, else the next ones up (a queue another process
 * holds is skipped), in the caller's network namespace. Needs
 * CAP_NET_ADMIN there. The socket is non-blocking and close-on-exec. */
struct mnl_socket *kiwi_nfq_open(uint16_t first, uint16_t *num, kiwi_err *err);

struct kiwi_nfq_packet {
	uint32_t id;
	uint32_t mark;
	const uint8_t *data;   /* the network header on */
	size_t len;
};

/* Calls fn for each queued packet in buf (what one recv gave); other
 * messages are skipped. -1 when buf is malformed. */
int kiwi_nfq_parse(const void *buf, size_t len, void (*fn)(const struct kiwi_nfq_packet *pkt, void *arg),
		   void *arg);

/* NF_ACCEPT, NF_DROP or NF_REPEAT (NF_*); with_mark: the packet's mark
 * becomes mark. -1 with errno on failure. */
int kiwi_nfq_verdict(struct mnl_socket *nl, uint16_t num, uint32_t id, uint32_t verdict, bool with_mark,
		     uint32_t mark);

/* An IPv4 TCP segment, as the sandbox sent it (host byte order). */
struct kiwi_tcp4 {
	uint32_t saddr, daddr;
	uint16_t sport, dport;
	uint32_t seq;
	uint8_t flags;         /* TH_SYN, TH_ACK, TH_FIN, TH_RST... */
	const uint8_t *payload;
	size_t payload_len;
};
bool kiwi_tcp4_parse(const uint8_t *pkt, size_t len, struct kiwi_tcp4 *out);

/* The first bytes of a stream, in sequence order, as segments come:
 * next is the sequence number of the byte wanted next (the SYN's + 1). */
struct kiwi_stream_head {
	uint32_t next;
	size_t len;
	uint8_t *buf;          /* cap bytes */
	size_t cap;
};
enum kiwi_stream_take {
	KIWI_STREAM_TOOK,      /* new bytes appended (a retransmission's new tail too) */
	KIWI_STREAM_DUP,       /* nothing new: every byte was taken already */
	KIWI_STREAM_GAP,       /* starts after next: an earlier segment is missing */
	KIWI_STREAM_FULL,      /* more than cap */
	KIWI_STREAM_BAD,       /* overlaps taken bytes with other bytes */
};
enum kiwi_stream_take kiwi_stream_take(struct kiwi_stream_head *s, uint32_t seq, const uint8_t *data, size_t len);

#endif
