/* SPDX-License-Identifier: Apache-2.0 */
/* nfnetlink_log through libmnl: the packets an nftables `log group N` rule
 * hands to user space, read from a non-blocking netlink socket. */
#ifndef KIWI_NFLOG_H
#define KIWI_NFLOG_H

#include <stdint.h>

#include "kiwi/err.h"
#include "kiwi/json.h"

struct mnl_socket;

struct kiwi_nflog_packet {
	uint8_t family;      /* 4 or 6 */
	uint8_t proto;       /* IPPROTO_* */
	uint16_t port;       /* destination port of TCP/UDP, else 0 */
	uint8_t src[16], dst[16];  /* 4 or 16 bytes used, network order */
	char prefix[48];     /* the log rule's prefix ("" without one): its class */
};

/* Binds group in this network namespace. EBUSY: another socket has it. */
struct mnl_socket *kiwi_nflog_open(uint16_t group, kiwi_err *err);
/* Reads every packet queued now and calls fn for each; never blocks.
 * *lost grows by one for each time the kernel had to drop messages. */
int kiwi_nflog_drain(struct mnl_socket *nl, void (*fn)(const struct kiwi_nflog_packet *p, void *arg),
		     void *arg, unsigned *lost, kiwi_err *err);
/* The same on a bare socket fd (one received from the sandbox). */
int kiwi_nflog_drain_fd(int fd, void (*fn)(const struct kiwi_nflog_packet *p, void *arg), void *arg,
			unsigned *lost, kiwi_err *err);

/* Writes "proto", ["src",] "dst" and "port" (null without one) into the
 * open JSON object: the shape every packet report of the verdict shares. */
void kiwi_nflog_write_tuple(kiwi_json_writer *w, uint8_t family, uint8_t proto, const uint8_t *src,
			    const uint8_t *dst, uint16_t port);

#endif
