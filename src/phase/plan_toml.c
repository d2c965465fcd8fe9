/* SPDX-License-Identifier: Apache-2.0 */
/* A TOML scan, not a parser, for Cargo.toml, pyproject.toml and Pipfile:
 * it splits the text into logical lines (a value's strings, brackets and
 * comments may span lines) and reports each [table] header and each
 * key = value with the table it is in. The planner only asks whether a
 * manifest declares any dependency; malformed input just yields odd keys. */
#include "plan_int.h"

#include <stdio.h>
#include <string.h>

struct toml_scan {
	const char *p, *end;
	char table[128];
};

/* Skips a string starting at p (quote is " or '; triple-quoted too). */
static const char *skip_string(const char *p, const char *end)
{
	char q = *p;
	bool triple = end - p >= 3 && p[1] == q && p[2] == q;
	p += triple ? 3 : 1;
	while (p < end) {
		if (q == '"' && *p == '\\') {
			p += 2;
			continue;
		}
		if (*p == q && (!triple || (end - p >= 3 && p[1] == q && p[2] == q)))
			return p + (triple ? 3 : 1);
		if (*p == '\n' && !triple)
			return p;
		p++;
	}
	return end;
}

/* The end of the logical line starting at p: the first newline outside
 * strings, comments aside, with every bracket and brace closed. */
static const char *logical_end(const char *p, const char *end)
{
	int depth = 0;
	while (p < end) {
		char c = *p;
		if (c == '"' || c == '\'') {
			p = skip_string(p, end);
			continue;
		}
		if (c == '#') {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			p = nl ? nl : end;
			continue;
		}
		if (c == '[' || c == '{')
			depth++;
		else if ((c == ']' || c == '}') && depth > 0)
			depth--;
		else if (c == '\n' && depth == 0)
			return p;
		p++;
	}
	return end;
}

static const char *skip_blank(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'))
		p++;
	return p;
}

/* Copies [a . "b" ] as a.b (spaces and quotes dropped). */
static void set_table(struct toml_scan *s, const char *p, const char *end)
{
	size_t n = 0;
	while (p < end && *p == '[')
		p++;
	for (; p < end && *p != ']' && n + 1 < sizeof(s->table); p++)
		if (*p != ' ' && *p != '\t' && *p != '"' && *p != '\'')
			s->table[n++] = *p;
	s->table[n] = '\0';
}

typedef bool (*toml_fn)(const char *table, const char *key, const char *value, const char *vend);

/* Calls fn per key = value; true as soon as fn answers true. A header is
 * also passed, with key "" and value NULL. */
static bool toml_each(const char *text, size_t len, toml_fn fn)
{
	struct toml_scan s = { .p = text, .end = text + len, .table = "" };
	while (s.p < s.end) {
		const char *line = skip_blank(s.p, s.end);
		const char *lend = logical_end(line, s.end);
		s.p = lend + 1;
		if (line == lend || *line == '#' || *line == '\n')
			continue;
		if (*line == '[') {
			set_table(&s, line, lend);
			if (fn(s.table, "", NULL, NULL))
				return true;
			continue;
		}
		const char *eq = memchr(line, '=', (size_t)(lend - line));
		if (!eq)
			continue;
		char key[128];
		size_t n = 0;
		for (const char *k = line; k < eq && n + 1 < sizeof(key); k++)
			if (*k != ' ' && *k != '\t' && *k != '"' && *k != '\'')
				key[n++] = *k;
		key[n] = '\0';
		if (fn(s.table, key, skip_blank(eq + 1, lend), lend))
			return true;
	}
	return false;
}

/* True when [value, vend) is an array with nothing in it but blanks and
 * comments. */
static bool empty_array(const char *v, const char *vend)
{
	if (!v || v >= vend || *v != '[')
		return false;
	for (const char *p = v + 1; p < vend; p++) {
		if (*p == '#') {
			const char *nl = memchr(p, '\n', (size_t)(vend - p));
			if (!nl)
				return false;
			p = nl;
			continue;
		}
		if (*p == ']')
			return true;
		if (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n')
			return false;
	}
	return false;
}

/* Does the dotted table name have the component c (quotes already gone)? */
static bool has_component(const char *table, const char *c)
{
	size_t n = strlen(c);
	for (const char *p = table; (p = strstr(p, c)); p += n)
		if ((p == table || p[-1] == '.') && (p[n] == '\0' || p[n] == '.'))
			return true;
	return false;
}

static bool is_cargo_dep_table(const char *t)
{
	return has_component(t, "dependencies") || has_component(t, "dev-dependencies") ||
	       has_component(t, "build-dependencies");
}

/* [dependencies] with a key, [dependencies.serde], or a workspace whose
 * members (not read here) may declare their own. */
static bool cargo_fn(const char *table, const char *key, const char *value, const char *vend)
{
	if (!value) {
		/* [dependencies.serde] declares serde; [dependencies] waits for a key. */
		const char *dot = strrchr(table, '.');
		const char *last = dot ? dot + 1 : table;
		return is_cargo_dep_table(table) && !is_cargo_dep_table(last);
	}
	if (!strcmp(table, "workspace") && !strcmp(key, "members"))
		return !empty_array(value, vend);
	return is_cargo_dep_table(table) || (!table[0] && is_cargo_dep_table(key));
}

bool plan_cargo_declares(const char *text, size_t len)
{
	return toml_each(text, len, cargo_fn);
}

static bool is_poetry_dep_table(const char *t)
{
	return !strncmp(t, "tool.poetry.", 12) &&
	       (has_component(t + 12, "dependencies") || has_component(t + 12, "dev-dependencies"));
}

static bool pyproject_fn(const char *table, const char *key, const char *value, const char *vend)
{
	if (!value)
		return false;
	if (!strcmp(table, "project") && !strcmp(key, "dependencies"))
		return !empty_array(value, vend);
	if (!strcmp(table, "project.optional-dependencies") || !strcmp(table, "dependency-groups"))
		return !empty_array(value, vend);
	if (is_poetry_dep_table(table))
		return strcmp(key, "python") != 0;
	if (!strcmp(table, "tool.uv") && !strcmp(key, "dev-dependencies"))
		return !empty_array(value, vend);
	if (!strcmp(table, "tool.uv.workspace") && !strcmp(key, "members"))
		return !empty_array(value, vend);
	return false;
}

bool plan_pyproject_declares(const char *text, size_t len)
{
	return toml_each(text, len, pyproject_fn);
}

static bool poetry_fn(const char *table, const char *key, const char *value, const char *vend)
{
	if (!strcmp(table, "tool.poetry") || !strncmp(table, "tool.poetry.", 12))
		return true;
	return value && !strcmp(table, "build-system") && !strcmp(key, "build-backend") &&
	       memmem(value, (size_t)(vend - value), "poetry", 6);
}

bool plan_pyproject_is_poetry(const char *text, size_t len)
{
	return toml_each(text, len, poetry_fn);
}

/* Pipfile: every table but these few is a package category (packages,
 * dev-packages, or one the project named). */
static bool pipfile_fn(const char *table, const char *key, const char *value, const char *vend)
{
	(void)key;
	(void)vend;
	static const char *const not_packages[] = { "source", "requires", "pipenv", "scripts" };
	if (!value || !table[0])
		return false;
	for (size_t i = 0; i < sizeof(not_packages) / sizeof(not_packages[0]); i++)
		if (!strcmp(table, not_packages[i]))
			return false;
	return true;
}

bool plan_pipfile_declares(const char *text, size_t len)
{
	return toml_each(text, len, pipfile_fn);
}
