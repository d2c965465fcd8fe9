/* SPDX-License-Identifier: Apache-2.0 */
/* The install planner's parsers of workspace files, which the code under
 * test wrote: package.json and composer.json (JSON), and the line scans of
 * yarn.lock, go.mod, Cargo.toml, pyproject.toml, Pipfile, Gemfile and
 * requirements files. The first byte picks the parser, the rest is the
 * file. Properties: no crash, no read out of bounds (the sanitizers), every
 * refusal says why, and what a parse reports is self-consistent. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/phase/plan_int.h"

static const char *const managers[] = { "npm", "pnpm", "yarn", "bun" };

static void check_package_json(const char *text, size_t len)
{
	struct plan_package_json p;
	kiwi_err err = { 0 };
	if (plan_parse_package_json(text, len, &p, &err) < 0) {
		if (strcmp(err.step, "plan") || strncmp(err.msg, "package.json: ", 14))
			abort();   /* every refusal names the file */
		return;
	}
	if (p.declares != (p.declared_by[0] != '\0'))
		abort();
	if (p.has_pm) {
		bool known = false;
		for (size_t i = 0; i < sizeof(managers) / sizeof(managers[0]); i++)
			known |= !strcmp(p.pm_name, managers[i]);
		if (!known || p.pm_major < 0)
			abort();
	}
}

static void check_composer_json(const char *text, size_t len)
{
	bool declares;
	kiwi_err err = { 0 };
	if (plan_parse_composer_json(text, len, &declares, &err) < 0 && strncmp(err.msg, "composer.json: ", 15))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	/* A copy of exactly the input's size, so reading past it is caught. */
	size_t len = size - 1;
	char *text = malloc(len ? len : 1);
	memcpy(text, data + 1, len);
	switch (data[0] % 10) {
	case 0: check_package_json(text, len); break;
	case 1: check_composer_json(text, len); break;
	case 2: (void)plan_yarn_lock_is_berry(text, len); break;
	case 3: (void)plan_gomod_requires(text, len); break;
	case 4: (void)plan_cargo_declares(text, len); break;
	case 5: (void)plan_pyproject_declares(text, len); break;
	case 6: (void)plan_pyproject_is_poetry(text, len); break;
	case 7: (void)plan_pipfile_declares(text, len); break;
	case 8: (void)plan_gemfile_declares(text, len); break;
	default: (void)plan_requirements_declares(text, len); break;
	}
	free(text);
	return 0;
}
