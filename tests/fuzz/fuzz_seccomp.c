/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the seccomp profile compiler: any input must either
 * compile into a filter that passes a basic structural check, or fail with
 * an error message, and never crash, leak or hit undefined behaviour. */
#include "kiwi/seccomp.h"

#include <linux/filter.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Fuzzing must exercise the compiler, not fill the cache directory. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	setenv("KIWI_SECCOMP_CACHE_DIR", "off", 1);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kiwi_seccomp *f = NULL;
	kiwi_err err = { 0 };
	if (kiwi_seccomp_compile_json((const char *)data, size, "fuzz", &f, &err) < 0) {
		if (f || !err.msg[0])
			abort();
		return 0;
	}
	const struct sock_fprog *prog = kiwi_seccomp_program(f);
	/* The kernel's own limits: a non-empty program ending in a return. */
	if (!prog->len || prog->len > BPF_MAXINSNS ||
	    BPF_CLASS(prog->filter[prog->len - 1].code) != BPF_RET)
		abort();
	kiwi_seccomp_free(f);
	return 0;
}
