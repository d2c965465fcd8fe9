/* SPDX-License-Identifier: Apache-2.0 */
#include "kiwi/units.h"

#include <ctype.h>
#include <stdbool.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Decimal digits with an optional fraction ("1.5", never "1." or ".5"),
 * then a suffix; no sign, exponent or hex, which strtod would take. */
static int split_number(const char *s, double *value, bool *fraction, const char **suffix)
{
	const char *p = s;
	if (!s || !isdigit((unsigned char)*p))
		return -1;
	while (isdigit((unsigned char)*p))
		p++;
	*fraction = *p == '.';
	if (*fraction) {
		if (!isdigit((unsigned char)p[1]))
			return -1;
		for (p++; isdigit((unsigned char)*p);)
			p++;
	}
	if (*p == 'x' || *p == 'X' || *p == 'e' || *p == 'E')
		return -1;
	*value = strtod(s, NULL);
	*suffix = p;
	return isfinite(*value) ? 0 : -1;
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
	bool fraction;
	const char *suffix;
	if (split_number(s, &v, &fraction, &suffix) == 0)
		for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
			if (!strcasecmp(suffix, units[i].name)) {
				double bytes = v * (double)(1ULL << units[i].shift);
				/* A fraction of a byte means nothing; past 2^63 no
				 * int64 holds it. */
				if ((fraction && units[i].shift == 0) || bytes >= 9223372036854775807.0)
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
	bool fraction;
	const char *suffix;
	if (split_number(s, &v, &fraction, &suffix) == 0)
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
