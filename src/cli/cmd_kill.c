/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-run kill ID [SIGNAL]: ends one of the caller's sandboxes. */
#include "cli.h"
#include "kiwi/cleanup.h"
#include "kiwi/registry.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const struct option kill_options[] = {
	{ "help", no_argument, NULL, 'h' },
	{ 0 },
};

static const struct {
	const char *name;
	int sig;
} signal_names[] = {
	{ "TERM", SIGTERM }, { "INT", SIGINT }, { "HUP", SIGHUP }, { "QUIT", SIGQUIT },
	{ "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "KILL", SIGKILL },
};

/* "TERM", "SIGTERM", "term" or "15"; -1 for anything kill does not send. */
static int parse_signal(const char *s)
{
	char *end;
	errno = 0;
	long n = strtol(s, &end, 10);
	if (!errno && end != s && !*end)
		return n > 0 && n < NSIG && kiwi_registry_signal_ok((int)n) ? (int)n : -1;
	if (!strncasecmp(s, "SIG", 3))
		s += 3;
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(signal_names); i++)
		if (!strcasecmp(s, signal_names[i].name))
			return signal_names[i].sig;
	return -1;
}

int kiwi_cmd_kill(int argc, char **argv)
{
	int c;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "+", kill_options, NULL)) != -1) {
		if (c != 'h')
			return kiwi_cli_usage_error("kill", "unknown option `%s`", argv[optind - 1]);
		printf("usage: kiwi-run kill ID [SIGNAL]\n\n"
		       "Sends SIGNAL (default TERM) to the command of the sandbox ID, through\n"
		       "the kiwi-run that follows it; KILL ends the whole sandbox at once.\n"
		       "Signals: TERM INT HUP QUIT USR1 USR2 KILL. See kiwi-run(1).\n");
		return 0;
	}
	if (optind >= argc)
		return kiwi_cli_usage_error("kill", "no sandbox id given");
	if (argc - optind > 2)
		return kiwi_cli_usage_error("kill", "unexpected argument `%s`", argv[optind + 2]);
	int sig = SIGTERM;
	if (argc - optind == 2 && (sig = parse_signal(argv[optind + 1])) < 0)
		return kiwi_cli_usage_error("kill", "signal `%s` is not one kiwi-run passes on (TERM, INT, "
					    "HUP, QUIT, USR1, USR2, KILL)", argv[optind + 1]);
	kiwi_err err = { 0 };
	if (kiwi_registry_kill(argv[optind], sig, &err) < 0) {
		kiwi_cli_print_error(&err);
		return KIWI_EXIT_FAILED;
	}
	return 0;
}
