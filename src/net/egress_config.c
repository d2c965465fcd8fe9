/* SPDX-License-Identifier: Apache-2.0 */
/* The egress policy as the user writes it: flags (or policy file keys)
 * parsed into plain data. Pure code, fuzzed by fuzz_egress_config. */
#include "egress_int.h"
#include "kiwi/cleanup.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define DEFAULT_POOL 0x0ac80000u  /* 10.200.0.0/16 */

struct range {
	uint32_t addr;
	uint8_t prefix;
	const char *name;    /* the audit's and the messages' word for it */
	const char *cls;     /* the rule class that denies it */
};

#define NEVER(a, p, n) { a, p, n, "always_deny:" n }
#define SPECIAL(a, p, n) { a, p, n, "not_allowed:" n }

/* Never reachable, whatever --allow-cidr says. */
static const struct range never[] = {
	NEVER(0x00000000, 8, "this_network"),  /* 0.0.0.0/8 */
	NEVER(0x7f000000, 8, "loopback"),
	NEVER(0xa9fea9fe, 32, "metadata"),     /* 169.254.169.254, before its /16 */
	NEVER(0xa9fe0000, 16, "link_local"),
	NEVER(0xe0000000, 4, "multicast"),
	NEVER(0xf0000000, 4, "reserved"),      /* with broadcast 255.255.255.255 */
};

/* Not public: reachable only through --allow-cidr. */
static const struct range special[] = {
	SPECIAL(0x0a000000, 8, "private"),       /* RFC 1918 */
	SPECIAL(0x64400000, 10, "cgnat"),        /* RFC 6598 */
	SPECIAL(0xac100000, 12, "private"),      /* RFC 1918 */
	SPECIAL(0xc0000000, 24, "ietf"),         /* IETF protocol assignments */
	SPECIAL(0xc0000200, 24, "documentation"),/* TEST-NET-1 */
	SPECIAL(0xc0586300, 24, "6to4_relay"),   /* deprecated anycast */
	SPECIAL(0xc0a80000, 16, "private"),      /* RFC 1918 */
	SPECIAL(0xc6120000, 15, "benchmarking"),
	SPECIAL(0xc6336400, 24, "documentation"),/* TEST-NET-2 */
	SPECIAL(0xcb007100, 24, "documentation"),/* TEST-NET-3 */
};

/* private_network takes only these (and ranges inside them). */
static const struct range private4[] = {
	SPECIAL(0x0a000000, 8, "private"),
	SPECIAL(0x64400000, 10, "cgnat"),
	SPECIAL(0xac100000, 12, "private"),
	SPECIAL(0xc0a80000, 16, "private"),
};

struct range6 {
	const char *addr;
	uint8_t prefix;
	const char *name;
};

/* IPv6, never reachable: with every form that carries an IPv4 address
 * (which might be one of the IPv4 never ranges, reached through a
 * translator). More specific first: the first match names it. */
static const struct range6 never6[] = {
	{ "::", 128, "unspecified" },
	{ "::1", 128, "loopback" },
	{ "::", 96, "ipv4_compatible" },
	{ "::ffff:0:0", 96, "ipv4_mapped" },
	{ "::ffff:0:0:0", 96, "ipv4_translated" },
	{ "64:ff9b::", 96, "nat64" },
	{ "64:ff9b:1::", 48, "nat64" },
	{ "2002::", 16, "6to4" },
	{ "2001::", 32, "teredo" },
	{ "fd00:ec2::254", 128, "metadata" },
	{ "fe80::", 10, "link_local" },
	{ "fec0::", 10, "site_local" },
	{ "ff00::", 8, "multicast" },
};

static const struct range6 special6[] = {
	{ "fc00::", 7, "private" },         /* unique local, RFC 4193 */
	{ "100::", 64, "discard" },         /* RFC 6666 */
	{ "2001:2::", 48, "benchmarking" },
	{ "2001:db8::", 32, "documentation" },
	{ "3fff::", 20, "documentation" },  /* RFC 9637 */
};

static uint32_t mask_of(unsigned prefix)
{
	return prefix ? ~0u << (32 - prefix) : 0;
}

static bool in_range(uint32_t a, uint32_t net, unsigned prefix)
{
	return (a & mask_of(prefix)) == net;
}

static size_t ranges_of(const struct range *r, size_t n, struct kiwi_ip4_range *out)
{
	for (size_t i = 0; i < n; i++)
		out[i] = (struct kiwi_ip4_range){ r[i].addr, r[i].addr | ~mask_of(r[i].prefix) };
	return n;
}

size_t kiwi_egress_never_ranges(struct kiwi_ip4_range *out)
{
	return ranges_of(never, KIWI_ARRAY_SIZE(never), out);
}

size_t kiwi_egress_special_ranges(struct kiwi_ip4_range *out)
{
	return ranges_of(special, KIWI_ARRAY_SIZE(special), out);
}

/* The first and last address of a prefix, network order. */
void kiwi_cidr6_bounds(const uint8_t *net, unsigned prefix, uint8_t *lo, uint8_t *hi)
{
	for (unsigned i = 0; i < 16; i++) {
		unsigned bits = prefix > i * 8 ? prefix - i * 8 : 0;
		uint8_t m = bits >= 8 ? 0xff : (uint8_t)(0xff00 >> bits);
		lo[i] = net[i] & m;
		hi[i] = (uint8_t)(net[i] | (uint8_t)~m);
	}
}

static size_t ranges6_of(const struct range6 *r, size_t n, struct kiwi_ip6_range *out)
{
	for (size_t i = 0; i < n; i++) {
		uint8_t a[16];
		inet_pton(AF_INET6, r[i].addr, a);
		kiwi_cidr6_bounds(a, r[i].prefix, out[i].lo, out[i].hi);
	}
	return n;
}

size_t kiwi_egress_never_ranges6(struct kiwi_ip6_range *out)
{
	return ranges6_of(never6, KIWI_ARRAY_SIZE(never6), out);
}

size_t kiwi_egress_special_ranges6(struct kiwi_ip6_range *out)
{
	return ranges6_of(special6, KIWI_ARRAY_SIZE(special6), out);
}

bool kiwi_in_cidr6(const uint8_t *a, const uint8_t *net, unsigned prefix)
{
	uint8_t lo[16], hi[16];
	kiwi_cidr6_bounds(net, prefix, lo, hi);
	return memcmp(a, lo, 16) >= 0 && memcmp(a, hi, 16) <= 0;
}

static const char *find6(const struct range6 *r, size_t n, const uint8_t *a)
{
	for (size_t i = 0; i < n; i++) {
		uint8_t net[16];
		inet_pton(AF_INET6, r[i].addr, net);
		if (kiwi_in_cidr6(a, net, r[i].prefix))
			return r[i].name;
	}
	return NULL;
}

static const struct range *find4(const struct range *r, size_t n, uint32_t a)
{
	for (size_t i = 0; i < n; i++)
		if (in_range(a, r[i].addr, r[i].prefix))
			return &r[i];
	return NULL;
}

enum kiwi_addr_class kiwi_egress_classify(uint8_t family, const uint8_t *addr, const char **range)
{
	const char *name;
	if (family == 6) {
		if ((name = find6(never6, KIWI_ARRAY_SIZE(never6), addr)))
			return *range = name, KIWI_ADDR_NEVER;
		if ((name = find6(special6, KIWI_ARRAY_SIZE(special6), addr)))
			return *range = name, KIWI_ADDR_SPECIAL;
		return *range = NULL, KIWI_ADDR_PUBLIC;
	}
	uint32_t a = (uint32_t)addr[0] << 24 | (uint32_t)addr[1] << 16 | (uint32_t)addr[2] << 8 | addr[3];
	const struct range *r;
	if ((r = find4(never, KIWI_ARRAY_SIZE(never), a)))
		return *range = r->name, KIWI_ADDR_NEVER;
	if ((r = find4(special, KIWI_ARRAY_SIZE(special), a)))
		return *range = r->name, KIWI_ADDR_SPECIAL;
	return *range = NULL, KIWI_ADDR_PUBLIC;
}

enum kiwi_addr_class kiwi_egress_addr_class(uint32_t addr)
{
	const uint8_t b[4] = { (uint8_t)(addr >> 24), (uint8_t)(addr >> 16), (uint8_t)(addr >> 8), (uint8_t)addr };
	const char *range;
	return kiwi_egress_classify(4, b, &range);
}

static bool in_cidr(uint32_t a, const struct kiwi_cidr4 *c)
{
	return in_range(a, c->addr, c->prefix);
}

const char *kiwi_egress_forbidden(const struct kiwi_egress_config *c, const uint32_t *host, size_t n_host,
				  uint32_t a)
{
	const struct range *r = find4(never, KIWI_ARRAY_SIZE(never), a);
	if (r)
		return r->cls;
	if (in_cidr(a, &c->pool))
		return "always_deny:sandbox_pool";
	for (size_t i = 0; i < n_host; i++)
		if (host[i] == a)
			return "always_deny:host";
	if (!(r = find4(special, KIWI_ARRAY_SIZE(special), a)))
		return NULL;
	for (size_t i = 0; i < c->n_allow_cidrs; i++)
		if (in_cidr(a, &c->allow_cidrs[i]))
			return NULL;
	return r->cls;
}

void kiwi_egress_config_init(struct kiwi_egress_config *c)
{
	memset(c, 0, sizeof(*c));
	c->kind = KIWI_EGRESS_PUBLIC_INTERNET;
	c->pool = (struct kiwi_cidr4){ DEFAULT_POOL, 16 };
}

static int parse_ip4(const char *s, uint32_t *out)
{
	struct in_addr a;
	if (inet_pton(AF_INET, s, &a) != 1)
		return -1;
	*out = ntohl(a.s_addr);
	return 0;
}

static int bad(kiwi_err *err, const char *flag, const char *value, const char *why)
{
	/* bad input, not a system error: no errno, so no strerror after it */
	return kiwi_error(err, 0, "egress", "--%s `%s`: %s", flag, value, why);
}

static int parse_prefix(const char *flag, const char *value, const char *slash, unsigned max,
			unsigned *out, kiwi_err *err)
{
	unsigned long prefix = max;
	if (slash) {
		char *end;
		if (!isdigit((unsigned char)slash[1]) || (errno = 0, prefix = strtoul(slash + 1, &end, 10), *end) ||
		    prefix > max)
			return bad(err, flag, value, max == 32 ? "the prefix length must be 0 to 32"
							       : "the prefix length must be 0 to 128");
	}
	*out = (unsigned)prefix;
	return 0;
}

static int parse_cidr6(const char *flag, const char *value, struct kiwi_cidr6 *out, kiwi_err *err)
{
	char addr[INET6_ADDRSTRLEN];
	const char *slash = strchr(value, '/');
	size_t len = slash ? (size_t)(slash - value) : strlen(value);
	unsigned prefix;
	if (len >= sizeof(addr))
		return bad(err, flag, value, "not an IPv6 address or CIDR (X:X::X[/N])");
	memcpy(addr, value, len);
	addr[len] = '\0';
	if (parse_prefix(flag, value, slash, 128, &prefix, err) < 0)
		return -1;
	if (inet_pton(AF_INET6, addr, out->addr) != 1)
		return bad(err, flag, value, "not an IPv6 address or CIDR (X:X::X[/N])");
	uint8_t lo[16], hi[16];
	kiwi_cidr6_bounds(out->addr, prefix, lo, hi);
	if (memcmp(lo, out->addr, 16))
		return bad(err, flag, value, "host bits are set after the prefix length");
	out->prefix = (uint8_t)prefix;
	return 0;
}

static int parse_cidr(const char *flag, const char *value, struct kiwi_cidr4 *out, kiwi_err *err)
{
	char addr[INET_ADDRSTRLEN];
	const char *slash = strchr(value, '/');
	size_t len = slash ? (size_t)(slash - value) : strlen(value);
	if (strchr(value, ':'))
		return bad(err, flag, value, "expected an IPv4 address or CIDR here");
	if (len >= sizeof(addr))
		return bad(err, flag, value, "not an IPv4 address or CIDR (A.B.C.D[/N])");
	memcpy(addr, value, len);
	addr[len] = '\0';
	unsigned prefix;
	if (parse_prefix(flag, value, slash, 32, &prefix, err) < 0)
		return -1;
	if (parse_ip4(addr, &out->addr) < 0)
		return bad(err, flag, value, "not an IPv4 address or CIDR (A.B.C.D[/N])");
	if (out->addr & ~mask_of((unsigned)prefix))
		return bad(err, flag, value, "host bits are set after the prefix length");
	out->prefix = (uint8_t)prefix;
	return 0;
}

static int parse_port(const char *flag, const char *whole, const char *s, uint16_t *out, kiwi_err *err)
{
	char *end;
	if (!isdigit((unsigned char)s[0]))
		return bad(err, flag, whole, "a port is a number from 1 to 65535");
	errno = 0;
	unsigned long p = strtoul(s, &end, 10);
	if (errno || *end || p == 0 || p > 65535)
		return bad(err, flag, whole, "a port is a number from 1 to 65535");
	*out = (uint16_t)p;
	return 0;
}

/* A DNS name (letters, digits, '-', '_', dots; labels of 1 to 63) or a
 * dotted IPv4 address. */
static bool valid_name(const char *s, size_t len)
{
	if (len == 0 || len > KIWI_EGRESS_NAME_MAX)
		return false;
	size_t label = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch == '.') {
			if (label == 0)
				return false;
			label = 0;
		} else if (isalnum(ch) || ch == '-' || ch == '_') {
			if (++label > 63 || (label == 1 && ch == '-'))
				return false;
		} else {
			return false;
		}
	}
	return true;
}

static int parse_host(const char *value, struct kiwi_egress_host *h, kiwi_err *err)
{
	if (value[0] == '[' || strchr(value, ':') != strrchr(value, ':'))
		return bad(err, "allow-host", value, "IPv6 is not supported: egress is IPv4 only");
	const char *colon = strchr(value, ':');
	size_t len = colon ? (size_t)(colon - value) : strlen(value);
	/* "*.example.org": every name under example.org, not itself */
	size_t skip = len > 2 && value[0] == '*' && value[1] == '.' ? 2 : 0;
	if (len > KIWI_EGRESS_NAME_MAX || !valid_name(value + skip, len - skip))
		return bad(err, "allow-host", value,
			   "expected NAME[:PORT], NAME a DNS name, *.NAME (the names under it) or an IPv4 address");
	memcpy(h->name, value, len);
	h->name[len] = '\0';
	h->port = 0;
	return colon ? parse_port("allow-host", value, colon + 1, &h->port, err) : 0;
}

bool kiwi_egress_host_is_addr(const struct kiwi_egress_host *h)
{
	struct in_addr a;
	return inet_pton(AF_INET, h->name, &a) == 1;
}

bool kiwi_egress_host_matches(const struct kiwi_egress_host *h, const char *name)
{
	if (h->name[0] == '*' && h->name[1] == '.') {
		size_t pl = strlen(h->name + 1), nl = strlen(name);
		return nl > pl && !strcasecmp(name + nl - pl, h->name + 1);
	}
	return !kiwi_egress_host_is_addr(h) && !strcasecmp(h->name, name);
}

static int parse_kind(const char *value, enum kiwi_egress_kind *out, kiwi_err *err)
{
	static const char *const names[] = {
		[KIWI_EGRESS_PUBLIC_INTERNET] = "public_internet",
		[KIWI_EGRESS_PRIVATE_NETWORK] = "private_network",
		[KIWI_EGRESS_HOST_ALLOWLIST] = "host_allowlist",
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(value, names[i])) {
			*out = (enum kiwi_egress_kind)i;
			return 0;
		}
	return bad(err, "egress", value, "expected public_internet, private_network or host_allowlist");
}

/* One item of a list-valued flag. */
static int add_item(struct kiwi_egress_config *c, const char *key, const char *item, kiwi_err *err)
{
	if (!strcmp(key, "allow-cidr") && strchr(item, ':')) {
		if (c->n_allow_cidrs6 == KIWI_EGRESS_MAX_CIDRS)
			return bad(err, key, item, "too many IPv6 ranges (at most 64)");
		if (parse_cidr6(key, item, &c->allow_cidrs6[c->n_allow_cidrs6], err) < 0)
			return -1;
		c->n_allow_cidrs6++;
		return 0;
	}
	if (!strcmp(key, "allow-cidr")) {
		if (c->n_allow_cidrs == KIWI_EGRESS_MAX_CIDRS)
			return bad(err, key, item, "too many ranges (at most 64)");
		if (parse_cidr(key, item, &c->allow_cidrs[c->n_allow_cidrs], err) < 0)
			return -1;
		c->n_allow_cidrs++;
		return 0;
	}
	if (!strcmp(key, "allow-host")) {
		if (c->n_allow_hosts == KIWI_EGRESS_MAX_HOSTS)
			return bad(err, key, item, "too many hosts (at most 32)");
		if (parse_host(item, &c->allow_hosts[c->n_allow_hosts], err) < 0)
			return -1;
		c->n_allow_hosts++;
		return 0;
	}
	if (c->n_allow_ports == KIWI_EGRESS_MAX_PORTS)
		return bad(err, key, item, "too many ports (at most 32)");
	uint16_t port;
	if (parse_port(key, item, item, &port, err) < 0)
		return -1;
	for (size_t i = 0; i < c->n_allow_ports; i++)
		if (c->allow_ports[i] == port)
			return 0;
	c->allow_ports[c->n_allow_ports++] = port;
	return 0;
}

static int add_items(struct kiwi_egress_config *c, const char *key, const char *value, kiwi_err *err)
{
	char item[KIWI_EGRESS_NAME_MAX + 8];
	const char *p = value;
	for (;;) {
		size_t len = strcspn(p, ",");
		if (len == 0 || len >= sizeof(item))
			return bad(err, key, value, len ? "an item is too long" : "an empty item");
		memcpy(item, p, len);
		item[len] = '\0';
		if (add_item(c, key, item, err) < 0)
			return -1;
		if (!p[len])
			return 0;
		p += len + 1;
	}
}

/* A comma list is taken whole or not at all. */
static int add_list(struct kiwi_egress_config *c, const char *key, const char *value, kiwi_err *err)
{
	size_t cidrs = c->n_allow_cidrs, cidrs6 = c->n_allow_cidrs6, hosts = c->n_allow_hosts,
	       ports = c->n_allow_ports;
	if (add_items(c, key, value, err) == 0)
		return 0;
	c->n_allow_cidrs = cidrs;
	c->n_allow_cidrs6 = cidrs6;
	c->n_allow_hosts = hosts;
	c->n_allow_ports = ports;
	return -1;
}

/* --dns names a resolver on loopback (host_allowlist only: its gate asks
 * the resolver from the host). */
static bool dns_on_loopback(const struct kiwi_egress_config *c)
{
	return (c->dns >> 24) == 127;
}

int kiwi_egress_config_add(struct kiwi_egress_config *c, const char *key, const char *value,
			   kiwi_err *err)
{
	if (!strcmp(key, "egress"))
		return parse_kind(value, &c->kind, err);
	if (!strcmp(key, "allow-cidr") || !strcmp(key, "allow-host") || !strcmp(key, "allow-port"))
		return add_list(c, key, value, err);
	if (!strcmp(key, "dns")) {
		if (parse_ip4(value, &c->dns) < 0)
			return bad(err, key, value, strchr(value, ':') ? "the resolver must be an IPv4 address"
								       : "expected the resolver's IPv4 address");
		/* loopback: only host_allowlist takes it, see kiwi_egress_config_check() */
		if (kiwi_egress_addr_class(c->dns) == KIWI_ADDR_NEVER && !dns_on_loopback(c))
			return bad(err, key, value,
				   "this address is never a resolver (link-local, multicast or reserved): name a "
				   "resolver on the network, or on loopback with --egress host_allowlist");
		return 0;
	}
	if (!strcmp(key, "egress-audit")) {
		if (!value[0])
			return bad(err, key, value, "expected a file name");
		c->audit_path = value;
		return 0;
	}
	if (!strcmp(key, "egress-pool")) {
		struct kiwi_cidr4 pool;
		if (parse_cidr(key, value, &pool, err) < 0)
			return -1;
		if (pool.prefix < 8 || pool.prefix > 30)
			return bad(err, key, value, "the pool needs a prefix length from 8 to 30");
		if (kiwi_egress_addr_class(pool.addr) == KIWI_ADDR_NEVER)
			return bad(err, key, value, "the pool must not lie in loopback, link-local, multicast or "
						    "reserved space");
		c->pool = pool;
		return 0;
	}
	return kiwi_error(err, 0, "egress", "unknown egress setting `%s`", key);
}

static bool private_cidr(const struct kiwi_cidr4 *c)
{
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(private4); i++)
		if (c->prefix >= private4[i].prefix && in_range(c->addr, private4[i].addr, private4[i].prefix))
			return true;
	return false;
}

static bool private_cidr6(const struct kiwi_cidr6 *c)
{
	return c->prefix >= 7 && (c->addr[0] & 0xfe) == 0xfc;
}

/* private_network is for private ranges: one that holds a public address
 * belongs to public_internet, which still keeps the private ones shut. */
static int check_private(const struct kiwi_egress_config *c, kiwi_err *err)
{
	char s[INET6_ADDRSTRLEN];
	static const char why[] = "is not private: private_network takes only private ranges (RFC 1918 "
				  "10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, CGNAT 100.64.0.0/10, unique local "
				  "fc00::/7) and ranges inside them; public addresses need the public_internet mode";
	for (size_t i = 0; i < c->n_allow_cidrs; i++)
		if (!private_cidr(&c->allow_cidrs[i]))
			return kiwi_error(err, 0, "egress", "--allow-cidr `%s/%u` %s",
					  inet_ntop(AF_INET, &(struct in_addr){ htonl(c->allow_cidrs[i].addr) }, s, sizeof(s)),
					  c->allow_cidrs[i].prefix, why);
	for (size_t i = 0; i < c->n_allow_cidrs6; i++)
		if (!private_cidr6(&c->allow_cidrs6[i]))
			return kiwi_error(err, 0, "egress", "--allow-cidr `%s/%u` %s",
					  inet_ntop(AF_INET6, c->allow_cidrs6[i].addr, s, sizeof(s)),
					  c->allow_cidrs6[i].prefix, why);
	return 0;
}

int kiwi_egress_config_check(const struct kiwi_egress_config *c, kiwi_err *err)
{
	char s[INET_ADDRSTRLEN];
	/* The gate asks the upstream from the host; elsewhere the sandbox asks
	 * it itself, and can never reach the host's loopback. */
	if (dns_on_loopback(c) && c->kind != KIWI_EGRESS_HOST_ALLOWLIST)
		return kiwi_error(err, 0, "egress", "--dns `%s` is on loopback, which the sandbox itself asks in "
						    "%s and can never reach: only host_allowlist, whose resolver asks "
						    "from the host, takes it",
				  inet_ntop(AF_INET, &(uint32_t){ htonl(c->dns) }, s, sizeof(s)),
				  c->kind == KIWI_EGRESS_PUBLIC_INTERNET ? "public_internet" : "private_network");
	if (c->kind == KIWI_EGRESS_PRIVATE_NETWORK && !c->n_allow_cidrs && !c->n_allow_cidrs6)
		return kiwi_error(err, 0, "egress",
				  "--egress private_network needs at least one --allow-cidr");
	if (c->kind == KIWI_EGRESS_HOST_ALLOWLIST && !c->n_allow_hosts)
		return kiwi_error(err, 0, "egress",
				  "--egress host_allowlist needs at least one --allow-host");
	if (c->kind != KIWI_EGRESS_HOST_ALLOWLIST && c->n_allow_hosts)
		return kiwi_error(err, 0, "egress",
				  "--allow-host `%s` needs --egress host_allowlist", c->allow_hosts[0].name);
	return c->kind == KIWI_EGRESS_PRIVATE_NETWORK ? check_private(c, err) : 0;
}
