/* SPDX-License-Identifier: Apache-2.0 */
/* The verdict: one JSON object describing a run, for orchestrators.
 * Documented in man/kiwi-run.1 (VERDICT). Fields are only ever added;
 * "version" changes when a field changes meaning. */
#ifndef KIWI_VERDICT_H
#define KIWI_VERDICT_H

#include <stdbool.h>

#include "kiwi/err.h"
#include "kiwi/json.h"
#include "kiwi/sandbox.h"

#define KIWI_VERDICT_VERSION 1

struct kiwi_verdict {
	const struct kiwi_sandbox_result *result;
	const kiwi_err *error;    /* NULL when kiwi-run did not fail */
	int exit_code;            /* what kiwi-run exits with */
	/* A command's own fields (phase, plan...), written last. */
	void (*extra)(kiwi_json_writer *w, void *ctx);
	void *extra_ctx;
};

/* Writes the verdict followed by a newline to fd. */
int kiwi_verdict_write(int fd, const struct kiwi_verdict *v, kiwi_err *err);

#endif
