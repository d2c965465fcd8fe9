/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the cgroup module's readers of the host's text:
 * a /proc/self/mountinfo line (mount points with octal escapes) and
 * /proc/PID/cgroup. Properties: never crashes nor reads past the input;
 * every answer is NUL-terminated within its buffer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kiwi/cgroup.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Text as the kernel gives it: up to the first NUL. */
	char *text = strndup((const char *)data, size);
	if (!text)
		return 0;
	char out[32];
	bool v1 = false;
	size_t len = size % sizeof(out) + 1;   /* small buffers too */
	memset(out, 'x', sizeof(out));
	if (kiwi_cgroup_mountinfo_line(text, out, len, &v1) && strnlen(out, len) == len)
		abort();
	memset(out, 'x', sizeof(out));
	if (kiwi_cgroup_v2_line(text, out, len) && strnlen(out, len) == len)
		abort();
	free(text);
	return 0;
}
