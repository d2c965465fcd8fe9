/* SPDX-License-Identifier: Apache-2.0 */
/* The rule set: one row per ecosystem, its lockfiles in the order its own
 * tools prefer them. Each install flag is chosen so that the tool installs
 * exactly what the lockfile pins and fails, instead of re-resolving, when
 * the manifest and the lockfile disagree (npm ci's behaviour), and asks no
 * question. kiwi-run-plan(1) explains each row. */
#include "plan_int.h"
#include "kiwi/cleanup.h"

#include <stdio.h>
#include <string.h>

#define ARGV(...) ((const char *const[]){ __VA_ARGS__, NULL })

/* ---- node ---- */

static int node_declares(struct plan_ctx *ctx, const char *manifest, bool *yes)
{
	if (strcmp(manifest, "package.json"))   /* pnpm-workspace.yaml */
		return *yes = true, 0;
	_cleanup_free_ char *text = NULL;
	size_t len;
	if (plan_ws_read(ctx->dirfd, manifest, PLAN_MANIFEST_MAX, &text, &len, ctx->err) < 0)
		return -1;
	if (plan_parse_package_json(text, len, &ctx->pkg, ctx->err) < 0)
		return -1;
	*yes = ctx->pkg.declares;
	snprintf(ctx->declared_by, sizeof(ctx->declared_by), " (%s)", ctx->pkg.declared_by);
	return 0;
}

/* corepack runs the manager packageManager names, and refuses the others. */
static const char *node_prefer(struct plan_ctx *ctx, bool *strict, char *why, size_t n)
{
	*strict = true;
	if (!ctx->pkg.has_pm)
		return NULL;
	snprintf(why, n, "package.json names %s (major version %ld) in packageManager, which corepack enforces",
		 ctx->pkg.pm_name, ctx->pkg.pm_major);
	return ctx->pkg.pm_name;
}

/* yarn 2+ ("berry"): packageManager says so, else the lockfile's format,
 * else its config file. Yarn 1 cannot read a berry lockfile, and berry
 * rewrites a yarn 1 lockfile, which --immutable refuses: the format the
 * lockfile is in is the version that must read it. */
static int yarn_is_berry(struct plan_ctx *ctx)
{
	if (ctx->pkg.has_pm && !strcmp(ctx->pkg.pm_name, "yarn")) {
		snprintf(ctx->variant_why, sizeof(ctx->variant_why), "packageManager names yarn %ld",
			 ctx->pkg.pm_major);
		return ctx->pkg.pm_major >= 2;
	}
	_cleanup_free_ char *head = NULL;
	size_t len;
	if (plan_ws_read_head(ctx->dirfd, "yarn.lock", PLAN_LOCK_HEAD, &head, &len, ctx->err) < 0)
		return -1;
	if (plan_yarn_lock_is_berry(head, len)) {
		snprintf(ctx->variant_why, sizeof(ctx->variant_why), "yarn.lock has __metadata:, the format of yarn 2+");
		return 1;
	}
	bool rc;
	if (plan_present(ctx, ".yarnrc.yml", &rc, NULL) < 0)
		return -1;
	snprintf(ctx->variant_why, sizeof(ctx->variant_why), "%s",
		 rc ? ".yarnrc.yml, the config file of yarn 2+, is present"
		    : "yarn.lock is in the yarn 1 format and there is no .yarnrc.yml");
	return rc;
}

static int yarn_is_classic(struct plan_ctx *ctx)
{
	int r = yarn_is_berry(ctx);
	return r < 0 ? -1 : !r;
}

static const struct plan_rule node_rules[] = {
	{ "bun.lock", NULL, "bun", NULL, { ARGV("bun", "install", "--frozen-lockfile") }, NULL,
	  "lockfile of bun (text format)" },
	{ "bun.lockb", NULL, "bun", NULL, { ARGV("bun", "install", "--frozen-lockfile") }, NULL,
	  "lockfile of bun (binary format)" },
	{ "pnpm-lock.yaml", NULL, "pnpm", NULL, { ARGV("pnpm", "install", "--frozen-lockfile") }, NULL,
	  "lockfile of pnpm" },
	/* Yarn 4 keeps its download cache in $HOME by default and Plug'n'Play
	 * points there; the project cache keeps the install in the workspace. */
	{ "yarn.lock", NULL, "yarn", yarn_is_berry,
	  { ARGV("env", "YARN_ENABLE_GLOBAL_CACHE=false", "yarn", "install", "--immutable") }, NULL,
	  "lockfile of yarn 2+" },
	{ "yarn.lock", NULL, "yarn", yarn_is_classic, { ARGV("yarn", "install", "--frozen-lockfile") }, NULL,
	  "lockfile of yarn 1" },
	{ "npm-shrinkwrap.json", NULL, "npm", NULL, { ARGV("npm", "ci") }, NULL,
	  "lockfile of npm (shrinkwrap), which npm prefers to package-lock.json" },
	{ "package-lock.json", NULL, "npm", NULL, { ARGV("npm", "ci") }, NULL, "lockfile of npm" },
};

/* ---- python ---- */

static int requirements_declare(struct plan_ctx *ctx, bool *yes)
{
	*yes = false;
	for (size_t i = 0; i < ctx->n_requirements && !*yes; i++)
		if (plan_scan_manifest(ctx, ctx->requirements[i], plan_requirements_declares, yes) < 0)
			return -1;
	return 0;
}

static bool mentions_install_requires(const char *text, size_t len)
{
	return memmem(text, len, "install_requires", 16) != NULL;
}

static int python_declares(struct plan_ctx *ctx, const char *manifest, bool *yes)
{
	if (!strcmp(manifest, PLAN_REQUIREMENTS))
		return requirements_declare(ctx, yes);
	if (!strcmp(manifest, "Pipfile"))
		return plan_scan_manifest(ctx, manifest, plan_pipfile_declares, yes);
	if (strcmp(manifest, "pyproject.toml"))   /* setup.py, setup.cfg */
		return plan_scan_manifest(ctx, manifest, mentions_install_requires, yes);
	if (plan_scan_manifest(ctx, manifest, plan_pyproject_is_poetry, &ctx->pyproject_poetry) < 0)
		return -1;
	return plan_scan_manifest(ctx, manifest, plan_pyproject_declares, yes);
}

/* Not strict, a tie-break only: uv.lock and poetry.lock both pin
 * pyproject.toml, and a [tool.poetry] table says whose it is. */
static const char *python_prefer(struct plan_ctx *ctx, bool *strict, char *why, size_t n)
{
	*strict = false;
	if (!ctx->pyproject_poetry)
		return NULL;
	snprintf(why, n, "pyproject.toml configures poetry ([tool.poetry] or its build backend)");
	return "poetry";
}

static const struct plan_rule python_rules[] = {
	/* --locked, not --frozen: fail when pyproject.toml and uv.lock
	 * disagree, as npm ci does, rather than install a stale lock. uv puts
	 * .venv in the project, and installs the project into it so that
	 * `uv run` in verify finds nothing left to do offline. No Python
	 * download: one would land in $HOME, gone by verify, with .venv
	 * pointing at it; better a clear failure here. */
	{ "uv.lock", "pyproject.toml", "uv", NULL, { ARGV("uv", "sync", "--locked", "--no-python-downloads") }, NULL,
	  "lockfile of uv" },
	/* --no-root: the dependencies, not the project (which may be no
	 * installable package at all); the virtualenv goes into the project,
	 * where `poetry run` in verify finds it. */
	{ "poetry.lock", "pyproject.toml", "poetry", NULL,
	  { ARGV("env", "POETRY_VIRTUALENVS_IN_PROJECT=true", "poetry", "install", "--no-root", "--no-interaction") },
	  NULL, "lockfile of poetry" },
	/* --deploy fails when Pipfile.lock is out of date; --dev because the
	 * tests run in verify need the dev packages. */
	{ "Pipfile.lock", "Pipfile", "pipenv", NULL,
	  { ARGV("env", "PIPENV_VENV_IN_PROJECT=1", "pipenv", "install", "--deploy", "--dev") }, NULL,
	  "lockfile of pipenv" },
	/* A virtualenv in the workspace: the rootfs outside it does not
	 * survive to verify, and Debian's python refuses system-wide pip
	 * installs (PEP 668). Every requirements file in one pip run, so
	 * that pip resolves them together. */
	{ PLAN_REQUIREMENTS, NULL, "pip", NULL,
	  { ARGV("python3", "-m", "venv", ".venv"), ARGV(".venv/bin/pip", "install", "--no-input") }, NULL,
	  "pinned requirements for pip, installed into .venv; requirements.txt first, then the other requirements*.txt in byte order" },
};

/* ---- the others: one manifest, one lock ---- */

static int ruby_declares(struct plan_ctx *ctx, const char *manifest, bool *yes)
{
	return plan_scan_manifest(ctx, manifest, plan_gemfile_declares, yes);
}

static int php_declares(struct plan_ctx *ctx, const char *manifest, bool *yes)
{
	_cleanup_free_ char *text = NULL;
	size_t len;
	if (plan_ws_read(ctx->dirfd, manifest, PLAN_MANIFEST_MAX, &text, &len, ctx->err) < 0)
		return -1;
	return plan_parse_composer_json(text, len, yes, ctx->err);
}

static int go_declares(struct plan_ctx *ctx, const char *manifest, bool *yes)
{
	return plan_scan_manifest(ctx, manifest, plan_gomod_requires, yes);
}

static int rust_declares(struct plan_ctx *ctx, const char *manifest, bool *yes)
{
	return plan_scan_manifest(ctx, manifest, plan_cargo_declares, yes);
}

/* Maven and Gradle builds download their plugins even with no dependency. */
static int always_declares(struct plan_ctx *ctx, const char *manifest, bool *yes)
{
	(void)manifest;
	*yes = true;
	snprintf(ctx->declared_by, sizeof(ctx->declared_by), " (taken as read: the build downloads its plugins)");
	return 0;
}

/* A wrapper script pins the build tool's version, with its properties
 * file; without the execute bit (lost in a patch, say) sh runs it. */
static int wrapper_variant(struct plan_ctx *ctx, const char *script, const char *props, bool want_exec)
{
	bool yes, exec;
	if (plan_present(ctx, script, &yes, &exec) < 0 || plan_present(ctx, props, &yes, NULL) < 0)
		return -1;
	if (!yes)
		snprintf(ctx->variant_why, sizeof(ctx->variant_why), "%s is missing", props);
	else
		snprintf(ctx->variant_why, sizeof(ctx->variant_why), "with %s%s", props,
			 exec ? "" : "; the script is not executable, so sh runs it");
	return yes && exec == want_exec;
}

#define MVN_PROPS ".mvn/wrapper/maven-wrapper.properties"
#define GRADLE_PROPS "gradle/wrapper/gradle-wrapper.properties"

static int mvnw_exec(struct plan_ctx *ctx)
{
	return wrapper_variant(ctx, "mvnw", MVN_PROPS, true);
}

static int mvnw_sh(struct plan_ctx *ctx)
{
	return wrapper_variant(ctx, "mvnw", MVN_PROPS, false);
}

static int gradlew_exec(struct plan_ctx *ctx)
{
	return wrapper_variant(ctx, "gradlew", GRADLE_PROPS, true);
}

static int gradlew_sh(struct plan_ctx *ctx)
{
	return wrapper_variant(ctx, "gradlew", GRADLE_PROPS, false);
}

static const struct plan_rule ruby_rules[] = {
	/* Deployment mode: installs into vendor/bundle (in the workspace)
	 * and fails if the Gemfile changed without its lockfile. */
	{ "Gemfile.lock", "Gemfile", "bundler", NULL,
	  { ARGV("bundle", "config", "set", "--local", "deployment", "true"), ARGV("bundle", "install") }, NULL,
	  "lockfile of bundler" },
	{ "gems.locked", "gems.rb", "bundler", NULL,
	  { ARGV("bundle", "config", "set", "--local", "deployment", "true"), ARGV("bundle", "install") }, NULL,
	  "lockfile of bundler (gems.rb naming)" },
};

static const struct plan_rule php_rules[] = {
	{ "composer.lock", NULL, "composer", NULL, { ARGV("composer", "install", "--no-interaction") }, NULL,
	  "lockfile of composer" },
};

static const struct plan_rule go_rules[] = {
	{ "go.sum", NULL, "go", NULL, { ARGV("go", "mod", "download") }, "$GOMODCACHE (default $HOME/go/pkg/mod)",
	  "checksums of go modules; go mod download fetches exactly the versions go.mod selects and checks them against go.sum" },
};

static const struct plan_rule rust_rules[] = {
	{ "Cargo.lock", NULL, "cargo", NULL, { ARGV("cargo", "fetch", "--locked") }, "$CARGO_HOME (default $HOME/.cargo)",
	  "lockfile of cargo" },
};

/* dependency:go-offline resolves the plugins and dependencies of the
 * build; -B: batch mode, no prompts, no progress bars. */
static const struct plan_rule maven_rules[] = {
	{ "mvnw", NULL, "maven", mvnw_exec, { ARGV("./mvnw", "-B", "dependency:go-offline") }, "$HOME/.m2",
	  "the Maven wrapper, which pins the Maven version" },
	{ "mvnw", NULL, "maven", mvnw_sh, { ARGV("sh", "./mvnw", "-B", "dependency:go-offline") }, "$HOME/.m2",
	  "the Maven wrapper, which pins the Maven version" },
	{ "pom.xml", NULL, "maven", NULL, { ARGV("mvn", "-B", "dependency:go-offline") }, "$HOME/.m2",
	  "Maven project without a wrapper; pom.xml pins the versions" },
};

/* Gradle has no go-offline task; `dependencies` resolves (so downloads)
 * every configuration of the root project. A build without the wrapper
 * names no Gradle version, so nothing pins it: refused. */
static const struct plan_rule gradle_rules[] = {
	{ "gradlew", NULL, "gradle", gradlew_exec, { ARGV("./gradlew", "--no-daemon", "dependencies") }, "$HOME/.gradle",
	  "the Gradle wrapper, which pins the Gradle version" },
	{ "gradlew", NULL, "gradle", gradlew_sh, { ARGV("sh", "./gradlew", "--no-daemon", "dependencies") },
	  "$HOME/.gradle", "the Gradle wrapper, which pins the Gradle version" },
};

#define RULES(r) r, KIWI_ARRAY_SIZE(r)

const struct plan_ecosystem plan_ecosystems[] = {
	{ "node", ARGV("package.json", "pnpm-workspace.yaml"), node_declares, false, node_prefer, RULES(node_rules),
	  "no packageManager field, so the first of bun, pnpm, yarn, npm: each imports the lockfiles after it when a "
	  "project moves to it (bun install, pnpm import, yarn import), so the earlier one is the newer",
	  "lockfile of bun, pnpm, yarn or npm" },
	{ "python", ARGV("pyproject.toml", "Pipfile", PLAN_REQUIREMENTS, "setup.py", "setup.cfg"), python_declares, true,
	  python_prefer, RULES(python_rules),
	  "one Python environment, one tool: uv.lock, then poetry.lock, then Pipfile.lock, then requirements*.txt, "
	  "which those tools can export",
	  "uv.lock, poetry.lock, Pipfile.lock or requirements*.txt" },
	{ "ruby", ARGV("Gemfile", "gems.rb"), ruby_declares, true, NULL, RULES(ruby_rules),
	  "Gemfile.lock before gems.locked, as bundler looks for Gemfile before gems.rb", "Gemfile.lock or gems.locked" },
	{ "php", ARGV("composer.json"), php_declares, false, NULL, RULES(php_rules), "the only lockfile", "composer.lock" },
	{ "go", ARGV("go.mod"), go_declares, true, NULL, RULES(go_rules), "the only lockfile", "go.sum" },
	{ "rust", ARGV("Cargo.toml"), rust_declares, true, NULL, RULES(rust_rules), "the only lockfile", "Cargo.lock" },
	{ "maven", ARGV("pom.xml"), always_declares, true, NULL, RULES(maven_rules), "the Maven wrapper wins over a system mvn",
	  "pom.xml" },
	{ "gradle", ARGV("settings.gradle.kts", "settings.gradle", "build.gradle.kts", "build.gradle"), always_declares,
	  true, NULL, RULES(gradle_rules), "the only way Gradle's version is pinned",
	  "Gradle wrapper (gradlew with gradle/wrapper/gradle-wrapper.properties) to pin the Gradle version" },
};
const size_t plan_n_ecosystems = KIWI_ARRAY_SIZE(plan_ecosystems);
