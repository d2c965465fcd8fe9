/* SPDX-License-Identifier: Apache-2.0 */
/* The default profile, compiled to BPF when kiwi-run is built
 * (src/tools/seccomp_precompile.c writes seccomp-default.h from
 * seccomp-profiles/default.json with the same libseccomp kiwi-run links):
 * a sandbox start pays neither libseccomp's 2-5 ms compile nor a cache
 * lookup. The profile uses no kernel-dependent condition (minKernel), so
 * the program does not depend on the machine that builds it. */
#include "kiwi/seccomp.h"
#include "seccomp_internal.h"
#include "seccomp-default.h"

#include <errno.h>
#include <string.h>

const char *kiwi_seccomp_default_text(size_t *len)
{
	*len = sizeof(kiwi_default_profile_text) - 1;
	return (const char *)kiwi_default_profile_text;
}

int kiwi_seccomp_compile_default(struct kiwi_seccomp **out, kiwi_err *err)
{
	size_t n = sizeof(kiwi_default_program) / sizeof(kiwi_default_program[0]);
	struct kiwi_seccomp *f = kiwi_seccomp_alloc(n, KIWI_DEFAULT_PROGRAM_FLAGS);
	if (!f)
		return kiwi_error(err, ENOMEM, "seccomp", "cannot allocate the default filter");
	memcpy(f->insns, kiwi_default_program, sizeof(kiwi_default_program));
	f->builtin = true;
	*out = f;
	return 0;
}
