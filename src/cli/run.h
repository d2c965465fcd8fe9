/* SPDX-License-Identifier: Apache-2.0 */
/* The machinery behind every command that runs a sandbox (run, phase,
 * shell): one flag parser, one preparation, one way to finish with a
 * verdict. A command adds its own options through struct run_extra. */
#ifndef KIWI_CLI_RUN_H
#define KIWI_CLI_RUN_H

#include <getopt.h>
#include <stdbool.h>

#include "image.h"
#include "kiwi/debug.h"
#include "kiwi/egress.h"
#include "kiwi/json.h"
#include "kiwi/sandbox.h"
#include "kiwi/userns.h"

struct kiwi_seccomp;

/* Option codes: run's own are below RUN_OPT_EXTRA, a command's above. */
#define RUN_OPT_EXTRA 0x200

struct run_args {
	const char *cmd;      /* the subcommand, for messages */
	struct kiwi_sandbox_config cfg;
	struct kiwi_bind *binds;   /* growable: see run_args_add_bind */
	size_t bind_cap;
	int *preserve;
	char **env;          /* NULL-terminated; entries point into argv or are literals */
	size_t n_env;
	char **user_env;     /* --env, applied last */
	size_t n_user_env;
	size_t user_env_cap;
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
	struct kiwi_idmap idmap;  /* --uidmap, --gidmap: cfg.idmap points here once one is given */
	bool defaults_set;
	bool command_optional;    /* no command after `--` is fine (the caller fills it) */
	bool no_rootfs;           /* neither --rootfs nor --image (session exec: the session has one) */
	kiwi_err err;         /* a flag's value that did not parse */
	struct kiwi_debug debug;  /* --debug: cfg.debug points here */
};

/* A command's own options on top of run's. take() gets each one; it
 * returns 0, or KIWI_EXIT_FAILED once it printed why. */
struct run_extra {
	const struct option *options;   /* codes >= RUN_OPT_EXTRA, {0}-terminated */
	int (*take)(void *ctx, struct run_args *a, int opt, const char *value);
	void *ctx;
	const char *usage;              /* printed after run's options by --help */
	const char *synopsis;           /* --help's usage lines, in place of run's */
};

/* Run's defaults; a command may change them (from a configuration file)
 * before run_args_parse, which calls this itself otherwise. */
void run_args_defaults(struct run_args *a);
/* Parses argv (argv[0] is the subcommand). Returns 0, -2 after --help,
 * or KIWI_EXIT_FAILED once the error is printed. */
int run_args_parse(int argc, char **argv, struct run_args *a, const struct run_extra *x);
void run_args_release(struct run_args *a);
/* FLAG's value, read before run_args_parse (see run_args.c). */
const char *run_args_find_flag(int argc, char **argv, const char *flag);
int run_args_add_bind(struct run_args *a, const char *source, const char *dest, bool read_only);
/* A bind written through the sandbox's layer (kiwi/fslayer.h). */
int run_args_add_workspace(struct run_args *a, const char *source, const char *dest);
int run_args_add_env(struct run_args *a, const char *kv);
/* --tty: TERM for the session, the caller's (or xterm) unless --env set it. */
int run_args_tty_env(struct run_args *a);
/* One of run's flags, set from a configuration file as if given on the
 * command line ("memory", "2G"); only the sandbox bounds are accepted. */
int run_args_set_bound(struct run_args *a, const char *flag, const char *value);

/* One run from parsed flags to verdict. */
struct run_session {
	struct run_args a;
	kiwi_err err;
	int vfd;
	struct kiwi_sandbox_result res;
	struct kiwi_cli_image img;
	int out_fd, err_fd;
	struct kiwi_seccomp *filter;
	/* Called inside the verdict object, after run's fields. */
	void (*verdict_extra)(kiwi_json_writer *w, void *ctx);
	void *verdict_ctx;
};

void run_session_init(struct run_session *s, const char *cmd);
void run_session_release(struct run_session *s);
/* The verdict's destination, opened before anything else happens so that
 * every later outcome is written there. -1 once the error is printed. */
int run_session_open_verdict(struct run_session *s);
/* Image, environment, output files, seccomp program. */
int run_session_prepare(struct run_session *s);
/* Only the output files (--stdout, --stderr). */
int run_session_prepare_output(struct run_session *s);
/* One error line, the verdict, the network teardown; the exit status. */
int run_session_finish(struct run_session *s, bool failed);

/* The install half of the phase policy at path (kiwi-run-policy(5)): its
 * network, as flags would set it (cmd_phase.c; session create --policy). */
int phase_policy_network(const char *path, struct run_args *a);
/* Sessions' own (cmd_session.c), shared with phase --session: */
struct kiwi_registry_entry;
/* Refuses, by name, the flags that shape a whole session. */
int session_refuse_create_flags(const char *cmd, int argc, char **argv);
/* s's command as one exec of session e: output, then the exec; true when
 * it failed (s->err). The verdict is run_session_finish()'s. */
bool session_run_exec(struct run_session *s, const struct kiwi_registry_entry *e, bool keep_background,
		      bool before_verify);

#endif
