/* SPDX-License-Identifier: Apache-2.0 */
/* The flags of every command that runs a sandbox: run's own table, plus
 * whatever options the command adds (struct run_extra). */
#include "cli.h"
#include "run.h"
#include "kiwi/cleanup.h"
#include "kiwi/fslayer.h"
#include "kiwi/loopfs.h"
#include "kiwi/units.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


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
	OPT_DISK_BACKEND,
	OPT_DISK_DIR,
	OPT_WORKSPACE_MODE,
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
	OPT_DEBUG,
	OPT_UIDMAP,
	OPT_GIDMAP,
	OPT_USER,
	OPT_HOST_ROOT_MAP,
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
	{ "disk-backend", required_argument, NULL, OPT_DISK_BACKEND },
	{ "disk-dir", required_argument, NULL, OPT_DISK_DIR },
	{ "workspace-mode", required_argument, NULL, OPT_WORKSPACE_MODE },
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
	{ "debug", no_argument, NULL, OPT_DEBUG },
	{ "uidmap", required_argument, NULL, OPT_UIDMAP },
	{ "gidmap", required_argument, NULL, OPT_GIDMAP },
	{ "user", required_argument, NULL, OPT_USER },
	{ "host-root-map", no_argument, NULL, OPT_HOST_ROOT_MAP },
	{ "help", no_argument, NULL, OPT_HELP },
	{ 0 },
};

static void run_usage(const char *cmd, const struct run_extra *x)
{
	if (x && x->synopsis)
		fputs(x->synopsis, stdout);
	else
		printf("usage: kiwi-run %s --rootfs DIR [OPTIONS] -- CMD [ARG...]\n"
		       "       kiwi-run %s --image LAYOUT[:TAG] [OPTIONS] [-- CMD [ARG...]]\n\n", cmd, cmd);
	if (x && x->usage)
		fputs(x->usage, stdout);
	printf("  --rootfs DIR          the root filesystem\n"
	       "  --image REF           an OCI image layout or archive, unpacked once into the\n"
	       "                        cache by kiwi-rootfs; its Env, Entrypoint, Cmd and\n"
	       "                        WorkingDir are the defaults\n"
	       "  --image-cache DIR     where unpacked images are kept\n"
	       "  --hostname NAME       hostname inside (default: kiwi)\n"
	       "  --cwd DIR             working directory inside (default: /)\n"
	       "  --env K=V             set a variable (repeatable); nothing else is inherited\n"
	       "  --bind SRC:DST[:ro|:layer]  bind a host path into the sandbox (repeatable);\n"
	       "                        :layer writes through the sandbox's layer (--disk)\n"
	       "  --workspace-mode land|discard  what becomes of :layer binds' changes at the\n"
	       "                        end (default land: applied to the host directory)\n"
	       "  --rw-root             make the root writable (default: read-only)\n"
	       "  --preserve-fd N       pass fd N through (repeatable)\n"
	       "  --verdict FILE        write the JSON verdict to FILE\n"
	       "  --verdict-fd N        write the JSON verdict to fd N\n"
	       "  --landlock            add a Landlock ruleset under the mounts (see kiwi-run(1))\n"
	       "  --network none|egress|audit  only lo (default), a filtered veth to the host,\n"
	       "                        or only lo with every attempt out logged and refused\n"
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
	       "  --disk SIZE           bound on everything the sandbox writes: /tmp, /dev/shm,\n"
	       "                        --rw-root, the workspace (default 1G)\n"
	       "  --disk-backend tmpfs|loop  what holds that layer: memory (default) or an\n"
	       "                        ext4 image on a loop device (not root: from kiwi-helper)\n"
	       "  --disk-dir DIR        root: where the loop backend's unnamed image is made\n"
	       "                        (default /var/lib/kiwi-run/layers)\n"
	       "  --memory SIZE         memory.max of the sandbox's cgroup (swap 0 unless asked)\n"
	       "  --memory-swap SIZE    memory.swap.max\n"
	       "  --pids N              pids.max\n"
	       "  --cpus N              cpu.max as a number of CPUs (1.5)\n"
	       "  --io-weight N         io.weight (1-10000)\n"
	       "  --io-max LINE         io.max (\"MAJ:MIN rbps=N wbps=N ...\")\n"
	       "  --cgroup-parent PATH  where the sandbox's cgroup is made (cgroup v2 only)\n"
	       "  --uidmap IN:OUT:N     map N uids from OUT (host) to IN (repeatable, up to 5);\n"
	       "  --gidmap IN:OUT:N     not root: through kiwi-helper(8); one alone sets both\n"
	       "  --user UID[:GID]      the ids the command runs as inside (default 0:0)\n"
	       "  --host-root-map       root: the sandbox's root is the host's (map 0 0 1),\n"
	       "                        not kiwi's /etc/subuid range with idmapped mounts\n"
	       "  --debug               print each setup step with its timing on stderr\n\n"
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
	b->layered = false;
	char *mode = strrchr(colon + 1, ':');
	if (mode && (!strcmp(mode, ":ro") || !strcmp(mode, ":rw") || !strcmp(mode, ":layer"))) {
		b->read_only = !strcmp(mode, ":ro");
		b->layered = !strcmp(mode, ":layer");
		*mode = '\0';
	}
	return b->dest[0] == '/' ? 0 : -1;
}

int run_args_add_bind(struct run_args *a, const char *source, const char *dest, bool read_only)
{
	if (a->cfg.n_binds == a->bind_cap) {
		size_t cap = a->bind_cap ? 2 * a->bind_cap : 8;
		struct kiwi_bind *b = reallocarray(a->binds, cap, sizeof(*b));
		if (!b)
			return kiwi_error(&a->err, ENOMEM, "args", "too many binds");
		a->binds = b;
		a->bind_cap = cap;
	}
	a->binds[a->cfg.n_binds++] = (struct kiwi_bind){ source, dest, read_only, false };
	a->cfg.binds = a->binds;
	return 0;
}

int run_args_add_workspace(struct run_args *a, const char *source, const char *dest)
{
	if (run_args_add_bind(a, source, dest, false) < 0)
		return -1;
	a->binds[a->cfg.n_binds - 1].layered = true;
	return 0;
}

int run_args_add_env(struct run_args *a, const char *kv)
{
	if (a->n_user_env == a->user_env_cap) {
		size_t cap = a->user_env_cap ? 2 * a->user_env_cap : 8;
		char **e = reallocarray(a->user_env, cap, sizeof(*e));
		if (!e)
			return kiwi_error(&a->err, ENOMEM, "args", "too many variables");
		a->user_env = e;
		a->user_env_cap = cap;
	}
	a->user_env[a->n_user_env++] = (char *)kv;
	return 0;
}

void run_args_release(struct run_args *a)
{
	free(a->binds);
	free(a->preserve);
	free(a->user_env);
	free(a->env);
	free(a->image_argv);
	a->binds = NULL;
	a->preserve = NULL;
	a->user_env = a->env = a->image_argv = NULL;
}

void run_args_defaults(struct run_args *a)
{
	a->defaults_set = true;
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

static const struct {
	const char *flag;
	int opt;
} bound_flags[] = {
	{ "timeout", OPT_TIMEOUT }, { "kill-grace", OPT_KILL_GRACE },
	{ "output-limit", OPT_OUTPUT_LIMIT }, { "disk", OPT_DISK },
	{ "memory", OPT_MEMORY }, { "memory-swap", OPT_MEMORY_SWAP },
	{ "pids", OPT_PIDS }, { "cpus", OPT_CPUS },
	{ "io-weight", OPT_IO_WEIGHT }, { "io-max", OPT_IO_MAX },
};

int run_args_set_bound(struct run_args *a, const char *flag, const char *value)
{
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(bound_flags); i++)
		if (!strcmp(flag, bound_flags[i].flag))
			return parse_bound(a, bound_flags[i].opt, value);
	return kiwi_error(&a->err, EINVAL, "args", "`%s` is not a bound", flag);
}

/* --uidmap, --gidmap, --user: checked as they come (form, overlaps,
 * count); whether --user is mapped is the launcher's to say. */
static int take_id_option(struct run_args *a, int c, const char *value)
{
	struct kiwi_idmap *m = &a->idmap;
	kiwi_err e = { 0 };
	int r;
	if (c == OPT_USER) {
		r = kiwi_userns_parse_user(value, &a->cfg.uid, &a->cfg.gid, &e);
	} else if (c == OPT_UIDMAP) {
		r = kiwi_idmap_add(m->uid, &m->n_uid, value, &e);
	} else {
		r = kiwi_idmap_add(m->gid, &m->n_gid, value, &e);
	}
	if (r < 0)
		return kiwi_cli_usage_error(a->cmd, "--%s: %s", c == OPT_USER ? "user" : c == OPT_UIDMAP ? "uidmap" : "gidmap",
					    e.msg);
	return 0;
}

/* The options whose value must be checked. Returns 0, or non-zero once the
 * error is printed. */
static int take_checked_option(struct run_args *a, int c, const char *name, const char *value)
{
	switch (c) {
	case OPT_WORKSPACE_MODE:
		if (!strcmp(value, "land") || !strcmp(value, "discard")) {
			a->cfg.ws_mode = !strcmp(value, "land") ? KIWI_WS_LAND : KIWI_WS_DISCARD;
			return 0;
		}
		return kiwi_cli_usage_error(a->cmd, "--workspace-mode wants land or discard, got `%s`", value);
	case OPT_DISK_BACKEND:
		if (!strcmp(value, "tmpfs") || !strcmp(value, "loop")) {
			a->cfg.disk_backend = !strcmp(value, "tmpfs") ? KIWI_DISK_TMPFS : KIWI_DISK_LOOP;
			return 0;
		}
		return kiwi_cli_usage_error(a->cmd, "--disk-backend wants tmpfs or loop, got `%s`", value);
	case OPT_DISK_DIR:
		if (!*value)
			return kiwi_cli_usage_error(a->cmd, "--disk-dir wants a directory");
		a->cfg.disk_dir = value;
		return 0;
	case OPT_NETWORK:
		if (strcmp(value, "none") && strcmp(value, "egress") && strcmp(value, "audit"))
			return kiwi_cli_usage_error(a->cmd, "--network wants none, egress or audit, got `%s`", value);
		a->network_egress = !strcmp(value, "egress");
		a->cfg.net_audit = !strcmp(value, "audit");
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
			return kiwi_cli_usage_error(a->cmd, "--env wants K=V, got `%s`", value);
		return run_args_add_env(a, value) < 0 ? kiwi_cli_usage_error(a->cmd, "out of memory") : 0;
	case OPT_BIND: {
		struct kiwi_bind b;
		if (parse_bind((char *)value, &b) < 0)
			return kiwi_cli_usage_error(a->cmd, "--bind wants SRC:/DST[:ro|:layer], got `%s`", value);
		if ((b.layered ? run_args_add_workspace(a, b.source, b.dest)
			       : run_args_add_bind(a, b.source, b.dest, b.read_only)) < 0)
			return kiwi_cli_usage_error(a->cmd, "out of memory");
		return 0;
	}
	case OPT_PRESERVE_FD:
		if (parse_fd(value, &a->preserve[a->cfg.n_preserve_fds]) < 0 ||
		    a->preserve[a->cfg.n_preserve_fds] < 3)
			return kiwi_cli_usage_error(a->cmd, "--preserve-fd wants a number >= 3, got `%s`", value);
		a->cfg.n_preserve_fds++;
		return 0;
	case OPT_UIDMAP:
	case OPT_GIDMAP:
	case OPT_USER:
		return take_id_option(a, c, value);
	case OPT_VERDICT_FD:
		if (parse_fd(value, &a->verdict_fd) < 0 || fcntl(a->verdict_fd, F_GETFD) < 0)
			return kiwi_cli_usage_error(a->cmd, "--verdict-fd `%s` is not an open fd", value);
		return 0;
	default:
		/* The bounds and limits: sizes, durations, counts. */
		if (parse_bound(a, c, value) == 0)
			return 0;
		kiwi_cli_print_error(&a->err);
		return -1;
	}
}

/* One of --uidmap and --gidmap alone stands for both, as the common
 * case maps the same ranges (podman does the same). */
static void complete_idmap(struct run_args *a)
{
	struct kiwi_idmap *m = &a->idmap;
	if (!m->n_uid && !m->n_gid)
		return;
	if (!m->n_gid) {
		memcpy(m->gid, m->uid, sizeof(m->gid));
		m->n_gid = m->n_uid;
	} else if (!m->n_uid) {
		memcpy(m->uid, m->gid, sizeof(m->uid));
		m->n_uid = m->n_gid;
	}
	a->cfg.idmap = m;
}

/* What only the whole command line can tell. */
static int check_run_args(int argc, char **argv, struct run_args *a)
{
	if (a->no_rootfs && (a->cfg.rootfs || a->image))
		return kiwi_cli_usage_error(a->cmd, "the session has its root filesystem: --rootfs and --image "
					    "belong to `session create`");
	if (!a->no_rootfs && !a->cfg.rootfs == !a->image)
		return kiwi_cli_usage_error(a->cmd, "give one of --rootfs and --image");
	if (a->egress_flag && !a->network_egress)
		return kiwi_cli_usage_error(a->cmd, "--%s needs --network egress", a->egress_flag);
	if (a->network_egress)
		a->cfg.egress = &a->egress;
	if (a->cfg.disk_dir && a->cfg.disk_backend != KIWI_DISK_LOOP)
		return kiwi_cli_usage_error(a->cmd, "--disk-dir needs --disk-backend loop");
	if (a->cfg.disk_backend == KIWI_DISK_LOOP && a->cfg.disk_bytes && a->cfg.disk_bytes < KIWI_LOOPFS_MIN_SIZE)
		return kiwi_cli_usage_error(a->cmd, "--disk-backend loop needs --disk of at least 1M (ext4's own "
					    "tables), got %llu bytes", (unsigned long long)a->cfg.disk_bytes);
	complete_idmap(a);
	/* The environment's ask, for a host whose filesystems cannot be
	 * idmapped (a test VM's): explicit, as the flag is, and yielding to
	 * maps given on the command line (it is nobody's typed flag). */
	const char *hrm = getenv("KIWI_HOST_ROOT_MAP");
	if (hrm && !strcmp(hrm, "1") && !a->cfg.idmap)
		a->cfg.host_root_map = true;
	if (a->cfg.host_root_map && a->cfg.idmap)
		return kiwi_cli_usage_error(a->cmd, "--host-root-map and --uidmap/--gidmap exclude each other");
	if (optind >= argc && !a->image && !a->command_optional)
		return kiwi_cli_usage_error(a->cmd, "no command given (put it after `--`)");
	if (a->verdict_path && a->verdict_fd >= 0)
		return kiwi_cli_usage_error(a->cmd, "--verdict and --verdict-fd exclude each other");
	for (size_t i = 0; i < a->cfg.n_preserve_fds; i++)
		if (a->preserve[i] == a->verdict_fd)
			return kiwi_cli_usage_error(a->cmd, "fd %d cannot be both the verdict and preserved",
						    a->verdict_fd);
	a->cfg.argv = optind < argc ? argv + optind : NULL;
	a->cfg.binds = a->binds;
	a->cfg.preserve_fds = a->preserve;
	return 0;
}

/* run's table followed by the command's own options. */
static struct option *all_options(const struct run_extra *x)
{
	size_t n_run = KIWI_ARRAY_SIZE(run_options) - 1, n_extra = 0;
	while (x && x->options && x->options[n_extra].name)
		n_extra++;
	struct option *all = calloc(n_run + n_extra + 1, sizeof(*all));
	if (!all)
		return NULL;
	memcpy(all, run_options, n_run * sizeof(*all));
	if (n_extra)
		memcpy(all + n_run, x->options, n_extra * sizeof(*all));
	return all;
}

static int take_simple_option(struct run_args *a, int c)
{
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
	case OPT_HOST_ROOT_MAP: a->cfg.host_root_map = true; break;
	case OPT_DEBUG: a->debug.fd = STDERR_FILENO; a->cfg.debug = &a->debug; break;
	default: return 1;
	}
	return 0;
}

int run_args_parse(int argc, char **argv, struct run_args *a, const struct run_extra *x)
{
	if (!a->defaults_set)
		run_args_defaults(a);
	if (!a->preserve)
		a->preserve = calloc((size_t)argc + 1, sizeof(*a->preserve));
	_cleanup_free_ struct option *options = all_options(x);
	if (!options || !a->preserve)
		return kiwi_cli_usage_error(a->cmd, "out of memory");
	/* --debug's clock starts here (a vDSO read: no system call). */
	a->debug.t0 = kiwi_debug_clock();
	opterr = 0;
	optind = 1;
	int c, r, longindex = 0;
	while ((c = getopt_long(argc, argv, "+", options, &longindex)) != -1) {
		if (c == OPT_HELP) {
			run_usage(a->cmd, x);
			return -2;
		}
		if (c == '?') {
			if (optopt)
				return kiwi_cli_usage_error(a->cmd, "option `%s` is missing its value or unknown",
							    argv[optind - 1]);
			return kiwi_cli_usage_error(a->cmd, "unknown option `%s`", argv[optind - 1]);
		}
		if (c >= RUN_OPT_EXTRA)
			r = x->take(x->ctx, a, c, optarg);
		else if (take_simple_option(a, c) == 0)
			r = 0;
		else
			r = take_checked_option(a, c, options[longindex].name, optarg);
		if (r != 0)
			return r < 0 ? KIWI_EXIT_FAILED : r;
	}
	r = check_run_args(argc, argv, a);
	KIWI_DEBUG(a->cfg.debug, "run", a->debug.t0, "args", "kiwi-run %s, %d argument(s)", a->cmd, argc - 1);
	return r;
}

/* The value of the last FLAG VALUE or FLAG=VALUE before "--", for the few
 * flags read before getopt sees the rest: a policy file comes first so
 * that every flag can override it, and `phase --session` decides which
 * flags there are. */
const char *run_args_find_flag(int argc, char **argv, const char *flag)
{
	const char *value = NULL;
	size_t len = strlen(flag);
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		if (!strcmp(argv[i], flag) && i + 1 < argc)
			value = argv[++i];
		else if (!strncmp(argv[i], flag, len) && argv[i][len] == '=')
			value = argv[i] + len + 1;
	}
	return value;
}
