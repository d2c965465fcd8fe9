/* SPDX-License-Identifier: Apache-2.0 */
/* The walk `kiwi-run gc` makes of a layout's index.json and the indexes
 * and manifests it names (src/session/layout_refs.c), over hostile text:
 * the input up to its first NUL is index.json, the rest is every blob. */
#include "kiwi/layout_refs.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct input {
	const char *index, *blob;
	size_t index_len, blob_len;
};

static int read_part(void *ctx, const char *path, char **text, size_t *len)
{
	const struct input *in = ctx;
	bool index = !strcmp(path, "index.json");
	const char *src = index ? in->index : in->blob;
	size_t n = index ? in->index_len : in->blob_len;
	if (!src)
		return 1;
	if (!(*text = malloc(n + 1)))
		return -1;
	memcpy(*text, src, n);
	(*text)[n] = '\0';
	*len = n;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	const char *nul = memchr(text, '\0', size);
	struct input in = { .index = text, .index_len = nul ? (size_t)(nul - text) : size };
	if (nul) {
		in.blob = nul + 1;
		in.blob_len = size - in.index_len - 1;
	}
	struct kiwi_layout_refs r = { 0 };
	if (kiwi_layout_refs_read(read_part, &in, &r) == 0)
		for (size_t i = 0; i < r.n; i++)
			if (!kiwi_layout_refs_has(&r, r.v[i]))
				abort();
	kiwi_layout_refs_clear(&r);
	return 0;
}
