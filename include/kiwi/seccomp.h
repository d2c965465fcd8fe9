/* SPDX-License-Identifier: Apache-2.0 */
/* Seccomp: what the sandboxed code may ask of the kernel.
 * Parent side: parse an OCI `linux.seccomp` profile and compile it, once,
 * with libseccomp. Child side: load the precompiled program with one raw
 * seccomp(2) call, as the very last step before execve.
 * The profile format and the default profile are described in
 * kiwi-run-seccomp(5). */
#ifndef KIWI_SECCOMP_H
#define KIWI_SECCOMP_H

#include <stddef.h>

#include <stdbool.h>

#include "kiwi/err.h"

/* A compiled classic-BPF program and the seccomp(2) flags to load it with. */
struct kiwi_seccomp;

/* Profiles larger than this are refused rather than read. */
#define KIWI_SECCOMP_PROFILE_MAX (4u << 20)

/* The compile functions reuse a program compiled before from the same text
 * when the cache has it (kiwi-run-seccomp(5), CACHE; KIWI_SECCOMP_CACHE_DIR
 * moves or disables it). On failure *out is NULL and err names the profile,
 * the member at fault and why. */
int kiwi_seccomp_compile_file(const char *path, struct kiwi_seccomp **out, kiwi_err *err);
/* Turns the cache off for this process when path (a bind source, a
 * writable rootfs) is the cache directory, holds it, or lies in it: a
 * sandbox that reaches the cache does not share it. Returns true then. */
bool kiwi_seccomp_cache_skip_if_reached(const char *path);
/* origin names the profile in error messages ("default", a path...). */
int kiwi_seccomp_compile_json(const char *text, size_t len, const char *origin,
			      struct kiwi_seccomp **out, kiwi_err *err);
/* seccomp-profiles/default.json, embedded in the binary at build time. */
int kiwi_seccomp_compile_default(struct kiwi_seccomp **out, kiwi_err *err);

/* Child side, after no_new_privs: one seccomp(2) call, no allocation. */
int kiwi_seccomp_load(const struct kiwi_seccomp *f, kiwi_err *err);
void kiwi_seccomp_free(struct kiwi_seccomp *f);

static inline void kiwi_seccomp_freep(struct kiwi_seccomp **f)
{
	kiwi_seccomp_free(*f);
}
#define _cleanup_seccomp_ __attribute__((cleanup(kiwi_seccomp_freep)))

/* For tests and tools that inspect the program instead of loading it. */
struct sock_fprog;
const struct sock_fprog *kiwi_seccomp_program(const struct kiwi_seccomp *f);
unsigned int kiwi_seccomp_flags(const struct kiwi_seccomp *f);
/* The built-in default profile: it allows what a command's process does
 * between loading it and its exec (keeper.c loads it ahead, in the process
 * made for a session's next exec); any other profile is loaded last. */
bool kiwi_seccomp_builtin(const struct kiwi_seccomp *f);
const char *kiwi_seccomp_default_text(size_t *len);

#endif
