/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-rootfs gc: prune the cache of unpacked roots. */
#include "cli.h"
#include "kiwi/cleanup.h"
#include "kiwi/oci_image.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

int cmd_gc(int argc, char **argv)
{
	enum { OPT_CACHE_DIR = 256, OPT_OLDER, OPT_JSON };
	static const struct option opts[] = {
		{ "cache-dir", required_argument, NULL, OPT_CACHE_DIR },
		{ "older-than", required_argument, NULL, OPT_OLDER },
		{ "json", no_argument, NULL, OPT_JSON },
		{ 0 },
	};
	const char *cache_dir = NULL;
	int64_t older = 0;
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case OPT_CACHE_DIR: cache_dir = optarg; break;
		case OPT_OLDER: {
			char *end;
			double days = strtod(optarg, &end);
			if (*end || end == optarg || days < 0 || days > 1e6)
				return cli_usage("--older-than `%s` is not a number of days", optarg);
			older = (int64_t)(days * 86400);
			break;
		}
		case OPT_JSON: cli_json = true; break;
		default: return cli_usage("gc: bad option");
		}
	}
	if (optind != argc)
		return cli_usage("gc takes no arguments");
	kiwi_err err = { 0 };
	struct kiwi_gc_stats st;
	if (kiwi_image_cache_gc(cache_dir, older, &st, &err) < 0)
		return cli_fail(&err);
	if (!cli_json) {
		printf("removed %u, kept %u, in use %u\n", st.removed, st.kept, st.busy);
		return 0;
	}
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
	if (!w)
		return 0;
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "removed");
	kiwi_jw_int(w, st.removed);
	kiwi_jw_key(w, "kept");
	kiwi_jw_int(w, st.kept);
	kiwi_jw_key(w, "busy");
	kiwi_jw_int(w, st.busy);
	kiwi_jw_close_object(w);
	cli_print_json(w);
	return 0;
}
