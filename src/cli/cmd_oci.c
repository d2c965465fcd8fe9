/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-run as an OCI runtime: `kiwi-run [GLOBAL] COMMAND [OPTIONS] ID`,
 * the command line containerd's runc shim and podman call. This file holds
 * the global flags, the log, the dispatch table and the commands that need
 * no container (spec, features) or only read one (state). */
#include "cli.h"
#include "cmd_oci.h"
#include "kiwi/cleanup.h"
#include "kiwi/fileio.h"
#include "kiwi/json.h"
#include "kiwi/oci_runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct kiwi_oci_globals kiwi_oci_g;
static int log_fd = -1;
static bool log_json;

static void log_time(char *buf, size_t len)
{
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, len - n, ".%09ldZ", ts.tv_nsec);
}

/* One line per event, in the shape runc's logrus writes: the containerd
 * shim reads the last "error" line of a json log to report a failure. */
static void log_line(const char *level, const char *msg)
{
	char when[64];
	log_time(when, sizeof(when));
	if (log_fd < 0) {
		fprintf(stderr, "kiwi-run: %s: %s\n", level, msg);
		return;
	}
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
	if (!w)
		return;
	if (log_json) {
		kiwi_jw_open_object(w);
		kiwi_jw_key(w, "level");
		kiwi_jw_string(w, level);
		kiwi_jw_key(w, "msg");
		kiwi_jw_string(w, msg);
		kiwi_jw_key(w, "time");
		kiwi_jw_string(w, when);
		kiwi_jw_close_object(w);
	} else {
		/* A JSON string is a quoted, escaped text value: reuse it. */
		kiwi_jw_string(w, msg);
	}
	size_t len;
	const char *text = kiwi_jw_text(w, &len);
	if (log_json)
		dprintf(log_fd, "%.*s\n", (int)len, text);
	else
		dprintf(log_fd, "time=\"%s\" level=%s msg=%.*s\n", when, level, (int)len, text);
}

void kiwi_oci_log(const char *level, const char *fmt, ...)
{
	if (!strcmp(level, "debug") && !kiwi_oci_g.debug)
		return;
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_line(level, msg);
}

void kiwi_oci_note(const char *msg)
{
	kiwi_oci_log("debug", "%s", msg);
}

void kiwi_oci_warn(const char *msg)
{
	kiwi_oci_log("warning", "%s", msg);
}

int kiwi_oci_fail(const kiwi_err *err)
{
	char text[1024];
	kiwi_error_format(err, text, sizeof(text));
	fprintf(stderr, "kiwi-run: %s\n", text);
	if (log_fd >= 0)
		log_line("error", text);
	return 1;
}

int kiwi_oci_usage(const char *cmd, const char *fmt, ...)
{
	char text[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	kiwi_err e;
	kiwi_error(&e, 0, "args", "%s: %s (see kiwi-run-oci(1))", cmd, text);
	return kiwi_oci_fail(&e);
}

static int print_json(kiwi_json_writer *w, FILE *out)
{
	size_t len;
	const char *text = kiwi_jw_text(w, &len);
	fwrite(text, 1, len, out);
	if (len && text[len - 1] != '\n')
		fputc('\n', out);
	return fflush(out) == 0 ? 0 : 1;
}

/* ---- spec, features, state ---- */

static int cmd_spec(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "bundle", required_argument, NULL, 'b' },
		{ "rootless", no_argument, NULL, 'r' },
		{ 0 },
	};
	const char *bundle = ".";
	bool rootless = false;
	int c;
	while ((c = getopt_long_only(argc, argv, "+b:", opts, NULL)) != -1) {
		if (c == 'b')
			bundle = optarg;
		else if (c == 'r')
			rootless = true;
		else
			return kiwi_oci_usage("spec", "unknown option `%s`", argv[optind - 1]);
	}
	if (optind != argc)
		return kiwi_oci_usage("spec", "takes no arguments");
	char path[4096];
	kiwi_err err;
	snprintf(path, sizeof(path), "%s/config.json", bundle);
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(true);
	if (!w)
		return kiwi_oci_fail(&(kiwi_err){ ENOMEM, "spec", "cannot allocate" });
	kiwi_oci_write_spec(w, rootless, (unsigned)getuid(), (unsigned)getgid());
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		kiwi_error(&err, errno, "spec", errno == EEXIST ? "`%s` exists; remove it first" : "cannot create `%s`",
			   path);
		return kiwi_oci_fail(&err);
	}
	FILE *f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		return kiwi_oci_fail(&(kiwi_err){ errno, "spec", "cannot write config.json" });
	}
	int r = print_json(w, f);
	if (fclose(f) != 0 || r) {
		kiwi_error(&err, errno, "spec", "cannot write `%s`", path);
		unlink(path);
		return kiwi_oci_fail(&err);
	}
	return 0;
}

static int cmd_features(int argc, char **argv)
{
	(void)argv;
	if (argc != 1)
		return kiwi_oci_usage("features", "takes no arguments");
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(true);
	if (!w)
		return kiwi_oci_fail(&(kiwi_err){ ENOMEM, "features", "cannot allocate" });
	kiwi_oci_write_features(w);
	return print_json(w, stdout);
}

static int cmd_state(int argc, char **argv)
{
	if (argc != 2 || argv[1][0] == '-')
		return kiwi_oci_usage("state", "takes exactly one container id");
	struct kiwi_oci_state st;
	kiwi_err err;
	if (kiwi_oci_state_load(kiwi_oci_g.root, argv[1], &st, &err) < 0)
		return kiwi_oci_fail(&err);
	enum kiwi_oci_status s = kiwi_oci_state_status(kiwi_oci_g.root, &st, NULL);
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(true);
	if (!w) {
		kiwi_oci_state_clear(&st);
		return kiwi_oci_fail(&(kiwi_err){ ENOMEM, "state", "cannot allocate" });
	}
	kiwi_oci_write_state(w, &st, s);
	kiwi_oci_state_clear(&st);
	return print_json(w, stdout);
}

/* ---- dispatch ---- */

static int cmd_checkpoint(int argc, char **argv);

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
} oci_commands[] = {
	{ "checkpoint", cmd_checkpoint },
	{ "restore", cmd_checkpoint },
	{ "create", kiwi_oci_cmd_create },
	{ "delete", kiwi_oci_cmd_delete },
	{ "exec", kiwi_oci_cmd_exec },
	{ "features", cmd_features },
	{ "kill", kiwi_oci_cmd_kill },
	{ "ps", kiwi_oci_cmd_ps },
	{ "run", kiwi_oci_cmd_run },
	{ "spec", cmd_spec },
	{ "start", kiwi_oci_cmd_start },
	{ "state", cmd_state },
};

static const char *const global_flags[] = { "root", "log", "log-format", "debug", "systemd-cgroup", NULL };

/* runc's checkpoint and restore (CRIU): not something kiwi-run does, and
 * `features` does not claim it. Said plainly, exit 1, as any failure. */
static int cmd_checkpoint(int argc, char **argv)
{
	(void)argc;
	kiwi_err e;
	kiwi_error(&e, EOPNOTSUPP, argv[0], "checkpoint/restore is not supported by kiwi-run");
	return kiwi_oci_fail(&e);
}

/* Whether a word is one of the global flags, in any of the spellings
 * runc's parser takes (--root X, --root=X, -root X). */
static bool is_global_flag(const char *arg)
{
	if (arg[0] != '-')
		return false;
	arg += arg[1] == '-' ? 2 : 1;
	for (const char *const *f = global_flags; *f; f++) {
		size_t n = strlen(*f);
		if (!strncmp(arg, *f, n) && (arg[n] == '\0' || arg[n] == '='))
			return true;
	}
	return false;
}

static const char *default_root(char *buf, size_t len);

/* kiwi-run's own `kill ID [SIGNAL]` (kiwi-run-list(1)) has the OCI form:
 * it is the OCI one with --all, or when ID is a container under the
 * default --root. (The shim and podman pass --root first anyway.) */
static bool kill_is_oci(int argc, char **argv)
{
	char root[4096], path[8192];
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "-a") || !strcmp(argv[i], "--all") || !strcmp(argv[i], "-all"))
			return true;
		if (argv[i][0] == '-')
			continue;
		snprintf(path, sizeof(path), "%s/%s/state.json", default_root(root, sizeof(root)), argv[i]);
		return !strchr(argv[i], '/') && access(path, F_OK) == 0;
	}
	return false;
}

bool kiwi_cli_is_oci(int argc, char **argv)
{
	const char *base = strrchr(argv[0], '/');
	base = base ? base + 1 : argv[0];
	if (!strcmp(base, "kiwi-oci"))
		return true;
	if (argc < 2)
		return false;
	if (is_global_flag(argv[1]))
		return true;
	if (!strcmp(argv[1], "kill"))
		return kill_is_oci(argc, argv);
	/* `run` is kiwi-run's own unless it names a bundle. */
	if (!strcmp(argv[1], "run")) {
		for (int i = 2; i < argc && strcmp(argv[i], "--"); i++)
			if (!strcmp(argv[i], "-b") || !strcmp(argv[i], "--bundle") || !strncmp(argv[i], "--bundle=", 9) ||
			    !strcmp(argv[i], "-bundle") || !strncmp(argv[i], "-bundle=", 8))
				return true;
		return false;
	}
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(oci_commands); i++)
		if (!strcmp(argv[1], oci_commands[i].name))
			return true;
	return false;
}

static int open_log(const char *path, const char *format)
{
	if (format && strcmp(format, "json") && strcmp(format, "text"))
		return kiwi_oci_usage("--log-format", "`%s` is neither json nor text", format);
	log_json = format && !strcmp(format, "json");
	if (!path)
		return 0;
	kiwi_err err;
	log_fd = kiwi_open_output(path, KIWI_OUTPUT_APPEND, 0640, "log", "log file", &err);
	if (log_fd < 0)
		return kiwi_oci_fail(&err);
	return 0;
}

/* --root's default: /run/kiwi/oci for root, $XDG_RUNTIME_DIR/kiwi/oci
 * otherwise. Not /run/kiwi itself: kiwi-run's registry, egress and helper
 * keep directories there, which container ids must not collide with. */
static const char *default_root(char *buf, size_t len)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	if (geteuid() == 0)
		return "/run/kiwi/oci";
	if (xdg && xdg[0])
		snprintf(buf, len, "%s/kiwi/oci", xdg);
	else
		snprintf(buf, len, "/run/user/%u/kiwi/oci", (unsigned)geteuid());
	return buf;
}

int kiwi_cmd_oci(int argc, char **argv)
{
	enum { G_ROOT = 0x100, G_LOG, G_LOG_FORMAT, G_DEBUG, G_SYSTEMD, G_HELP, G_VERSION };
	static const struct option opts[] = {
		{ "root", required_argument, NULL, G_ROOT },
		{ "log", required_argument, NULL, G_LOG },
		{ "log-format", required_argument, NULL, G_LOG_FORMAT },
		{ "debug", no_argument, NULL, G_DEBUG },
		{ "systemd-cgroup", no_argument, NULL, G_SYSTEMD },
		{ "help", no_argument, NULL, G_HELP },
		{ "h", no_argument, NULL, G_HELP },
		{ "version", no_argument, NULL, G_VERSION },
		{ "v", no_argument, NULL, G_VERSION },
		{ 0 },
	};
	const char *log_path = NULL, *log_format = NULL;
	bool systemd = false;
	char root_buf[4096];
	kiwi_oci_g.root = default_root(root_buf, sizeof(root_buf));
	int c;
	opterr = 0;
	while ((c = getopt_long_only(argc, argv, "+", opts, NULL)) != -1) {
		switch (c) {
		case G_ROOT: kiwi_oci_g.root = optarg; break;
		case G_LOG: log_path = optarg; break;
		case G_LOG_FORMAT: log_format = optarg; break;
		case G_DEBUG: kiwi_oci_g.debug = true; break;
		case G_SYSTEMD: systemd = true; break;
		case G_HELP:
			printf("usage: kiwi-run [--root DIR] [--log FILE] [--log-format json|text] [--debug] COMMAND ...\n"
			       "commands: create start state kill delete run exec ps spec features (see kiwi-run-oci(1))\n");
			return 0;
		case G_VERSION:
			/* Global flags come in any order: `--root DIR --version`. */
			printf("kiwi-run %s\nspec: %s\n", KIWI_VERSION, KIWI_OCI_VERSION);
			return 0;
		default:
			return kiwi_oci_usage("kiwi-run", "unknown global option `%s`", argv[optind - 1]);
		}
	}
	if (open_log(log_path, log_format))
		return 1;
	if (systemd)
		return kiwi_oci_usage("--systemd-cgroup",
				      "kiwi-run does not drive systemd; use the cgroupfs driver (cgroupsPath is a path)");
	if (optind >= argc)
		return kiwi_oci_usage("kiwi-run", "no command given");
	const char *cmd = argv[optind];
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(oci_commands); i++)
		if (!strcmp(cmd, oci_commands[i].name)) {
			int sub_argc = argc - optind;
			char **sub_argv = argv + optind;
			optind = 0;
			kiwi_oci_log("debug", "%s", cmd);
			/* The commands whose processes enter a container run from
			 * a sealed copy of kiwi-run (src/oci/sealed.c). */
			kiwi_err err = { 0 };
			if ((!strcmp(cmd, "create") || !strcmp(cmd, "run") || !strcmp(cmd, "exec")) &&
			    kiwi_oci_reexec_sealed(argv, &err) < 0)
				return kiwi_oci_fail(&err);
			return oci_commands[i].fn(sub_argc, sub_argv);
		}
	return kiwi_oci_usage("kiwi-run", "unknown command `%s`", cmd);
}
