/* SPDX-License-Identifier: Apache-2.0 */
#include "kiwi/sync.h"

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
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} control = { 0 };
	struct iovec iov = { .iov_base = (void *)m, .iov_len = sizeof(*m) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
			      .msg_controllen = sizeof(control.buf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	ssize_t n;
	do
		n = sendmsg(sock, &msg, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)sizeof(*m) ? 0 : -1;
}

/* The fd a message carried, or -1. Room for one only: more would be
 * truncated (MSG_CTRUNC), and the kernel closes what did not fit. */
static int take_fd(struct msghdr *msg)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
		    c->cmsg_len == CMSG_LEN(sizeof(int))) {
			int fd;
			memcpy(&fd, CMSG_DATA(c), sizeof(int));
			return fd;
		}
	return -1;
}

int kiwi_sync_recv_fd(int sock, struct kiwi_sync_msg *m, int flags, int *fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} control;
	struct iovec iov = { .iov_base = m, .iov_len = sizeof(*m) };
	struct msghdr msg;
	ssize_t n;
	*fd = -1;
	do {
		msg = (struct msghdr){ .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
				       .msg_controllen = sizeof(control.buf) };
		n = recvmsg(sock, &msg, flags | MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	if (n > 0)
		*fd = take_fd(&msg);
	if (n == 0 || (n < 0 && errno == ECONNRESET))
		return 0;
	if (n != (ssize_t)sizeof(*m)) {
		if (n >= 0)
			errno = EPROTO;
		if (*fd >= 0)
			close(TAKE_FD(*fd));
		return -1;
	}
	m->err.step[sizeof(m->err.step) - 1] = '\0';
	m->err.msg[sizeof(m->err.msg) - 1] = '\0';
	return 1;
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
