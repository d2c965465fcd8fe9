/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the passwd reader (HOME of an OCI process): the
 * first 4 bytes are the uid, the rest the file. Properties: never crashes
 * nor reads past the text; a home it returns is absolute, NUL-free and fits. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kiwi/passwd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 4)
		return 0;
	uint32_t uid;
	memcpy(&uid, data, 4);
	/* An exact-size copy, so that ASan sees any read past the end. */
	char *text = malloc(size - 4 + 1);
	if (!text)
		return 0;
	memcpy(text, data + 4, size - 4);
	char home[64];
	memset(home, 'x', sizeof(home));
	if (kiwi_passwd_home(text, size - 4, uid % 4 ? uid % 4 : uid, home, sizeof(home))) {
		size_t n = strnlen(home, sizeof(home));
		if (n == sizeof(home) || home[0] != '/')
			abort();
	}
	free(text);
	return 0;
}
