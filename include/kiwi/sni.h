/* SPDX-License-Identifier: Apache-2.0 */
/* The name a connection asks for, read from its first bytes: the
 * server_name of a TLS ClientHello (RFC 8446, 6066), or the Host header
 * of a plain HTTP/1 request. Pure code over bytes, fuzzed by fuzz_sni.
 * Names come out lowercase, without a port or a final dot. */
#ifndef KIWI_SNI_H
#define KIWI_SNI_H

#include <stddef.h>
#include <stdint.h>

#define KIWI_SNI_NAME_MAX 253
/* Bytes read before a connection that has not said its name is refused:
 * a ClientHello fits in one 16 KiB record, plus its header. */
#define KIWI_SNI_PEEK_MAX (16384 + 5)

enum kiwi_sni {
	KIWI_SNI_MORE,     /* not enough bytes yet */
	KIWI_SNI_NAME,     /* name filled in */
	KIWI_SNI_NO_NAME,  /* a ClientHello without server_name, an HTTP request without Host */
	KIWI_SNI_ECH,      /* a ClientHello with encrypted_client_hello: its real name is hidden */
	KIWI_SNI_BAD,      /* neither TLS nor HTTP/1, or malformed */
};

/* Whichever of the two the bytes start with. */
enum kiwi_sni kiwi_sni_read(const uint8_t *buf, size_t len, char name[KIWI_SNI_NAME_MAX + 1]);
enum kiwi_sni kiwi_sni_tls(const uint8_t *buf, size_t len, char name[KIWI_SNI_NAME_MAX + 1]);
enum kiwi_sni kiwi_sni_http(const uint8_t *buf, size_t len, char name[KIWI_SNI_NAME_MAX + 1]);

/* A plain HTTP/1 connection carries one request after another, each
 * with its own Host: the gate reads them all, not just the first, or a
 * second request on the same connection could name another host served
 * from the same address. The framer walks the client's bytes request by
 * request (headers, then a Content-Length body or chunks): each head must
 * name `allowed`; bytes are passed only once the head they belong to was
 * checked. Anything it cannot frame (a second Host, both Content-Length
 * and chunked, an upgrade to another protocol) ends the connection. */
struct kiwi_http_framer {
	int state;
	uint64_t left;     /* bytes of body or chunk still to pass */
};
enum kiwi_http_verdict { KIWI_HTTP_OK, KIWI_HTTP_OTHER_HOST, KIWI_HTTP_BAD };
/* Reads buf (the client's bytes not yet passed, in order); *pass says how
 * many at its start may go to the server now (the rest wait for more).
 * On KIWI_HTTP_OTHER_HOST, name holds the host the request asked for. */
enum kiwi_http_verdict kiwi_http_frame(struct kiwi_http_framer *f, const uint8_t *buf, size_t len,
				       const char *allowed, size_t *pass, char name[KIWI_SNI_NAME_MAX + 1]);

#endif
