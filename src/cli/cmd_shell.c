/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-run shell: an interactive session for a person. run's flags and
 * machinery with other defaults: a terminal (--tty), no output limit, no
 * network, a shell, and --workspace bound read-write as the working
 * directory. */
#include "cli.h"
#include "run.h"
#include "kiwi/cleanup.h"
#include "kiwi/sandbox.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define WORKSPACE "/workspace"

enum { OPT_WORKSPACE = RUN_OPT_EXTRA };

static const struct option shell_options[] = {
	{ "workspace", required_argument, NULL, OPT_WORKSPACE },
	{ 0 },
};

struct shell_opts {
	const char *workspace;
};

static int take_shell_option(void *ctx, struct run_args *a, int opt, const char *value)
{
	struct shell_opts *o = ctx;
	if (opt != OPT_WORKSPACE)
		return kiwi_cli_usage_error(a->cmd, "unexpected option");
	if (o->workspace)
		return kiwi_cli_usage_error(a->cmd, "--workspace given twice");
	if (!*value)
		return kiwi_cli_usage_error(a->cmd, "--workspace wants a directory");
	o->workspace = value;
	return 0;
}

/* An image whose default command is a shell alone (CMD ["bash"]) gets that
 * shell; anything else (a server, a test runner) is no session for a
 * person, and /bin/sh is. */
static bool is_shell(char *const *argv)
{
	static const char *const shells[] = { "sh", "bash", "ash", "dash", "zsh", "ksh", "mksh", "fish" };
	if (!argv || !argv[0] || argv[1])
		return false;
	const char *base = strrchr(argv[0], '/');
	base = base ? base + 1 : argv[0];
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(shells); i++)
		if (!strcmp(base, shells[i]))
			return true;
	return false;
}

static void shell_defaults(struct run_args *a)
{
	run_args_defaults(a);
	a->cfg.tty = true;
	/* A person watches the output; a ceiling would cut the session off. */
	a->cfg.output_limit = 0;
	a->command_optional = true;
}

/* What only the whole command line can tell, and the workspace. */
static int apply_shell_opts(struct run_args *a, const struct shell_opts *o)
{
	if (o->workspace) {
		if (run_args_add_bind(a, o->workspace, WORKSPACE, false) < 0) {
			kiwi_cli_print_error(&a->err);
			return KIWI_EXIT_FAILED;
		}
		if (!a->cwd_set) {
			a->cfg.cwd = WORKSPACE;
			a->cwd_set = true;
		}
	}
	if (run_args_tty_env(a) < 0) {
		kiwi_cli_print_error(&a->err);
		return KIWI_EXIT_FAILED;
	}
	return 0;
}

int kiwi_cmd_shell(int argc, char **argv)
{
	static char *const default_shell[] = { (char *)"/bin/sh", NULL };
	_cleanup_(run_session_release) struct run_session s;
	run_session_init(&s, "shell");
	struct shell_opts o = { 0 };
	const struct run_extra own = {
		.options = shell_options,
		.take = take_shell_option,
		.ctx = &o,
		.usage = "  --workspace DIR       bind DIR read-write at " WORKSPACE " and start there\n"
			 "  (shell's defaults: a terminal, no output limit, no network, /bin/sh)\n\n",
	};
	shell_defaults(&s.a);
	int r = run_args_parse(argc, argv, &s.a, &own);
	if (r != 0)
		return r == -2 ? 0 : KIWI_EXIT_FAILED;
	if (!isatty(STDIN_FILENO))
		return kiwi_cli_usage_error("shell", "stdin is not a terminal: a shell is for a person at "
					    "one (for a command, `kiwi-run run --tty -- CMD`)");
	if (apply_shell_opts(&s.a, &o) != 0)
		return KIWI_EXIT_FAILED;
	if (!s.a.cfg.argv && !s.a.image)
		s.a.cfg.argv = default_shell;
	if (run_session_open_verdict(&s) < 0)
		return KIWI_EXIT_FAILED;
	bool failed = run_session_prepare(&s) < 0;
	if (!failed && s.a.image_argv && !is_shell(s.a.image_argv))
		s.a.cfg.argv = default_shell;
	if (!failed)
		failed = kiwi_sandbox_run(&s.a.cfg, &s.res, &s.err) < 0;
	return run_session_finish(&s, failed);
}
