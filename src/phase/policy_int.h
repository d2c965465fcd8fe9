/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by the policy parser (policy.c), the credential rules
 * (policy_env.c) and the writer (policy_write.c); not a public API. */
#ifndef KIWI_POLICY_INT_H
#define KIWI_POLICY_INT_H

#include "kiwi/policy.h"

/* Appends a copy of s to a NULL-free string vector. -1 on ENOMEM. */
int kiwi_strv_push(char ***v, size_t *n, const char *s);
void kiwi_strv_free(char **v, size_t n);

/* Adds a model-provider key name or pattern unless it is built in or
 * already listed (compared without case). -1 on ENOMEM. */
int kiwi_policy_add_model_key(struct kiwi_policy *p, const char *pattern);

/* A variable name as a shell would take it: [A-Za-z_][A-Za-z0-9_]*. */
bool kiwi_env_name_ok(const char *name);

#endif
