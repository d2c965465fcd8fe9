/* SPDX-License-Identifier: Apache-2.0 */
/* The JSON module under every parser of outside input (policies, seccomp
 * profiles, OCI configs). Property: whatever parses, written back out by
 * the writer, parses again to the same shape, and then to the same text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kiwi/json.h"

static size_t count_nodes(const kiwi_json *j)
{
	size_t n = 1;
	for (size_t k = 0; k < kiwi_json_len(j); k++)
		n += count_nodes(kiwi_json_at(j, k));
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	kiwi_err err = { 0 };
	kiwi_json *j = kiwi_json_parse((const char *)data, size, &err);
	if (!j) {
		if (!err.step[0] || !err.msg[0])
			abort();  /* every refusal must say why */
		return 0;
	}
	kiwi_json_writer *w = kiwi_jw_new(false);
	kiwi_jw_value(w, j);
	size_t len;
	const char *text = kiwi_jw_text(w, &len);
	kiwi_json *again = kiwi_json_parse(text, len, &err);
	if (!again || count_nodes(again) != count_nodes(j))
		abort();
	kiwi_json_writer *w2 = kiwi_jw_new(false);
	kiwi_jw_value(w2, again);
	size_t len2;
	const char *text2 = kiwi_jw_text(w2, &len2);
	if (len2 != len || memcmp(text, text2, len))
		abort();
	kiwi_jw_free(w2);
	kiwi_json_free(again);
	kiwi_jw_free(w);
	kiwi_json_free(j);
	return 0;
}
