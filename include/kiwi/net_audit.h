/* SPDX-License-Identifier: Apache-2.0 */
/* The network audit (--network audit): the sandbox still has no way out,
 * but every packet its code tries to send leaves a trace. With no route a
 * connect() fails inside the routing code and nothing can be seen, so the
 * sandbox's own network namespace gets default routes over lo (IPv4 and
 * IPv6) and an nftables table whose output chain passes what is addressed
 * to the sandbox itself and logs every other packet to an NFLOG group,
 * then rejects it at once (TCP reset, ICMP administratively prohibited):
 * tools fail fast instead of timing out.
 *
 * Pid 1 sets it up while it still holds CAP_NET_ADMIN in the sandbox's
 * user namespace and hands the NFLOG socket to the parent, which reads it
 * while the command runs. The table and the routes live and die with the
 * namespace: nothing is made on the host. */
#ifndef KIWI_NET_AUDIT_H
#define KIWI_NET_AUDIT_H

#include <stddef.h>
#include <stdint.h>

#include "kiwi/err.h"
#include "kiwi/json.h"

/* Distinct attempts kept, in the order first seen; the count goes on. */
#define KIWI_NET_AUDIT_KEEP 16

/* The source address the sandbox's packets get, on lo: RFC 7600's IPv4
 * dummy address, meant for hosts that have no other. Without an address
 * that is not loopback an IPv4 packet would leave from 0.0.0.0 and the
 * TCP reset could never find its socket. */
#define KIWI_NET_AUDIT_SRC4 0xc0000008u  /* 192.0.0.8 */

struct kiwi_net_attempt {
	uint8_t family;           /* 4 or 6 */
	uint8_t proto;            /* IPPROTO_* */
	uint16_t port;            /* TCP or UDP destination port, else 0 */
	uint8_t dst[16];          /* 4 or 16 bytes used, network order */
	uint64_t count;           /* packets with this (proto, dst, port) */
};

struct kiwi_net_attempts {
	uint64_t total;           /* every packet logged (at least: see lost) */
	uint64_t lost;            /* times the kernel dropped log messages */
	size_t n;
	struct kiwi_net_attempt first[KIWI_NET_AUDIT_KEEP];
};

/* Child side: pid 1, in the sandbox's network namespace with lo up and
 * CAP_NET_ADMIN. Adds the routes and the table and returns the NFLOG
 * socket's fd (close-on-exec) for the parent, or -1 with err set. */
int kiwi_net_audit_setup(kiwi_err *err);

/* Counts one attempt into a (the first KIWI_NET_AUDIT_KEEP distinct ones
 * kept): the audit's tally, shared with the egress audit. */
void kiwi_net_attempts_add(struct kiwi_net_attempts *a, uint8_t family, uint8_t proto, const uint8_t *dst,
			   uint16_t port);

/* Parent side: reads every log message queued on fd now into a; never
 * blocks. */
int kiwi_net_audit_drain(int fd, struct kiwi_net_attempts *a, kiwi_err *err);

/* Writes "network_attempted", "network_attempt_count" and
 * "network_attempts" (keys and values) into the open verdict object. */
void kiwi_net_audit_write_verdict(kiwi_json_writer *w, const struct kiwi_net_attempts *a);

#endif
