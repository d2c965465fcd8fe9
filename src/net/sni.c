/* SPDX-License-Identifier: Apache-2.0 */
/* The name a connection asks for: see include/kiwi/sni.h. A ClientHello
 * may span several TLS records (the handshake message is fragmented);
 * its fragments are joined first, and only a complete message is read,
 * so a truncated one is MORE, never a guess. */
#include "kiwi/sni.h"

#include <stdbool.h>
#include <string.h>

#define REC_HANDSHAKE 22
#define HS_CLIENT_HELLO 1
#define EXT_SERVER_NAME 0
#define EXT_ECH 0xfe0d
#define HOST_NAME 0

struct cursor {
	const uint8_t *p;
	size_t left;
	bool bad;
};

static const uint8_t *take(struct cursor *c, size_t n)
{
	if (c->bad || c->left < n) {
		c->bad = true;
		return NULL;
	}
	const uint8_t *p = c->p;
	c->p += n;
	c->left -= n;
	return p;
}

static size_t take_len(struct cursor *c, size_t bytes)
{
	const uint8_t *p = take(c, bytes);
	size_t v = 0;
	for (size_t i = 0; p && i < bytes; i++)
		v = v << 8 | p[i];
	return v;
}

/* A sub-cursor over a length-prefixed vector. */
static struct cursor vector(struct cursor *c, size_t len_bytes)
{
	size_t n = take_len(c, len_bytes);
	const uint8_t *p = take(c, n);
	return (struct cursor){ p, p ? n : 0, !p };
}

/* A host name as DNS allows it; lowercased into out. */
static bool copy_name(const uint8_t *s, size_t n, char out[KIWI_SNI_NAME_MAX + 1])
{
	if (n && s[n - 1] == '.')
		n--;
	if (n == 0 || n > KIWI_SNI_NAME_MAX)
		return false;
	size_t label = 0;
	for (size_t i = 0; i < n; i++) {
		uint8_t c = s[i];
		if (c == '.') {
			if (!label)
				return false;
			label = 0;
		} else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_') {
			label++;
		} else if (c >= 'A' && c <= 'Z') {
			c += 32;
			label++;
		} else {
			return false;
		}
		if (label > 63)
			return false;
		out[i] = (char)c;
	}
	out[n] = '\0';
	return true;
}

static enum kiwi_sni server_name(struct cursor ext, char *name)
{
	struct cursor list = vector(&ext, 2);
	if (ext.bad || ext.left)
		return KIWI_SNI_BAD;
	while (list.left) {
		const uint8_t *type = take(&list, 1);
		struct cursor host = vector(&list, 2);
		if (list.bad)
			return KIWI_SNI_BAD;
		if (*type == HOST_NAME)
			return copy_name(host.p, host.left, name) ? KIWI_SNI_NAME : KIWI_SNI_BAD;
	}
	return KIWI_SNI_NO_NAME;
}

/* The ClientHello body, complete. */
static enum kiwi_sni client_hello(struct cursor c, char *name)
{
	take(&c, 2 + 32);                /* legacy_version, random */
	vector(&c, 1);                   /* legacy_session_id */
	struct cursor suites = vector(&c, 2);
	vector(&c, 1);                   /* legacy_compression_methods */
	if (c.bad || suites.left == 0 || suites.left % 2)
		return KIWI_SNI_BAD;
	if (c.left == 0)
		return KIWI_SNI_NO_NAME;      /* no extensions at all */
	struct cursor exts = vector(&c, 2);
	if (c.bad || c.left)
		return KIWI_SNI_BAD;
	enum kiwi_sni found = KIWI_SNI_NO_NAME;
	bool seen_sni = false, ech = false;
	while (exts.left) {
		size_t type = take_len(&exts, 2);
		struct cursor body = vector(&exts, 2);
		if (exts.bad)
			return KIWI_SNI_BAD;
		if (type == EXT_ECH)
			ech = true;
		if (type != EXT_SERVER_NAME)
			continue;
		/* two server_name extensions: which one would the server use? */
		if (seen_sni)
			return KIWI_SNI_BAD;
		seen_sni = true;
		found = server_name(body, name);
		if (found == KIWI_SNI_BAD)
			return found;
	}
	return ech ? KIWI_SNI_ECH : found;
}

enum kiwi_sni kiwi_sni_tls(const uint8_t *buf, size_t len, char name[KIWI_SNI_NAME_MAX + 1])
{
	static _Thread_local uint8_t hs[KIWI_SNI_PEEK_MAX];
	size_t have = 0, off = 0;
	/* join the handshake fragments of consecutive records */
	while (off + 5 <= len) {
		const uint8_t *r = buf + off;
		size_t rlen = (size_t)r[3] << 8 | r[4];
		if (r[0] != REC_HANDSHAKE || r[1] != 3 || rlen == 0 || rlen > 16384)
			return KIWI_SNI_BAD;
		if (off + 5 + rlen > len)
			break;
		if (have + rlen > sizeof(hs))
			return KIWI_SNI_BAD;
		memcpy(hs + have, r + 5, rlen);
		have += rlen;
		off += 5 + rlen;
		if (have >= 4) {
			size_t hlen = (size_t)hs[1] << 16 | (size_t)hs[2] << 8 | hs[3];
			if (hs[0] != HS_CLIENT_HELLO || 4 + hlen > sizeof(hs))
				return KIWI_SNI_BAD;
			if (have >= 4 + hlen)
				return client_hello((struct cursor){ hs + 4, hlen, false }, name);
		}
	}
	if (len >= 1 && buf[0] != REC_HANDSHAKE)
		return KIWI_SNI_BAD;
	return len >= KIWI_SNI_PEEK_MAX ? KIWI_SNI_BAD : KIWI_SNI_MORE;
}

static bool ieq_prefix(const uint8_t *s, size_t n, const char *lit)
{
	size_t l = strlen(lit);
	if (n < l)
		return false;
	for (size_t i = 0; i < l; i++) {
		uint8_t c = s[i] >= 'A' && s[i] <= 'Z' ? (uint8_t)(s[i] + 32) : s[i];
		if (c != (uint8_t)lit[i])
			return false;
	}
	return true;
}

static const uint8_t *find_crlf(const uint8_t *p, const uint8_t *end)
{
	for (; p + 1 < end; p++)
		if (p[0] == '\r' && p[1] == '\n')
			return p;
	return NULL;
}

/* The Host header's value, without its port. */
static enum kiwi_sni host_value(const uint8_t *v, const uint8_t *end, char *name)
{
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	const uint8_t *colon = memchr(v, ':', (size_t)(end - v));
	if (colon) {
		for (const uint8_t *d = colon + 1; d < end; d++)
			if (*d < '0' || *d > '9')
				return KIWI_SNI_BAD;
		end = colon;
	}
	return copy_name(v, (size_t)(end - v), name) ? KIWI_SNI_NAME : KIWI_SNI_BAD;
}

enum kiwi_sni kiwi_sni_http(const uint8_t *buf, size_t len, char name[KIWI_SNI_NAME_MAX + 1])
{
	/* a method: capital letters, then a space */
	size_t m = 0;
	while (m < len && m < 16 && buf[m] >= 'A' && buf[m] <= 'Z')
		m++;
	if (m < len && (m == 0 || buf[m] != ' '))
		return KIWI_SNI_BAD;
	const uint8_t *end = buf + len, *line = find_crlf(buf, end);
	if (!line)
		return len >= KIWI_SNI_PEEK_MAX ? KIWI_SNI_BAD : KIWI_SNI_MORE;
	enum kiwi_sni found = KIWI_SNI_NO_NAME;
	for (const uint8_t *h = line + 2;;) {
		const uint8_t *eol = find_crlf(h, end);
		if (!eol)
			return len >= KIWI_SNI_PEEK_MAX ? KIWI_SNI_BAD : KIWI_SNI_MORE;
		if (eol == h)
			return found;   /* the blank line: the headers are complete */
		if (ieq_prefix(h, (size_t)(eol - h), "host:")) {
			/* two Host headers: which one would the server use? */
			if (found != KIWI_SNI_NO_NAME)
				return KIWI_SNI_BAD;
			found = host_value(h + 5, eol, name);
			if (found == KIWI_SNI_BAD)
				return found;
		}
		h = eol + 2;
	}
}

enum kiwi_sni kiwi_sni_read(const uint8_t *buf, size_t len, char name[KIWI_SNI_NAME_MAX + 1])
{
	if (len == 0)
		return KIWI_SNI_MORE;
	return buf[0] == REC_HANDSHAKE ? kiwi_sni_tls(buf, len, name) : kiwi_sni_http(buf, len, name);
}
