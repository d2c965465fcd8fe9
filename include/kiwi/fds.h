/* SPDX-License-Identifier: Apache-2.0 */
/* Closing every fd but a few; passing one over a unix socket. */
#ifndef KIWI_FDS_H
#define KIWI_FDS_H

#include <stddef.h>
#include <sys/types.h>

/* Closes every fd but the n kept (at most 8; negative ones are skipped);
 * 0-2, unless kept, become /dev/null. */
void kiwi_fds_keep_only(const int *keep, size_t n);

#define KIWI_MAX_PASSED_FDS 3

/* One message of len bytes with n_fds fds attached (at most
 * KIWI_MAX_PASSED_FDS), as sendmsg returns; EINTR retried, never SIGPIPE. */
ssize_t kiwi_send_fds(int sock, const void *buf, size_t len, const int *fds, size_t n_fds);
/* One message into buf, as recvmsg returns, its fds (close-on-exec) into
 * fds; a cut message or more fds than that: -1, EMSGSIZE, none kept. */
ssize_t kiwi_recv_fds(int sock, void *buf, size_t len, int flags, int fds[KIWI_MAX_PASSED_FDS], size_t *n_fds);
/* The same with one fd (fd < 0: none; *fd -1 when none came). */
ssize_t kiwi_send_fd(int sock, const void *buf, size_t len, int fd);
ssize_t kiwi_recv_fd(int sock, void *buf, size_t len, int flags, int *fd);

#endif
