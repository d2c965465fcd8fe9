/* SPDX-License-Identifier: Apache-2.0 */
/* The policy file of `kiwi-run phase install|verify` (kiwi-run-policy(5)):
 * per-phase network, limits, environment and caches, plus the credential
 * rules that decide which variable names may cross into which phase.
 * A policy is trusted configuration of the orchestrator, so the file must be
 * a regular file that only its owner (root or the caller) can write.
 * Loading checks everything it can alone; command-line flags are applied by
 * the caller on top of it and override it. */
#ifndef KIWI_POLICY_H
#define KIWI_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiwi/cgroup.h"
#include "kiwi/err.h"
#include "kiwi/json.h"

enum kiwi_phase { KIWI_PHASE_INSTALL, KIWI_PHASE_VERIFY };

/* "install" or "verify". */
const char *kiwi_phase_name(enum kiwi_phase phase);

/* A policy file is read whole, up to this size. */
#define KIWI_POLICY_MAX_BYTES (1 << 20)
/* The one version of the format this kiwi-run reads. */
#define KIWI_POLICY_VERSION 1

struct kiwi_policy_cache {
	char *host;   /* absolute path on the host */
	char *dest;   /* absolute path in the sandbox */
};

struct kiwi_phase_policy {
	bool network_egress;   /* install: default true (public_internet); verify: always false */
	/* Fed in order to kiwi_egress_config_add(cfg, key, value): keys "egress",
	 * "allow-cidr", "allow-host", "allow-port", "dns"; one value each. */
	char **egress_keys, **egress_values;
	size_t n_egress;
	/* KIWI_CGROUP_LIMITS_INIT when unset. limits.io_max, when set, is owned
	 * by the policy (freed by kiwi_policy_clear). */
	struct kiwi_cgroup_limits limits;
	uint64_t timeout_ns;
	bool timeout_set;      /* install's default (5 min) is the launcher's */
	uint64_t output_limit;
	bool output_limit_set;
	uint64_t disk_bytes;   /* 0: not set */
	char **pass_env;       /* verify only: names taken from the caller */
	size_t n_pass_env;
	char **set_env;        /* "K=V" literals */
	size_t n_set_env;
	struct kiwi_policy_cache *caches;
	size_t n_caches;
};

struct kiwi_policy {
	struct kiwi_phase_policy install, verify;
	char **deny_env;       /* names or fnmatch patterns never passed */
	size_t n_deny_env;
	/* The file's additions to the built-in model-provider key names and
	 * patterns (kiwi_policy_builtin_model_keys), which always apply. */
	char **model_keys;
	size_t n_model_keys;
	bool allow_test_credentials;
};

/* Defaults: install on the network (public_internet), verify without,
 * no limits set, no variables, the built-in model-provider keys. */
void kiwi_policy_init(struct kiwi_policy *p);
/* Reads and checks a policy file into p (initialised here). Errors have
 * step "policy" and start with the path, then name the key:
 *   "kiwi.json: unknown key `install.limts`". p is left cleared on error. */
int kiwi_policy_load(const char *path, struct kiwi_policy *p, kiwi_err *err);
/* The same from text; origin stands for the file in errors. */
int kiwi_policy_parse(const char *text, size_t len, const char *origin, struct kiwi_policy *p,
		      kiwi_err *err);
void kiwi_policy_clear(struct kiwi_policy *p);

/* The phase's half of p. */
const struct kiwi_phase_policy *kiwi_policy_phase(const struct kiwi_policy *p, enum kiwi_phase phase);

/* The built-in model-provider key names and patterns; *n gets the count. */
const char *const *kiwi_policy_builtin_model_keys(size_t *n);
/* Does NAME match a model-provider key name or pattern? Case-insensitive. */
bool kiwi_policy_is_model_key(const struct kiwi_policy *p, const char *name);
/* May the caller's variable NAME cross into PHASE (--pass-env, pass_env)?
 * 0 yes; -1 with err (step "policy") saying exactly why not: install never
 * receives a caller's variable, whatever is asked; a deny_env match never
 * crosses; a model-provider key crosses only into verify and only with
 * allow_test_credentials. */
int kiwi_policy_check_env(const struct kiwi_policy *p, enum kiwi_phase phase, const char *name,
			  kiwi_err *err);
/* May a literal NAME=VALUE (--env, the policy's env) be set in PHASE? The
 * same rules without the install ban: a literal is not the caller's
 * environment, but a credential written into it is still a credential. */
int kiwi_policy_check_literal(const struct kiwi_policy *p, enum kiwi_phase phase, const char *name,
			      kiwi_err *err);

/* Writes p as a policy file, every default spelt out, into w: the output
 * of `kiwi-run policy check`, and itself a valid policy. */
void kiwi_policy_write_json(const struct kiwi_policy *p, kiwi_json_writer *w);

static inline void kiwi_policy_clearp(struct kiwi_policy *p)
{
	kiwi_policy_clear(p);
}
#define _cleanup_policy_ __attribute__((cleanup(kiwi_policy_clearp)))

#endif
