/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-run phase install|verify: the two phases of a coding loop over one
 * workspace (kiwi-run-phase(1)). install fetches dependencies on the
 * network with an empty environment; verify runs the tests offline with
 * only the variables named. Both are `run` with rules on top: the policy
 * file, the credential checks, the plan and a verdict that says why. */
#include "cli.h"
#include "run.h"
#include "kiwi/cleanup.h"
#include "kiwi/output.h"
#include "kiwi/plan.h"
#include "kiwi/policy.h"
#include "kiwi/session.h"
#include "kiwi/units.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#define INSTALL_TIMEOUT_DEFAULT "5m"
#define TAIL_BYTES 4096

enum {
	OPT_WORKSPACE = RUN_OPT_EXTRA,
	OPT_WORKSPACE_DEST,
	OPT_POLICY,
	OPT_PASS_ENV,
	OPT_CACHE,
	OPT_SESSION,
	OPT_KEEP_BACKGROUND,
};

static const struct option phase_options[] = {
	{ "workspace", required_argument, NULL, OPT_WORKSPACE },
	{ "workspace-dest", required_argument, NULL, OPT_WORKSPACE_DEST },
	{ "policy", required_argument, NULL, OPT_POLICY },
	{ "pass-env", required_argument, NULL, OPT_PASS_ENV },
	{ "cache", required_argument, NULL, OPT_CACHE },
	{ "session", required_argument, NULL, OPT_SESSION },
	{ "keep-background", no_argument, NULL, OPT_KEEP_BACKGROUND },
	{ 0 },
};

static const char phase_usage[] =
	"  --workspace DIR       the repository, read-write at --workspace-dest in both\n"
	"                        phases and the working directory (required)\n"
	"  --workspace-dest DIR  where the workspace appears inside (default /workspace)\n"
	"  --policy FILE         the phase policy (kiwi-run-policy(5)); flags override it\n"
	"  --pass-env NAME       verify only: pass the caller's NAME (repeatable);\n"
	"                        model-provider keys are refused (kiwi-run-policy(5))\n"
	"  --cache HOST:DEST     a cache directory: read-write in install, read-only in verify\n"
	"  --session ID          run as one exec of session ID (kiwi-run-session(1)):\n"
	"                        verify first kills every process of it and takes its\n"
	"                        network away for good\n"
	"  --keep-background     with --session: leave what the command started running\n"
	"install runs the plan of `kiwi-run plan` when no command is given.\n\n";

struct phase {
	enum kiwi_phase which;
	const char *workspace, *workspace_dest;
	const char **pass_env;       /* names, from the policy then the flags */
	size_t n_pass_env;
	char **passed;               /* "K=V" built from the caller's environment */
	size_t n_passed;
	struct kiwi_policy policy;
	struct kiwi_plan plan;
	bool planned;
	char **plan_argv;
	int ws_fd;
	const char *reason;          /* why the phase failed, for the verdict */
	const char *session;         /* --session: an exec of that session */
	bool keep_background;
	struct kiwi_tail out_tail, err_tail;
	char out_buf[TAIL_BYTES], err_buf[TAIL_BYTES];
	struct run_session *s;
};

static int add_pass_env(struct phase *p, const char *name)
{
	const char **n = reallocarray(p->pass_env, p->n_pass_env + 1, sizeof(*n));
	if (!n)
		return -1;
	p->pass_env = n;
	p->pass_env[p->n_pass_env++] = name;
	return 0;
}

/* A cache is HOST:DEST; read-only in verify, so that the tests cannot
 * poison what the next install reads. */
static int add_cache(struct phase *p, struct run_args *a, const char *host, const char *dest)
{
	if (host[0] != '/' || dest[0] != '/')
		return kiwi_cli_usage_error(a->cmd, "a cache wants absolute HOST:DEST paths, got `%s:%s`",
					    host, dest);
	if (run_args_add_bind(a, host, dest, p->which == KIWI_PHASE_VERIFY) < 0)
		return kiwi_cli_usage_error(a->cmd, "out of memory");
	return 0;
}

static int take_phase_option(void *ctx, struct run_args *a, int opt, const char *value)
{
	struct phase *p = ctx;
	switch (opt) {
	case OPT_WORKSPACE: p->workspace = value; return 0;
	case OPT_WORKSPACE_DEST:
		if (value[0] != '/')
			return kiwi_cli_usage_error(a->cmd, "--workspace-dest wants an absolute path, got `%s`", value);
		p->workspace_dest = value;
		return 0;
	case OPT_POLICY: return 0;  /* read before the flags: see find_policy */
	case OPT_PASS_ENV:
		return add_pass_env(p, value) < 0 ? kiwi_cli_usage_error(a->cmd, "out of memory") : 0;
	case OPT_SESSION: return 0;  /* read before the flags: see run_args_find_flag */
	case OPT_KEEP_BACKGROUND: p->keep_background = true; return 0;
	case OPT_CACHE: {
		if (p->session)
			return kiwi_cli_usage_error(a->cmd, "--cache is a bind of the session's: give it to `session create --bind`");
		char *colon = strchr(value, ':');
		if (!colon)
			return kiwi_cli_usage_error(a->cmd, "--cache wants HOST:DEST, got `%s`", value);
		*colon = '\0';
		return add_cache(p, a, value, colon + 1);
	}
	default:
		return kiwi_cli_usage_error(a->cmd, "unexpected option");
	}
}

/* A phase never runs without a bound on its processes: the policy's, or
 * this many. A real `npm ci` peaks at tens of tasks (threads count); a
 * fork bomb reached 4,101 on a host that bounded nothing. Held by pids.max
 * where cgroup v2 offers it, and by RLIMIT_NPROC in any case. */
#define PHASE_PIDS_DEFAULT 1024

static int apply_limits(struct run_args *a, const struct kiwi_phase_policy *pp)
{
	a->cfg.limits = pp->limits;
	a->cfg.pids_rlimit = PHASE_PIDS_DEFAULT;
	if (pp->timeout_set)
		a->cfg.timeout_ns = pp->timeout_ns;
	if (pp->output_limit_set)
		a->cfg.output_limit = pp->output_limit;
	if (pp->disk_bytes)
		a->cfg.disk_bytes = pp->disk_bytes;
	return 0;
}

/* The policy's half for this phase becomes run's defaults. */
/* The phase's network, its flags first: the command line's come after
 * and override them. path names the policy in errors when it is not the
 * phase's own. */
static int apply_network(struct run_args *a, const struct kiwi_phase_policy *pp, const char *path)
{
	a->network_egress = pp->network_egress;
	for (size_t i = 0; i < pp->n_egress; i++)
		if (kiwi_egress_config_add(&a->egress, pp->egress_keys[i], pp->egress_values[i], &a->err) < 0)
			return path ? kiwi_error_wrap(&a->err, "policy `%s`", path) : kiwi_error_wrap(&a->err, "policy");
	return 0;
}

static int apply_policy(struct phase *p, struct run_args *a)
{
	const struct kiwi_phase_policy *pp = kiwi_policy_phase(&p->policy, p->which);
	apply_limits(a, pp);
	if (p->which == KIWI_PHASE_INSTALL && !pp->timeout_set) {
		const char *t = secure_getenv("KIWI_INSTALL_TIMEOUT");
		if (kiwi_parse_duration(t && *t ? t : INSTALL_TIMEOUT_DEFAULT, "KIWI_INSTALL_TIMEOUT",
					&a->cfg.timeout_ns, &a->err) < 0)
			return -1;
	}
	if (apply_network(a, pp, NULL) < 0)
		return -1;
	/* verify has no route out; the audit makes its attempts visible
	 * (network_attempted), so "needs the network" is not a mystery. */
	a->cfg.net_audit = p->which == KIWI_PHASE_VERIFY;
	/* Tools write their caches under HOME: a tmpfs, gone with the phase. */
	if (run_args_add_env(a, "HOME=/tmp") < 0)
		return -1;
	for (size_t i = 0; i < pp->n_set_env; i++)
		if (run_args_add_env(a, pp->set_env[i]) < 0)
			return -1;
	for (size_t i = 0; i < pp->n_pass_env; i++)
		if (add_pass_env(p, pp->pass_env[i]) < 0)
			return kiwi_error(&a->err, ENOMEM, "policy", "out of memory");
	/* A session's binds are its own, made at create. */
	for (size_t i = 0; !p->session && i < pp->n_caches; i++)
		if (add_cache(p, a, pp->caches[i].host, pp->caches[i].dest) != 0)
			return kiwi_error(&a->err, EINVAL, "policy", "cache `%s` refused", pp->caches[i].host);
	return 0;
}

/* Every variable that crosses is checked by name: a literal may not carry
 * a credential, and the caller's own variables cross only into verify. */
static int check_env(struct phase *p, struct run_args *a)
{
	for (size_t i = 0; i < a->n_user_env; i++) {
		/* The whole name: a cut one could slip past a pattern. */
		_cleanup_free_ char *name = strndup(a->user_env[i], strcspn(a->user_env[i], "="));
		if (!name)
			return kiwi_error(&a->err, ENOMEM, "policy", "out of memory");
		if (kiwi_policy_check_literal(&p->policy, p->which, name, &a->err) < 0)
			return -1;
	}
	p->passed = calloc(p->n_pass_env + 1, sizeof(*p->passed));
	if (!p->passed)
		return kiwi_error(&a->err, ENOMEM, "policy", "out of memory");
	for (size_t i = 0; i < p->n_pass_env; i++) {
		const char *name = p->pass_env[i];
		if (kiwi_policy_check_env(&p->policy, p->which, name, &a->err) < 0)
			return -1;
		const char *value = getenv(name);
		if (!value)
			return kiwi_error(&a->err, ENOENT, "policy", "--pass-env %s: not set in kiwi-run's environment",
					  name);
		if (asprintf(&p->passed[p->n_passed], "%s=%s", name, value) < 0)
			return kiwi_error(&a->err, ENOMEM, "policy", "out of memory");
		if (run_args_add_env(a, p->passed[p->n_passed++]) < 0)
			return -1;
	}
	return 0;
}

int phase_policy_network(const char *path, struct run_args *a)
{
	_cleanup_(kiwi_policy_clear) struct kiwi_policy policy;
	if (kiwi_policy_load(path, &policy, &a->err) < 0)
		return -1;
	return apply_network(a, kiwi_policy_phase(&policy, KIWI_PHASE_INSTALL), path);
}

/* What only the whole command line can tell, for a phase. */
static int check_session_args(struct phase *p, struct run_args *a)
{
	if (p->workspace || p->workspace_dest)
		return kiwi_cli_usage_error(a->cmd, "--workspace is the session's: give it to `session create`");
	if (!a->cfg.argv)
		return kiwi_cli_usage_error(a->cmd, "with --session, give the %s command after `--`",
					    kiwi_phase_name(p->which));
	if (a->cfg.tty)
		return kiwi_cli_usage_error(a->cmd, "--tty: a phase runs unattended");
	return 0;
}

static int check_phase_args(struct phase *p, struct run_args *a)
{
	if (p->session)
		return check_session_args(p, a);
	if (p->keep_background)
		return kiwi_cli_usage_error(a->cmd, "--keep-background needs --session: a phase's sandbox ends with it");
	if (!p->workspace)
		return kiwi_cli_usage_error(a->cmd, "--workspace is required");
	if (p->which == KIWI_PHASE_VERIFY && a->network_egress)
		return kiwi_cli_usage_error(a->cmd, "verify never has a network: --network egress refused");
	if (p->which == KIWI_PHASE_VERIFY && !a->cfg.argv && !a->image)
		return kiwi_cli_usage_error(a->cmd, "verify needs the test command (put it after `--`)");
	a->cfg.egress = a->network_egress ? &a->egress : NULL;
	if (!p->workspace_dest)
		p->workspace_dest = "/workspace";
	if (!a->cwd_set)
		a->cfg.cwd = p->workspace_dest;
	return 0;
}

/* The workspace: one phase at a time (an flock, so that a verify cannot
 * start while an install on it still runs), then bound read-write. */
static int open_workspace(struct phase *p, struct run_args *a, kiwi_err *err)
{
	p->ws_fd = open(p->workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (p->ws_fd < 0)
		return kiwi_error(err, errno, "workspace", "cannot open `%s`", p->workspace);
	if (flock(p->ws_fd, LOCK_EX | LOCK_NB) < 0)
		return kiwi_error(err, errno, "workspace", "`%s` is in use by another kiwi-run phase",
				  p->workspace);
	if (run_args_add_workspace(a, p->workspace, p->workspace_dest) < 0)
		return kiwi_error(err, ENOMEM, "workspace", "out of memory");
	return 0;
}

/* install without a command: the repository's own, by lockfile. */
static int plan_install(struct phase *p, struct run_args *a, kiwi_err *err)
{
	p->planned = true;
	if (kiwi_plan_workspace(p->ws_fd, &p->plan, err) < 0) {
		p->reason = "plan_refused";
		return -1;
	}
	if (!p->plan.n_steps)
		return 0;
	p->plan_argv = kiwi_plan_command(&p->plan);
	if (!p->plan_argv)
		return kiwi_error(err, ENOMEM, "plan", "cannot build the install command");
	a->cfg.argv = p->plan_argv;
	return 0;
}

/* Why a phase that ran did not succeed, in one word for the orchestrator. */
static const char *phase_reason(const struct phase *p, const struct kiwi_sandbox_result *r,
				const kiwi_err *err, bool failed)
{
	bool install = p->which == KIWI_PHASE_INSTALL;
	if (failed && !strcmp(err->step, "exec") && (err->errnum == ENOENT || err->errnum == ENOTDIR))
		return "tool_missing";
	if (failed && !strcmp(err->step, KIWI_SESSION_STEP_SEALED))
		return "session_refused";
	if (failed)
		return p->reason ? p->reason : "kiwi_run_failed";
	if (r->timed_out)
		return install ? "install_timed_out" : "verify_timed_out";
	if (r->exit_code == 127 && !r->signal)
		return "tool_missing";   /* a shell (the plan's, or the caller's) found no such command */
	if (r->exit_code != 0 || r->signal)
		return install ? "install_failed" : "verify_failed";
	return NULL;
}

/* A tail may start inside a character and hold anything: what is not
 * valid UTF-8 becomes '?', so that the verdict stays valid JSON. */
static size_t utf8_sequence(const unsigned char *s, size_t len)
{
	size_t n = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3
		 : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
	if (!n || n > len || (n == 2 && s[0] < 0xc2))
		return 0;
	for (size_t i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

static void write_tail(kiwi_json_writer *w, const char *key, const struct kiwi_tail *t)
{
	char raw[TAIL_BYTES + 1];
	size_t len = kiwi_tail_copy(t, raw);
	for (size_t i = 0; i < len;) {
		size_t n = utf8_sequence((const unsigned char *)raw + i, len - i);
		if (!n)
			raw[i] = '?';
		i += n ? n : 1;
	}
	raw[len] = '\0';
	kiwi_jw_key(w, key);
	kiwi_jw_string(w, raw);
}

static void write_names(kiwi_json_writer *w, const char *key, char *const *kv, size_t n)
{
	kiwi_jw_key(w, key);
	kiwi_jw_open_array(w);
	for (size_t i = 0; i < n; i++) {
		char name[256];
		snprintf(name, sizeof(name), "%.*s", (int)strcspn(kv[i], "="), kv[i]);
		kiwi_jw_string(w, name);
	}
	kiwi_jw_close_array(w);
}

static void write_plan(kiwi_json_writer *w, const struct phase *p)
{
	kiwi_jw_key(w, "plan");
	if (!p->planned) {
		kiwi_jw_null(w);
		return;
	}
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "steps");
	kiwi_jw_open_array(w);
	for (size_t i = 0; i < p->plan.n_steps; i++) {
		kiwi_jw_open_array(w);
		for (char **arg = p->plan.steps[i].argv; arg && *arg; arg++)
			kiwi_jw_string(w, *arg);
		kiwi_jw_close_array(w);
	}
	kiwi_jw_close_array(w);
	kiwi_jw_key(w, "evidence");
	kiwi_jw_open_array(w);
	for (size_t i = 0; i < p->plan.n_evidence; i++) {
		kiwi_jw_open_object(w);
		kiwi_jw_key(w, "file");
		kiwi_jw_string(w, p->plan.evidence[i].file);
		kiwi_jw_key(w, "why");
		kiwi_jw_string(w, p->plan.evidence[i].why);
		kiwi_jw_close_object(w);
	}
	kiwi_jw_close_array(w);
	kiwi_jw_close_object(w);
}

/* The phase's fields, after run's (kiwi-run-verdict(5)). */
static void write_phase_verdict(kiwi_json_writer *w, void *ctx)
{
	const struct phase *p = ctx;
	const struct run_args *a = &p->s->a;
	kiwi_jw_key(w, "phase");
	kiwi_jw_string(w, kiwi_phase_name(p->which));
	kiwi_jw_key(w, "reason");
	kiwi_jw_string(w, p->reason);
	kiwi_jw_key(w, "skipped");
	kiwi_jw_string(w, p->planned && !p->plan.n_steps && !p->plan.refused ? p->plan.skipped : NULL);
	kiwi_jw_key(w, "workspace");
	kiwi_jw_string(w, p->workspace_dest);
	write_plan(w, p);
	/* Names only, never values: what crossed from the caller, and the
	 * literals set. */
	write_names(w, "credentials", p->passed, p->n_passed);
	write_names(w, "env_set", a->user_env, a->n_user_env - p->n_passed);
	kiwi_jw_key(w, "output_tail");
	kiwi_jw_open_object(w);
	write_tail(w, "stdout", &p->out_tail);
	write_tail(w, "stderr", &p->err_tail);
	kiwi_jw_close_object(w);
}

static void phase_release(struct phase *p)
{
	kiwi_policy_clear(&p->policy);
	kiwi_plan_clear(&p->plan);
	kiwi_plan_command_free(p->plan_argv);
	for (size_t i = 0; i < p->n_passed; i++)
		free(p->passed[i]);
	free(p->passed);
	free(p->pass_env);
	kiwi_closep(&p->ws_fd);
}

/* Policy, then flags, then the checks that need both. */
static int parse_phase(struct phase *p, struct run_session *s, int argc, char **argv)
{
	struct run_args *a = &s->a;
	const char *policy_path = run_args_find_flag(argc, argv, "--policy");
	if (policy_path ? kiwi_policy_load(policy_path, &p->policy, &a->err) < 0
			: (kiwi_policy_init(&p->policy), 0)) {
		kiwi_cli_print_error(&a->err);
		return KIWI_EXIT_FAILED;
	}
	run_args_defaults(a);
	a->command_optional = true;
	if (apply_policy(p, a) < 0) {
		kiwi_cli_print_error(&a->err);
		return KIWI_EXIT_FAILED;
	}
	struct run_extra x = { phase_options, take_phase_option, p, phase_usage };
	int r = run_args_parse(argc, argv, a, &x);
	if (r != 0)
		return r;
	if ((r = check_phase_args(p, a)) != 0)
		return r;
	if (check_env(p, a) < 0) {
		kiwi_cli_print_error(&a->err);
		return KIWI_EXIT_FAILED;
	}
	return 0;
}

/* The session's network must be the one the phase needs: egress pinned
 * at create for an install whose policy gives the network (and none for
 * one that gives none), never one verify sealed; verify takes it away,
 * with every process of the session, before its command starts. */
static int enter_session(struct phase *p, struct run_session *s, struct kiwi_registry_entry *e)
{
	if (kiwi_session_find(p->session, e, &s->err) < 0)
		return -1;
	if (p->which == KIWI_PHASE_VERIFY) {
		int64_t t = KIWI_DEBUG_NOW(s->a.cfg.debug);
		int reaped = 0;
		if (kiwi_session_seal(e, &reaped, &s->err) < 0)
			return -1;
		KIWI_DEBUG(s->a.cfg.debug, "phase", t, "seal", "session %s: %d process(es) killed and reaped, "
			   "its network gone", e->id, reaped);
		return 0;
	}
	/* Sealed meanwhile: the session refuses the exec itself
	 * (before_verify), so no verify can slip in between a check here and
	 * the start. */
	bool egress = !strcmp(e->network, "egress");
	if (s->a.network_egress && !egress)
		return kiwi_error(&s->err, EINVAL, "session", "the install policy gives the network and session `%s` "
				  "has none: create it with --network egress (or --policy FILE)", e->id);
	if (!s->a.network_egress && egress)
		return kiwi_error(&s->err, EINVAL, "session", "the install policy gives no network and session `%s` "
				  "has egress: create it without --network egress", e->id);
	return 0;
}

static int run_in_session(struct phase *p, struct run_session *s)
{
	struct kiwi_registry_entry e;
	bool failed = enter_session(p, s, &e) < 0;
	if (failed) {
		/* Refused before anything ran: one line, nothing else. */
		p->reason = "session_refused";
		return run_session_finish(s, true);
	}
	failed = session_run_exec(s, &e, p->keep_background, p->which == KIWI_PHASE_INSTALL);
	p->reason = phase_reason(p, &s->res, &s->err, failed);
	return run_session_finish(s, failed);
}

/* argv[0] is "phase", argv[1] the phase. */
int kiwi_cmd_phase(int argc, char **argv)
{
	if (argc < 2 || (strcmp(argv[1], "install") && strcmp(argv[1], "verify"))) {
		if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
			printf("usage: kiwi-run phase install|verify --workspace DIR [OPTIONS] [-- CMD...]\n"
			       "See kiwi-run-phase(1).\n");
			return 0;
		}
		return kiwi_cli_usage_error("phase", "wants install or verify, got `%s`",
					    argc >= 2 ? argv[1] : "");
	}
	_cleanup_(run_session_release) struct run_session s;
	run_session_init(&s, !strcmp(argv[1], "install") ? "phase install" : "phase verify");
	_cleanup_(phase_release) struct phase p = {
		.which = !strcmp(argv[1], "install") ? KIWI_PHASE_INSTALL : KIWI_PHASE_VERIFY,
		.ws_fd = -1,
		.out_tail = { .size = TAIL_BYTES },
		.err_tail = { .size = TAIL_BYTES },
		.s = &s,
	};
	p.out_tail.buf = p.out_buf;
	p.err_tail.buf = p.err_buf;
	p.session = run_args_find_flag(argc - 1, argv + 1, "--session");
	if (p.session && session_refuse_create_flags(s.a.cmd, argc - 1, argv + 1) != 0)
		return KIWI_EXIT_FAILED;
	s.a.no_rootfs = p.session != NULL;
	int r = parse_phase(&p, &s, argc - 1, argv + 1);
	if (r != 0)
		return r == -2 ? 0 : r;
	if (run_session_open_verdict(&s) < 0)
		return KIWI_EXIT_FAILED;
	s.verdict_extra = write_phase_verdict;
	s.verdict_ctx = &p;

	struct kiwi_sandbox_config *cfg = &s.a.cfg;
	cfg->stdout_tail = &p.out_tail;
	cfg->stderr_tail = &p.err_tail;
	cfg->own_cgroup = true;
	cfg->phase = kiwi_phase_name(p.which);   /* for `kiwi-run list` */
	if (p.session)
		return run_in_session(&p, &s);
	bool failed = open_workspace(&p, &s.a, &s.err) < 0 ||
		      (p.which == KIWI_PHASE_INSTALL && !cfg->argv && !s.a.image &&
		       plan_install(&p, &s.a, &s.err) < 0);
	if (!failed && p.planned && !p.plan.n_steps) {
		s.res.exit_code = 0;   /* nothing declared: skipped, and that is success */
		return run_session_finish(&s, false);
	}
	/* The policy's or --pids's count, when it gives one. */
	if (cfg->limits.pids_max > 0 && cfg->limits.pids_max != KIWI_CGROUP_MAX)
		cfg->pids_rlimit = cfg->limits.pids_max;
	if (!failed)
		failed = run_session_prepare(&s) < 0 || kiwi_sandbox_run(cfg, &s.res, &s.err) < 0;
	p.reason = phase_reason(&p, &s.res, &s.err, failed);
	return run_session_finish(&s, failed);
}
