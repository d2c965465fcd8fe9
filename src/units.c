/* SPDX-License-Identifier: Apache-2.0 */
#include "kiwi/units.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A non-negative decimal with an optional fraction, then a suffix. */
static int split_number(const char *s, double *value, const char **suffix)
{
	char *end;
	if (!s || !isdigit((unsigned char)s[0]))
		return -1;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || !isfinite(v) || v < 0)
		return -1;
	*value = v;
	*suffix = end;
	return 0;
}

int kiwi_parse_size(const char *s, const char *what, int64_t *out, kiwi_err *err)
{
	static const struct { const char *name; int shift; } units[] = {
		{ "", 0 }, { "b", 0 }, { "k", 10 }, { "kb", 10 }, { "kib", 10 },
		{ "m", 20 }, { "mb", 20 }, { "mib", 20 }, { "g", 30 }, { "gb", 30 }, { "gib", 30 },
		{ "t", 40 }, { "tb", 40 }, { "tib", 40 },
	};
	if (s && !strcmp(s, "max")) {
		*out = INT64_MAX;
		return 0;
	}
	double v;
	const char *suffix;
	if (split_number(s, &v, &suffix) == 0)
		for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
			if (!strcasecmp(suffix, units[i].name)) {
				double bytes = v * (double)(1ULL << units[i].shift);
				if (bytes >= 9.2e18)
					break;
				*out = (int64_t)bytes;
				return 0;
			}
	return kiwi_error(err, EINVAL, "args", "%s wants a size such as 512M or 2G, got `%s`", what,
			  s ? s : "");
}

int kiwi_parse_duration(const char *s, const char *what, uint64_t *ns_out, kiwi_err *err)
{
	static const struct { const char *name; double ns; } units[] = {
		{ "", 1e9 }, { "s", 1e9 }, { "ms", 1e6 }, { "us", 1e3 }, { "m", 60e9 }, { "h", 3600e9 },
	};
	double v;
	const char *suffix;
	if (split_number(s, &v, &suffix) == 0)
		for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
			if (!strcmp(suffix, units[i].name)) {
				double ns = v * units[i].ns;
				if (ns >= 1.8e19)
					break;
				*ns_out = (uint64_t)ns;
				return 0;
			}
	return kiwi_error(err, EINVAL, "args", "%s wants a duration such as 30s or 500ms, got `%s`", what,
			  s ? s : "");
}
