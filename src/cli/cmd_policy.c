/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-run policy check FILE: loads a policy file exactly as the phases
 * would and prints the effective policy as JSON, or its one error. */
#include "cli.h"
#include "kiwi/json.h"
#include "kiwi/policy.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

static const struct option policy_options[] = {
	{ "help", no_argument, NULL, 'h' },
	{ 0 },
};

static void policy_usage(void)
{
	printf("usage: kiwi-run policy check FILE\n\n"
	       "Checks a policy file (kiwi-run-policy(5)) and prints the effective\n"
	       "policy, every default spelt out, as JSON. Exit 0 when it is valid,\n"
	       "125 with one error line naming the file and the key otherwise.\n");
}

static int policy_check(const char *path)
{
	_cleanup_policy_ struct kiwi_policy p;
	kiwi_err err = { 0 };
	if (kiwi_policy_load(path, &p, &err) < 0) {
		kiwi_cli_print_error(&err);
		return KIWI_EXIT_FAILED;
	}
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(true);
	if (!w) {
		kiwi_error(&err, ENOMEM, "policy", "cannot write the policy");
		kiwi_cli_print_error(&err);
		return KIWI_EXIT_FAILED;
	}
	kiwi_policy_write_json(&p, w);
	size_t len = 0;
	const char *text = kiwi_jw_text(w, &len);
	if (fwrite(text, 1, len, stdout) != len || (len && text[len - 1] != '\n' && putchar('\n') == EOF) ||
	    fflush(stdout) != 0) {
		kiwi_error(&err, errno, "policy", "cannot write to stdout");
		kiwi_cli_print_error(&err);
		return KIWI_EXIT_FAILED;
	}
	return 0;
}

int kiwi_cmd_policy(int argc, char **argv)
{
	int c;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "+", policy_options, NULL)) != -1) {
		switch (c) {
		case 'h':
			policy_usage();
			return 0;
		default:
			return kiwi_cli_usage_error("policy", "unknown option `%s`", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return kiwi_cli_usage_error("policy", "no action given: want `check FILE`");
	if (strcmp(argv[optind], "check"))
		return kiwi_cli_usage_error("policy", "unknown action `%s`: want `check FILE`", argv[optind]);
	if (optind + 2 != argc)
		return kiwi_cli_usage_error("policy", "`check` wants exactly one FILE");
	return policy_check(argv[optind + 1]);
}
