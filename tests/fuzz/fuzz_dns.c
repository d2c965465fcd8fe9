/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the name gate's DNS reader: the input is one
 * datagram, read both as a sandbox's query and as the upstream's answer
 * (to the query whose id and name the input's own question names).
 * Properties: never crashes; a query read gives a name that is
 * non-empty, lowercase and made of DNS name characters, and builds a
 * reply that reads back as an answer to it with the same addresses;
 * an answer read keeps at most KIWI_DNS_MAX_ADDRS distinct addresses. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kiwi/dns.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_name(const char *n)
{
	if (!n[0] || strlen(n) > KIWI_DNS_NAME_MAX)
		abort();
	for (const char *p = n; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.'))
			abort();
}

static void roundtrip(const struct kiwi_dns_query *q)
{
	uint32_t addrs[3] = { 0xcb00710a, 0xcb00710b, 0x05050505 };
	uint8_t buf[600];
	struct kiwi_dns_query a1 = *q;
	a1.qtype = KIWI_DNS_TYPE_A;
	a1.qclass = 1;
	size_t len = kiwi_dns_build_reply(buf, sizeof(buf), &a1, 0, addrs, 3, 30);
	if (!len)
		return;   /* a name too long for 512 bytes with three answers */
	struct kiwi_dns_answer ans;
	if (kiwi_dns_parse_answer(buf, len, q->id, q->name, KIWI_DNS_TYPE_A, &ans) < 0 || ans.n_addrs != 3 ||
	    ans.ttl != 30 || memcmp(ans.addrs, addrs, sizeof(addrs)))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kiwi_dns_query q;
	if (kiwi_dns_parse_query(data, size, &q) == 0) {
		check_name(q.name);
		roundtrip(&q);
	}
	/* as an answer: to the question it carries, if it carries one */
	struct kiwi_dns_query asked;
	if (size >= 12) {
		uint8_t copy[4096];
		size_t n = size < sizeof(copy) ? size : sizeof(copy);
		memcpy(copy, data, n);
		copy[2] &= 0x07;   /* read its question as a query's */
		copy[6] = copy[7] = copy[8] = copy[9] = copy[10] = copy[11] = 0;
		if (kiwi_dns_parse_query(copy, n, &asked) == 0) {
			struct kiwi_dns_answer a;
			if (kiwi_dns_parse_answer(data, size, asked.id, asked.name, asked.qtype, &a) == 0 &&
			    a.n_addrs > KIWI_DNS_MAX_ADDRS)
				abort();
		}
	}
	return 0;
}
