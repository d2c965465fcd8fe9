/* SPDX-License-Identifier: Apache-2.0 */
#include "kiwi/output.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

int kiwi_output_open(struct kiwi_output *o, int dest_fd, uint64_t limit, kiwi_err *err)
{
	int p[2];
	*o = (struct kiwi_output){ .read_fd = -1, .write_fd = -1, .dest_fd = dest_fd, .limit = limit };
	if (pipe2(p, O_CLOEXEC) < 0)
		return kiwi_error(err, errno, "output", "cannot create an output pipe");
	o->read_fd = p[0];
	o->write_fd = p[1];
	if (fcntl(o->read_fd, F_SETFL, O_NONBLOCK) < 0)
		return kiwi_error(err, errno, "output", "cannot make the output pipe non-blocking");
	/* A larger pipe means fewer wake-ups for a chatty command. */
	(void)fcntl(o->read_fd, F_SETPIPE_SZ, 1 << 18);
	return 0;
}

static int write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			/* A non-blocking destination we share with our caller:
			 * wait until it takes more. */
			struct pollfd p = { .fd = fd, .events = POLLOUT };
			poll(&p, 1, -1);
			continue;
		}
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

int kiwi_output_pump(struct kiwi_output *o, kiwi_err *err)
{
	char buf[16384];  /* small: every page touched counts in our peak RSS */
	while (o->read_fd >= 0) {
		ssize_t n = read(o->read_fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 1;
		/* A pty master reads EIO, not 0, once every slave is closed. */
		if (n < 0 && errno != EIO)
			return kiwi_error(err, errno, "output", "cannot read the command's output");
		if (n <= 0) {
			close(o->read_fd);
			o->read_fd = -1;
			return 0;
		}
		if (o->tail)
			kiwi_tail_add(o->tail, buf, (size_t)n);
		uint64_t room = o->bytes < o->limit ? o->limit - o->bytes : 0;
		size_t pass = (uint64_t)n < room ? (size_t)n : (size_t)room;
		o->bytes += (uint64_t)n;
		if (o->bytes > o->limit)
			o->truncated = true;
		if (pass && o->dest_fd >= 0 && write_all(o->dest_fd, buf, pass) < 0) {
			/* Our reader went away: so does the command's, and its
			 * next write meets SIGPIPE, as it would outside. */
			if (errno == EPIPE) {
				close(o->read_fd);
				o->read_fd = -1;
				return 0;
			}
			return kiwi_error(err, errno, "output", "cannot pass the command's output on");
		}
	}
	return 0;
}

void kiwi_output_close(struct kiwi_output *o)
{
	if (o->read_fd >= 0)
		close(o->read_fd);
	if (o->write_fd >= 0)
		close(o->write_fd);
	o->read_fd = o->write_fd = -1;
}

void kiwi_tail_add(struct kiwi_tail *t, const char *data, size_t len)
{
	if (!t->size)
		return;
	if (len >= t->size) {
		data += len - t->size;
		t->written += len - t->size;
		len = t->size;
	}
	size_t at = (size_t)(t->written % t->size);
	size_t first = len < t->size - at ? len : t->size - at;
	memcpy(t->buf + at, data, first);
	memcpy(t->buf, data + first, len - first);
	t->written += len;
}

size_t kiwi_tail_copy(const struct kiwi_tail *t, char *out)
{
	if (t->written <= t->size) {
		memcpy(out, t->buf, (size_t)t->written);
		return (size_t)t->written;
	}
	size_t at = (size_t)(t->written % t->size);
	memcpy(out, t->buf + at, t->size - at);
	memcpy(out + t->size - at, t->buf, at);
	return t->size;
}
