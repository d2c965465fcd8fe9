/* SPDX-License-Identifier: Apache-2.0 */
/* Sizes and durations as people write them, for flags and policy files.
 * One parser for each, shared by every module that takes such a value. */
#ifndef KIWI_UNITS_H
#define KIWI_UNITS_H

#include <stdint.h>

#include "kiwi/err.h"

/* "4096", "512k", "1.5M", "2G", "1T" (binary multiples, case-insensitive,
 * an optional trailing "B"/"iB"). "max" gives INT64_MAX. what names the
 * flag in errors. */
int kiwi_parse_size(const char *s, const char *what, int64_t *out, kiwi_err *err);
/* "30s", "500ms", "2m", "1h", "1.5s"; a bare number is seconds. */
int kiwi_parse_duration(const char *s, const char *what, uint64_t *ns_out, kiwi_err *err);

#endif
