/* SPDX-License-Identifier: Apache-2.0 */
/* Reading whole files of outside input, with a ceiling: shared by every
 * parser (JSON configs, seccomp profiles, OCI blobs). */
#ifndef KIWI_FILEIO_H
#define KIWI_FILEIO_H

#include <stddef.h>

#include "kiwi/err.h"

/* Reads all of fd, refusing more than max bytes (EFBIG); NUL-terminates.
 * `what` names the file in errors. The caller frees *out. */
int kiwi_read_bounded(int fd, size_t max, const char *what, char **out, size_t *len, kiwi_err *err);

#endif
