/* SPDX-License-Identifier: Apache-2.0 */
/* DNS messages (RFC 1035), as much as kiwi-run's own resolver for a
 * sandbox needs: a sandbox's query read, a query to the upstream built,
 * the upstream's answer read (its A records and their least TTL), and
 * the answer to the sandbox built. Pure code over bytes, fuzzed by
 * fuzz_dns. Names come out lowercase, without the final dot, and only
 * when every label is letters, digits, '-' or '_' (a label holding a dot
 * or a NUL would read as another name). */
#ifndef KIWI_DNS_H
#define KIWI_DNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KIWI_DNS_NAME_MAX 253
#define KIWI_DNS_MAX_ADDRS 16
#define KIWI_DNS_TYPE_A 1
#define KIWI_DNS_TYPE_AAAA 28
#define KIWI_DNS_NOERROR 0
#define KIWI_DNS_SERVFAIL 2
#define KIWI_DNS_NXDOMAIN 3
#define KIWI_DNS_REFUSED 5

struct kiwi_dns_query {
	uint16_t id, flags;
	uint16_t qtype, qclass;
	char name[KIWI_DNS_NAME_MAX + 1];
};

struct kiwi_dns_answer {
	uint16_t id;
	uint8_t rcode;
	bool truncated;
	size_t n_addrs;
	uint32_t addrs[KIWI_DNS_MAX_ADDRS];  /* host byte order, distinct */
	uint32_t ttl;                        /* least TTL of those A records */
};

/* A standard query with exactly one question; -1 otherwise. */
int kiwi_dns_parse_query(const uint8_t *msg, size_t len, struct kiwi_dns_query *q);
/* A response to the query (id, name, type) made by kiwi_dns_build_query:
 * -1 when it is not one. A records of class IN anywhere in the answer
 * section count (the owner may be a CNAME's target). */
int kiwi_dns_parse_answer(const uint8_t *msg, size_t len, uint16_t id, const char *name, uint16_t qtype,
			  struct kiwi_dns_answer *a);
/* Returns the length written, 0 when cap is too small. */
size_t kiwi_dns_build_query(uint8_t *buf, size_t cap, uint16_t id, const char *name, uint16_t qtype);
/* The answer to q: rcode, and the A records addrs (host order) with ttl. */
size_t kiwi_dns_build_reply(uint8_t *buf, size_t cap, const struct kiwi_dns_query *q, uint8_t rcode,
			    const uint32_t *addrs, size_t n, uint32_t ttl);

#endif
