/* SPDX-License-Identifier: Apache-2.0 */
/* /etc/passwd of a container image, read by hand: the C library's lookup
 * would load NSS modules, and a container's must never run in a runtime. */
#ifndef KIWI_PASSWD_H
#define KIWI_PASSWD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The home directory of the first entry with uid in the passwd text (len
 * bytes, not NUL-terminated), copied to out; false when none is usable
 * (no such uid, an empty or relative home, one that does not fit). */
bool kiwi_passwd_home(const char *text, size_t len, uint32_t uid, char *out, size_t out_len);

/* A decimal id of exactly len bytes (at most 10 digits, <= 2^32-1), as
 * passwd, subuid and subgid files write them. */
static inline bool kiwi_parse_id(const char *s, size_t len, uint32_t *out)
{
	uint64_t v = 0;
	if (!len || len > 10)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v > UINT32_MAX)
		return false;
	*out = (uint32_t)v;
	return true;
}

#endif
