/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-run plan: prints, as JSON, what `kiwi-run phase install` would run
 * in a workspace and why. Reads the workspace, runs nothing. */
#include "cli.h"
#include "kiwi/plan.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <unistd.h>

static const struct option plan_options[] = {
	{ "workspace", required_argument, NULL, 'w' },
	{ "json", no_argument, NULL, 'j' },
	{ "help", no_argument, NULL, 'h' },
	{ 0 },
};

static int plan_usage(void)
{
	printf("usage: kiwi-run plan --workspace DIR [--json]\n\n"
	       "Prints, as JSON, the install command `kiwi-run phase install` would run in DIR,\n"
	       "chosen by the lockfiles there, and the evidence for the choice.\n"
	       "See kiwi-run-plan(1).\n");
	return 0;
}

int kiwi_cmd_plan(int argc, char **argv)
{
	const char *workspace = NULL;
	int c;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "+", plan_options, NULL)) != -1) {
		switch (c) {
		case 'w':
			workspace = optarg;
			break;
		case 'j':   /* JSON is the only output; the flag says so explicitly */
			break;
		case 'h':
			return plan_usage();
		default:
			return kiwi_cli_usage_error("plan", "unknown option or missing value `%s`", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return kiwi_cli_usage_error("plan", "unexpected argument `%s`", argv[optind]);
	if (!workspace)
		return kiwi_cli_usage_error("plan", "--workspace DIR is required");

	kiwi_err err = { 0 };
	int dirfd = open(workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0) {
		kiwi_error(&err, errno, "plan", "cannot open workspace `%s`", workspace);
		kiwi_cli_print_error(&err);
		return KIWI_EXIT_FAILED;
	}
	struct kiwi_plan plan;
	int r = kiwi_plan_workspace(dirfd, &plan, &err);
	close(dirfd);
	/* A refusal is a plan too: its evidence goes out before the error. */
	kiwi_err werr = { 0 };
	if ((r == 0 || plan.refused) && kiwi_plan_write_json(STDOUT_FILENO, &plan, &werr) < 0) {
		kiwi_plan_clear(&plan);
		kiwi_cli_print_error(&werr);
		return KIWI_EXIT_FAILED;
	}
	kiwi_plan_clear(&plan);
	if (r < 0) {
		kiwi_cli_print_error(&err);
		return KIWI_EXIT_FAILED;
	}
	return 0;
}
