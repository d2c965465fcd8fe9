/* SPDX-License-Identifier: Apache-2.0 */
/* Connection tracking through ctnetlink: a sandbox's flows forgotten at
 * its end (src/net/conntrack.c). */
#ifndef KIWI_CONNTRACK_H
#define KIWI_CONNTRACK_H

#include "kiwi/err.h"

/* Deletes every conntrack entry of this network namespace whose original
 * direction comes from addr (4 bytes for AF_INET, 16 for AF_INET6): the
 * flows of a sandbox whose address that was. *forgotten counts them.
 * A kernel without conntrack or ctnetlink has nothing to forget: 0. */
int kiwi_ct_forget_source(int family, const void *addr, unsigned *forgotten, kiwi_err *err);

#endif
