/* SPDX-License-Identifier: Apache-2.0 */
/* The install planner: which of the repository's own install commands
 * `kiwi-run phase install` runs, chosen by the lockfiles in the workspace,
 * never by guessing, with the evidence for each choice. The rules are
 * documented in kiwi-run-plan(1).
 *
 * The workspace is written by untrusted code: it is read only through the
 * caller's directory fd, beneath it, refusing symlinks and anything but
 * regular files, with bounded reads. */
#ifndef KIWI_PLAN_H
#define KIWI_PLAN_H

#include <stddef.h>

#include "kiwi/err.h"

struct kiwi_plan_evidence {
	char *file;   /* "pnpm-lock.yaml", relative to the workspace */
	char *why;    /* "lockfile of pnpm, named by packageManager" */
};

struct kiwi_plan_step {
	char *ecosystem;   /* "node", "python", "go", ... */
	char *tool;        /* "pnpm", "pip", ... */
	char **argv;       /* NULL-terminated; argv[0] is looked up in PATH */
	/* Where the tool keeps what it downloads when that is outside the
	 * workspace ("$HOME/go/pkg/mod"): only a declared cache carries it
	 * over to verify. NULL when the install lands in the workspace. */
	const char *cache;
};

struct kiwi_plan {
	struct kiwi_plan_step *steps;   /* in order */
	size_t n_steps;                 /* 0 => skipped */
	const char *skipped;            /* "no dependencies declared" when n_steps == 0 */
	struct kiwi_plan_evidence *evidence;
	size_t n_evidence;
	/* Set (with the same text as err) when kiwi_plan_workspace refuses
	 * because the workspace declares dependencies that no lockfile pins,
	 * or names its tool ambiguously: the plan still holds the evidence so
	 * `kiwi-run plan` can show it. NULL otherwise. */
	char *refused;
};

/* The reason phase install is skipped; compare pointers or text. */
#define KIWI_PLAN_NOTHING_DECLARED "no dependencies declared"

/* Plans the install of the workspace open at workspace_dirfd (a directory
 * fd; not consumed). Returns 0, or -1 with err set (step "plan"): a symlink,
 * special file or oversized file where a manifest or lockfile is looked for,
 * a malformed manifest, or a refusal (plan->refused). Whatever it returns,
 * release the plan with kiwi_plan_clear. */
int kiwi_plan_workspace(int workspace_dirfd, struct kiwi_plan *plan, kiwi_err *err);
void kiwi_plan_clear(struct kiwi_plan *plan);

/* One argv for the sandbox: the step itself when there is one, else
 * /bin/sh -c with each step quoted, stopping at the first failure.
 * NULL when the plan has no step or memory runs out. */
char **kiwi_plan_command(const struct kiwi_plan *plan);
void kiwi_plan_command_free(char **argv);

/* Writes the plan as one JSON object and a newline to fd:
 *   {"steps":[{"ecosystem","tool","argv","cache"}], "command":[...] | null,
 *    "skipped": str | null, "refused": str | null,
 *    "evidence":[{"file","why"}]} */
int kiwi_plan_write_json(int fd, const struct kiwi_plan *plan, kiwi_err *err);
/* The same object, into a writer the caller owns (a verdict, say). */
struct kiwi_json_writer;
void kiwi_plan_write(struct kiwi_json_writer *w, const struct kiwi_plan *plan);

#endif
