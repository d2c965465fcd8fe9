/* SPDX-License-Identifier: Apache-2.0 */
/* The install planner's rules: one table of ecosystems, each with the
 * manifests that make it present, how to tell whether they declare any
 * dependency, and its lockfiles in the order that ecosystem's own tools
 * prefer them. Every choice leaves evidence; kiwi-run-plan(1) is the
 * prose version of this table. */
#include "plan_int.h"
#include "kiwi/cleanup.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- evidence and steps ---- */

int plan_note(struct plan_ctx *ctx, const char *file, const char *fmt, ...)
{
	struct kiwi_plan *p = ctx->plan;
	struct kiwi_plan_evidence *ev = realloc(p->evidence, (p->n_evidence + 1) * sizeof(*ev));
	if (!ev)
		return kiwi_error(ctx->err, ENOMEM, "plan", "cannot record evidence");
	p->evidence = ev;
	va_list ap;
	va_start(ap, fmt);
	char *why = NULL;
	int r = vasprintf(&why, fmt, ap);
	va_end(ap);
	char *f = strdup(file);
	if (r < 0 || !f) {
		free(f);
		if (r >= 0)
			free(why);
		return kiwi_error(ctx->err, ENOMEM, "plan", "cannot record evidence");
	}
	ev[p->n_evidence++] = (struct kiwi_plan_evidence){ .file = f, .why = why };
	return 0;
}

static char **strv_dup(const char *const *argv, char *const *extra)
{
	size_t n = 0, m = 0;
	while (argv[n])
		n++;
	while (extra && extra[m])
		m++;
	char **v = calloc(n + 2 * m + 1, sizeof(*v));
	for (size_t i = 0; v && i < n + 2 * m; i++) {
		const char *s = i < n ? argv[i] : (i - n) % 2 == 0 ? "-r" : extra[(i - n) / 2];
		if (!(v[i] = strdup(s))) {
			plan_strv_free(v);
			return NULL;
		}
	}
	return v;
}

/* extra: file names appended as "-r NAME" to the last step (pip). */
static int add_steps(struct plan_ctx *ctx, const char *eco, const struct plan_rule *r, char *const *extra)
{
	struct kiwi_plan *p = ctx->plan;
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(r->argv) && r->argv[i]; i++) {
		bool last = i + 1 == KIWI_ARRAY_SIZE(r->argv) || !r->argv[i + 1];
		struct kiwi_plan_step *s = realloc(p->steps, (p->n_steps + 1) * sizeof(*s));
		if (!s)
			return kiwi_error(ctx->err, ENOMEM, "plan", "cannot record a step");
		p->steps = s;
		struct kiwi_plan_step step = {
			.ecosystem = strdup(eco),
			.tool = strdup(r->tool),
			.argv = strv_dup(r->argv[i], last ? extra : NULL),
			.cache = r->cache,
		};
		p->steps[p->n_steps++] = step;
		if (!step.ecosystem || !step.tool || !step.argv)
			return kiwi_error(ctx->err, ENOMEM, "plan", "cannot record a step");
	}
	return 0;
}

static int refuse(struct plan_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int refuse(struct plan_ctx *ctx, const char *fmt, ...)
{
	char msg[KIWI_ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!ctx->plan->refused)
		ctx->plan->refused = strdup(msg);
	return kiwi_error(ctx->err, 0, "plan", "%s", msg);
}

/* ---- the workspace ---- */

int plan_present(struct plan_ctx *ctx, const char *path, bool *yes, bool *exec)
{
	if (!strcmp(path, PLAN_REQUIREMENTS)) {
		*yes = ctx->n_requirements > 0;
		return 0;
	}
	enum plan_kind kind;
	if (plan_ws_kind(ctx->dirfd, path, &kind, exec, ctx->err) < 0)
		return -1;
	if (kind == PLAN_DIR)
		return kiwi_error(ctx->err, 0, "plan", "`%s` in the workspace is a directory, not a file", path);
	*yes = kind == PLAN_FILE;
	return 0;
}

int plan_scan_manifest(struct plan_ctx *ctx, const char *path, bool (*fn)(const char *, size_t), bool *yes)
{
	_cleanup_free_ char *text = NULL;
	size_t len;
	if (plan_ws_read(ctx->dirfd, path, PLAN_MANIFEST_MAX, &text, &len, ctx->err) < 0)
		return -1;
	*yes = fn(text, len);
	return 0;
}

/* ---- choosing ---- */

/* The rule for the first lock present (and whose variant applies), among
 * those of tool when tool is set. NULL when none. */
static int first_candidate(struct plan_ctx *ctx, const struct plan_ecosystem *e, const char *tool,
			   const struct plan_rule **out)
{
	*out = NULL;
	for (size_t i = 0; i < e->n_rules && !*out; i++) {
		const struct plan_rule *r = &e->rules[i];
		bool yes;
		if (tool && strcmp(tool, r->tool))
			continue;
		if (plan_present(ctx, r->lock, &yes, NULL) < 0)
			return -1;
		if (yes && r->manifest && plan_present(ctx, r->manifest, &yes, NULL) < 0)
			return -1;
		if (!yes)
			continue;
		ctx->variant_why[0] = '\0';
		int v = r->variant ? r->variant(ctx) : 1;
		if (v < 0)
			return -1;
		if (v > 0)
			*out = r;
	}
	return 0;
}

/* Every other lock of the ecosystem that is present gets a line saying
 * why it was not used. */
static int note_unused(struct plan_ctx *ctx, const struct plan_ecosystem *e, const struct plan_rule *chosen,
		       const char *because)
{
	for (size_t i = 0; i < e->n_rules; i++) {
		const struct plan_rule *r = &e->rules[i];
		bool yes, listed = false;
		for (size_t k = 0; k < i; k++)
			listed |= !strcmp(e->rules[k].lock, r->lock);
		if (listed || (chosen && !strcmp(r->lock, chosen->lock)))
			continue;
		if (plan_present(ctx, r->lock, &yes, NULL) < 0)
			return -1;
		if (!yes)
			continue;
		bool has_manifest = true;
		if (r->manifest && plan_present(ctx, r->manifest, &has_manifest, NULL) < 0)
			return -1;
		/* because NULL: a present lock none of whose variants applies;
		 * the variant says why. */
		ctx->variant_why[0] = '\0';
		if (!because && r->variant && r->variant(ctx) < 0)
			return -1;
		const char *why = because ? because : ctx->variant_why[0] ? ctx->variant_why : "its rule does not apply";
		int rc = !has_manifest ? plan_note(ctx, r->lock, "lockfile of %s, not used: there is no %s", r->tool, r->manifest)
			 : chosen ? plan_note(ctx, r->lock, "lockfile of %s, not used: %s wins (%s)", r->tool, chosen->lock, why)
				  : plan_note(ctx, r->lock, "lockfile of %s, not used: %s", r->tool, why);
		if (rc < 0)
			return -1;
	}
	return 0;
}

/* How many distinct lock names of the ecosystem are present. */
static int count_locks(struct plan_ctx *ctx, const struct plan_ecosystem *e, size_t *n)
{
	*n = 0;
	for (size_t i = 0; i < e->n_rules; i++) {
		bool yes, listed = false;
		for (size_t k = 0; k < i; k++)
			listed |= !strcmp(e->rules[k].lock, e->rules[i].lock);
		if (listed)
			continue;
		if (plan_present(ctx, e->rules[i].lock, &yes, NULL) < 0)
			return -1;
		*n += yes;
	}
	return 0;
}

static int choose(struct plan_ctx *ctx, const struct plan_ecosystem *e, const struct plan_rule **out,
		  char *because, size_t n)
{
	bool strict = false;
	char pwhy[200] = "";
	const char *tool = e->prefer ? e->prefer(ctx, &strict, pwhy, sizeof(pwhy)) : NULL;
	*out = NULL;
	if (tool && first_candidate(ctx, e, tool, out) < 0)
		return -1;
	if (*out) {
		snprintf(because, n, "%s", pwhy);
		return 0;
	}
	if (tool && strict) {
		if (note_unused(ctx, e, NULL, pwhy) < 0)
			return -1;
		return refuse(ctx, "%s, but there is no lockfile of %s: kiwi-run installs only what a lockfile pins; "
			      "commit the lockfile or give the install command after --", pwhy, tool);
	}
	if (first_candidate(ctx, e, NULL, out) < 0)
		return -1;
	size_t locks;
	if (count_locks(ctx, e, &locks) < 0)
		return -1;
	if (locks > 1)
		snprintf(because, n, "%s", e->order_why);
	else
		snprintf(because, n, "the only lockfile of %s in the workspace", e->name);
	return 0;
}

static int plan_ecosystem(struct plan_ctx *ctx, const struct plan_ecosystem *e)
{
	const char *manifest = NULL;
	bool declares = false;
	ctx->declared_by[0] = '\0';
	for (size_t i = 0; e->manifests[i]; i++) {
		bool yes, d = false;
		if (plan_present(ctx, e->manifests[i], &yes, NULL) < 0)
			return -1;
		if (!yes)
			continue;
		if (e->declares(ctx, e->manifests[i], &d) < 0)
			return -1;
		if (!manifest || (d && !declares))
			manifest = e->manifests[i];
		declares |= d;
	}
	if (!manifest)
		return note_unused(ctx, e, NULL, "no manifest of this ecosystem in the workspace");

	if (plan_note(ctx, manifest, "manifest of %s; %s%s", e->name,
		      declares ? "declares dependencies" : "declares no dependencies", declares ? ctx->declared_by : "") < 0)
		return -1;
	if (!declares && !e->lock_suffices)
		return note_unused(ctx, e, NULL, "nothing is declared to install");
	const struct plan_rule *r = NULL;
	char because[256] = "";
	if (choose(ctx, e, &r, because, sizeof(because)) < 0)
		return -1;
	/* requirements*.txt are the manifest and the lock at once: empty ones
	 * pin nothing. */
	if (!declares && (!r || !strcmp(r->lock, PLAN_REQUIREMENTS)))
		return note_unused(ctx, e, NULL, "nothing is declared to install");
	if (!r) {
		if (note_unused(ctx, e, NULL, NULL) < 0)
			return -1;
		return refuse(ctx, "%s declares dependencies but there is no %s: kiwi-run installs only what a "
			      "lockfile pins; commit it or give the install command after --", manifest, e->expects);
	}
	if (plan_note(ctx, r->lock, "%s%s%s; chosen: %s", r->why, ctx->variant_why[0] ? "; " : "", ctx->variant_why,
		 because) < 0)
		return -1;
	if (note_unused(ctx, e, r, because) < 0)
		return -1;
	bool pip = !strcmp(r->lock, PLAN_REQUIREMENTS);
	for (size_t i = 0; pip && i < ctx->n_requirements; i++)
		if (plan_note(ctx, ctx->requirements[i], "requirements file %zu of %zu for pip", i + 1,
			      ctx->n_requirements) < 0)
			return -1;
	return add_steps(ctx, e->name, r, pip ? ctx->requirements : NULL);
}

/* The requirements files are listed once; each must be a regular file. */
static int list_requirements(struct plan_ctx *ctx)
{
	if (plan_ws_requirements(ctx->dirfd, &ctx->requirements, &ctx->n_requirements, ctx->err) < 0)
		return -1;
	for (size_t i = 0; i < ctx->n_requirements; i++) {
		bool yes;
		if (plan_present(ctx, ctx->requirements[i], &yes, NULL) < 0)
			return -1;
		if (!yes)
			return kiwi_error(ctx->err, ENOENT, "plan", "`%s` vanished from the workspace", ctx->requirements[i]);
	}
	return 0;
}

int kiwi_plan_workspace(int workspace_dirfd, struct kiwi_plan *plan, kiwi_err *err)
{
	memset(plan, 0, sizeof(*plan));
	struct plan_ctx ctx = { .dirfd = workspace_dirfd, .plan = plan, .err = err };
	int r = list_requirements(&ctx);
	for (size_t i = 0; i < plan_n_ecosystems && r == 0; i++)
		r = plan_ecosystem(&ctx, &plan_ecosystems[i]);
	plan_strv_free(ctx.requirements);
	if (r < 0)
		return -1;
	if (plan->n_steps == 0)
		plan->skipped = KIWI_PLAN_NOTHING_DECLARED;
	return 0;
}

void kiwi_plan_clear(struct kiwi_plan *plan)
{
	for (size_t i = 0; i < plan->n_steps; i++) {
		free(plan->steps[i].ecosystem);
		free(plan->steps[i].tool);
		plan_strv_free(plan->steps[i].argv);
	}
	for (size_t i = 0; i < plan->n_evidence; i++) {
		free(plan->evidence[i].file);
		free(plan->evidence[i].why);
	}
	free(plan->steps);
	free(plan->evidence);
	free(plan->refused);
	memset(plan, 0, sizeof(*plan));
}
