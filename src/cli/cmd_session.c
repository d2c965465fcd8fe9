/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-run session: one sandbox across many commands, without a daemon
 * (kiwi-run-session(1), kiwi/session.h). create forks the session's
 * supervisor and prints the id once the sandbox is ready; exec, list and
 * destroy find it through the caller's registry. */
#include "cli.h"
#include "run.h"
#include "session_snap.h"
#include "kiwi/cleanup.h"
#include "kiwi/fslayer.h"
#include "kiwi/mount.h"
#include "kiwi/policy.h"
#include "kiwi/registry.h"
#include "kiwi/sandbox.h"
#include "kiwi/session.h"
#include "kiwi/slice.h"
#include "kiwi/units.h"
#include "kiwi/verdict.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define WORKSPACE "/workspace"

/* ---- credentials: the phases' rules, model-provider keys never ------- */

static int check_env_names(struct run_args *a)
{
	struct kiwi_policy p;
	kiwi_policy_init(&p);
	int r = 0;
	for (size_t i = 0; r == 0 && i < a->n_user_env; i++) {
		char name[256];
		const char *eq = strchr(a->user_env[i], '=');
		snprintf(name, sizeof(name), "%.*s", eq ? (int)(eq - a->user_env[i]) : 255, a->user_env[i]);
		r = kiwi_policy_check_literal(&p, KIWI_PHASE_VERIFY, name, &a->err);
	}
	kiwi_policy_clear(&p);
	return r;
}

/* ---- create ------------------------------------------------------------ */

enum {
	OPT_WORKSPACE = RUN_OPT_EXTRA, OPT_IDLE_TIMEOUT, OPT_MAX_LIFETIME, OPT_TTY, OPT_KEEP_BACKGROUND, OPT_PASS_ENV,
	OPT_FROM, OPT_POLICY,
};

struct create_opts {
	const char *workspace;
	uint64_t idle_ns, lifetime_ns;
	struct session_from from;
	char image_ref[4200];     /* --image, absolute, for snapshots; "" without one */
};

static const struct option create_options[] = {
	{ "workspace", required_argument, NULL, OPT_WORKSPACE },
	{ "idle-timeout", required_argument, NULL, OPT_IDLE_TIMEOUT },
	{ "max-lifetime", required_argument, NULL, OPT_MAX_LIFETIME },
	{ "from", required_argument, NULL, OPT_FROM },
	{ "policy", required_argument, NULL, OPT_POLICY },
	{ 0 },
};

static int take_create_option(void *ctx, struct run_args *a, int opt, const char *value)
{
	struct create_opts *o = ctx;
	kiwi_err e = { 0 };
	if (opt == OPT_WORKSPACE) {
		o->workspace = value;
		return 0;
	}
	if (opt == OPT_FROM)
		return session_from_take(&o->from, a, value);
	if (opt == OPT_POLICY)
		return 0;  /* applied before the flags, which override it */
	if (kiwi_parse_duration(value, opt == OPT_IDLE_TIMEOUT ? "--idle-timeout" : "--max-lifetime",
				opt == OPT_IDLE_TIMEOUT ? &o->idle_ns : &o->lifetime_ns, &e) < 0)
		return kiwi_cli_usage_error(a->cmd, "%s", e.msg);
	return 0;
}

/* What a session cannot take: its flags mean the whole session, a
 * command's belong to each exec. */
static int check_create_args(struct run_args *a)
{
	if (a->cfg.argv)
		return kiwi_cli_usage_error(a->cmd, "a session runs no command of its own: give it to `session exec`");
	if (a->cfg.tty)
		return kiwi_cli_usage_error(a->cmd, "--tty belongs to `session exec`");
	if (a->cfg.n_preserve_fds)
		return kiwi_cli_usage_error(a->cmd, "--preserve-fd cannot reach a session that outlives this command");
	if (a->verdict_path || a->verdict_fd >= 0 || a->stdout_path || a->stderr_path)
		return kiwi_cli_usage_error(a->cmd, "--verdict, --stdout and --stderr belong to `session exec`");
	if (a->cfg.timeout_ns)
		return kiwi_cli_usage_error(a->cmd, "--timeout belongs to `session exec`; a session is bounded by "
					    "--idle-timeout and --max-lifetime");
	if (check_env_names(a) < 0) {
		kiwi_cli_print_error(&a->err);
		return KIWI_EXIT_FAILED;
	}
	return 0;
}

/* What the supervisor says to its creator: ready, or why not. */
struct ready_report {
	int ok;
	kiwi_err err;
};

static void on_ready(void *ctx, const struct kiwi_sandbox_result *res)
{
	(void)res;
	int *fd = ctx;
	struct ready_report r = { .ok = 1 };
	(void)!write(*fd, &r, sizeof(r));
	close(*fd);
	*fd = -1;
}

/* The session's listening socket, in the caller's registry directory. */
static int listen_on(const char *path, kiwi_err *err)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return kiwi_error(err, errno, "session", "cannot create a socket");
	mode_t old = umask(077);
	int r = bind(fd, (struct sockaddr *)&sun, sizeof(sun));
	umask(old);
	if (r < 0 || listen(fd, 64) < 0)
		return kiwi_error(err, errno, "session", "cannot listen on `%s`", path);
	return TAKE_FD(fd);
}

/* What is left of the session's processes and mounts. Its own procfs
 * lists its pid namespace, empty once pid 1 is reaped (the kernel ends and
 * reaps the rest first); a mount namespace that no longer exists has
 * nobody in it. Where a witness is missing (an older kernel) or the mount
 * namespace lives on, every process of the host is read instead, until
 * none is left or 2 s have passed. A mount namespace that lives on while
 * its users cannot be counted is -1: not clean. */
static void count_leftovers(const struct kiwi_session_hooks *h, uint64_t pidns, uint64_t mntns,
			    struct kiwi_session_evidence *ev)
{
	for (int i = 0; i < 200; i++) {
		int tasks = kiwi_session_pidns_tasks(h->procfs_fd);
		int exists = kiwi_mount_ns_exists(h->mntns_id);
		/* No namespace id (before Linux 6.10) and pid 1's link unread
		 * (rootless): pid 1's own word for it, and the scan counts the
		 * processes we may look at, our own (which alone could join it,
		 * root aside). Alive by id with no link to count by: -1. */
		uint64_t look = mntns ? mntns : exists == -1 ? h->mntns_ino : 0;
		int pids = 0, mnts = 0;
		if (tasks < 0 || exists != 0)
			kiwi_session_ns_users(tasks < 0 ? pidns : 0, exists != 0 ? look : 0, &pids, &mnts);
		ev->processes_left = tasks >= 0 ? tasks : pids;
		ev->mount_ns_users = exists != 0 && !look ? -1 : mnts;
		if (ev->processes_left <= 0 && ev->mount_ns_users == 0)
			return;
		usleep(10000);
	}
}

/* The supervisor's last word, for destroy: what is left of the session. */
static void answer_destroy(struct run_session *s, struct kiwi_session_hooks *h, uint64_t pidns, uint64_t mntns,
			   const char *sock_path, int run_rc, int release_rc, const kiwi_err *release_err)
{
	struct kiwi_session_evidence ev = { .reason = h->end_reason ? h->end_reason : "killed" };
	bool layered = false;
	for (size_t i = 0; i < s->a.cfg.n_binds; i++)
		layered |= s->a.cfg.binds[i].layered && !s->a.cfg.binds[i].read_only;
	if (layered)
		ev.workspace = run_rc < 0 ? "failed" : s->a.cfg.ws_mode == KIWI_WS_DISCARD ? "discarded" : "landed";
	count_leftovers(h, pidns, mntns, &ev);
	kiwi_closep(&h->procfs_fd);
	ev.cgroup_removed = -1;
	if (s->res.has_cgroup) {
		char mount[4096], path[8192];
		struct stat st;
		ev.cgroup_removed = !s->res.cleanup_failed;
		if (kiwi_cgroup_mount(mount, sizeof(mount), NULL) == 0) {
			snprintf(path, sizeof(path), "%s%s", mount, s->res.cgroup_name);
			ev.cgroup_removed = stat(path, &st) < 0 && errno == ENOENT;
		}
	}
	ev.network_removed = s->a.cfg.egress ? release_rc == 0 : -1;
	struct stat st;
	ev.socket_removed = lstat(sock_path, &st) < 0 && errno == ENOENT;
	if (s->res.cleanup_failed)
		ev.cleanup_error = s->res.cleanup_error;
	else if (layered && run_rc < 0)
		ev.cleanup_error = s->err;
	else if (release_rc < 0)
		ev.cleanup_error = *release_err;
	if (h->destroy_fd < 0)
		return;
	_cleanup_free_ char *text = kiwi_session_evidence_json(h->id, &ev);
	if (text)
		(void)!send(h->destroy_fd, text, strlen(text), MSG_NOSIGNAL);
	close(h->destroy_fd);
}

/* The namespace inode of pid 1's kind, for the evidence. */
static uint64_t ns_inode(pid_t pid, const char *kind)
{
	char path[64];
	struct stat st;
	snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)pid, kind);
	return stat(path, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

struct supervisor_ctx {
	int ready_fd;
	const char *sock_path;
	bool bound;               /* sock_path is ours to remove */
	struct run_session *s;
	const struct kiwi_session_hooks *h;
	uint64_t pidns, mntns;
	const char *image_ref;    /* NULL: made from --rootfs */
};

/* `session snapshot`: the root's upper directory and each layered bind's. */
static void supervisor_snapshot(void *ctx, int conn, int layer, struct kiwi_cgroup *cg)
{
	struct supervisor_ctx *c = ctx;
	const struct kiwi_sandbox_config *cfg = &c->s->a.cfg;
	struct kiwi_snapshot_source src = { .image = c->image_ref, .names = { "root" }, .dests = { "" }, .n = 1 };
	char names[KIWI_SNAPSHOT_MAX_TREES][32];
	for (size_t i = 0; i < cfg->n_binds && src.n < KIWI_SNAPSHOT_MAX_TREES; i++) {
		if (!cfg->binds[i].layered || cfg->binds[i].read_only)
			continue;
		snprintf(names[src.n], sizeof(names[src.n]), "bind%zu", i);
		src.names[src.n] = names[src.n];
		src.dests[src.n++] = cfg->binds[i].dest;
	}
	kiwi_session_serve_snapshot(conn, layer, cg, &src);
}

/* The session's socket, once pid 1 is cloned: made while it builds
 * itself, not on create's time before. */
static int supervisor_cloned(void *ctx, kiwi_err *err)
{
	struct supervisor_ctx *c = ctx;
	int fd = listen_on(c->sock_path, err);
	if (fd < 0)
		return -1;
	c->bound = true;
	c->s->a.cfg.session->listen_fd = fd;
	return 0;
}

static void supervisor_ready(void *ctx, const struct kiwi_sandbox_result *res)
{
	struct supervisor_ctx *c = ctx;
	/* Pid 1's namespaces, while its pid is surely its own: we have not
	 * reaped it (this process alone may). Where a witness is missing, or
	 * the mount namespace outlives pid 1, the evidence counts what is
	 * left in them at the end. */
	c->pidns = ns_inode(c->h->init_pid, "pid");
	c->mntns = ns_inode(c->h->init_pid, "mnt");
	/* The snapshot's blob, read by the restore: not the session's to hold. */
	if (c->s->a.cfg.restore_fd > 2) {
		close(c->s->a.cfg.restore_fd);
		c->s->a.cfg.restore_fd = -1;
	}
	/* The creator last: a pipe's wake-up is a synchronous one, which
	 * puts it on this CPU to run once we sleep. */
	on_ready(&c->ready_fd, res);
}

/* The supervisor: detached from the caller (its own session, no stdio of
 * the caller's, so `id=$(kiwi-run session create ...)` returns), it runs
 * the sandbox until the end, then answers a destroy with the evidence. */
_Noreturn static void supervise(struct run_session *s, struct kiwi_session_hooks *h, int ready_fd,
				const char *sock_path, const char *image_ref)
{
	setsid();
	/* Ours and so the session's own processes' (not its commands'):
	 * each exec's request passes through three of them (we, pid 1, its
	 * leader); beside a CPU hog an exec took twice as long without it,
	 * each wake-up likely waiting out the hog's slice (bench/RESULTS.md). */
	(void)kiwi_slice_short();
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	for (int fd = 0; null >= 0 && fd <= 2; fd++)
		dup2(null, fd);
	if (null > 2)
		close(null);
	struct supervisor_ctx ctx = { .ready_fd = ready_fd, .sock_path = sock_path, .s = s, .h = h,
				      .image_ref = image_ref[0] ? image_ref : NULL };
	h->cloned = supervisor_cloned;
	h->ready = supervisor_ready;
	h->snapshot = supervisor_snapshot;
	h->ctx = &ctx;
	s->a.cfg.session = h;
	s->a.cfg.stdout_dest = s->a.cfg.stderr_dest = STDOUT_FILENO;
	s->a.cfg.stdin_null = true;
	s->a.cfg.debug = NULL;
	int r = kiwi_sandbox_run(&s->a.cfg, &s->res, &s->err);
	if (ctx.bound)
		unlink(sock_path);
	if (ctx.ready_fd >= 0) {
		struct ready_report rep = { .ok = 0, .err = s->err };
		if (r == 0)
			kiwi_error(&rep.err, EPROTO, "session", "the session's pid 1 ended before it was ready");
		(void)!write(ctx.ready_fd, &rep, sizeof(rep));
	}
	kiwi_err rerr = { 0 };
	int rr = kiwi_sandbox_result_release(&s->res, &rerr);
	answer_destroy(s, h, ctx.pidns, ctx.mntns, sock_path, r, rr, &rerr);
	kiwi_closep(&h->netns_fd);
	_exit(0);
}

static int session_create(int argc, char **argv)
{
	_cleanup_(run_session_release) struct run_session s;
	run_session_init(&s, "session create");
	struct create_opts o = { 0 };
	const struct run_extra own = {
		.options = create_options, .take = take_create_option, .ctx = &o,
		.usage = "  --workspace DIR       bind DIR read-write at " WORKSPACE " and start execs there\n"
			 "  --idle-timeout DUR    end the session when no exec has run for DUR\n"
			 "  --max-lifetime DUR    end the session DUR after it was created\n"
			 "  --from LAYOUT:TAG     restore a `session snapshot` (with --rootfs DIR when it was\n"
			 "                        made from one)\n"
			 "  --policy FILE         the network of the phase policy's install half\n"
			 "                        (for `phase install --session`; flags override it)\n\n",
		.synopsis = "usage: kiwi-run session create --rootfs DIR [OPTIONS]\n"
			    "       kiwi-run session create --image LAYOUT[:TAG] [OPTIONS]\n"
			    "       kiwi-run session create --from LAYOUT:TAG [--rootfs DIR] [OPTIONS]\n\n"
			    "Prints the new session's id alone once it is ready. It runs no command:\n"
			    "`session exec` does; the options that apply to one command are exec's.\n\n",
	};
	run_args_defaults(&s.a);
	const char *policy = run_args_find_flag(argc, argv, "--policy");
	if (policy && phase_policy_network(policy, &s.a) < 0) {
		kiwi_cli_print_error(&s.a.err);
		return KIWI_EXIT_FAILED;
	}
	s.a.command_optional = true;
	int r = run_args_parse(argc, argv, &s.a, &own);
	if (r == 0 && (check_create_args(&s.a) != 0 || session_from_arm(&o.from, &s.a) != 0))
		r = KIWI_EXIT_FAILED;
	if (r == 0 && s.a.image && session_abs_ref(s.a.image, o.image_ref, sizeof(o.image_ref), &s.err) < 0) {
		kiwi_cli_print_error(&s.err);
		r = KIWI_EXIT_FAILED;
	}
	if (r != 0)
		return r == -2 ? 0 : KIWI_EXIT_FAILED;
	if (o.workspace) {
		/* In the session's layer, bounded by --disk; its changes land
		 * on the host directory when the session ends (--workspace-mode). */
		if (run_args_add_workspace(&s.a, o.workspace, WORKSPACE) < 0) {
			kiwi_cli_print_error(&s.a.err);
			return KIWI_EXIT_FAILED;
		}
		if (!s.a.cwd_set)
			s.a.cfg.cwd = WORKSPACE;
		s.a.cfg.binds = s.a.binds;
	}
	/* The image's command is no session's: an image without one is fine. */
	static char *const no_command[] = { "(session)", NULL };
	s.a.cfg.argv = no_command;
	if (run_session_prepare(&s) < 0) {
		kiwi_cli_print_error(&s.err);
		return KIWI_EXIT_FAILED;
	}
	/* The image's command is no session's: execs bring their own. */
	s.a.cfg.argv = NULL;
	/* A cgroup where the host gives one, even without limits: each exec
	 * gets its own below it, and its removal proves the end. */
	s.a.cfg.own_cgroup = true;
	struct kiwi_session_hooks h = { .listen_fd = -1, .destroy_fd = -1, .procfs_fd = -1, .netns_fd = -1, .idle_timeout_ns = o.idle_ns,
					.max_lifetime_ns = o.lifetime_ns };
	char sock_path[108];
	char id[KIWI_REGISTRY_ID_LEN + 1];
	int ready[2] = { -1, -1 };
	if (kiwi_registry_new_id(id, &s.err) < 0 ||
	    kiwi_session_socket_path(id, sock_path, sizeof(sock_path), true, &s.err) < 0 ||
	    pipe2(ready, O_CLOEXEC) < 0) {
		if (!s.err.step[0])
			kiwi_error(&s.err, errno, "session", "cannot make a pipe");
		kiwi_cli_print_error(&s.err);
		return KIWI_EXIT_FAILED;
	}
	snprintf(h.id, sizeof(h.id), "%s", id);
	pid_t pid = fork();
	if (pid == 0) {
		close(ready[0]);
		supervise(&s, &h, ready[1], sock_path, o.image_ref);
	}
	close(ready[1]);
	struct ready_report rep = { 0 };
	ssize_t n = pid < 0 ? -1 : read(ready[0], &rep, sizeof(rep));
	close(ready[0]);
	if (n == (ssize_t)sizeof(rep) && rep.ok) {
		printf("%s\n", id);
		return 0;
	}
	if (pid < 0)
		kiwi_error(&rep.err, errno, "session", "cannot start the session's supervisor");
	else if (n != (ssize_t)sizeof(rep))
		kiwi_error(&rep.err, EPROTO, "session", "the session's supervisor died before the session was ready");
	/* A supervisor that failed has taken everything down: reap it. One
	 * that died without a word may have left its socket; one that said
	 * why removed what it made, and nothing else (the path may be
	 * another's: then the bind failed). */
	if (pid > 0)
		waitpid(pid, NULL, 0);
	if (pid > 0 && n != (ssize_t)sizeof(rep))
		unlink(sock_path);
	kiwi_cli_print_error(&rep.err);
	return KIWI_EXIT_FAILED;
}

/* ---- exec -------------------------------------------------------------- */

struct exec_opts {
	bool keep_background;
	const char **pass_env;
	size_t n_pass_env;
};

static const struct option exec_options[] = {
	{ "tty", no_argument, NULL, OPT_TTY },
	{ "keep-background", no_argument, NULL, OPT_KEEP_BACKGROUND },
	{ "pass-env", required_argument, NULL, OPT_PASS_ENV },
	{ 0 },
};

static int take_exec_option(void *ctx, struct run_args *a, int opt, const char *value)
{
	struct exec_opts *o = ctx;
	if (opt == OPT_KEEP_BACKGROUND) {
		o->keep_background = true;
	} else if (opt == OPT_PASS_ENV) {
		const char **v = reallocarray(o->pass_env, o->n_pass_env + 1, sizeof(*v));
		if (!v)
			return kiwi_cli_usage_error(a->cmd, "out of memory");
		o->pass_env = v;
		o->pass_env[o->n_pass_env++] = value;
	} else {
		a->cfg.tty = true;
	}
	return 0;
}

/* Flags that bound or shape the whole session, refused by name: an exec
 * cannot change them. */
int session_refuse_create_flags(const char *cmd, int argc, char **argv)
{
	static const char *const whole[] = {
		"rootfs", "image", "image-cache", "hostname", "bind", "rw-root", "seccomp", "disk", "memory",
		"memory-swap", "pids", "cpus", "io-weight", "io-max", "cgroup-parent", "landlock", "network",
		"uidmap", "gidmap", "user", "host-root-map", "preserve-fd", "allow-cidr", "allow-host", "allow-port", "egress",
		"dns", "egress-audit", "disk-backend", "disk-dir",
	};
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		if (strncmp(argv[i], "--", 2))
			continue;
		size_t len = strcspn(argv[i] + 2, "=");
		for (size_t k = 0; k < KIWI_ARRAY_SIZE(whole); k++)
			if (strlen(whole[k]) == len && !strncmp(argv[i] + 2, whole[k], len))
				return kiwi_cli_usage_error(cmd, "--%s is the session's, set at `session create`",
							    whole[k]);
	}
	return 0;
}

static void free_strings(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

/* --pass-env NAME: the caller's value, under the phases' rules. */
static int add_passed_env(struct run_args *a, const struct exec_opts *o, char ***owned, size_t *n_owned)
{
	*owned = calloc(o->n_pass_env + 1, sizeof(**owned));
	if (!*owned)
		return kiwi_error(&a->err, ENOMEM, "env", "out of memory");
	struct kiwi_policy p;
	kiwi_policy_init(&p);
	int r = 0;
	for (size_t i = 0; r == 0 && i < o->n_pass_env; i++) {
		const char *name = o->pass_env[i], *value = getenv(name);
		if (kiwi_policy_check_env(&p, KIWI_PHASE_VERIFY, name, &a->err) < 0)
			r = -1;
		else if (!value)
			r = kiwi_error(&a->err, ENOENT, "env", "--pass-env %s: not set in kiwi-run's environment", name);
		else {
			char *kv = NULL;
			if (asprintf(&kv, "%s=%s", name, value) < 0)
				r = kiwi_error(&a->err, ENOMEM, "env", "out of memory");
			else if (((*owned)[(*n_owned)++] = kv, run_args_add_env(a, kv)) < 0)
				r = kiwi_error(&a->err, ENOMEM, "env", "out of memory");
		}
	}
	kiwi_policy_clear(&p);
	return r;
}

static bool asks_help(int argc, char **argv)
{
	return argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"));
}

static int session_exec(int argc, char **argv)
{
	/* --help in the id's place: the parser below prints exec's options. */
	bool help = asks_help(argc, argv);
	if (!help && (argc < 2 || argv[1][0] == '-'))
		return kiwi_cli_usage_error("session exec", "give the session's id first: session exec ID [OPTIONS] -- CMD");
	const char *id = help ? NULL : argv[1];
	int shift = help ? 0 : 1;
	if (session_refuse_create_flags("session exec", argc - shift, argv + shift) != 0)
		return KIWI_EXIT_FAILED;
	_cleanup_(run_session_release) struct run_session s;
	run_session_init(&s, "session exec");
	struct exec_opts o = { 0 };
	const struct run_extra own = {
		.options = exec_options, .take = take_exec_option, .ctx = &o,
		.usage = "  --tty                 a terminal of the session's own\n"
			 "  --keep-background     leave what the command started running\n"
			 "  --pass-env NAME       pass the caller's NAME (model-provider keys never)\n\n",
		.synopsis = "usage: kiwi-run session exec ID [OPTIONS] -- CMD [ARG...]\n\n"
			    "The options below that shape the sandbox (--rootfs, --memory, --network,\n"
			    "...) are create's and refused here; the rest apply to this exec alone.\n\n",
	};
	run_args_defaults(&s.a);
	s.a.no_rootfs = true;
	int r = run_args_parse(argc - shift, argv + shift, &s.a, &own);
	char **owned = NULL;
	size_t n_owned = 0;
	if (r != 0) {
		free(o.pass_env);
		return r == -2 ? 0 : KIWI_EXIT_FAILED;
	}
	struct kiwi_registry_entry e;
	bool failed = check_env_names(&s.a) < 0 || add_passed_env(&s.a, &o, &owned, &n_owned) < 0 ||
		      kiwi_session_find(id, &e, &s.a.err) < 0;
	free(o.pass_env);
	if (failed) {
		kiwi_cli_print_error(&s.a.err);
		free_strings(owned, n_owned);
		return KIWI_EXIT_FAILED;
	}
	if (s.a.cfg.tty && run_args_tty_env(&s.a) < 0) {
		kiwi_cli_print_error(&s.a.err);
		free_strings(owned, n_owned);
		return KIWI_EXIT_FAILED;
	}
	if (run_session_open_verdict(&s) < 0) {
		free_strings(owned, n_owned);
		return KIWI_EXIT_FAILED;
	}
	failed = session_run_exec(&s, &e, o.keep_background, false);
	int status = run_session_finish(&s, failed);
	free_strings(owned, n_owned);
	return status;
}

bool session_run_exec(struct run_session *s, const struct kiwi_registry_entry *e, bool keep_background,
		      bool before_verify)
{
	/* Only the exec's own variables: the session's environment is the base
	 * its pid 1 holds. */
	char **env = reallocarray(s->a.user_env, s->a.n_user_env + 1, sizeof(*env));
	if (!env)
		return kiwi_error(&s->err, ENOMEM, "env", "out of memory") < 0;
	s->a.user_env = env;
	s->a.user_env_cap = s->a.n_user_env + 1;
	s->a.user_env[s->a.n_user_env] = NULL;
	struct kiwi_session_exec x = {
		.argv = s->a.cfg.argv, .envp = s->a.user_env, .cwd = s->a.cwd_set ? s->a.cfg.cwd : "",
		.tty = s->a.cfg.tty, .keep_background = keep_background, .before_verify = before_verify, .timeout_ns = s->a.cfg.timeout_ns,
		.kill_grace_ns = s->a.cfg.kill_grace_ns, .output_limit = s->a.cfg.output_limit,
		.output_limit_kill = s->a.cfg.output_limit_kill, .stdout_dest = STDOUT_FILENO,
		.stderr_dest = STDERR_FILENO, .stdout_tail = s->a.cfg.stdout_tail, .stderr_tail = s->a.cfg.stderr_tail,
		.debug = s->a.cfg.debug,
	};
	if (run_session_prepare_output(s) < 0)
		return true;
	x.stdout_dest = s->a.cfg.stdout_dest;
	x.stderr_dest = s->a.cfg.stderr_dest;
	return kiwi_session_exec(e, &x, &s->res, &s->err) < 0;
}

/* ---- cp ---------------------------------------------------------------- */

/* "ID:/path" names a file in session ID (4 to 12 hex digits); anything
 * else is a path on the host. */
static const char *session_side(const char *arg, char id[KIWI_REGISTRY_ID_LEN + 1])
{
	size_t n = strspn(arg, "0123456789abcdef");
	if (n < 4 || n > KIWI_REGISTRY_ID_LEN || arg[n] != ':')
		return NULL;
	snprintf(id, KIWI_REGISTRY_ID_LEN + 1, "%.*s", (int)n, arg);
	return arg + n + 1;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

static int cp_in(const struct kiwi_registry_entry *e, const char *host, const char *inside, kiwi_err *err)
{
	size_t len = strlen(inside);
	/* "-": what comes on stdin, a file's bytes (no archive) */
	if (!strcmp(host, "-")) {
		if (!len || inside[len - 1] == '/')
			return kiwi_error(err, EINVAL, "cp", "a copy from stdin needs a file name in the session, "
					  "not `%s`", inside);
		return kiwi_session_copy(e, true, inside, STDIN_FILENO, 0644, err);
	}
	_cleanup_close_ int fd = open(host, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return kiwi_error(err, errno, "cp", "cannot open `%s`", host);
	if (!S_ISREG(st.st_mode))
		return kiwi_error(err, EINVAL, "cp", "`%s` is not a regular file (session cp copies files)", host);
	_cleanup_free_ char *dest = NULL;
	if (len && inside[len - 1] == '/' && asprintf(&dest, "%s%s", inside, base_name(host)) < 0)
		return kiwi_error(err, ENOMEM, "cp", "out of memory");
	return kiwi_session_copy(e, true, dest ? dest : inside, fd, st.st_mode & 0777, err);
}

/* Out of the session: into a new file beside the destination, renamed
 * over it once whole, never through a link planted there. */
static int cp_out(const struct kiwi_registry_entry *e, const char *inside, const char *host, kiwi_err *err)
{
	/* "-": the file's bytes on stdout; a copy cut off says so in its
	 * exit status, not by what it wrote */
	if (!strcmp(host, "-"))
		return kiwi_session_copy(e, false, inside, STDOUT_FILENO, 0, err);
	struct stat st;
	_cleanup_free_ char *dest = NULL, *tmp = NULL;
	if (stat(host, &st) == 0 && S_ISDIR(st.st_mode) && asprintf(&dest, "%s/%s", host, base_name(inside)) < 0)
		return kiwi_error(err, ENOMEM, "cp", "out of memory");
	const char *target = dest ? dest : host;
	_cleanup_free_ char *dir = strdup(target);
	if (!dir)
		return kiwi_error(err, ENOMEM, "cp", "out of memory");
	char *slash = strrchr(dir, '/');
	if (asprintf(&tmp, "%s%s.kiwi-cp.%d", slash ? "" : "./", target, (int)getpid()) < 0)
		return kiwi_error(err, ENOMEM, "cp", "out of memory");
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return kiwi_error(err, errno, "cp", "cannot create `%s`", tmp);
	if (kiwi_session_copy(e, false, inside, fd, 0, err) < 0 || rename(tmp, target) < 0) {
		if (!err->step[0])
			kiwi_error(err, errno, "cp", "cannot put the copy at `%s`", target);
		unlink(tmp);
		return -1;
	}
	return 0;
}

static int session_cp(int argc, char **argv)
{
	if (asks_help(argc, argv)) {
		printf("usage: kiwi-run session cp HOST_FILE ID:/PATH\n"
		       "       kiwi-run session cp ID:/PATH HOST_PATH\n\n"
		       "One regular file into or out of a session, resolved inside its root.\n"
		       "HOST_FILE - reads stdin; HOST_PATH - writes stdout (the bytes, no archive).\n"
		       "See kiwi-run-session(1).\n");
		return 0;
	}
	if (argc != 3)
		return kiwi_cli_usage_error("session cp", "give a source and a destination, one of them ID:/path");
	char id_src[KIWI_REGISTRY_ID_LEN + 1], id_dst[KIWI_REGISTRY_ID_LEN + 1];
	const char *in_src = session_side(argv[1], id_src), *in_dst = session_side(argv[2], id_dst);
	if (!in_src == !in_dst)
		return kiwi_cli_usage_error("session cp", "exactly one of source and destination is ID:/path");
	kiwi_err err = { 0 };
	struct kiwi_registry_entry e;
	int r = kiwi_session_find(in_src ? id_src : id_dst, &e, &err);
	if (r == 0)
		r = in_dst ? cp_in(&e, argv[1], in_dst, &err) : cp_out(&e, in_src, argv[2], &err);
	if (r < 0) {
		kiwi_cli_print_error(&err);
		return KIWI_EXIT_FAILED;
	}
	return 0;
}

/* ---- destroy, list ----------------------------------------------------- */

static int session_destroy(int argc, char **argv)
{
	if (asks_help(argc, argv)) {
		printf("usage: kiwi-run session destroy ID\n\n"
		       "Ends the session and prints the evidence of a clean end as JSON.\n"
		       "See kiwi-run-session(1).\n");
		return 0;
	}
	if (argc != 2 || argv[1][0] == '-')
		return kiwi_cli_usage_error("session destroy", "give one session id: session destroy ID");
	kiwi_err err = { 0 };
	struct kiwi_registry_entry e = { 0 };
	/* A whole id reaches the supervisor at once; else (or none there)
	 * the registry says which session it is, or why none. */
	snprintf(e.id, sizeof(e.id), "%.*s", KIWI_REGISTRY_ID_LEN, argv[1]);
	_cleanup_close_ int conn = kiwi_session_reach(argv[1], "d", 1);
	if (conn < 0 && kiwi_session_find(argv[1], &e, &err) < 0) {
		kiwi_cli_print_error(&err);
		return KIWI_EXIT_FAILED;
	}
	if (conn < 0)
		conn = kiwi_session_connect(&e, 'd', &err);
	if (conn < 0) {
		kiwi_cli_print_error(&err);
		return KIWI_EXIT_FAILED;
	}
	char text[4096];
	ssize_t n;
	do
		n = recv(conn, text, sizeof(text) - 1, 0);
	while (n < 0 && errno == EINTR);
	if (n <= 0) {
		kiwi_error(&err, n < 0 ? errno : EPIPE, "session", "session `%s` ended without its evidence", e.id);
		kiwi_cli_print_error(&err);
		return KIWI_EXIT_FAILED;
	}
	text[n] = '\0';
	fputs(text, stdout);
	/* "clean":true, or something was left: the caller must hear of a leak. */
	return strstr(text, "\"clean\":true") ? 0 : KIWI_EXIT_FAILED;
}

static void session_usage(FILE *out)
{
	fprintf(out, "usage: kiwi-run session create [RUN OPTIONS] [--workspace DIR] [--idle-timeout DUR]\n"
		     "                                [--max-lifetime DUR]\n"
		     "       kiwi-run session exec ID [--timeout DUR] [--verdict FILE] [--env K=V]\n"
		     "                                [--pass-env NAME] [--tty] [--keep-background] -- CMD...\n"
		     "       kiwi-run session cp HOST_FILE ID:/PATH   |   kiwi-run session cp ID:/PATH HOST_PATH\n"
		     "       kiwi-run session snapshot ID LAYOUT:TAG\n"
		     "       kiwi-run session create --from LAYOUT:TAG [--rootfs DIR] [RUN OPTIONS]...\n"
		     "       kiwi-run session list [--json]\n"
		     "       kiwi-run session destroy ID\n\n"
		     "One sandbox across many commands. See kiwi-run-session(1).\n");
}

int kiwi_cmd_session(int argc, char **argv)
{
	if (argc < 2) {
		session_usage(stderr);
		return KIWI_EXIT_FAILED;
	}
	const char *verb = argv[1];
	if (!strcmp(verb, "--help") || !strcmp(verb, "-h")) {
		session_usage(stdout);
		return 0;
	}
	if (!strcmp(verb, "create"))
		return session_create(argc - 1, argv + 1);
	if (!strcmp(verb, "exec"))
		return session_exec(argc - 1, argv + 1);
	if (!strcmp(verb, "destroy"))
		return session_destroy(argc - 1, argv + 1);
	if (!strcmp(verb, "cp"))
		return session_cp(argc - 1, argv + 1);
	if (!strcmp(verb, "snapshot"))
		return kiwi_cli_session_snapshot(argc - 1, argv + 1);
	if (!strcmp(verb, "list"))
		return kiwi_cli_list(argc - 1, argv + 1, true);
	return kiwi_cli_usage_error("session", "unknown verb `%s`: create, exec, cp, snapshot, list or destroy", verb);
}
