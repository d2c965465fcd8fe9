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

#endif
