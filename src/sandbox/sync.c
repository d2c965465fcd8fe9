/* SPDX-License-Identifier: Apache-2.0 */
#include "kiwi/sync.h"
#include "kiwi/fds.h"

#include "kiwi/cleanup.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int kiwi_sync_send(int sock, const struct kiwi_sync_msg *m)
{
	ssize_t n;
	do
		n = send(sock, m, sizeof(*m), MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)sizeof(*m) ? 0 : -1;
}

int kiwi_sync_send_fd(int sock, const struct kiwi_sync_msg *m, int fd)
{
	return kiwi_send_fd(sock, m, sizeof(*m), fd) == (ssize_t)sizeof(*m) ? 0 : -1;
}

int kiwi_sync_send_fds(int sock, const struct kiwi_sync_msg *m, const int *fds, size_t n_fds)
{
	return kiwi_send_fds(sock, m, sizeof(*m), fds, n_fds) == (ssize_t)sizeof(*m) ? 0 : -1;
}

int kiwi_sync_recv_fds(int sock, struct kiwi_sync_msg *m, int flags, int fds[2])
{
	int got[KIWI_MAX_PASSED_FDS];
	size_t n_got;
	ssize_t n = kiwi_recv_fds(sock, m, sizeof(*m), flags, got, &n_got);
	fds[0] = fds[1] = -1;
	for (size_t i = 0; i < n_got; i++) {
		if (i < 2 && n == (ssize_t)sizeof(*m))
			fds[i] = got[i];
		else
			close(got[i]);
	}
	if (n == 0 || (n < 0 && errno == ECONNRESET))
		return 0;
	if (n != (ssize_t)sizeof(*m)) {
		if (n >= 0)
			errno = EPROTO;
		return -1;
	}
	m->err.step[sizeof(m->err.step) - 1] = '\0';
	m->err.msg[sizeof(m->err.msg) - 1] = '\0';
	return 1;
}

int kiwi_sync_recv_fd(int sock, struct kiwi_sync_msg *m, int flags, int *fd)
{
	int fds[2];
	int r = kiwi_sync_recv_fds(sock, m, flags, fds);
	if (fds[1] >= 0)
		close(fds[1]);
	*fd = fds[0];
	return r;
}

int kiwi_sync_recv(int sock, struct kiwi_sync_msg *m, int flags)
{
	int fd;
	int r = kiwi_sync_recv_fd(sock, m, flags, &fd);
	if (fd >= 0)
		close(fd);
	return r;
}

int64_t kiwi_clock_ns(int clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
