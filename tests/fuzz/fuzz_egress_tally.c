/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the tally a session's supervisor sends an exec's
 * client (kiwi/egress.h, kiwi_egress_tally_load): the input is the
 * message's bytes, padded or cut to the tally's size, with the magic set
 * (else nearly every input stops at the first check), read and then
 * written as the verdict's fields. Properties: never crashes, never reads
 * past a string's bytes, and the JSON written is whole. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kiwi/egress.h"
#include "kiwi/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t len = kiwi_egress_tally_size();
	uint8_t *buf = calloc(1, len);
	if (!buf)
		abort();
	memcpy(buf, data, size < len ? size : len);
	if (size > 0 && data[0] & 1) {
		const uint32_t magic = 0x6b657467u;   /* TALLY_MAGIC */
		memcpy(buf, &magic, sizeof(magic));
	}
	/* a wrong length is always refused */
	if (kiwi_egress_tally_load(buf, len - 1))
		abort();
	struct kiwi_egress_tally *t = kiwi_egress_tally_load(buf, len);
	free(buf);
	if (!t)
		return 0;
	kiwi_json_writer *w = kiwi_jw_new(false);
	if (!w)
		abort();
	kiwi_jw_open_object(w);
	kiwi_egress_write_tally(t, w);
	kiwi_jw_close_object(w);
	size_t out;
	if (!kiwi_jw_text(w, &out) || !out)
		abort();
	kiwi_jw_free(w);
	free(t);
	return 0;
}
