/* SPDX-License-Identifier: Apache-2.0 */
/* name:password:uid:gid:gecos:home:shell, one entry a line. */
#include "kiwi/passwd.h"

#include <string.h>

/* The n-th ':'-separated field of line [p, end): its start and length. */
static bool field(const char *p, const char *end, int n, const char **f, size_t *flen)
{
	for (int i = 0; i < n; i++) {
		const char *c = memchr(p, ':', (size_t)(end - p));
		if (!c)
			return false;
		p = c + 1;
	}
	const char *c = memchr(p, ':', (size_t)(end - p));
	*f = p;
	*flen = (size_t)((c ? c : end) - p);
	return true;
}

static bool uid_is(const char *f, size_t n, uint32_t uid)
{
	uint32_t v;
	return kiwi_parse_id(f, n, &v) && v == uid;
}

bool kiwi_passwd_home(const char *text, size_t len, uint32_t uid, char *out, size_t out_len)
{
	const char *p = text, *end = text + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end;
		const char *f;
		size_t n;
		if (field(p, eol, 2, &f, &n) && uid_is(f, n, uid)) {
			/* The first entry for the uid decides, as getpwuid's. */
			if (!field(p, eol, 5, &f, &n) || !n || f[0] != '/' || n >= out_len || memchr(f, '\0', n))
				return false;
			memcpy(out, f, n);
			out[n] = '\0';
			return true;
		}
		p = eol + 1;
	}
	return false;
}
