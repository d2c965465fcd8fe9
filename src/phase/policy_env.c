/* SPDX-License-Identifier: Apache-2.0 */
/* The credential rules of the two phases: which variable names may cross
 * into install and verify. Names and patterns are compared without regard
 * to case: Linux keeps OPENAI_API_KEY and openai_api_key apart and a program
 * may read either, and a refusal that is too wide is seen at once and fixed
 * by renaming, while one that is too narrow leaks a key without a sound. */
#include "policy_int.h"

#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kiwi/cleanup.h"

/* Each provider's key and token variables under the names its SDKs and
 * command-line tools read. A provider with a distinctive name gets a
 * pattern (its name, then KEY or TOKEN: AZURE_OPENAI_API_KEY,
 * ANTHROPIC_AUTH_TOKEN, CLAUDE_CODE_OAUTH_TOKEN); a short or common word
 * (XAI, HF, TOGETHER, CO) only exact names, so that no unrelated variable
 * of a test suite is caught. Generic patterns such as *_API_KEY are left
 * out on purpose: verify legitimately needs test keys of other services. */
static const char *const builtin_model_keys[] = {
	/* the three named by the design, exactly */
	"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY",
	"*ANTHROPIC*KEY*", "*ANTHROPIC*TOKEN*", "*CLAUDE*KEY*", "*CLAUDE*TOKEN*",
	"*OPENAI*KEY*", "*OPENAI*TOKEN*",
	"*GEMINI*KEY*", "GOOGLE_API_KEY", "GOOGLE_GENERATIVE_AI_API_KEY",
	"AZURE_API_KEY", "AZURE_AI_API_KEY", "AWS_BEARER_TOKEN_BEDROCK",
	"*MISTRAL*KEY*", "*COHERE*KEY*", "CO_API_KEY", "*GROQ*KEY*", "*DEEPSEEK*KEY*",
	"XAI_API_KEY", "GROK_API_KEY", "*OPENROUTER*KEY*", "TOGETHER_API_KEY", "TOGETHERAI_API_KEY",
	"*FIREWORKS*KEY*", "*PERPLEXITY*KEY*", "PPLX_API_KEY", "*REPLICATE*TOKEN*", "*CEREBRAS*KEY*",
	"*VOYAGE*KEY*", "AI21_API_KEY", "NVIDIA_API_KEY", "DASHSCOPE_API_KEY", "MOONSHOT_API_KEY",
	"HF_TOKEN", "HF_API_TOKEN", "HF_API_KEY", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACEHUB_API_TOKEN",
};

const char *const *kiwi_policy_builtin_model_keys(size_t *n)
{
	*n = KIWI_ARRAY_SIZE(builtin_model_keys);
	return builtin_model_keys;
}

const char *kiwi_phase_name(enum kiwi_phase phase)
{
	return phase == KIWI_PHASE_INSTALL ? "install" : "verify";
}

int kiwi_strv_push(char ***v, size_t *n, const char *s)
{
	char *copy = strdup(s);
	char **grown = copy ? realloc(*v, (*n + 1) * sizeof(**v)) : NULL;
	if (!grown) {
		free(copy);
		return -1;
	}
	grown[(*n)++] = copy;
	*v = grown;
	return 0;
}

void kiwi_strv_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

bool kiwi_env_name_ok(const char *name)
{
	if (!name || !(isalpha((unsigned char)*name) || *name == '_'))
		return false;
	for (const char *c = name; *c; c++)
		if (!(isalnum((unsigned char)*c) || *c == '_'))
			return false;
	return true;
}

static bool matches(const char *pattern, const char *name)
{
	return !strcasecmp(pattern, name) || fnmatch(pattern, name, FNM_CASEFOLD) == 0;
}

static const char *match_list(char *const *list, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (matches(list[i], name))
			return list[i];
	return NULL;
}

/* The built-in entry or file addition NAME matches, or NULL. */
static const char *model_key_match(const struct kiwi_policy *p, const char *name)
{
	const char *m = match_list((char *const *)builtin_model_keys, KIWI_ARRAY_SIZE(builtin_model_keys), name);
	return m ? m : match_list(p->model_keys, p->n_model_keys, name);
}

int kiwi_policy_add_model_key(struct kiwi_policy *p, const char *pattern)
{
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(builtin_model_keys); i++)
		if (!strcasecmp(builtin_model_keys[i], pattern))
			return 0;
	for (size_t i = 0; i < p->n_model_keys; i++)
		if (!strcasecmp(p->model_keys[i], pattern))
			return 0;
	return kiwi_strv_push(&p->model_keys, &p->n_model_keys, pattern);
}

bool kiwi_policy_is_model_key(const struct kiwi_policy *p, const char *name)
{
	return name && model_key_match(p, name) != NULL;
}

/* NAME for an error line: control characters (a name from the command
 * line may hold anything) would split the one line the caller prints. */
static const char *printable(const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s", name ? name : "");
	for (char *p = buf; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	return buf;
}

/* The rules a literal and a passed variable share: deny_env, then model keys. */
static int check_credentials(const struct kiwi_policy *p, enum kiwi_phase phase, const char *name,
			     kiwi_err *err)
{
	char shown[128];
	if (!kiwi_env_name_ok(name))
		return kiwi_error(err, 0, "policy",
				  "`%s` is not a variable name: want letters, digits and _, not starting with a digit",
				  printable(name, shown, sizeof(shown)));
	const char *deny = match_list(p->deny_env, p->n_deny_env, name);
	if (deny)
		return kiwi_error(err, 0, "policy", "`%s` is refused by the policy's deny_env (`%s`)", name, deny);
	/* The model keys never cross, whatever the policy says: the code
	 * under test is the model's, and a key it can read is a key it can
	 * send. allow_test_credentials admits named non-model credentials
	 * only. */
	const char *key = model_key_match(p, name);
	if (!key)
		return 0;
	(void)phase;
	return kiwi_error(err, 0, "policy",
			  "`%s` is a model-provider key (matches `%s`): refused even when named, in install "
			  "and verify, whatever the policy says (allow_test_credentials admits named non-model "
			  "test credentials only; a test of model calls needs a stub or a recorded answer)",
			  name, key);
}

int kiwi_policy_check_env(const struct kiwi_policy *p, enum kiwi_phase phase, const char *name,
			  kiwi_err *err)
{
	if (phase == KIWI_PHASE_INSTALL) {
		/* Say the whole reason: a key asked for here is two refusals. */
		const char *key = kiwi_env_name_ok(name) ? model_key_match(p, name) : NULL;
		char shown[128];
		return kiwi_error(err, 0, "policy",
				  "install never receives the caller's variables, whatever is asked: `%s` refused "
				  "(install runs the repository's own scripts with the network open)%s%s%s",
				  printable(name, shown, sizeof(shown)), key ? "; it is also a model-provider key, matching `" : "",
				  key ? key : "", key ? "`" : "");
	}
	return check_credentials(p, phase, name, err);
}

int kiwi_policy_check_literal(const struct kiwi_policy *p, enum kiwi_phase phase, const char *name,
			      kiwi_err *err)
{
	return check_credentials(p, phase, name, err);
}
