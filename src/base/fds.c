/* SPDX-License-Identifier: Apache-2.0 */
/* The fds a process keeps: for the children that outlive their parent's
 * work (the egress table's holder, kiwi-helper's keepers), which must hold
 * nothing but what they keep alive. */
#include "kiwi/fds.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

void kiwi_fds_keep_only(const int *keep, size_t n)
{
	int k[8], null = open("/dev/null", O_RDWR | O_CLOEXEC);
	size_t m = 0;
	for (size_t i = 0; i < n && m < 8; i++)
		if (keep[i] >= 0)
			k[m++] = keep[i];
	for (size_t i = 1; i < m; i++)   /* sorted, so the gaps are ranges */
		for (size_t j = i; j > 0 && k[j - 1] > k[j]; j--) {
			int t = k[j];
			k[j] = k[j - 1];
			k[j - 1] = t;
		}
	for (int fd = 0; fd < 3 && null >= 0; fd++) {
		bool kept = false;
		for (size_t i = 0; i < m; i++)
			kept |= k[i] == fd;
		if (!kept)
			dup2(null, fd);
	}
	unsigned lo = 3;
	for (size_t i = 0; i < m; i++) {
		if ((unsigned)k[i] > lo)
			close_range(lo, (unsigned)k[i] - 1, 0);
		if ((unsigned)k[i] + 1 > lo)
			lo = (unsigned)k[i] + 1;
	}
	close_range(lo, ~0u, 0);
}

ssize_t kiwi_send_fds(int sock, const void *buf, size_t len, const int *fds, size_t n_fds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * KIWI_MAX_PASSED_FDS)];
		struct cmsghdr align;
	} control = { 0 };
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (n_fds > KIWI_MAX_PASSED_FDS) {
		errno = EINVAL;
		return -1;
	}
	if (n_fds) {
		msg.msg_control = control.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
	}
	ssize_t n;
	do
		n = sendmsg(sock, &msg, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n;
}

ssize_t kiwi_recv_fds(int sock, void *buf, size_t len, int flags, int fds[KIWI_MAX_PASSED_FDS], size_t *n_fds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * KIWI_MAX_PASSED_FDS)];
		struct cmsghdr align;
	} control;
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr msg;
	ssize_t n;
	*n_fds = 0;
	do {
		msg = (struct msghdr){ .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
				       .msg_controllen = sizeof(control.buf) };
		n = recvmsg(sock, &msg, flags | MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return n;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (*n_fds < KIWI_MAX_PASSED_FDS)
				fds[(*n_fds)++] = fd;
			else
				close(fd);
		}
	}
	if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
		for (size_t i = 0; i < *n_fds; i++)
			close(fds[i]);
		*n_fds = 0;
		errno = EMSGSIZE;
		return -1;
	}
	return n;
}

ssize_t kiwi_send_fd(int sock, const void *buf, size_t len, int fd)
{
	return kiwi_send_fds(sock, buf, len, &fd, fd >= 0);
}

ssize_t kiwi_recv_fd(int sock, void *buf, size_t len, int flags, int *fd)
{
	int fds[KIWI_MAX_PASSED_FDS];
	size_t n_fds;
	ssize_t n = kiwi_recv_fds(sock, buf, len, flags, fds, &n_fds);
	*fd = n_fds ? fds[0] : -1;
	for (size_t i = 1; i < n_fds; i++)
		close(fds[i]);
	return n;
}
