/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-run gc: removes what dead kiwi-runs left behind. Everything kiwi-run
 * creates is tagged, and a live owner holds a lock on it, so gc never takes
 * a running sandbox's resources. */
#include "cli.h"
#include "kiwi/cgroup.h"
#include "kiwi/egress.h"

#include <getopt.h>
#include <stdio.h>

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
			       "kiwi-runs that are gone. See kiwi-run(1).\n");
			return 0;
		default:
			return kiwi_cli_usage_error("gc", "unknown option `%s`", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return kiwi_cli_usage_error("gc", "unexpected argument `%s`", argv[optind]);

	kiwi_err err = { 0 };
	unsigned cgroups = 0, network = 0;
	if (kiwi_cgroup_gc(cgroup_parent, &cgroups, &err) < 0 || kiwi_egress_gc(&network, &err) < 0) {
		kiwi_cli_print_error(&err);
		return KIWI_EXIT_FAILED;
	}
	printf("{\"cgroups_removed\":%u,\"network_removed\":%u}\n", cgroups, network);
	return 0;
}
