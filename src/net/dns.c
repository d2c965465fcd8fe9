/* SPDX-License-Identifier: Apache-2.0 */
/* DNS messages: see include/kiwi/dns.h. Every read is bounded by the
 * message's length; compression pointers are followed at most
 * MAX_JUMPS times, so a loop of pointers ends. */
#include "kiwi/dns.h"

#include <string.h>

#define HEADER 12
#define MAX_JUMPS 32
#define FLAG_QR 0x8000u
#define FLAG_OPCODE 0x7800u
#define FLAG_TC 0x0200u
#define FLAG_RD 0x0100u
#define FLAG_RA 0x0080u
#define CLASS_IN 1

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p + 2, (uint16_t)v);
}

static bool name_char(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Reads the name at *off into out (NULL: only skip it); *off moves past
 * it in the message (not past what a pointer leads to). */
static int read_name(const uint8_t *msg, size_t len, size_t *off, char *out)
{
	size_t p = *off, n = 0, end = 0;
	int jumps = 0;
	for (;;) {
		if (p >= len)
			return -1;
		uint8_t l = msg[p];
		if ((l & 0xc0) == 0xc0) {
			if (p + 1 >= len || ++jumps > MAX_JUMPS)
				return -1;
			if (!end)
				end = p + 2;
			p = (size_t)(l & 0x3f) << 8 | msg[p + 1];
			continue;
		}
		if (l & 0xc0)
			return -1;   /* the extended label types are not used */
		if (l == 0) {
			*off = end ? end : p + 1;
			if (out)
				out[n ? n - 1 : 0] = '\0';   /* no final dot; the root is "" */
			return 0;
		}
		if (p + 1 + l > len || n + l + 1 > KIWI_DNS_NAME_MAX + 1)
			return -1;
		for (size_t i = 0; i < l; i++) {
			uint8_t c = msg[p + 1 + i];
			if (!name_char(c))
				return -1;
			if (out)
				out[n + i] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
		}
		n += l;
		if (out)
			out[n] = '.';
		n++;
		p += 1 + l;
	}
}

int kiwi_dns_parse_query(const uint8_t *msg, size_t len, struct kiwi_dns_query *q)
{
	if (len < HEADER)
		return -1;
	q->id = get16(msg);
	q->flags = get16(msg + 2);
	if ((q->flags & (FLAG_QR | FLAG_OPCODE)) || get16(msg + 4) != 1 || get16(msg + 6) || get16(msg + 8))
		return -1;
	size_t off = HEADER;
	if (read_name(msg, len, &off, q->name) < 0 || !q->name[0] || off + 4 > len)
		return -1;
	q->qtype = get16(msg + off);
	q->qclass = get16(msg + off + 2);
	return 0;
}

static bool add_addr(struct kiwi_dns_answer *a, uint32_t addr, uint32_t ttl)
{
	for (size_t i = 0; i < a->n_addrs; i++)
		if (a->addrs[i] == addr)
			return true;
	if (a->n_addrs == KIWI_DNS_MAX_ADDRS)
		return false;
	a->addrs[a->n_addrs++] = addr;
	if (a->n_addrs == 1 || ttl < a->ttl)
		a->ttl = ttl;
	return true;
}

int kiwi_dns_parse_answer(const uint8_t *msg, size_t len, uint16_t id, const char *name, uint16_t qtype,
			  struct kiwi_dns_answer *a)
{
	char qname[KIWI_DNS_NAME_MAX + 1];
	memset(a, 0, sizeof(*a));
	if (len < HEADER)
		return -1;
	uint16_t flags = get16(msg + 2);
	if (get16(msg) != id || !(flags & FLAG_QR) || (flags & FLAG_OPCODE) || get16(msg + 4) != 1)
		return -1;
	a->id = id;
	a->rcode = flags & 0xf;
	a->truncated = flags & FLAG_TC;
	size_t off = HEADER;
	if (read_name(msg, len, &off, qname) < 0 || strcmp(qname, name) || off + 4 > len ||
	    get16(msg + off) != qtype || get16(msg + off + 2) != CLASS_IN)
		return -1;
	off += 4;
	for (unsigned n = get16(msg + 6); n; n--) {
		if (read_name(msg, len, &off, NULL) < 0 || off + 10 > len)
			return -1;
		uint16_t type = get16(msg + off), class = get16(msg + off + 2), rdlen = get16(msg + off + 8);
		uint32_t ttl = get32(msg + off + 4);
		off += 10;
		if (off + rdlen > len)
			return -1;
		/* more addresses than we keep: refused whole, never half-taken */
		if (type == KIWI_DNS_TYPE_A && class == CLASS_IN &&
		    (rdlen != 4 || !add_addr(a, get32(msg + off), ttl > 0x7fffffff ? 0 : ttl)))
			return -1;
		off += rdlen;
	}
	return 0;
}

/* The name as labels; returns the bytes written or 0. */
static size_t put_name(uint8_t *buf, size_t cap, const char *name)
{
	size_t o = 0;
	for (const char *p = name; *p;) {
		size_t l = strcspn(p, ".");
		if (l == 0 || l > 63 || o + 1 + l + 1 > cap)
			return 0;
		buf[o] = (uint8_t)l;
		memcpy(buf + o + 1, p, l);
		o += 1 + l;
		p += l;
		if (*p)
			p++;
	}
	if (o + 1 > cap)
		return 0;
	buf[o++] = 0;
	return o;
}

static size_t put_header(uint8_t *buf, uint16_t id, uint16_t flags, uint16_t an)
{
	memset(buf, 0, HEADER);
	put16(buf, id);
	put16(buf + 2, flags);
	put16(buf + 4, 1);
	put16(buf + 6, an);
	return HEADER;
}

static size_t put_question(uint8_t *buf, size_t cap, const char *name, uint16_t qtype, uint16_t qclass)
{
	size_t o = put_name(buf, cap, name);
	if (!o || o + 4 > cap)
		return 0;
	put16(buf + o, qtype);
	put16(buf + o + 2, qclass);
	return o + 4;
}

size_t kiwi_dns_build_query(uint8_t *buf, size_t cap, uint16_t id, const char *name, uint16_t qtype)
{
	if (cap < HEADER)
		return 0;
	put_header(buf, id, FLAG_RD, 0);
	size_t q = put_question(buf + HEADER, cap - HEADER, name, qtype, CLASS_IN);
	return q ? HEADER + q : 0;
}

size_t kiwi_dns_build_reply(uint8_t *buf, size_t cap, const struct kiwi_dns_query *q, uint8_t rcode,
			    const uint32_t *addrs, size_t n, uint32_t ttl)
{
	if (cap < HEADER || n > 0xffff)
		return 0;
	put_header(buf, q->id, (uint16_t)(FLAG_QR | (q->flags & FLAG_RD) | FLAG_RA | (rcode & 0xf)), (uint16_t)n);
	size_t o = put_question(buf + HEADER, cap - HEADER, q->name, q->qtype, q->qclass);
	if (!o)
		return 0;
	o += HEADER;
	for (size_t i = 0; i < n; i++) {
		if (o + 16 > cap)
			return 0;
		put16(buf + o, 0xc000 | HEADER);   /* the question's name */
		put16(buf + o + 2, KIWI_DNS_TYPE_A);
		put16(buf + o + 4, CLASS_IN);
		put32(buf + o + 6, ttl);
		put16(buf + o + 10, 4);
		put32(buf + o + 12, addrs[i]);
		o += 16;
	}
	return o;
}
