/* SPDX-License-Identifier: Apache-2.0 */
/* The JSON module under every parser of outside input (policies, seccomp
 * profiles, OCI configs). Property: whatever parses, written back out by
 * the writer, parses again to the same shape. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kiwi/json.h"

static void rewrite(kiwi_json_writer *w, const kiwi_json *j, int depth)
{
	long long i;
	double d;
	bool b;
	switch (kiwi_json_type_of(j)) {
	case KIWI_JSON_OBJECT:
		kiwi_jw_open_object(w);
		for (size_t k = 0; k < kiwi_json_len(j); k++) {
			kiwi_jw_key(w, kiwi_json_key_at(j, k));
			rewrite(w, kiwi_json_at(j, k), depth + 1);
		}
		kiwi_jw_close_object(w);
		break;
	case KIWI_JSON_ARRAY:
		kiwi_jw_open_array(w);
		for (size_t k = 0; k < kiwi_json_len(j); k++)
			rewrite(w, kiwi_json_at(j, k), depth + 1);
		kiwi_jw_close_array(w);
		break;
	case KIWI_JSON_STRING:
		kiwi_jw_string(w, kiwi_json_string(j));
		break;
	case KIWI_JSON_NUMBER:
		if (kiwi_json_int(j, &i))
			kiwi_jw_int(w, i);
		else if (kiwi_json_double(j, &d))
			kiwi_jw_fixed(w, d, 6);
		else
			kiwi_jw_null(w);
		break;
	case KIWI_JSON_BOOL:
		kiwi_json_bool(j, &b);
		kiwi_jw_bool(w, b);
		break;
	case KIWI_JSON_NULL:
	default:
		kiwi_jw_null(w);
		break;
	}
}

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
	rewrite(w, j, 0);
	size_t len;
	const char *text = kiwi_jw_text(w, &len);
	kiwi_json *again = kiwi_json_parse(text, len, &err);
	/* Non-finite doubles are written as null and keep the shape. */
	if (!again || count_nodes(again) != count_nodes(j))
		abort();
	kiwi_json_free(again);
	kiwi_jw_free(w);
	kiwi_json_free(j);
	return 0;
}
