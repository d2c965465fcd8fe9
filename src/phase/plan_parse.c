/* SPDX-License-Identifier: Apache-2.0 */
/* The manifests the planner reads: JSON ones (package.json, composer.json)
 * through the JSON module, the others by a line scan that finds whether
 * dependencies are declared at all. A scan is enough for that question and
 * keeps a TOML or Ruby parser out of a security tool; where it cannot tell,
 * it answers "declares", which ends in a clear refusal, never a skip. */
#include "plan_int.h"
#include "kiwi/cleanup.h"
#include "kiwi/json.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- package.json ---- */

/* The fields npm, pnpm, yarn and bun install from. bundledDependencies
 * only lists names already in dependencies. */
static const char *const node_dep_fields[] = {
	"dependencies", "devDependencies", "optionalDependencies", "peerDependencies",
};
static const char *const node_managers[] = { "npm", "pnpm", "yarn", "bun" };

static int node_dep_field(const kiwi_json *top, const char *field, struct plan_package_json *out, kiwi_err *err)
{
	const kiwi_json *v = kiwi_json_get(top, field);
	enum kiwi_json_type t = kiwi_json_type_of(v);
	if (!v || t == KIWI_JSON_NULL)
		return 0;
	if (t != KIWI_JSON_OBJECT)
		return kiwi_error(err, 0, "plan", "package.json: `%s` is of type %s, not an object of name: version",
				  field, kiwi_json_type_name(t));
	if (kiwi_json_len(v) > 0 && !out->declares) {
		out->declares = true;
		snprintf(out->declared_by, sizeof(out->declared_by), "%s", field);
	}
	return 0;
}

/* npm and yarn 1 take an array of globs; yarn also {"packages": [...]}. */
static int node_workspaces(const kiwi_json *top, struct plan_package_json *out, kiwi_err *err)
{
	const kiwi_json *v = kiwi_json_get(top, "workspaces");
	enum kiwi_json_type t = kiwi_json_type_of(v);
	if (!v || t == KIWI_JSON_NULL)
		return 0;
	if (t == KIWI_JSON_OBJECT)
		v = kiwi_json_get(v, "packages");
	if (v && kiwi_json_type_of(v) != KIWI_JSON_ARRAY)
		return kiwi_error(err, 0, "plan", "package.json: `workspaces` is neither an array nor {\"packages\": [...]}");
	if (kiwi_json_len(v) > 0 && !out->declares) {
		out->declares = true;
		snprintf(out->declared_by, sizeof(out->declared_by), "workspaces");
	}
	return 0;
}

/* corepack's format: name@version, the version a semver, maybe +hash. */
static int node_package_manager(const kiwi_json *top, struct plan_package_json *out, kiwi_err *err)
{
	const kiwi_json *v = kiwi_json_get(top, "packageManager");
	if (!v || kiwi_json_type_of(v) == KIWI_JSON_NULL)
		return 0;
	const char *s = kiwi_json_string(v);
	if (!s)
		return kiwi_error(err, 0, "plan", "package.json: `packageManager` is not a string");
	const char *at = strchr(s, '@');
	if (at)
		for (size_t i = 0; i < KIWI_ARRAY_SIZE(node_managers); i++) {
			if ((size_t)(at - s) != strlen(node_managers[i]) || strncmp(s, node_managers[i], (size_t)(at - s)))
				continue;
			if (!isdigit((unsigned char)at[1]))
				break;
			char *end;
			errno = 0;
			long major = strtol(at + 1, &end, 10);
			if (errno || (*end != '.' && *end != '\0' && *end != '+'))
				break;
			out->has_pm = true;
			out->pm_major = major;
			snprintf(out->pm_name, sizeof(out->pm_name), "%s", node_managers[i]);
			return 0;
		}
	return kiwi_error(err, 0, "plan",
			  "package.json: `packageManager` \"%.64s\" is not name@version with a name of npm, pnpm, yarn or bun (the form corepack requires)",
			  s);
}

int plan_parse_package_json(const char *text, size_t len, struct plan_package_json *out, kiwi_err *err)
{
	memset(out, 0, sizeof(*out));
	kiwi_err jerr = { 0 };
	_cleanup_json_ kiwi_json *top = kiwi_json_parse(text, len, &jerr);
	if (!top)
		return kiwi_error(err, 0, "plan", "package.json: %s", jerr.msg);
	if (kiwi_json_type_of(top) != KIWI_JSON_OBJECT)
		return kiwi_error(err, 0, "plan", "package.json: the top level is not an object");
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(node_dep_fields); i++)
		if (node_dep_field(top, node_dep_fields[i], out, err) < 0)
			return -1;
	if (node_workspaces(top, out, err) < 0)
		return -1;
	return node_package_manager(top, out, err);
}

/* ---- composer.json ---- */

/* Composer packages are always vendor/name; php, ext-*, lib-* and
 * composer-* are platform checks with no slash and nothing to download. */
static int composer_field(const kiwi_json *top, const char *field, bool *declares, kiwi_err *err)
{
	const kiwi_json *v = kiwi_json_get(top, field);
	enum kiwi_json_type t = kiwi_json_type_of(v);
	if (!v || t == KIWI_JSON_NULL)
		return 0;
	if (t != KIWI_JSON_OBJECT)
		return kiwi_error(err, 0, "plan", "composer.json: `%s` is of type %s, not an object of name: version",
				  field, kiwi_json_type_name(t));
	for (size_t i = 0; i < kiwi_json_len(v); i++)
		if (strchr(kiwi_json_key_at(v, i), '/'))
			*declares = true;
	return 0;
}

int plan_parse_composer_json(const char *text, size_t len, bool *declares, kiwi_err *err)
{
	*declares = false;
	kiwi_err jerr = { 0 };
	_cleanup_json_ kiwi_json *top = kiwi_json_parse(text, len, &jerr);
	if (!top)
		return kiwi_error(err, 0, "plan", "composer.json: %s", jerr.msg);
	if (kiwi_json_type_of(top) != KIWI_JSON_OBJECT)
		return kiwi_error(err, 0, "plan", "composer.json: the top level is not an object");
	if (composer_field(top, "require", declares, err) < 0)
		return -1;
	return composer_field(top, "require-dev", declares, err);
}

/* ---- line scans ---- */

/* Calls fn on each line (without its newline); stops when fn says so. */
static bool each_line(const char *text, size_t len, bool (*fn)(const char *line, size_t n, void *ctx), void *ctx)
{
	const char *p = text, *end = text + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *stop = nl ? nl : end;
		while (p < stop && (*p == ' ' || *p == '\t'))
			p++;
		if (fn(p, (size_t)(stop - p), ctx))
			return true;
		p = stop + 1;
	}
	return false;
}

/* line starts with word, followed by nothing or a byte from after. */
static bool starts_with_word(const char *line, size_t n, const char *word, const char *after)
{
	size_t w = strlen(word);
	if (n < w || memcmp(line, word, w))
		return false;
	return n == w || (line[w] != '\0' && strchr(after, line[w]));
}

static bool berry_line(const char *line, size_t n, void *ctx)
{
	(void)ctx;
	return starts_with_word(line, n, "__metadata", ":");
}

bool plan_yarn_lock_is_berry(const char *head, size_t len)
{
	return each_line(head, len, berry_line, NULL);
}

static bool require_line(const char *line, size_t n, void *ctx)
{
	(void)ctx;
	return starts_with_word(line, n, "require", " \t(");
}

bool plan_gomod_requires(const char *text, size_t len)
{
	return each_line(text, len, require_line, NULL);
}

static bool gem_line(const char *line, size_t n, void *ctx)
{
	(void)ctx;
	return starts_with_word(line, n, "gem", " \t(") || starts_with_word(line, n, "gemspec", " \t(\r");
}

bool plan_gemfile_declares(const char *text, size_t len)
{
	return each_line(text, len, gem_line, NULL);
}

static bool requirement_line(const char *line, size_t n, void *ctx)
{
	(void)ctx;
	return n > 0 && line[0] != '#' && line[0] != '\r';
}

bool plan_requirements_declares(const char *text, size_t len)
{
	return each_line(text, len, requirement_line, NULL);
}
