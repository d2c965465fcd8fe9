/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-run run: one command in a fresh sandbox, then a verdict. */
#include "cli.h"
#include "image.h"
#include "kiwi/cleanup.h"
#include "kiwi/egress.h"
#include "kiwi/sandbox.h"
#include "kiwi/seccomp.h"
#include "kiwi/units.h"
#include "kiwi/verdict.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

enum {
	OPT_ROOTFS = 0x100,
	OPT_HOSTNAME,
	OPT_CWD,
	OPT_ENV,
	OPT_BIND,
	OPT_RW_ROOT,
	OPT_PRESERVE_FD,
	OPT_VERDICT,
	OPT_VERDICT_FD,
	OPT_SECCOMP,
	OPT_TIMEOUT,
	OPT_KILL_GRACE,
	OPT_OUTPUT_LIMIT,
	OPT_OUTPUT_LIMIT_KILL,
	OPT_STDOUT,
	OPT_STDERR,
	OPT_DISK,
	OPT_MEMORY,
	OPT_MEMORY_SWAP,
	OPT_PIDS,
	OPT_CPUS,
	OPT_IO_WEIGHT,
	OPT_IO_MAX,
	OPT_CGROUP_PARENT,
	OPT_LANDLOCK,
	OPT_NETWORK,
	OPT_IMAGE,
	OPT_IMAGE_CACHE,
	OPT_EGRESS_SETTING,   /* every flag kiwi_egress_config_add() takes */
	OPT_HELP,
};

static const struct option run_options[] = {
	{ "rootfs", required_argument, NULL, OPT_ROOTFS },
	{ "hostname", required_argument, NULL, OPT_HOSTNAME },
	{ "cwd", required_argument, NULL, OPT_CWD },
	{ "env", required_argument, NULL, OPT_ENV },
	{ "bind", required_argument, NULL, OPT_BIND },
	{ "rw-root", no_argument, NULL, OPT_RW_ROOT },
	{ "preserve-fd", required_argument, NULL, OPT_PRESERVE_FD },
	{ "verdict", required_argument, NULL, OPT_VERDICT },
	{ "verdict-fd", required_argument, NULL, OPT_VERDICT_FD },
	{ "seccomp", required_argument, NULL, OPT_SECCOMP },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "kill-grace", required_argument, NULL, OPT_KILL_GRACE },
	{ "output-limit", required_argument, NULL, OPT_OUTPUT_LIMIT },
	{ "output-limit-kill", no_argument, NULL, OPT_OUTPUT_LIMIT_KILL },
	{ "stdout", required_argument, NULL, OPT_STDOUT },
	{ "stderr", required_argument, NULL, OPT_STDERR },
	{ "disk", required_argument, NULL, OPT_DISK },
	{ "memory", required_argument, NULL, OPT_MEMORY },
	{ "memory-swap", required_argument, NULL, OPT_MEMORY_SWAP },
	{ "pids", required_argument, NULL, OPT_PIDS },
	{ "cpus", required_argument, NULL, OPT_CPUS },
	{ "io-weight", required_argument, NULL, OPT_IO_WEIGHT },
	{ "io-max", required_argument, NULL, OPT_IO_MAX },
	{ "cgroup-parent", required_argument, NULL, OPT_CGROUP_PARENT },
	{ "landlock", no_argument, NULL, OPT_LANDLOCK },
	{ "network", required_argument, NULL, OPT_NETWORK },
	{ "image", required_argument, NULL, OPT_IMAGE },
	{ "image-cache", required_argument, NULL, OPT_IMAGE_CACHE },
	{ "egress", required_argument, NULL, OPT_EGRESS_SETTING },
	{ "allow-cidr", required_argument, NULL, OPT_EGRESS_SETTING },
	{ "allow-host", required_argument, NULL, OPT_EGRESS_SETTING },
	{ "allow-port", required_argument, NULL, OPT_EGRESS_SETTING },
	{ "dns", required_argument, NULL, OPT_EGRESS_SETTING },
	{ "egress-audit", required_argument, NULL, OPT_EGRESS_SETTING },
	{ "egress-pool", required_argument, NULL, OPT_EGRESS_SETTING },
	{ "help", no_argument, NULL, OPT_HELP },
	{ 0 },
};

struct run_args {
	struct kiwi_sandbox_config cfg;
	struct kiwi_bind *binds;
	int *preserve;
	char **env;          /* NULL-terminated; entries point into argv or are literals */
	size_t n_env;
	char **user_env;     /* --env, applied last */
	size_t n_user_env;
	const char *image, *image_cache;
	char **image_argv;   /* Entrypoint + Cmd when no command was given; freed */
	bool cwd_set;
	const char *verdict_path;
	int verdict_fd;
	const char *seccomp;  /* a profile path, "unconfined", or NULL: the default */
	const char *stdout_path, *stderr_path;
	struct kiwi_egress_config egress;
	bool network_egress;
	const char *egress_flag;  /* the first egress setting seen, for errors */
	kiwi_err err;         /* a flag's value that did not parse */
};

static void run_usage(void)
{
	printf("usage: kiwi-run run --rootfs DIR [OPTIONS] -- CMD [ARG...]\n"
	       "       kiwi-run run --image LAYOUT[:TAG] [OPTIONS] [-- CMD [ARG...]]\n\n"
	       "  --rootfs DIR          the root filesystem\n"
	       "  --image REF           an OCI image layout or archive, unpacked once into the\n"
	       "                        cache by kiwi-rootfs; its Env, Entrypoint, Cmd and\n"
	       "                        WorkingDir are the defaults\n"
	       "  --image-cache DIR     where unpacked images are kept\n"
	       "  --hostname NAME       hostname inside (default: kiwi)\n"
	       "  --cwd DIR             working directory inside (default: /)\n"
	       "  --env K=V             set a variable (repeatable); nothing else is inherited\n"
	       "  --bind SRC:DST[:ro]   bind a host path into the sandbox (repeatable)\n"
	       "  --rw-root             make the root writable (default: read-only)\n"
	       "  --preserve-fd N       pass fd N through (repeatable)\n"
	       "  --verdict FILE        write the JSON verdict to FILE\n"
	       "  --verdict-fd N        write the JSON verdict to fd N\n"
	       "  --landlock            add a Landlock ruleset under the mounts (see kiwi-run(1))\n"
	       "  --network none|egress only lo (default), or a filtered veth to the host\n"
	       "  --egress KIND         public_internet (default), private_network, host_allowlist\n"
	       "  --allow-cidr CIDR     --allow-host NAME[:PORT]  --allow-port PORT  --dns ADDR\n"
	       "  --egress-audit FILE   --egress-pool CIDR   (see kiwi-run-network(7))\n"
	       "  --seccomp FILE        an OCI seccomp profile instead of the default;\n"
	       "                        `unconfined` disables seccomp (debugging only)\n"
	       "  --timeout DURATION    kill the whole sandbox this long after exec (30s, 500ms)\n"
	       "  --kill-grace DURATION on timeout, SIGTERM first and SIGKILL this much later\n"
	       "  --output-limit SIZE   pass on at most SIZE of stdout and of stderr (default 1M)\n"
	       "  --output-limit-kill   kill the sandbox when a stream passes the limit\n"
	       "  --stdout FILE         the command's stdout goes to FILE (default: ours)\n"
	       "  --stderr FILE         the command's stderr goes to FILE (default: ours)\n"
	       "  --disk SIZE           size of the writable tmpfs mounts (/tmp, /dev/shm)\n"
	       "  --memory SIZE         memory.max of the sandbox's cgroup (swap 0 unless asked)\n"
	       "  --memory-swap SIZE    memory.swap.max\n"
	       "  --pids N              pids.max\n"
	       "  --cpus N              cpu.max as a number of CPUs (1.5)\n"
	       "  --io-weight N         io.weight (1-10000)\n"
	       "  --io-max LINE         io.max (\"MAJ:MIN rbps=N wbps=N ...\")\n"
	       "  --cgroup-parent PATH  where the sandbox's cgroup is made (cgroup v2 only)\n\n"
	       "See kiwi-run(1).\n");
}

/* The cgroup limits; the module's parsers name the value, we add the flag. */
static int parse_limit(struct kiwi_cgroup_limits *l, int opt, const char *value, kiwi_err *err)
{
	char *end;
	int r = 0;
	switch (opt) {
	case OPT_MEMORY:
		return kiwi_parse_size(value, "--memory", &l->memory_max, err);
	case OPT_MEMORY_SWAP:
		return kiwi_parse_size(value, "--memory-swap", &l->memory_swap_max, err);
	case OPT_PIDS:
		r = kiwi_parse_pids(value, &l->pids_max, err);
		return r < 0 ? kiwi_error_wrap(err, "--pids") : 0;
	case OPT_CPUS:
		r = kiwi_parse_cpus(value, &l->cpu_quota_us, &l->cpu_period_us, err);
		return r < 0 ? kiwi_error_wrap(err, "--cpus") : 0;
	case OPT_IO_WEIGHT:
		errno = 0;
		long w = strtol(value, &end, 10);
		if (errno || end == value || *end || w < 1 || w > 10000)
			return kiwi_error(err, EINVAL, "args", "--io-weight wants 1 to 10000, got `%s`", value);
		l->io_weight = (int)w;
		return 0;
	case OPT_IO_MAX:
		l->io_max = value;
		r = kiwi_cgroup_check_io_max(value, err);
		return r < 0 ? kiwi_error_wrap(err, "--io-max") : 0;
	default:
		return kiwi_error(err, EINVAL, "args", "unexpected option");
	}
}

static int parse_bound(struct run_args *a, int opt, const char *value)
{
	int64_t size;
	switch (opt) {
	case OPT_TIMEOUT:
		return kiwi_parse_duration(value, "--timeout", &a->cfg.timeout_ns, &a->err);
	case OPT_KILL_GRACE:
		return kiwi_parse_duration(value, "--kill-grace", &a->cfg.kill_grace_ns, &a->err);
	case OPT_OUTPUT_LIMIT:
		if (kiwi_parse_size(value, "--output-limit", &size, &a->err) < 0)
			return -1;
		a->cfg.output_limit = (uint64_t)size;
		return 0;
	case OPT_DISK:
		if (kiwi_parse_size(value, "--disk", &size, &a->err) < 0)
			return -1;
		if (size < 4096)
			return kiwi_error(&a->err, EINVAL, "args", "--disk must be at least 4k, got `%s`", value);
		a->cfg.disk_bytes = (uint64_t)size;
		return 0;
	default:
		return parse_limit(&a->cfg.limits, opt, value, &a->err);
	}
}

static int parse_fd(const char *s, int *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 0 || v > INT_MAX)
		return -1;
	*out = (int)v;
	return 0;
}

static int parse_bind(char *spec, struct kiwi_bind *b)
{
	char *colon = strchr(spec, ':');
	if (!colon || colon == spec || !colon[1])
		return -1;
	*colon = '\0';
	b->source = spec;
	b->dest = colon + 1;
	b->read_only = false;
	char *mode = strrchr(colon + 1, ':');
	if (mode && (!strcmp(mode, ":ro") || !strcmp(mode, ":rw"))) {
		b->read_only = !strcmp(mode, ":ro");
		*mode = '\0';
	}
	return b->dest[0] == '/' ? 0 : -1;
}

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

static void set_defaults(struct run_args *a)
{
	a->cfg.limits = (struct kiwi_cgroup_limits)KIWI_CGROUP_LIMITS_INIT;
	kiwi_egress_config_init(&a->egress);
	a->cfg.hostname = "kiwi";
	a->cfg.cwd = "/";
	a->cfg.output_limit = 1 << 20;
	a->cfg.stdout_dest = STDOUT_FILENO;
	a->cfg.stderr_dest = STDERR_FILENO;
	/* A terminal is never handed to the sandbox (the TIOCSTI class). */
	a->cfg.stdin_null = isatty(STDIN_FILENO);
	a->verdict_fd = -1;
}

/* The options whose value must be checked. Returns 0, or non-zero once the
 * error is printed. */
static int take_checked_option(struct run_args *a, int c, const char *name, const char *value)
{
	switch (c) {
	case OPT_NETWORK:
		if (strcmp(value, "none") && strcmp(value, "egress"))
			return kiwi_cli_usage_error("run", "--network wants none or egress, got `%s`", value);
		a->network_egress = !strcmp(value, "egress");
		return 0;
	case OPT_EGRESS_SETTING:
		if (!a->egress_flag)
			a->egress_flag = name;
		if (kiwi_egress_config_add(&a->egress, name, value, &a->err) == 0)
			return 0;
		kiwi_cli_print_error(&a->err);
		return -1;
	case OPT_ENV:
		if (!strchr(value, '=') || value[0] == '=')
			return kiwi_cli_usage_error("run", "--env wants K=V, got `%s`", value);
		a->user_env[a->n_user_env++] = (char *)value;
		return 0;
	case OPT_BIND:
		if (parse_bind((char *)value, &a->binds[a->cfg.n_binds]) < 0)
			return kiwi_cli_usage_error("run", "--bind wants SRC:/DST[:ro], got `%s`", value);
		a->cfg.n_binds++;
		return 0;
	case OPT_PRESERVE_FD:
		if (parse_fd(value, &a->preserve[a->cfg.n_preserve_fds]) < 0 ||
		    a->preserve[a->cfg.n_preserve_fds] < 3)
			return kiwi_cli_usage_error("run", "--preserve-fd wants a number >= 3, got `%s`", value);
		a->cfg.n_preserve_fds++;
		return 0;
	case OPT_VERDICT_FD:
		if (parse_fd(value, &a->verdict_fd) < 0 || fcntl(a->verdict_fd, F_GETFD) < 0)
			return kiwi_cli_usage_error("run", "--verdict-fd `%s` is not an open fd", value);
		return 0;
	default:
		/* The bounds and limits: sizes, durations, counts. */
		if (parse_bound(a, c, value) == 0)
			return 0;
		kiwi_cli_print_error(&a->err);
		return -1;
	}
}

/* What only the whole command line can tell. */
static int check_run_args(int argc, char **argv, struct run_args *a)
{
	if (!a->cfg.rootfs == !a->image)
		return kiwi_cli_usage_error("run", "give one of --rootfs and --image");
	if (a->egress_flag && !a->network_egress)
		return kiwi_cli_usage_error("run", "--%s needs --network egress", a->egress_flag);
	if (a->network_egress)
		a->cfg.egress = &a->egress;
	if (optind >= argc && !a->image)
		return kiwi_cli_usage_error("run", "no command given (put it after `--`)");
	if (a->verdict_path && a->verdict_fd >= 0)
		return kiwi_cli_usage_error("run", "--verdict and --verdict-fd exclude each other");
	for (size_t i = 0; i < a->cfg.n_preserve_fds; i++)
		if (a->preserve[i] == a->verdict_fd)
			return kiwi_cli_usage_error("run", "fd %d cannot be both the verdict and preserved",
						    a->verdict_fd);
	a->cfg.argv = optind < argc ? argv + optind : NULL;
	a->cfg.binds = a->binds;
	a->cfg.preserve_fds = a->preserve;
	return 0;
}

static int parse_run_args(int argc, char **argv, struct run_args *a)
{
	set_defaults(a);
	opterr = 0;
	optind = 1;
	int c, r, longindex = 0;
	while ((c = getopt_long(argc, argv, "+", run_options, &longindex)) != -1) {
		switch (c) {
		case OPT_ROOTFS: a->cfg.rootfs = optarg; break;
		case OPT_HOSTNAME: a->cfg.hostname = optarg; break;
		case OPT_CWD: a->cfg.cwd = optarg; a->cwd_set = true; break;
		case OPT_IMAGE: a->image = optarg; break;
		case OPT_IMAGE_CACHE: a->image_cache = optarg; break;
		case OPT_RW_ROOT: a->cfg.rw_root = true; break;
		case OPT_VERDICT: a->verdict_path = optarg; break;
		case OPT_SECCOMP: a->seccomp = optarg; break;
		case OPT_OUTPUT_LIMIT_KILL: a->cfg.output_limit_kill = true; break;
		case OPT_STDOUT: a->stdout_path = optarg; break;
		case OPT_STDERR: a->stderr_path = optarg; break;
		case OPT_CGROUP_PARENT: a->cfg.cgroup_parent = optarg; break;
		case OPT_LANDLOCK: a->cfg.landlock = true; break;
		case OPT_HELP:
			run_usage();
			return -2;
		case '?':
			if (optopt)
				return kiwi_cli_usage_error("run", "option `%s` is missing its value or unknown",
							    argv[optind - 1]);
			return kiwi_cli_usage_error("run", "unknown option `%s`", argv[optind - 1]);
		default:
			if ((r = take_checked_option(a, c, run_options[longindex].name, optarg)) != 0)
				return r;
			break;
		}
	}
	return check_run_args(argc, argv, a);
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

static int open_output_file(const char *path, const char *what, int *fd, kiwi_err *err)
{
	if (!path)
		return 0;
	*fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0644);
	if (*fd < 0)
		return kiwi_error(err, errno, "output", "cannot write %s `%s`", what, path);
	return 0;
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
	int fd = open(a->verdict_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0644);
	if (fd < 0)
		return kiwi_error(err, errno, "verdict", "cannot write verdict `%s`", a->verdict_path);
	return fd;
}

/* What stands between the parsed flags and the sandbox: the image, the
 * environment, the output files and the seccomp program. Every resource is
 * handed back through the pointers, which the caller releases. */
static int prepare_run(struct run_args *a, struct kiwi_cli_image *img, int *out_fd, int *err_fd,
		       struct kiwi_seccomp **filter, kiwi_err *err)
{
	if (a->image && apply_image(a, img, err) < 0)
		return -1;
	if (build_env(a, img->env) < 0)
		return kiwi_error(err, ENOMEM, "args", "cannot build the environment");
	if (open_output_file(a->stdout_path, "--stdout", out_fd, err) < 0 ||
	    open_output_file(a->stderr_path, "--stderr", err_fd, err) < 0)
		return -1;
	if (*out_fd >= 0)
		a->cfg.stdout_dest = *out_fd;
	if (*err_fd >= 0)
		a->cfg.stderr_dest = *err_fd;
	if (prepare_seccomp(a->seccomp, filter, err) < 0)
		return -1;
	a->cfg.seccomp = *filter;
	return 0;
}

/* Every run ends here, failed or not: one error line, the verdict, then
 * the network teardown, which the verdict must not wait for. */
static int finish_run(int vfd, struct kiwi_sandbox_result *res, const kiwi_err *err, bool failed)
{
	int status = kiwi_sandbox_exit_status(res, err, failed);
	if (failed)
		kiwi_cli_print_error(err);
	if (res->cleanup_failed)
		kiwi_cli_print_error(&res->cleanup_error);
	if (vfd >= 0) {
		struct kiwi_verdict v = { .result = res, .error = failed ? err : NULL, .exit_code = status };
		kiwi_err verr = { 0 };
		if (kiwi_verdict_write(vfd, &v, &verr) < 0) {
			kiwi_cli_print_error(&verr);
			status = KIWI_EXIT_FAILED;
		}
	}
	kiwi_err rerr = { 0 };
	if (kiwi_sandbox_result_release(res, &rerr) < 0)
		kiwi_cli_print_error(&rerr);
	return status;
}

int kiwi_cmd_run(int argc, char **argv)
{
	size_t slots = (size_t)argc + 1;
	_cleanup_free_ struct kiwi_bind *binds = calloc(slots, sizeof(*binds));
	_cleanup_free_ int *preserve = calloc(slots, sizeof(*preserve));
	_cleanup_free_ char **user_env = calloc(slots, sizeof(*user_env));
	if (!binds || !preserve || !user_env)
		return KIWI_EXIT_FAILED;
	struct run_args a = { .binds = binds, .preserve = preserve, .user_env = user_env };
	int r = parse_run_args(argc, argv, &a);
	if (r == -2)
		return 0;
	if (r != 0)
		return KIWI_EXIT_FAILED;

	/* The verdict's destination first: from here on every outcome,
	 * failures included, is written there. */
	kiwi_err err = { 0 };
	_cleanup_close_ int vfd = open_verdict(&a, &err);
	if (vfd < 0 && err.step[0]) {
		kiwi_cli_print_error(&err);
		return KIWI_EXIT_FAILED;
	}
	struct kiwi_sandbox_result res = { .exit_code = -1 };
	clock_gettime(CLOCK_REALTIME, &res.started_at);

	_cleanup_(kiwi_cli_image_clear) struct kiwi_cli_image img = { .pin_fd = -1 };
	_cleanup_close_ int out_fd = -1;
	_cleanup_close_ int err_fd = -1;
	_cleanup_seccomp_ struct kiwi_seccomp *filter = NULL;
	bool failed = prepare_run(&a, &img, &out_fd, &err_fd, &filter, &err) < 0;
	_cleanup_free_ char **env = a.env;
	_cleanup_free_ char **image_argv = a.image_argv;
	if (!failed)
		failed = kiwi_sandbox_run(&a.cfg, &res, &err) < 0;
	int status = finish_run(vfd, &res, &err, failed);
	if (a.verdict_fd >= 0)
		TAKE_FD(vfd);  /* the caller's fd: leave it open */
	return status;
}
