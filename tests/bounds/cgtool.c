/* SPDX-License-Identifier: Apache-2.0 */
/* cgtool: drives the cgroup module (src/sandbox/cgroup.c) for the VM-lane tests.
 *
 *   cgtool run [--parent P] [LIMITS] [--cgroupns] -- CMD [ARGS...]
 *       create a cgroup with LIMITS, start CMD inside it with clone3 +
 *       CLONE_INTO_CGROUP (KIWI_CGROUP_PATH set to its directory), wait,
 *       read the stats, destroy
 *   cgtool cycles N [--parent P] [LIMITS]    N create/destroy pairs
 *   cgtool gc [--parent P]                   collect stale kiwi cgroups
 *
 * LIMITS: --memory SIZE --swap SIZE --pids N --cpus C --io-weight W
 * --io-max LINE. Every step prints one JSON object on its own line on
 * stdout, starting with {"event": ("created", "exited", "destroyed",
 * "cycles", "gc"). A module failure prints "cgtool: <error>" on stderr and
 * exits 125, like kiwi-run. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kiwi/cgroup.h"
#include "kiwi/json.h"
#include "kiwi/spawn.h"
#include "kiwi/units.h"

struct opts {
	const char *parent;
	struct kiwi_cgroup_limits limits;
	bool cgroupns;
};

static int fail(const kiwi_err *err)
{
	char text[1024];
	kiwi_error_format(err, text, sizeof(text));
	fprintf(stderr, "cgtool: %s\n", text);
	return 125;
}

static void emit(kiwi_json_writer *w)
{
	size_t len;
	const char *text = kiwi_jw_text(w, &len);
	fwrite(text, 1, len, stdout);
	fputc('\n', stdout);
	fflush(stdout);
}

static int parse_opt(int c, const char *arg, struct opts *o, kiwi_err *err)
{
	struct kiwi_cgroup_limits *l = &o->limits;
	int64_t v;
	switch (c) {
	case 'P': o->parent = arg; return 0;
	case 'm': return kiwi_parse_size(arg, "--memory", &l->memory_max, err);
	case 's': return kiwi_parse_size(arg, "--swap", &l->memory_swap_max, err);
	case 'p': return kiwi_parse_pids(arg, &l->pids_max, err);
	case 'c': return kiwi_parse_cpus(arg, &l->cpu_quota_us, &l->cpu_period_us, err);
	case 'x': l->io_max = arg; return kiwi_cgroup_check_io_max(arg, err);
	case 'n': o->cgroupns = true; return 0;
	case 'w':
		if (kiwi_parse_pids(arg, &v, err) < 0 || v > 10000)
			return kiwi_error(err, EINVAL, "parse", "`%s` is not an io weight (1..10000)", arg);
		l->io_weight = (int)v;
		return 0;
	default:
		break;
	}
	return kiwi_error(err, EINVAL, "args", "unknown option (see the top of cgtool.c)");
}

/* Options after the verb, up to "--" or the first operand. */
static int parse_opts(int argc, char **argv, struct opts *o, kiwi_err *err)
{
	static const struct option table[] = {
		{ "parent", required_argument, NULL, 'P' },
		{ "memory", required_argument, NULL, 'm' },
		{ "swap", required_argument, NULL, 's' },
		{ "pids", required_argument, NULL, 'p' },
		{ "cpus", required_argument, NULL, 'c' },
		{ "io-weight", required_argument, NULL, 'w' },
		{ "io-max", required_argument, NULL, 'x' },
		{ "cgroupns", no_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	*o = (struct opts){ .limits = KIWI_CGROUP_LIMITS_INIT };
	optind = 1;
	int i = -1;
	for (int c; (c = getopt_long(argc, argv, "+", table, &i)) != -1; i = -1)
		if (parse_opt(c, optarg, o, err) < 0)
			return kiwi_error_wrap(err, "--%s", i >= 0 ? table[i].name : "?");
	return optind;
}

static void emit_stats(int status, const struct kiwi_cgroup_stats *st)
{
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "event");
	kiwi_jw_string(w, "exited");
	kiwi_jw_key(w, "exit_code");
	kiwi_jw_int(w, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	kiwi_jw_key(w, "signal");
	kiwi_jw_int(w, WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	kiwi_jw_key(w, "oom_killed");
	kiwi_jw_bool(w, st->oom_killed);
	kiwi_jw_key(w, "oom_kills");
	kiwi_jw_int(w, (long long)st->oom_kills);
	kiwi_jw_key(w, "peak_known");
	kiwi_jw_bool(w, st->peak_known);
	kiwi_jw_key(w, "peak_memory_kib");
	kiwi_jw_int(w, (long long)st->peak_memory_kib);
	kiwi_jw_key(w, "pids_limit_hit");
	kiwi_jw_bool(w, st->pids_limit_hit);
	kiwi_jw_key(w, "cpu_usage_us");
	kiwi_jw_int(w, (long long)st->cpu_usage_us);
	kiwi_jw_key(w, "cpu_user_us");
	kiwi_jw_int(w, (long long)st->cpu_user_us);
	kiwi_jw_key(w, "cpu_system_us");
	kiwi_jw_int(w, (long long)st->cpu_system_us);
	kiwi_jw_close_object(w);
	emit(w);
}

static void emit_event(const char *event, const char *key, const char *s, long long n)
{
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "event");
	kiwi_jw_string(w, event);
	kiwi_jw_key(w, key);
	if (s)
		kiwi_jw_string(w, s);
	else
		kiwi_jw_int(w, n);
	kiwi_jw_close_object(w);
	emit(w);
}

/* The sequence the launcher uses: create, clone3 into it, wait, stats, destroy. */
static int cmd_run(const struct opts *o, char **cmd)
{
	kiwi_err err = { 0 };
	struct kiwi_cgroup *cg = NULL;
	if (!cmd[0]) {
		kiwi_error(&err, EINVAL, "args", "run: no command");
		return fail(&err);
	}
	if (kiwi_cgroup_create(o->parent, &o->limits, &cg, &err) < 0)
		return fail(&err);
	emit_event("created", "path", kiwi_cgroup_path(cg), 0);
	int pidfd = -1;
	pid_t pid = kiwi_spawn(o->cgroupns ? CLONE_NEWCGROUP : 0, kiwi_cgroup_fd(cg), &pidfd, &err);
	if (pid == 0) {
		/* The cgroup fd is CLOEXEC: exec drops it, and with it the lock. */
		setenv("KIWI_CGROUP_PATH", kiwi_cgroup_path(cg), 1);
		execvp(cmd[0], cmd);
		_exit(127);
	}
	int status = 0;
	struct kiwi_cgroup_stats st;
	if (pid < 0 || waitpid(pid, &status, 0) < 0 || kiwi_cgroup_read_stats(cg, &st, &err) < 0) {
		if (pid < 0 || err.step[0] == '\0')
			kiwi_error(&err, errno, "wait", "waiting for the command");
		kiwi_cgroup_destroy(cg, NULL);
		return fail(&err);
	}
	emit_stats(status, &st);
	if (kiwi_cgroup_destroy(cg, &err) < 0)
		return fail(&err);
	emit_event("destroyed", "path", "ok", 0);
	return 0;
}

static int cmd_cycles(const struct opts *o, const char *count)
{
	kiwi_err err = { 0 };
	int n = atoi(count ? count : "0");
	for (int i = 0; i < n; i++) {
		struct kiwi_cgroup *cg = NULL;
		if (kiwi_cgroup_create(o->parent, &o->limits, &cg, &err) < 0 ||
		    kiwi_cgroup_destroy(cg, &err) < 0) {
			kiwi_error_wrap(&err, "cycle %d", i);
			return fail(&err);
		}
	}
	emit_event("cycles", "cycles", NULL, n);
	return 0;
}

static int cmd_gc(const struct opts *o)
{
	kiwi_err err = { 0 };
	unsigned removed = 0;
	if (kiwi_cgroup_gc(o->parent, &removed, &err) < 0)
		return fail(&err);
	emit_event("gc", "removed", NULL, removed);
	return 0;
}

int main(int argc, char **argv)
{
	kiwi_err err = { 0 };
	struct opts o;
	if (argc < 2) {
		fprintf(stderr, "usage: cgtool run|cycles|gc [OPTIONS] [-- CMD...]\n");
		return 125;
	}
	int first = parse_opts(argc - 1, argv + 1, &o, &err);
	if (first < 0)
		return fail(&err);
	char **rest = argv + 1 + first;
	if (!strcmp(argv[1], "run"))
		return cmd_run(&o, rest);
	if (!strcmp(argv[1], "cycles"))
		return cmd_cycles(&o, rest[0]);
	if (!strcmp(argv[1], "gc"))
		return cmd_gc(&o);
	fprintf(stderr, "cgtool: args: unknown verb `%s`\n", argv[1]);
	return 125;
}
