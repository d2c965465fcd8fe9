/* SPDX-License-Identifier: Apache-2.0 */
/* The egress policy's pure parts: flag parsing, address classes, range
 * merging. The kernel side is tested in tests/net. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kiwi/egress.h"
#include "kiwi/nft.h"

static uint32_t ip(const char *s)
{
	struct in_addr a;
	cr_assert_eq(inet_pton(AF_INET, s, &a), 1, "%s", s);
	return ntohl(a.s_addr);
}

static struct kiwi_egress_config cfg(void)
{
	struct kiwi_egress_config c;
	kiwi_egress_config_init(&c);
	return c;
}

Test(egress, defaults)
{
	struct kiwi_egress_config c = cfg();
	cr_assert_eq(c.kind, KIWI_EGRESS_PUBLIC_INTERNET);
	cr_assert_eq(c.pool.addr, ip("10.200.0.0"));
	cr_assert_eq(c.pool.prefix, 16);
	cr_assert_eq(c.n_allow_ports, 0);
	cr_assert_eq(c.dns, 0);
	cr_assert_eq(kiwi_egress_config_check(&c, NULL), 0);
}

Test(egress, good_values)
{
	struct kiwi_egress_config c = cfg();
	kiwi_err e = { 0 };
	cr_assert_eq(kiwi_egress_config_add(&c, "egress", "host_allowlist", &e), 0, "%s", e.msg);
	cr_assert_eq(kiwi_egress_config_add(&c, "allow-cidr", "10.0.0.0/8,192.0.2.7", &e), 0, "%s", e.msg);
	cr_assert_eq(kiwi_egress_config_add(&c, "allow-host", "registry.example:443", &e), 0, "%s", e.msg);
	cr_assert_eq(kiwi_egress_config_add(&c, "allow-host", "mirror_1.internal,192.0.2.8", &e), 0, "%s", e.msg);
	cr_assert_eq(kiwi_egress_config_add(&c, "allow-port", "80,443,80", &e), 0, "%s", e.msg);
	cr_assert_eq(kiwi_egress_config_add(&c, "dns", "192.0.2.53", &e), 0, "%s", e.msg);
	cr_assert_eq(kiwi_egress_config_add(&c, "egress-pool", "172.30.0.0/20", &e), 0, "%s", e.msg);
	cr_assert_eq(kiwi_egress_config_add(&c, "egress-audit", "/tmp/a.jsonl", &e), 0, "%s", e.msg);
	cr_assert_eq(c.kind, KIWI_EGRESS_HOST_ALLOWLIST);
	cr_assert_eq(c.n_allow_cidrs, 2);
	cr_assert_eq(c.allow_cidrs[1].addr, ip("192.0.2.7"));
	cr_assert_eq(c.allow_cidrs[1].prefix, 32);
	cr_assert_eq(c.n_allow_hosts, 3);
	cr_assert_str_eq(c.allow_hosts[0].name, "registry.example");
	cr_assert_eq(c.allow_hosts[0].port, 443);
	cr_assert_eq(c.allow_hosts[2].port, 0);
	cr_assert_eq(c.n_allow_ports, 2, "duplicates fold");
	cr_assert_eq(c.dns, ip("192.0.2.53"));
	cr_assert_eq(c.pool.prefix, 20);
	cr_assert_eq(kiwi_egress_config_check(&c, &e), 0, "%s", e.msg);
}

/* Arrays, not pointers: criterion runs each case in a fresh process. */
struct bad {
	char key[16], value[32], says[40];
};

static const struct bad bads[] = {
	{ "egress", "internet", "expected public_internet" },
	{ "allow-cidr", "10.0.0.1/8", "host bits" },
	{ "allow-cidr", "10.0.0.0/33", "0 to 32" },
	{ "allow-cidr", "10.0.0.0/", "0 to 32" },
	{ "allow-cidr", "10.0.0.0/-1", "0 to 32" },
	{ "allow-cidr", "fd00::1/8", "host bits" },
	{ "allow-cidr", "fd00::/129", "0 to 128" },
	{ "allow-cidr", "fd00:::/8", "IPv6 address" },
	{ "allow-cidr", "fd00::/", "0 to 128" },
	{ "allow-cidr", "10.0.0", "not an IPv4" },
	{ "allow-cidr", "", "empty item" },
	{ "allow-cidr", "10.0.0.0/8,", "empty item" },
	{ "allow-port", "0", "1 to 65535" },
	{ "allow-port", "65536", "1 to 65535" },
	{ "allow-port", "http", "1 to 65535" },
	{ "allow-port", "80x", "1 to 65535" },
	{ "allow-host", "bad name", "NAME[:PORT]" },
	{ "allow-host", "-lead.example", "NAME[:PORT]" },
	{ "allow-host", "a..b", "NAME[:PORT]" },
	{ "allow-host", "x.example:0", "1 to 65535" },
	{ "allow-host", "[::1]:443", "IPv6" },
	{ "allow-host", "::1", "IPv6" },
	{ "dns", "0.0.0.0", "never a resolver" },
	{ "dns", "169.254.169.254", "never a resolver" },
	{ "dns", "224.0.0.251", "never a resolver" },
	{ "dns", "resolver", "IPv4 address" },
	{ "egress-pool", "10.200.0.0/31", "8 to 30" },
	{ "egress-pool", "127.0.0.0/16", "loopback" },
	{ "egress-audit", "", "file name" },
	{ "network", "egress", "unknown egress setting" },
};

ParameterizedTestParameters(egress, bad_values)
{
	return cr_make_param_array(struct bad, bads, sizeof(bads) / sizeof(bads[0]));
}

ParameterizedTest(const struct bad *b, egress, bad_values)
{
	struct kiwi_egress_config c = cfg(), before;
	kiwi_err e = { 0 };
	before = c;
	cr_assert_eq(kiwi_egress_config_add(&c, b->key, b->value, &e), -1, "%s=%s", b->key, b->value);
	cr_assert_eq(e.errnum, 0, "bad input is not a system error");
	cr_assert_str_eq(e.step, "egress");
	cr_assert(strstr(e.msg, b->says), "`%s` should say `%s`", e.msg, b->says);
	if (strcmp(b->key, "network") != 0)
		cr_assert(strstr(e.msg, b->key) && strstr(e.msg, b->value), "names flag and value: %s", e.msg);
	cr_assert_eq(c.n_allow_cidrs, before.n_allow_cidrs, "a bad value adds nothing");
	cr_assert_eq(c.n_allow_cidrs6, before.n_allow_cidrs6);
	cr_assert_eq(c.n_allow_hosts, before.n_allow_hosts);
}

Test(egress, limits)
{
	struct kiwi_egress_config c = cfg();
	kiwi_err e = { 0 };
	char v[32];
	for (int i = 0; i < KIWI_EGRESS_MAX_PORTS; i++) {
		snprintf(v, sizeof(v), "%d", 1000 + i);
		cr_assert_eq(kiwi_egress_config_add(&c, "allow-port", v, &e), 0);
	}
	cr_assert_eq(kiwi_egress_config_add(&c, "allow-port", "9", &e), -1);
	cr_assert(strstr(e.msg, "too many"));
}

Test(egress, cross_checks)
{
	struct kiwi_egress_config c = cfg();
	kiwi_err e = { 0 };
	kiwi_egress_config_add(&c, "egress", "private_network", &e);
	cr_assert_eq(kiwi_egress_config_check(&c, &e), -1);
	cr_assert(strstr(e.msg, "--allow-cidr"), "%s", e.msg);
	c = cfg();
	kiwi_egress_config_add(&c, "egress", "host_allowlist", &e);
	cr_assert_eq(kiwi_egress_config_check(&c, &e), -1);
	cr_assert(strstr(e.msg, "--allow-host"), "%s", e.msg);
	c = cfg();
	kiwi_egress_config_add(&c, "allow-host", "x.example", &e);
	cr_assert_eq(kiwi_egress_config_check(&c, &e), -1);
	cr_assert(strstr(e.msg, "host_allowlist"), "%s", e.msg);
}

/* A resolver on loopback: only the gate (host_allowlist) asks from the
 * host; in the other kinds the sandbox asks it itself. */
Test(egress, dns_on_loopback)
{
	kiwi_err e = { 0 };
	static const char *const refused[] = { "public_internet", "private_network" };
	for (size_t i = 0; i < 2; i++) {
		struct kiwi_egress_config c = cfg();
		cr_assert_eq(kiwi_egress_config_add(&c, "dns", "127.0.0.53", &e), 0, "%s", e.msg);
		kiwi_egress_config_add(&c, "egress", refused[i], &e);
		kiwi_egress_config_add(&c, "allow-cidr", "10.0.0.0/8", &e);
		cr_assert_eq(kiwi_egress_config_check(&c, &e), -1, "%s", refused[i]);
		cr_assert(strstr(e.msg, "`127.0.0.53` is on loopback") && strstr(e.msg, refused[i]) &&
			  strstr(e.msg, "only host_allowlist"), "%s", e.msg);
	}
	struct kiwi_egress_config c = cfg();
	kiwi_egress_config_add(&c, "egress", "host_allowlist", &e);
	kiwi_egress_config_add(&c, "allow-host", "x.example", &e);
	cr_assert_eq(kiwi_egress_config_add(&c, "dns", "127.0.0.53", &e), 0, "%s", e.msg);
	cr_assert_eq(kiwi_egress_config_check(&c, &e), 0, "%s", e.msg);
}

Test(egress, ipv6_cidrs)
{
	struct kiwi_egress_config c = cfg();
	kiwi_err e = { 0 };
	uint8_t want[16];
	cr_assert_eq(kiwi_egress_config_add(&c, "allow-cidr", "10.0.0.0/8,2001:db8::/32,fd99::1", &e), 0, "%s", e.msg);
	cr_assert_eq(c.n_allow_cidrs, 1);
	cr_assert_eq(c.n_allow_cidrs6, 2);
	inet_pton(AF_INET6, "2001:db8::", want);
	cr_assert(!memcmp(c.allow_cidrs6[0].addr, want, 16) && c.allow_cidrs6[0].prefix == 32);
	cr_assert_eq(c.allow_cidrs6[1].prefix, 128);
	/* a list is taken whole or not at all, across both families */
	cr_assert_eq(kiwi_egress_config_add(&c, "allow-cidr", "fd00::/8,300.0.0.0/8", &e), -1);
	cr_assert_eq(c.n_allow_cidrs6, 2);
}

/* private_network: private ranges only, in both families */
Test(egress, private_network_is_private)
{
	static const char *const ok[] = { "10.0.0.0/8", "10.99.0.0/16", "172.16.0.0/12", "172.20.1.0/24",
					  "192.168.0.0/16", "100.64.0.0/10", "100.100.0.1", "fc00::/7", "fd99::/16" };
	static const char *const refused[] = { "0.0.0.0/0", "5.5.5.0/24", "10.0.0.0/7", "172.0.0.0/11",
					       "203.0.113.0/24", "100.0.0.0/8", "::/0", "2001:db8::/32",
					       "fc00::/6", "2a00::/16" };
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		struct kiwi_egress_config c = cfg();
		kiwi_err e = { 0 };
		kiwi_egress_config_add(&c, "egress", "private_network", &e);
		cr_assert_eq(kiwi_egress_config_add(&c, "allow-cidr", ok[i], &e), 0, "%s", e.msg);
		cr_assert_eq(kiwi_egress_config_check(&c, &e), 0, "%s: %s", ok[i], e.msg);
	}
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		struct kiwi_egress_config c = cfg();
		kiwi_err e = { 0 };
		kiwi_egress_config_add(&c, "egress", "private_network", &e);
		cr_assert_eq(kiwi_egress_config_add(&c, "allow-cidr", "10.0.0.0/8", &e), 0);
		cr_assert_eq(kiwi_egress_config_add(&c, "allow-cidr", refused[i], &e), 0, "%s", e.msg);
		cr_assert_eq(kiwi_egress_config_check(&c, &e), -1, "%s", refused[i]);
		cr_assert(strstr(e.msg, refused[i]) && strstr(e.msg, "public_internet"), "%s", e.msg);
	}
}

static int class6(const char *s, const char **range)
{
	uint8_t a[16];
	cr_assert_eq(inet_pton(AF_INET6, s, a), 1, "%s", s);
	return kiwi_egress_classify(6, a, range);
}

Test(egress, address_classes6)
{
	static const struct { const char *addr; int k; const char *range; } v[] = {
		{ "::", KIWI_ADDR_NEVER, "unspecified" },       { "::1", KIWI_ADDR_NEVER, "loopback" },
		{ "fe80::1", KIWI_ADDR_NEVER, "link_local" },    { "ff02::1", KIWI_ADDR_NEVER, "multicast" },
		{ "fd00:ec2::254", KIWI_ADDR_NEVER, "metadata" },
		{ "::ffff:169.254.169.254", KIWI_ADDR_NEVER, "ipv4_mapped" },
		{ "64:ff9b::a9fe:a9fe", KIWI_ADDR_NEVER, "nat64" }, { "64:ff9b:1::1", KIWI_ADDR_NEVER, "nat64" },
		{ "2002:a9fe:a9fe::", KIWI_ADDR_NEVER, "6to4" }, { "::10.0.0.1", KIWI_ADDR_NEVER, "ipv4_compatible" },
		{ "fd00:ec2::253", KIWI_ADDR_SPECIAL, "private" }, { "fc00::1", KIWI_ADDR_SPECIAL, "private" },
		{ "100::1", KIWI_ADDR_SPECIAL, "discard" },      { "2001:db8::10", KIWI_ADDR_SPECIAL, "documentation" },
		{ "2a00:5::5", KIWI_ADDR_PUBLIC, NULL },          { "2001:4860::1", KIWI_ADDR_PUBLIC, NULL },
		{ "64:ff9c::1", KIWI_ADDR_PUBLIC, NULL },         { "2003::1", KIWI_ADDR_PUBLIC, NULL },
	};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		const char *range;
		cr_assert_eq(class6(v[i].addr, &range), v[i].k, "%s", v[i].addr);
		cr_assert(v[i].range ? range && !strcmp(range, v[i].range) : !range, "%s: %s", v[i].addr,
			  range ? range : "(null)");
	}
}

Test(egress, address_classes)
{
	static const char *const never[] = { "0.0.0.0", "127.0.0.1", "127.255.255.255", "169.254.169.254",
					     "224.0.0.1", "239.255.255.250", "240.0.0.1", "255.255.255.255" };
	static const char *const special[] = { "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1",
					       "100.64.0.1", "100.127.255.255", "192.0.2.1", "198.51.100.1",
					       "203.0.113.1", "198.18.0.1", "198.19.255.255", "192.0.0.8" };
	static const char *const public[] = { "1.1.1.1", "5.5.5.5", "8.8.8.8", "100.63.255.255", "100.128.0.0",
					      "172.15.255.255", "172.32.0.0", "192.0.3.0", "198.20.0.0",
					      "223.255.255.255", "9.255.255.255", "11.0.0.0" };
	for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++)
		cr_assert_eq(kiwi_egress_addr_class(ip(never[i])), KIWI_ADDR_NEVER, "%s", never[i]);
	for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++)
		cr_assert_eq(kiwi_egress_addr_class(ip(special[i])), KIWI_ADDR_SPECIAL, "%s", special[i]);
	for (size_t i = 0; i < sizeof(public) / sizeof(public[0]); i++)
		cr_assert_eq(kiwi_egress_addr_class(ip(public[i])), KIWI_ADDR_PUBLIC, "%s", public[i]);
}

Test(egress, ranges_merge)
{
	struct kiwi_ip4_range r[] = {
		{ 20, 30 }, { 0, 5 }, { 6, 9 }, { 25, 40 }, { 100, 100 }, { 50, 60 }, { 55, 56 },
		{ UINT32_MAX - 1, UINT32_MAX }, { UINT32_MAX, UINT32_MAX },
	};
	size_t n = kiwi_ip4_ranges_merge(r, sizeof(r) / sizeof(r[0]));
	struct kiwi_ip4_range want[] = { { 0, 9 }, { 20, 40 }, { 50, 60 }, { 100, 100 },
					 { UINT32_MAX - 1, UINT32_MAX } };
	cr_assert_eq(n, sizeof(want) / sizeof(want[0]));
	for (size_t i = 0; i < n; i++)
		cr_assert(r[i].lo == want[i].lo && r[i].hi == want[i].hi, "range %zu: %u-%u", i, r[i].lo, r[i].hi);
	cr_assert_eq(kiwi_ip4_ranges_merge(r, 0), 0);
}
