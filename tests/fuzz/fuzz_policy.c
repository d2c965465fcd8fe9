/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the policy file parser. Properties: never crashes
 * or leaks; a refused file gives a "policy" error and leaves the policy
 * empty; an accepted one obeys the credential rules it was checked
 * against, and what `policy check` prints from it parses back to a policy
 * that prints the very same text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kiwi/json.h"
#include "kiwi/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *written(const struct kiwi_policy *p, size_t *len)
{
	kiwi_json_writer *w = kiwi_jw_new(false);
	if (!w)
		abort();
	kiwi_policy_write_json(p, w);
	const char *text = kiwi_jw_text(w, len);
	char *copy = malloc(*len + 1);
	if (!copy)
		abort();
	memcpy(copy, text, *len);
	copy[*len] = '\0';
	kiwi_jw_free(w);
	return copy;
}

static void check_rules(const struct kiwi_policy *p)
{
	kiwi_err err = { 0 };
	if (p->verify.network_egress || p->verify.n_egress || p->install.n_pass_env)
		abort();
	for (size_t i = 0; i < p->verify.n_pass_env; i++) {
		if (kiwi_policy_check_env(p, KIWI_PHASE_VERIFY, p->verify.pass_env[i], &err) < 0)
			abort();
		/* nothing the caller has ever reaches install */
		if (kiwi_policy_check_env(p, KIWI_PHASE_INSTALL, p->verify.pass_env[i], &err) == 0)
			abort();
	}
	if (!p->install.network_egress && p->install.n_egress)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kiwi_policy p;
	kiwi_err err = { 0 };
	if (kiwi_policy_parse((const char *)data, size, "fuzz.json", &p, &err) < 0) {
		if (strcmp(err.step, "policy") || strncmp(err.msg, "fuzz.json: ", 11) ||
		    p.n_deny_env || p.n_model_keys || p.install.n_egress || p.verify.n_pass_env || p.install.n_caches)
			abort();
		for (const char *c = err.msg; *c; c++)
			if (*c == '\n')
				abort();   /* the CLI prints one line */
		return 0;
	}
	check_rules(&p);
	size_t len1, len2;
	char *first = written(&p, &len1);
	struct kiwi_policy again;
	if (kiwi_policy_parse(first, len1, "written", &again, &err) < 0)
		abort();   /* what policy check prints must be a valid policy */
	char *second = written(&again, &len2);
	/* The written form is canonical: reading it back changes nothing. */
	if (len2 != len1 || memcmp(first, second, len1))
		abort();
	free(first);
	free(second);
	kiwi_policy_clear(&p);
	kiwi_policy_clear(&again);
	return 0;
}
