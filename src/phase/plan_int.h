/* SPDX-License-Identifier: Apache-2.0 */
/* Inside the install planner: reading the workspace (plan_ws.c), parsing
 * manifests (plan_parse.c, pure functions over bytes, so the fuzzer and the
 * unit tests reach them without a filesystem) and the rules (plan.c). */
#ifndef KIWI_PLAN_INT_H
#define KIWI_PLAN_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "kiwi/err.h"
#include "kiwi/plan.h"

/* Manifests are small; a megabyte is already absurd for package.json. */
#define PLAN_MANIFEST_MAX (1024 * 1024)
/* Lockfiles can be huge; only their first lines are ever looked at. */
#define PLAN_LOCK_HEAD 4096
/* More requirements*.txt than this in one directory is not a Python
 * project layout anyone uses; refusing keeps argv bounded. */
#define PLAN_MAX_REQUIREMENTS 16
/* The name that stands for all of them in the rule table. */
#define PLAN_REQUIREMENTS "requirements*.txt"

/* ---- the workspace, read beneath its directory fd ---- */

/* For tests: pretend openat2 is missing, so the fallback walk runs. */
extern bool kiwi_plan_force_walk;

enum plan_kind { PLAN_ABSENT, PLAN_FILE, PLAN_DIR };

/* What path (relative, no "..") is: absent, a regular file or a directory.
 * A symlink anywhere on the path, or any other file type, is an error
 * naming the path: the planner never follows what the workspace points at.
 * *exec (may be NULL) tells whether a file has an execute bit. */
int plan_ws_kind(int dirfd, const char *path, enum plan_kind *kind, bool *exec, kiwi_err *err);
/* Reads the whole regular file path, at most max bytes (more is EFBIG). */
int plan_ws_read(int dirfd, const char *path, size_t max, char **out, size_t *len, kiwi_err *err);
/* Reads the first bytes of the regular file path, at most max of them. */
int plan_ws_read_head(int dirfd, const char *path, size_t max, char **out, size_t *len, kiwi_err *err);
/* The names in the workspace's top directory that match requirements*.txt,
 * requirements.txt first, then the others in byte order. *names is a
 * NULL-terminated malloc'd array of malloc'd strings. */
int plan_ws_requirements(int dirfd, char ***names, size_t *n, kiwi_err *err);
void plan_strv_free(char **v);
static inline void plan_strv_free_p(char ***v)
{
	plan_strv_free(*v);
}

/* ---- manifest parsers: outside input, fuzzed (tests/fuzz/fuzz_plan.c) ---- */

struct plan_package_json {
	bool declares;          /* a dependency field or workspaces is non-empty */
	char declared_by[32];   /* which field said so: "dependencies" */
	bool has_pm;            /* the packageManager field (corepack) is set */
	char pm_name[16];       /* "npm", "pnpm", "yarn", "bun" */
	long pm_major;          /* its major version */
};
/* package.json: the dependency fields (each must be an object), workspaces,
 * and packageManager, which must read name@major[.minor...][+hash] with a
 * known name, as corepack demands. */
int plan_parse_package_json(const char *text, size_t len, struct plan_package_json *out, kiwi_err *err);
/* composer.json: require or require-dev names a package (not php, ext-*,
 * lib-* or composer-*: those are platform checks, nothing to download). */
int plan_parse_composer_json(const char *text, size_t len, bool *declares, kiwi_err *err);
/* yarn.lock written by yarn 2+ ("berry") has a __metadata: entry near the top. */
bool plan_yarn_lock_is_berry(const char *head, size_t len);
/* go.mod has a require directive. */
bool plan_gomod_requires(const char *text, size_t len);
/* The TOML manifests, scanned line by line (not parsed): doubtful input
 * counts as declaring, which leads to a refusal, never a silent skip. */
bool plan_cargo_declares(const char *text, size_t len);
bool plan_pyproject_declares(const char *text, size_t len);
bool plan_pyproject_is_poetry(const char *text, size_t len);
bool plan_pipfile_declares(const char *text, size_t len);
/* Gemfile / gems.rb: a `gem` or `gemspec` line. */
bool plan_gemfile_declares(const char *text, size_t len);
/* requirements*.txt: any line that is not blank or a comment. */
bool plan_requirements_declares(const char *text, size_t len);

/* ---- the rules (plan_rules.c) and their helpers (plan.c) ---- */

struct plan_ctx {
	int dirfd;
	struct kiwi_plan *plan;
	kiwi_err *err;
	struct plan_package_json pkg;   /* read by node_declares */
	bool pyproject_poetry;          /* read by python_declares */
	char **requirements;            /* requirements*.txt, in install order */
	size_t n_requirements;
	char variant_why[160];          /* why a variant rule applied */
	char declared_by[64];           /* what in the manifest declares them */
};

struct plan_rule {
	const char *lock;       /* the file whose presence selects the rule */
	const char *manifest;   /* the manifest it pins, when not the ecosystem's first */
	const char *tool;
	/* NULL, or whether this variant of the lock's rule applies (<0 error). */
	int (*variant)(struct plan_ctx *ctx);
	const char *const *argv[3];   /* the steps, each NULL-terminated */
	const char *cache;            /* downloads outside the workspace */
	const char *why;
};

struct plan_ecosystem {
	const char *name;
	const char *const *manifests;   /* NULL-terminated */
	/* Reads one present manifest: does it declare a dependency? */
	int (*declares)(struct plan_ctx *ctx, const char *manifest, bool *yes);
	/* JSON manifests are read exactly, so a lock with nothing declared is
	 * ignored; scanned ones may miss a declaration, so a lock counts. */
	bool lock_suffices;
	/* NULL, or the tool the project names for itself (corepack's
	 * packageManager); strict: only that tool's lockfiles may be used. */
	const char *(*prefer)(struct plan_ctx *ctx, bool *strict, char *why, size_t n);
	const struct plan_rule *rules;
	size_t n_rules;
	const char *order_why;   /* why the first present lock wins */
	const char *expects;     /* what pins it, for a refusal: "go.sum" */
};

extern const struct plan_ecosystem plan_ecosystems[];
extern const size_t plan_n_ecosystems;

/* Adds a line of evidence. */
int plan_note(struct plan_ctx *ctx, const char *file, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Whether path exists as a regular file; anything else there is an error. */
int plan_present(struct plan_ctx *ctx, const char *path, bool *yes, bool *exec);
/* Reads the manifest path whole (bounded) and asks fn about it. */
int plan_scan_manifest(struct plan_ctx *ctx, const char *path, bool (*fn)(const char *, size_t), bool *yes);

#endif
