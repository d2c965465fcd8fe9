/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for kiwi-helper's parsers of outside input: the
 * request (from an unprivileged caller, read by a setuid-root process),
 * and, for inputs starting with 'C' or 'S', the admin config and the
 * subid file (and the config's egress bounds checked against a request).
 * Properties: never crashes or leaks; an accepted request keeps its
 * extents inside the bounds the helper relies on; a refusal says why. */
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
		if (r == 1 && (rule.n_uids > KIWI_HELPER_MAX_RANGES || rule.n_gids > KIWI_HELPER_MAX_RANGES ||
			       rule.egress.n_within > KIWI_HELPER_MAX_BOUNDS || rule.egress.n_never > KIWI_HELPER_MAX_BOUNDS ||
			       rule.egress.n_hosts > KIWI_HELPER_MAX_BOUNDS || rule.egress.n_dns > KIWI_HELPER_MAX_BOUNDS))
			abort();
		if (r == 1) {
			/* the bounds, against a request naming a bit of everything */
			struct kiwi_egress_config c;
			kiwi_egress_config_init(&c);
			kiwi_egress_config_add(&c, "allow-cidr", "10.0.0.0/8,192.0.2.0/24", NULL);
			kiwi_egress_config_add(&c, "allow-host", "a.example.org,10.1.2.3:22", NULL);
			kiwi_egress_config_add(&c, "dns", "192.0.2.53", NULL);
			kiwi_err err = { 0 };
			if (kiwi_helper_egress_check(&rule, &c, "helper.json", &err) < 0 && !err.msg[0])
				abort();
		}
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
