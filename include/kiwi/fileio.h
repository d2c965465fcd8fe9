/* SPDX-License-Identifier: Apache-2.0 */
/* Reading whole files of outside input, with a ceiling: shared by every
 * parser (JSON configs, seccomp profiles, OCI blobs). Writing the files a
 * caller names for kiwi-run to write (verdict, output, audit, pid files,
 * logs, state), never through a symbolic link a sandbox may have planted. */
#ifndef KIWI_FILEIO_H
#define KIWI_FILEIO_H

#include <stddef.h>
#include <sys/types.h>

#include "kiwi/err.h"

/* Reads all of fd, refusing more than max bytes (EFBIG); NUL-terminates.
 * `what` names the file in errors. The caller frees *out. */
int kiwi_read_bounded(int fd, size_t max, const char *what, char **out, size_t *len, kiwi_err *err);

/* How kiwi_open_output() treats a file that exists. */
enum kiwi_open_output {
	KIWI_OUTPUT_TRUNC,   /* truncated (a verdict, --stdout) */
	KIWI_OUTPUT_APPEND,  /* appended to (an audit log, --log) */
};

/* Opens path for writing on the caller's behalf. A symbolic link as its
 * last component is refused, never followed (ELOOP), except the host's
 * own names of an fd we hold (/dev/stdout, /dev/fd/N); an existing regular
 * file must belong to our euid and have no other name (a hard link), and
 * is truncated only once that is checked. Devices, pipes and terminals
 * are taken as they are. step and what name it in errors ("verdict",
 * "--verdict"). Returns the fd (O_CLOEXEC). */
int kiwi_open_output(const char *path, enum kiwi_open_output how, mode_t mode, const char *step, const char *what,
		     kiwi_err *err);

/* Replaces path with data, whole: written to tmp (made new, never through
 * a link), then renamed over path, which is never followed either; an
 * existing path of another owner is refused. */
int kiwi_write_file_replace(const char *path, const char *tmp, const char *data, size_t len, mode_t mode,
			    const char *step, kiwi_err *err);

/* Connects a SOCK_STREAM socket to the unix socket at path without
 * following a symbolic link as its last component. Returns the fd. */
int kiwi_connect_unix_nofollow(const char *path, const char *step, kiwi_err *err);

#endif
