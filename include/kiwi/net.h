/* SPDX-License-Identifier: Apache-2.0 */
/* Network configuration through rtnetlink (libmnl); never the ip command. */
#ifndef KIWI_NET_H
#define KIWI_NET_H

#include "kiwi/err.h"

/* Child side, in the sandbox's fresh network namespace: brings lo up. */
int kiwi_net_loopback_up(kiwi_err *err);

#endif
