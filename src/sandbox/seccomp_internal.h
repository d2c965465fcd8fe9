/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by the seccomp compiler and the precompiled default profile. */
#ifndef KIWI_SECCOMP_INTERNAL_H
#define KIWI_SECCOMP_INTERNAL_H

#include <stdbool.h>
#include <linux/filter.h>
#include <stddef.h>

struct kiwi_seccomp {
	struct sock_fprog prog;
	unsigned int flags;
	bool builtin;             /* kiwi_seccomp_compile_default's */
	struct sock_filter insns[];
};

/* An empty program of n_insns instructions, freed with kiwi_seccomp_free. */
struct kiwi_seccomp *kiwi_seccomp_alloc(size_t n_insns, unsigned int flags);

#endif
