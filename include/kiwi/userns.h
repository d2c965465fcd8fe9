/* SPDX-License-Identifier: Apache-2.0 */
/* User namespace id maps, written by the parent for its child. */
#ifndef KIWI_USERNS_H
#define KIWI_USERNS_H

#include <sys/types.h>

#include "kiwi/err.h"

/* Maps the caller's own uid and gid to 0 inside the child's user namespace
 * (root maps 0 to 0; a rootless caller maps itself). setgroups is denied
 * first, which an unprivileged writer of gid_map must do. */
int kiwi_userns_map_self(pid_t child, kiwi_err *err);

#endif
