/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-run gc: removes what dead kiwi-runs left behind. Everything kiwi-run
 * creates is tagged, and a live owner holds a lock on it, so gc never takes
 * a running sandbox's resources. */
#include "cli.h"
#include "kiwi/cgroup.h"
#include "kiwi/egress.h"
#include "kiwi/json.h"
#include "kiwi/registry.h"
#include "kiwi/session.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>

static const struct option gc_options[] = {
	{ "cgroup-parent", required_argument, NULL, 'c' },
	{ "help", no_argument, NULL, 'h' },
	{ 0 },
};

int kiwi_cmd_gc(int argc, char **argv)
{
	const char *cgroup_parent = NULL;
	int c;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "+", gc_options, NULL)) != -1) {
		switch (c) {
		case 'c':
			cgroup_parent = optarg;
			break;
		case 'h':
			printf("usage: kiwi-run gc [--cgroup-parent PATH]\n\n"
			       "Removes the cgroups, veths, nftables tables and address leases of\n"
			       "kiwi-runs that are gone, their stale `list` entries, and the scratch\n"
			       "and unnamed blobs that killed `session snapshot`s left in layouts.\n"
			       "See kiwi-run(1).\n");
			return 0;
		default:
			return kiwi_cli_usage_error("gc", "unknown option `%s`", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return kiwi_cli_usage_error("gc", "unexpected argument `%s`", argv[optind]);

	/* Each sweep runs whatever the other found: a host (or a network
	 * namespace's view of /sys) without cgroup v2 still has veths. */
	kiwi_err cg_err = { 0 }, net_err = { 0 }, reg_err = { 0 }, snap_err = { 0 };
	unsigned cgroups = 0, network = 0, entries = 0, snaps = 0, scratch = 0, blobs = 0;
	bool cg_failed = kiwi_cgroup_gc(cgroup_parent, &cgroups, &cg_err) < 0;
	/* Veths and tables live on the host's side, made by root (or by
	 * kiwi-helper, which removes its own): a rootless caller has none to
	 * collect, and no right to list them. */
	bool net_failed = geteuid() == 0 && kiwi_egress_gc(&network, &net_err) < 0;
	bool reg_failed = kiwi_registry_gc(&entries, &reg_err) < 0;
	/* The scratch of snapshots whose writer was killed midway, and the
	 * blobs it committed that no index names. */
	bool snap_failed = kiwi_session_scratch_gc(&snaps, &scratch, &blobs, &snap_err) < 0;
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
	if (w) {
		kiwi_jw_open_object(w);
		kiwi_jw_key(w, "cgroups_removed");
		kiwi_jw_int(w, cgroups);
		kiwi_jw_key(w, "network_removed");
		kiwi_jw_int(w, network);
		kiwi_jw_key(w, "registry_removed");
		kiwi_jw_int(w, entries);
		kiwi_jw_key(w, "snapshot_scratch_removed");
		kiwi_jw_int(w, scratch);
		kiwi_jw_key(w, "snapshot_blobs_removed");
		kiwi_jw_int(w, blobs);
		kiwi_jw_close_object(w);
		printf("%s\n", kiwi_jw_text(w, NULL));
	}
	if (cg_failed)
		kiwi_cli_print_error(&cg_err);
	if (net_failed)
		kiwi_cli_print_error(&net_err);
	if (reg_failed)
		kiwi_cli_print_error(&reg_err);
	if (snap_failed)
		kiwi_cli_print_error(&snap_err);
	return cg_failed || net_failed || reg_failed || snap_failed ? KIWI_EXIT_FAILED : 0;
}
