/* SPDX-License-Identifier: Apache-2.0 */
/* The name gate's pure parts: DNS messages, the name a connection's
 * first bytes carry, allowlist patterns. The gate itself is tested in
 * tests/net/test_names.py. */
#include <criterion/criterion.h>
#include <string.h>

#include "kiwi/dns.h"
#include "kiwi/egress.h"
#include "kiwi/sni.h"

static const uint8_t query_a[] = { 0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0,
				   4, 'G', 'o', 'o', 'd', 4, 't', 'e', 's', 't', 0, 0, 1, 0, 1 };

Test(dns, query_lowercase_and_reply_roundtrip)
{
	struct kiwi_dns_query q;
	cr_assert_eq(kiwi_dns_parse_query(query_a, sizeof(query_a), &q), 0);
	cr_assert_str_eq(q.name, "good.test");
	cr_assert_eq(q.qtype, KIWI_DNS_TYPE_A);
	uint8_t buf[512];
	uint32_t addrs[] = { 0xcb00710a, 0xcb00710b };
	size_t len = kiwi_dns_build_reply(buf, sizeof(buf), &q, 0, addrs, 2, 45);
	struct kiwi_dns_answer a;
	cr_assert_eq(kiwi_dns_parse_answer(buf, len, 0x1234, "good.test", KIWI_DNS_TYPE_A, &a), 0);
	cr_assert_eq(a.n_addrs, 2);
	cr_assert_eq(a.ttl, 45);
	cr_assert_eq(kiwi_dns_parse_answer(buf, len, 0x1235, "good.test", KIWI_DNS_TYPE_A, &a), -1, "another id");
	cr_assert_eq(kiwi_dns_parse_answer(buf, len, 0x1234, "evil.test", KIWI_DNS_TYPE_A, &a), -1, "another name");
}

Test(dns, label_with_a_dot_or_nul_is_refused)
{
	/* "good.test" as ONE label would read as the two-label name */
	uint8_t q[sizeof(query_a)];
	memcpy(q, query_a, sizeof(q));
	uint8_t one[] = { 0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0,
			  9, 'g', 'o', 'o', 'd', '.', 't', 'e', 's', 't', 0, 0, 1, 0, 1 };
	struct kiwi_dns_query out;
	cr_assert_eq(kiwi_dns_parse_query(one, sizeof(one), &out), -1);
	q[14] = 0;
	cr_assert_eq(kiwi_dns_parse_query(q, sizeof(q), &out), -1);
}

Test(dns, pointer_loop_ends)
{
	uint8_t loop[] = { 0, 1, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1 };
	struct kiwi_dns_answer a;
	cr_assert_eq(kiwi_dns_parse_answer(loop, sizeof(loop), 1, "x", KIWI_DNS_TYPE_A, &a), -1);
}

Test(dns, too_many_addresses_refuse_the_whole_answer)
{
	struct kiwi_dns_query q;
	kiwi_dns_parse_query(query_a, sizeof(query_a), &q);
	uint32_t addrs[KIWI_DNS_MAX_ADDRS + 1];
	for (size_t i = 0; i < KIWI_DNS_MAX_ADDRS + 1; i++)
		addrs[i] = 0x05050500 + (uint32_t)i;
	uint8_t buf[1024];
	size_t len = kiwi_dns_build_reply(buf, sizeof(buf), &q, 0, addrs, KIWI_DNS_MAX_ADDRS + 1, 60);
	struct kiwi_dns_answer a;
	cr_assert_eq(kiwi_dns_parse_answer(buf, len, 0x1234, "good.test", KIWI_DNS_TYPE_A, &a), -1);
}

static size_t hello(uint8_t *m, const char *sni, int ech)
{
	uint8_t *h = m + 5;
	size_t o = 4, e = 0, l = sni ? strlen(sni) : 0;
	h[o++] = 3, h[o++] = 3;
	memset(h + o, 0x42, 32), o += 32;
	h[o++] = 0;
	h[o++] = 0, h[o++] = 2, h[o++] = 0x13, h[o++] = 1;
	h[o++] = 1, h[o++] = 0;
	uint8_t *x = h + o + 2;
	if (sni) {
		uint8_t s[] = { 0, 0, 0, (uint8_t)(l + 5), 0, (uint8_t)(l + 3), 0, 0, (uint8_t)l };
		memcpy(x, s, sizeof(s)), e += sizeof(s);
		memcpy(x + e, sni, l), e += l;
	}
	if (ech) {
		uint8_t s[] = { 0xfe, 0x0d, 0, 1, 0 };
		memcpy(x + e, s, sizeof(s)), e += sizeof(s);
	}
	h[o] = (uint8_t)(e >> 8), h[o + 1] = (uint8_t)e, o += 2 + e;
	h[0] = 1, h[1] = 0, h[2] = (uint8_t)((o - 4) >> 8), h[3] = (uint8_t)(o - 4);
	m[0] = 22, m[1] = 3, m[2] = 1, m[3] = (uint8_t)(o >> 8), m[4] = (uint8_t)o;
	return o + 5;
}

Test(sni, client_hello)
{
	uint8_t m[512];
	char name[KIWI_SNI_NAME_MAX + 1];
	size_t len = hello(m, "Good.Test.", 0);
	cr_assert_eq(kiwi_sni_read(m, len, name), KIWI_SNI_NAME);
	cr_assert_str_eq(name, "good.test");
	for (size_t cut = 0; cut < len; cut++)
		cr_assert_eq(kiwi_sni_read(m, cut, name), KIWI_SNI_MORE, "at %zu", cut);
	cr_assert_eq(kiwi_sni_read(m, hello(m, NULL, 0), name), KIWI_SNI_NO_NAME);
	cr_assert_eq(kiwi_sni_read(m, hello(m, "good.test", 1), name), KIWI_SNI_ECH);
	cr_assert_eq(kiwi_sni_read(m, hello(m, "bad name", 0), name), KIWI_SNI_BAD);
}

Test(sni, http_host)
{
	char name[KIWI_SNI_NAME_MAX + 1];
	const char *ok = "GET / HTTP/1.1\r\nAccept: */*\r\nHOST:  Good.test:8080 \r\n\r\n";
	cr_assert_eq(kiwi_sni_read((const uint8_t *)ok, strlen(ok), name), KIWI_SNI_NAME);
	cr_assert_str_eq(name, "good.test");
	cr_assert_eq(kiwi_sni_read((const uint8_t *)ok, strlen(ok) - 2, name), KIWI_SNI_MORE);
	const char *two = "GET / HTTP/1.1\r\nHost: good.test\r\nHost: evil.test\r\n\r\n";
	cr_assert_eq(kiwi_sni_read((const uint8_t *)two, strlen(two), name), KIWI_SNI_BAD, "two Host headers");
	const char *none = "GET / HTTP/1.0\r\n\r\n";
	cr_assert_eq(kiwi_sni_read((const uint8_t *)none, strlen(none), name), KIWI_SNI_NO_NAME);
	cr_assert_eq(kiwi_sni_read((const uint8_t *)"SSH-2.0-x\r\n", 11, name), KIWI_SNI_BAD);
}

Test(names, patterns)
{
	struct kiwi_egress_host exact = { "registry.example", 0 }, wild = { "*.Example.org", 0 },
				addr = { "203.0.113.10", 0 };
	cr_assert(kiwi_egress_host_matches(&exact, "registry.example"));
	cr_assert_not(kiwi_egress_host_matches(&exact, "x.registry.example"));
	cr_assert(kiwi_egress_host_matches(&wild, "a.example.org"));
	cr_assert(kiwi_egress_host_matches(&wild, "a.b.example.org"));
	cr_assert_not(kiwi_egress_host_matches(&wild, "example.org"));
	cr_assert_not(kiwi_egress_host_matches(&wild, "badexample.org"));
	cr_assert_not(kiwi_egress_host_matches(&addr, "203.0.113.10"), "an address is not a name");
	cr_assert(kiwi_egress_host_is_addr(&addr));
}
