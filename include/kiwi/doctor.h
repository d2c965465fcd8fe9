/* SPDX-License-Identifier: Apache-2.0 */
/* `kiwi-run doctor`: what of the host kiwi-run needs works, and how to fix
 * what does not. Each check is one small function in a table; the ones a
 * default `kiwi-run run` (no limits, no network, seccomp on) cannot do
 * without are marked required. Checks that can be tried for real are
 * (clone3, nftables in a fresh network namespace, overlayfs in a user
 * namespace, loading the default seccomp filter), each in a child process
 * that takes what it made with it when it exits. */
#ifndef KIWI_DOCTOR_H
#define KIWI_DOCTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "kiwi/err.h"

enum kiwi_check_status {
	KIWI_CHECK_OK,
	KIWI_CHECK_WARN,   /* does not work, but a default run does not need it */
	KIWI_CHECK_FAIL,   /* does not work, and a default run needs it */
};

struct kiwi_check_result {
	const char *name;          /* "userns.clone", "cgroup.mode", ... */
	bool required;
	enum kiwi_check_status status;
	char detail[640];          /* what was found */
	char fix[512];             /* how to fix it; "" when nothing to fix */
};

/* Runs every check into out (room for kiwi_doctor_count() results).
 * Returns true when every required check passed. */
bool kiwi_doctor_run(struct kiwi_check_result *out);
size_t kiwi_doctor_count(void);
const char *kiwi_check_status_name(enum kiwi_check_status s);
/* --fix, as root: appends kiwi's range (KIWI_SUBID_OWNER, 65536 ids, past
 * every range there and below 2^31) to /etc/subuid and /etc/subgid where
 * it is missing, saying what it did on out. */
int kiwi_doctor_fix(FILE *out, kiwi_err *err);

#endif
