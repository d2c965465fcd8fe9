/* SPDX-License-Identifier: Apache-2.0 */
/* Capabilities: dropped completely, in every set, before the command runs. */
#ifndef KIWI_CAPS_H
#define KIWI_CAPS_H

#include "kiwi/err.h"

/* Locks the securebits so uid 0 gains nothing at exec, empties the
 * bounding and ambient sets, then the permitted, effective and inheritable
 * sets, and sets no_new_privs. Allocation-free: runs between fork and exec. */
int kiwi_caps_drop_all(kiwi_err *err);

#endif
