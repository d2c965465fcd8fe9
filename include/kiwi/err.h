/* SPDX-License-Identifier: Apache-2.0 */
/* One error type for all of kiwi-run: errno, the step that failed, and a
 * message with context. Fixed size and pointer-free so that a failure inside
 * the sandbox can cross the sync socket to the parent unchanged.
 * Library code fills it and returns; only the CLI prints it, once.
 * The contract is written down in docs/errors.md. */
#ifndef KIWI_ERR_H
#define KIWI_ERR_H

#include <stddef.h>

#define KIWI_ERR_STEP_MAX 32
#define KIWI_ERR_MSG_MAX 480

typedef struct kiwi_err {
	int errnum;                    /* errno, or 0 when none applies */
	char step[KIWI_ERR_STEP_MAX];  /* short machine-readable step: "pivot_root" */
	char msg[KIWI_ERR_MSG_MAX];    /* human context: "cannot pivot into `/x`" */
} kiwi_err;

/* Fills *err (when err is not NULL) and returns -1, so callers write
 *   return kiwi_error(err, errno, "mount", "cannot mount proc on `%s`", p); */
int kiwi_error(kiwi_err *err, int errnum, const char *step, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Prefixes context to an error already set further down:
 *   "loading profile `x`: " + old message. Returns -1. */
int kiwi_error_wrap(kiwi_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Formats "<step>: <msg>: <strerror>[ (hint)]" into buf. */
void kiwi_error_format(const kiwi_err *err, char *buf, size_t len);

/* A hint for ambiguous errnos (EPERM creating a user namespace...), or NULL. */
const char *kiwi_error_hint(const kiwi_err *err);

#endif
