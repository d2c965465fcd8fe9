/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the --uidmap/--gidmap/--user parsers: each input
 * line is a flag value ("u..." an extent, "U..." a user). Properties: never
 * crashes; a refused extent leaves the map as it was and says why; a kept
 * map never holds more than KIWI_USERNS_MAX_EXTENTS extents, an empty or
 * u32-overflowing range, or two overlapping ranges on either side.
 * A line "s..." is an /etc/subuid text (its ';' as newlines): a range
 * found has the owner's name, a start above 0, and room for all its ids. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kiwi/userns.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_map(const struct kiwi_id_extent *m, size_t n)
{
	if (n > KIWI_USERNS_MAX_EXTENTS)
		abort();
	for (size_t i = 0; i < n; i++) {
		if (!m[i].count || (uint64_t)m[i].inside + m[i].count > UINT32_MAX ||
		    (uint64_t)m[i].outside + m[i].count > UINT32_MAX)
			abort();
		if (!kiwi_idmap_maps(m, n, m[i].inside) || !kiwi_idmap_maps(m, n, m[i].inside + m[i].count - 1))
			abort();
		for (size_t j = 0; j < i; j++)
			if ((m[i].inside < m[j].inside + m[j].count && m[j].inside < m[i].inside + m[i].count) ||
			    (m[i].outside < m[j].outside + m[j].count && m[j].outside < m[i].outside + m[i].count))
				abort();
	}
}

static void check_subid(char *text)
{
	for (char *p = text; *p; p++)
		if (*p == ';')
			*p = '\n';
	size_t len = strlen(text);
	uint32_t start = 0;
	if (!kiwi_subid_find(text, len, KIWI_SUBID_OWNER, KIWI_SUBID_COUNT, &start))
		return;
	if (start == 0 || (uint64_t)start + KIWI_SUBID_COUNT > UINT32_MAX || !strstr(text, KIWI_SUBID_OWNER ":"))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	struct kiwi_id_extent map[KIWI_USERNS_MAX_EXTENTS], before[KIWI_USERNS_MAX_EXTENTS];
	size_t n = 0;
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		kiwi_err err = { 0 };
		if (line[0] == 's') {
			check_subid(line + 1);
			continue;
		}
		if (line[0] == 'U') {
			uint32_t uid = 7, gid = 7;
			if (kiwi_userns_parse_user(line + 1, &uid, &gid, &err) < 0 ? (uid != 7 || gid != 7 || !err.msg[0])
										: (uid == UINT32_MAX || gid == UINT32_MAX))
				abort();
			continue;
		}
		size_t was = n;
		memcpy(before, map, sizeof(map));
		if (kiwi_idmap_add(map, &n, line + (line[0] == 'u'), &err) < 0 &&
		    (n != was || memcmp(before, map, was * sizeof(*map)) || !err.msg[0]))
			abort();
		check_map(map, n);
	}
	free(text);
	return 0;
}
