/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the name gate's reader of a connection's first
 * bytes (a TLS ClientHello or an HTTP request, from the sandbox).
 * Properties: never crashes; a name found is non-empty, lowercase, at
 * most KIWI_SNI_NAME_MAX and made of DNS name characters; a prefix of
 * the input reads as MORE or exactly as the whole input does (the gate
 * decides on the first prefix that is not MORE, as bytes arrive). */
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
	return 0;
}
