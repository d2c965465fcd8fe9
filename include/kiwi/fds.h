/* SPDX-License-Identifier: Apache-2.0 */
/* Closing every fd but a few. */
#ifndef KIWI_FDS_H
#define KIWI_FDS_H

#include <stddef.h>

/* Closes every fd but the n kept (at most 8; negative ones are skipped);
 * 0-2, unless kept, become /dev/null. */
void kiwi_fds_keep_only(const int *keep, size_t n);

#endif
