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

/* ---- one request after another ---- */

enum { F_HEAD, F_BODY, F_CHUNK_LINE, F_CHUNK_DATA, F_CHUNK_END, F_TRAILER };

#define LINE_MAX_LEN 4096

/* The value of header `key` ("content-length:"), trimmed; NULL when the
 * head has none; *twice when it has it more than once. */
static const uint8_t *header(const uint8_t *head, const uint8_t *end, const char *key, const uint8_t **vend,
			     bool *twice)
{
	const uint8_t *found = NULL;
	*twice = false;
	for (const uint8_t *h = find_crlf(head, end) + 2; h < end;) {
		const uint8_t *eol = find_crlf(h, end);
		if (!eol || eol == h)
			break;
		if (ieq_prefix(h, (size_t)(eol - h), key)) {
			*twice |= found != NULL;
			found = h + strlen(key);
			while (found < eol && (*found == ' ' || *found == '\t'))
				found++;
			*vend = eol;
			while (*vend > found && ((*vend)[-1] == ' ' || (*vend)[-1] == '\t'))
				(*vend)--;
		}
		h = eol + 2;
	}
	return found;
}

static bool parse_number(const uint8_t *p, const uint8_t *end, int base, uint64_t *out)
{
	uint64_t v = 0;
	if (p == end || end - p > 15)
		return false;
	for (; p < end; p++) {
		int d = *p >= '0' && *p <= '9' ? *p - '0' : base == 16 && (*p | 32) >= 'a' && (*p | 32) <= 'f'
			? (*p | 32) - 'a' + 10 : -1;
		if (d < 0)
			return false;
		v = v * (uint64_t)base + (uint64_t)d;
	}
	*out = v;
	return true;
}

/* A complete head of n bytes (through its blank line). */
static enum kiwi_http_verdict head(struct kiwi_http_framer *f, const uint8_t *h, size_t n, const char *allowed,
				   char *name)
{
	const uint8_t *end = h + n, *cl_end = NULL, *te_end = NULL, *up_end = NULL;
	bool cl_twice, te_twice, up_twice;
	enum kiwi_sni r = kiwi_sni_http(h, n, name);
	if (r != KIWI_SNI_NAME)
		return KIWI_HTTP_BAD;
	if (strcmp(name, allowed))
		return KIWI_HTTP_OTHER_HOST;
	const uint8_t *cl = header(h, end, "content-length:", &cl_end, &cl_twice);
	const uint8_t *te = header(h, end, "transfer-encoding:", &te_end, &te_twice);
	if (header(h, end, "upgrade:", &up_end, &up_twice) || ieq_prefix(h, n, "connect ") || cl_twice ||
	    te_twice || (cl && te))
		return KIWI_HTTP_BAD;
	if (te) {
		if (te_end - te != 7 || !ieq_prefix(te, 7, "chunked"))
			return KIWI_HTTP_BAD;
		f->state = F_CHUNK_LINE;
	} else if (cl) {
		if (!parse_number(cl, cl_end, 10, &f->left))
			return KIWI_HTTP_BAD;
		f->state = f->left ? F_BODY : F_HEAD;
	}
	return KIWI_HTTP_OK;
}

/* One step from buf's start: how many bytes it takes (0: needs more). */
static enum kiwi_http_verdict step(struct kiwi_http_framer *f, const uint8_t *buf, size_t len, const char *allowed,
				   size_t *took, char *name)
{
	const uint8_t *end = buf + len, *eol;
	*took = 0;
	switch (f->state) {
	case F_BODY:
	case F_CHUNK_DATA: {
		size_t n = f->left < len ? (size_t)f->left : len;
		f->left -= n;
		*took = n;
		if (!f->left)
			f->state = f->state == F_BODY ? F_HEAD : F_CHUNK_END;
		return KIWI_HTTP_OK;
	}
	case F_CHUNK_END:
		if (len < 2)
			return KIWI_HTTP_OK;
		if (buf[0] != '\r' || buf[1] != '\n')
			return KIWI_HTTP_BAD;
		*took = 2;
		f->state = F_CHUNK_LINE;
		return KIWI_HTTP_OK;
	case F_CHUNK_LINE:
	case F_TRAILER:
		if (!(eol = find_crlf(buf, end)))
			return len >= LINE_MAX_LEN ? KIWI_HTTP_BAD : KIWI_HTTP_OK;
		*took = (size_t)(eol - buf) + 2;
		if (f->state == F_TRAILER) {
			if (eol == buf)
				f->state = F_HEAD;
			return KIWI_HTTP_OK;
		}
		const uint8_t *semi = memchr(buf, ';', (size_t)(eol - buf));
		if (!parse_number(buf, semi ? semi : eol, 16, &f->left))
			return KIWI_HTTP_BAD;
		f->state = f->left ? F_CHUNK_DATA : F_TRAILER;
		return KIWI_HTTP_OK;
	case F_HEAD:
	default:
		for (const uint8_t *p = buf; p + 3 < end; p++)
			if (!memcmp(p, "\r\n\r\n", 4)) {
				*took = (size_t)(p - buf) + 4;
				return head(f, buf, *took, allowed, name);
			}
		return len >= KIWI_SNI_PEEK_MAX ? KIWI_HTTP_BAD : KIWI_HTTP_OK;
	}
}

enum kiwi_http_verdict kiwi_http_frame(struct kiwi_http_framer *f, const uint8_t *buf, size_t len,
				       const char *allowed, size_t *pass, char name[KIWI_SNI_NAME_MAX + 1])
{
	*pass = 0;
	for (;;) {
		size_t took;
		enum kiwi_http_verdict v = step(f, buf + *pass, len - *pass, allowed, &took, name);
		if (v != KIWI_HTTP_OK)
			return v;
		if (!took)
			return KIWI_HTTP_OK;
		*pass += took;
	}
}
