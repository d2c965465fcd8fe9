/* SPDX-License-Identifier: Apache-2.0 */
/* A userspace interpreter for classic-BPF seccomp programs, so tests can
 * check what a compiled profile decides without loading it in the kernel
 * (kafel tests its policies the same way). */
#ifndef KIWI_TEST_SECCOMP_BPF_H
#define KIWI_TEST_SECCOMP_BPF_H

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdint.h>

/* Runs prog on d. Returns the 32-bit SECCOMP_RET_* value, or sets *bad and
 * returns 0 when the program is invalid (bad opcode, jump or load past the
 * end, division by zero, falling off the end). */
uint32_t seccomp_bpf_run(const struct sock_fprog *prog, const struct seccomp_data *d, const char **bad);

#endif
