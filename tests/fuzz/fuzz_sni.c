/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the name gate's reader of a connection's first
 * bytes (a TLS ClientHello or an HTTP request, from the sandbox), and of
 * the HTTP framer that checks every request after the first.
 * Properties: never crashes; a name found is non-empty, lowercase, at
 * most KIWI_SNI_NAME_MAX and made of DNS name characters; a prefix of
 * the input reads as MORE or exactly as the whole input does (the gate
 * decides on the first prefix that is not MORE, as bytes arrive); the
 * framer, fed the input as the gate feeds it (in pieces, the bytes it
 * passed dropped from the front), never passes more than it holds and
 * never passes anything after it refused. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kiwi/sni.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_name(const char *n)
{
	if (!n[0] || strlen(n) > KIWI_SNI_NAME_MAX)
		abort();
	for (const char *p = n; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.'))
			abort();
}

static void frame(const uint8_t *data, size_t size)
{
	static uint8_t held[KIWI_SNI_PEEK_MAX];
	struct kiwi_http_framer f = { 0 };
	char other[KIWI_SNI_NAME_MAX + 1];
	size_t len = 0, fed = 0;
	while (fed < size) {
		/* pieces of 1 to 64 bytes, sized by the data itself */
		size_t piece = 1 + data[fed] % 64;
		piece = piece > size - fed ? size - fed : piece;
		if (len + piece > sizeof(held))
			return;
		memcpy(held + len, data + fed, piece);
		len += piece;
		fed += piece;
		size_t pass;
		enum kiwi_http_verdict v = kiwi_http_frame(&f, held, len, "good.test", &pass, other);
		if (pass > len)
			abort();
		if (v == KIWI_HTTP_OTHER_HOST)
			check_name(other);
		if (v != KIWI_HTTP_OK)
			return;
		memmove(held, held + pass, len - pass);
		len -= pass;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char name[KIWI_SNI_NAME_MAX + 1], first[KIWI_SNI_NAME_MAX + 1];
	enum kiwi_sni whole = kiwi_sni_read(data, size, name);
	if (whole == KIWI_SNI_NAME)
		check_name(name);
	/* the gate decides on the first prefix that is not MORE */
	for (size_t cut = 0; cut < size; cut += 1 + cut / 2) {
		enum kiwi_sni r = kiwi_sni_read(data, cut, first);
		if (r == KIWI_SNI_MORE)
			continue;
		if (r != whole || (r == KIWI_SNI_NAME && strcmp(first, name)))
			abort();
		break;
	}
	frame(data, size);
	return 0;
}
