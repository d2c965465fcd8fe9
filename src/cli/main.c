/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-run: a thin front end. Each subcommand lives in cmd_<verb>.c and is
 * dispatched from the table below. */
#include "cli.h"
#include "kiwi/oci_runtime.h"

#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
} commands[] = {
	{ "run", kiwi_cmd_run, "run a command in a fresh sandbox" },
	{ "phase", kiwi_cmd_phase, "install or verify: the two phases of a coding loop" },
	{ "gc", kiwi_cmd_gc, "remove what dead kiwi-runs left behind" },
	{ "plan", kiwi_cmd_plan, "print, as JSON, what phase install would run and why" },
	{ "list", kiwi_cmd_list, "list the running sandboxes" },
	{ "kill", kiwi_cmd_kill, "send a signal to a running sandbox" },
	{ "doctor", kiwi_cmd_doctor, "check what this host offers kiwi-run" },
	{ "policy", kiwi_cmd_policy, "check a policy file and print the effective policy" },
	{ "shell", kiwi_cmd_shell, "an interactive shell in a fresh sandbox" },
	{ "session", kiwi_cmd_session, "one sandbox across many commands: create, exec, list, destroy" },
};

void kiwi_cli_print_error(const kiwi_err *err)
{
	char text[1024];
	kiwi_error_format(err, text, sizeof(text));
	fprintf(stderr, "kiwi-run: %s\n", text);
}

int kiwi_cli_usage_error(const char *cmd, const char *fmt, ...)
{
	char text[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	fprintf(stderr, "kiwi-run: %s: %s (see `kiwi-run %s --help`)\n", cmd, text, cmd);
	return KIWI_EXIT_FAILED;
}

static void usage(FILE *out)
{
	fprintf(out, "usage: kiwi-run COMMAND [OPTIONS]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(out, "\n  --version  print the version\n  --help     print this help\n"
		     "\nAs an OCI runtime (create, start, state, kill, delete, run --bundle, exec, ps,\n"
		     "spec, features; global --root, --log, --log-format): see kiwi-run-oci(1).\n"
		     "\nSee kiwi-run(1).\n");
}

/* fds 0-2 must exist before anything else is opened: a pipe or a verdict
 * file landing on fd 1 would be handed to the sandbox as its stdout. */
static void ensure_stdio(void)
{
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd)
			_exit(KIWI_EXIT_FAILED);
}

/* The arguments, copied to the heap. Pid 1 of a sandbox is a copy of this
 * process, and /proc/1/cmdline, which the command can read, is read from
 * the memory the kernel placed our arguments in: pid 1 blanks it first
 * thing (kiwi_init_main), so nothing kiwi-run keeps may point into it. */
static char **own_arguments(int argc, char **argv)
{
	/* Kept in a static, not only in main's frame: the copy lives as long
	 * as the process, and LeakSanitizer sees it that way. */
	static char **copy;
	copy = calloc((size_t)argc + 1, sizeof(*copy));
	for (int i = 0; copy && i < argc; i++)
		if (!(copy[i] = strdup(argv[i])))
			return NULL;
	return copy;
}

int main(int argc, char **argv)
{
	ensure_stdio();
	if (!(argv = own_arguments(argc, argv))) {
		fprintf(stderr, "kiwi-run: args: cannot copy the arguments: out of memory\n");
		return KIWI_EXIT_FAILED;
	}
	/* A reader of our output that goes away must not kill the supervisor
	 * of a running sandbox; the command gets SIGPIPE back by default. */
	signal(SIGPIPE, SIG_IGN);
	/* The OCI runtime's command line (kiwi-run-oci(1)): global flags
	 * first, its verbs, `run --bundle`, or the name kiwi-oci. */
	if (kiwi_cli_is_oci(argc, argv))
		return kiwi_cmd_oci(argc, argv);
	if (argc < 2) {
		fprintf(stderr, "kiwi-run: args: no command given (see `kiwi-run --help`)\n");
		return KIWI_EXIT_FAILED;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("kiwi-run %s\nspec: %s\n", KIWI_VERSION, KIWI_OCI_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "kiwi-run: args: unknown command `%s` (see `kiwi-run --help`)\n", argv[1]);
	return KIWI_EXIT_FAILED;
}
