/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-run run: one command in a fresh sandbox, then a verdict. */
#include "cli.h"
#include "run.h"
#include "kiwi/cleanup.h"
#include "kiwi/fileio.h"
#include "kiwi/egress.h"
#include "kiwi/sandbox.h"
#include "kiwi/seccomp.h"
#include "kiwi/verdict.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* The environment is built, never copied: PATH and HOME, then --env in
 * order, a later K= replacing an earlier one. */
static int add_env(struct run_args *a, char *kv)
{
	char *eq = strchr(kv, '=');
	if (!eq || eq == kv)
		return -1;
	size_t klen = (size_t)(eq - kv) + 1;
	for (size_t i = 0; i < a->n_env; i++)
		if (!strncmp(a->env[i], kv, klen)) {
			a->env[i] = kv;
			return 0;
		}
	a->env[a->n_env++] = kv;
	return 0;
}

/* The environment is built, never copied: PATH and HOME, the image's Env,
 * then --env; a later K= replaces an earlier one. */
static int build_env(struct run_args *a, char **image_env)
{
	size_t n = 2 + a->n_user_env;
	for (char **e = image_env; e && *e; e++)
		n++;
	a->env = calloc(n + 1, sizeof(*a->env));
	if (!a->env)
		return -1;
	add_env(a, (char *)"PATH=" DEFAULT_PATH);
	add_env(a, (char *)"HOME=/root");
	for (char **e = image_env; e && *e; e++)
		if (strchr(*e, '=') && **e != '=')
			add_env(a, *e);
	for (size_t i = 0; i < a->n_user_env; i++)
		add_env(a, a->user_env[i]);
	a->cfg.envp = a->env;
	return 0;
}

/* The image's Entrypoint followed by its Cmd, when no command was given. */
static char **image_command(const struct kiwi_cli_image *img)
{
	size_t n = 0, k = 0;
	for (char **p = img->entrypoint; p && *p; p++)
		n++;
	for (char **p = img->cmd; p && *p; p++)
		n++;
	char **argv = calloc(n + 1, sizeof(*argv));
	for (char **p = img->entrypoint; argv && p && *p; p++)
		argv[k++] = *p;
	for (char **p = img->cmd; argv && p && *p; p++)
		argv[k++] = *p;
	return argv;
}

/* --image: the cache entry becomes the rootfs, pinned for the whole run,
 * and the image's defaults apply where no flag said otherwise. */
static int apply_image(struct run_args *a, struct kiwi_cli_image *img, kiwi_err *err)
{
	if (kiwi_cli_image_resolve(a->image, a->image_cache, img, err) < 0)
		return -1;
	a->cfg.rootfs = img->rootfs;
	if (!a->cwd_set && img->working_dir)
		a->cfg.cwd = img->working_dir;
	if (!a->cfg.argv) {
		a->cfg.argv = a->image_argv = image_command(img);
		if (!a->cfg.argv || !a->cfg.argv[0])
			return kiwi_error(err, EINVAL, "image", "`%s` has no Entrypoint or Cmd: give a "
					  "command after `--`", a->image);
	}
	return 0;
}

/* The filter is compiled once, here in the parent; the sandbox only loads
 * the finished program. */
static int prepare_seccomp(const char *choice, struct kiwi_seccomp **out, kiwi_err *err)
{
	if (choice && !strcmp(choice, "unconfined")) {
		fprintf(stderr, "kiwi-run: WARNING: --seccomp unconfined: the sandbox may use every "
				"system call of the host kernel; for debugging only\n");
		*out = NULL;
		return 0;
	}
	return choice ? kiwi_seccomp_compile_file(choice, out, err) : kiwi_seccomp_compile_default(out, err);
}

/* A sandbox that can reach the filter cache does not use it (its entries
 * are MACed, kiwi-run-seccomp(5), so it cannot change another run's). */
static void skip_reached_cache(const struct kiwi_sandbox_config *cfg)
{
	bool skip = cfg->rw_root && kiwi_seccomp_cache_skip_if_reached(cfg->rootfs);
	for (size_t i = 0; !skip && i < cfg->n_binds; i++)
		skip = kiwi_seccomp_cache_skip_if_reached(cfg->binds[i].source);
	if (skip)
		KIWI_DEBUG(cfg->debug, "run", 0, "seccomp", "the filter cache is within the sandbox's reach: not used");
}

static int open_output_file(const char *path, const char *what, int *fd, kiwi_err *err)
{
	if (!path)
		return 0;
	*fd = kiwi_open_output(path, KIWI_OUTPUT_TRUNC, 0644, "output", what, err);
	return *fd < 0 ? -1 : 0;
}

/* The verdict destination is opened before anything else happens, so a
 * path that cannot be written fails the run up front. */
static int open_verdict(struct run_args *a, kiwi_err *err)
{
	if (a->verdict_fd >= 0) {
		/* Ours alone: it must not slip into the sandbox. Stdio (0-2) is
		 * shared with the command on purpose, and stays so. */
		if (a->verdict_fd > 2 && fcntl(a->verdict_fd, F_SETFD, FD_CLOEXEC) < 0)
			return kiwi_error(err, errno, "verdict", "cannot use fd %d", a->verdict_fd);
		return a->verdict_fd;
	}
	if (!a->verdict_path)
		return -1;
	return kiwi_open_output(a->verdict_path, KIWI_OUTPUT_TRUNC, 0644, "verdict", "verdict", err);
}

/* What stands between the parsed flags and the sandbox: the image, the
 * environment, the output files and the seccomp program. Every resource is
 * held by the session, which releases them. */
int run_session_prepare_output(struct run_session *s)
{
	struct run_args *a = &s->a;
	if (open_output_file(a->stdout_path, "--stdout", &s->out_fd, &s->err) < 0 ||
	    open_output_file(a->stderr_path, "--stderr", &s->err_fd, &s->err) < 0)
		return -1;
	if (s->out_fd >= 0)
		a->cfg.stdout_dest = s->out_fd;
	if (s->err_fd >= 0)
		a->cfg.stderr_dest = s->err_fd;
	return 0;
}

int run_session_prepare(struct run_session *s)
{
	struct run_args *a = &s->a;
	kiwi_err *err = &s->err;
	int64_t t = KIWI_DEBUG_NOW(a->cfg.debug);
	if (a->image && apply_image(a, &s->img, err) < 0)
		return -1;
	if (a->image)
		KIWI_DEBUG(a->cfg.debug, "run", t, "image", "%s -> %s", a->image, a->cfg.rootfs);
	if (build_env(a, s->img.env) < 0)
		return kiwi_error(err, ENOMEM, "args", "cannot build the environment");
	if (run_session_prepare_output(s) < 0)
		return -1;
	t = KIWI_DEBUG_NOW(a->cfg.debug);
	skip_reached_cache(&a->cfg);
	if (prepare_seccomp(a->seccomp, &s->filter, err) < 0)
		return -1;
	KIWI_DEBUG(a->cfg.debug, "run", t, "seccomp", "%s", s->filter ? (a->seccomp ? a->seccomp : "default profile")
								  : "unconfined");
	a->cfg.seccomp = s->filter;
	return 0;
}

/* Every run ends here, failed or not: one error line, the verdict, then
 * the network teardown, which the verdict must not wait for. */
int run_session_finish(struct run_session *s, bool failed)
{
	int status = kiwi_sandbox_exit_status(&s->res, &s->err, failed);
	/* failed before the sandbox was asked for: what the caller asked */
	if (!s->res.network)
		s->res.network = s->a.network_egress ? "egress" : s->a.cfg.net_audit ? "audit" : "none";
	if (failed)
		kiwi_cli_print_error(&s->err);
	if (s->res.cleanup_failed)
		kiwi_cli_print_error(&s->res.cleanup_error);
	if (s->res.registry_failed)
		kiwi_cli_print_error(&s->res.registry_error);
	if (s->vfd >= 0) {
		struct kiwi_verdict v = {
			.result = &s->res,
			.error = failed ? &s->err : NULL,
			.exit_code = status,
			.extra = s->verdict_extra,
			.extra_ctx = s->verdict_ctx,
		};
		kiwi_err verr = { 0 };
		if (kiwi_verdict_write(s->vfd, &v, &verr) < 0) {
			kiwi_cli_print_error(&verr);
			status = KIWI_EXIT_FAILED;
		}
	}
	kiwi_err rerr = { 0 };
	if (kiwi_sandbox_result_release(&s->res, &rerr) < 0)
		kiwi_cli_print_error(&rerr);
	return status;
}

void run_session_init(struct run_session *s, const char *cmd)
{
	*s = (struct run_session){
		.a = { .cmd = cmd },
		.vfd = -1,
		.res = { .exit_code = -1 },
		.img = { .pin_fd = -1 },
		.out_fd = -1,
		.err_fd = -1,
	};
}

void run_session_release(struct run_session *s)
{
	kiwi_cli_image_clear(&s->img);
	kiwi_closep(&s->out_fd);
	kiwi_closep(&s->err_fd);
	kiwi_seccomp_free(s->filter);
	s->filter = NULL;
	if (s->vfd >= 0 && s->vfd != s->a.verdict_fd)
		close(s->vfd);  /* the caller's --verdict-fd stays open */
	s->vfd = -1;
	run_args_release(&s->a);
}

int run_session_open_verdict(struct run_session *s)
{
	s->vfd = open_verdict(&s->a, &s->err);
	if (s->vfd < 0 && s->err.step[0]) {
		kiwi_cli_print_error(&s->err);
		return -1;
	}
	clock_gettime(CLOCK_REALTIME, &s->res.started_at);
	return 0;
}

int run_args_tty_env(struct run_args *a)
{
	/* The one thing of the caller's environment a terminal session needs:
	 * what the terminal at the other end of the relay understands. */
	static char term[128];
	const char *t = getenv("TERM");
	for (size_t i = 0; i < a->n_user_env; i++)
		if (!strncmp(a->user_env[i], "TERM=", 5))
			return 0;  /* --env TERM= wins */
	snprintf(term, sizeof(term), "TERM=%s", t && *t && strlen(t) < sizeof(term) - 5 ? t : "xterm");
	return run_args_add_env(a, term);
}

enum { OPT_TTY = RUN_OPT_EXTRA };

static const struct option run_own_options[] = {
	{ "tty", no_argument, NULL, OPT_TTY },
	{ 0 },
};

static int take_run_option(void *ctx, struct run_args *a, int opt, const char *value)
{
	(void)ctx;
	(void)value;
	if (opt == OPT_TTY)
		a->cfg.tty = true;
	return 0;
}

int kiwi_cmd_run(int argc, char **argv)
{
	_cleanup_(run_session_release) struct run_session s;
	run_session_init(&s, "run");
	const struct run_extra own = {
		.options = run_own_options,
		.take = take_run_option,
		.usage = "  --tty                 a terminal inside, relayed to ours (see kiwi-run-shell(1))\n",
	};
	int r = run_args_parse(argc, argv, &s.a, &own);
	if (r != 0)
		return r == -2 ? 0 : KIWI_EXIT_FAILED;
	if (s.a.cfg.tty && run_args_tty_env(&s.a) < 0) {
		kiwi_cli_print_error(&s.a.err);
		return KIWI_EXIT_FAILED;
	}
	if (run_session_open_verdict(&s) < 0)
		return KIWI_EXIT_FAILED;
	bool failed = run_session_prepare(&s) < 0 || kiwi_sandbox_run(&s.a.cfg, &s.res, &s.err) < 0;
	return run_session_finish(&s, failed);
}
