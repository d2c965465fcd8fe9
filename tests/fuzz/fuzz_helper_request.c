/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for kiwi-helper's parsers of outside input: the
 * request (from an unprivileged caller, read by a setuid-root process),
 * and, for inputs starting with 'C' or 'S', the admin config and the
 * subid file. Properties: never crashes or leaks; an accepted request
 * keeps its extents inside the bounds the helper relies on. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kiwi/helper.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_map(const struct kiwi_id_extent *m, size_t n)
{
	if (n > KIWI_HELPER_MAX_EXTENTS)
		abort();
	for (size_t i = 0; i < n; i++)
		if (m[i].count == 0 || (uint64_t)m[i].inside + m[i].count > UINT32_MAX ||
		    (uint64_t)m[i].outside + m[i].count > UINT32_MAX)
			abort();
}

static int no_group(const char *name, gid_t *gid)
{
	(void)name;
	*gid = 1000;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	gid_t groups[] = { 27, 1000 };
	struct kiwi_helper_caller who = { .uid = 1000, .gid = 1000, .name = "svc", .groups = groups, .n_groups = 2 };
	if (size > 0 && data[0] == 'C') {
		struct kiwi_helper_rule rule;
		int r = kiwi_helper_config_parse(text + 1, size - 1, &who, no_group, &rule, NULL);
		if (r == 1 && (rule.n_uids > KIWI_HELPER_MAX_RANGES || rule.n_gids > KIWI_HELPER_MAX_RANGES))
			abort();
		return 0;
	}
	if (size > 0 && data[0] == 'S') {
		struct kiwi_id_range r[8];
		size_t n = 0;
		kiwi_subid_parse(text + 1, size - 1, &who, r, 8, &n);
		for (size_t i = 0; i < n; i++)
			if (r[i].start == 0 || r[i].count == 0 || (uint64_t)r[i].start + r[i].count > UINT32_MAX)
				abort();
		return 0;
	}
	struct kiwi_helper_request req;
	kiwi_err err = { 0 };
	if (kiwi_helper_request_parse(text, size, &req, &err) < 0) {
		if (!err.msg[0])
			abort();
		return 0;
	}
	check_map(req.uid_map, req.n_uid_map);
	check_map(req.gid_map, req.n_gid_map);
	if (req.op == KIWI_HELPER_OP_IDMAP && (!req.n_uid_map || !req.n_gid_map))
		abort();
	if (req.egress.audit_path)
		abort();
	return 0;
}
