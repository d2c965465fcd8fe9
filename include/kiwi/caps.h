/* SPDX-License-Identifier: Apache-2.0 */
/* Capabilities: dropped, in every set, before the command runs. */
#ifndef KIWI_CAPS_H
#define KIWI_CAPS_H

#include <stdint.h>

#include "kiwi/err.h"

/* Locks the securebits so uid 0 gains nothing at exec, empties the
 * bounding and ambient sets, then the permitted, effective and inheritable
 * sets, and sets no_new_privs. Allocation-free: runs between fork and exec.
 * The capabilities of keep (a mask of CAP_* below 32; 0: none) stay in
 * the bounding, permitted, effective and inheritable sets and cross exec
 * as ambient ones: CAP_CHOWN for a root command whose root is an
 * unprivileged host id (kiwi/idmount.h), so that `chown` to the ids a
 * tarball names works inside. */
int kiwi_caps_drop_all_but(uint32_t keep, kiwi_err *err);

#endif
