/* SPDX-License-Identifier: Apache-2.0 */
#include "kiwi/output.h"
#include "kiwi/sync.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The destination is shared with our caller (a terminal, a pipeline's
 * pipe). Setting O_NONBLOCK on it would set it for everyone sharing its
 * open file description, the caller's shell included; a second opening of
 * the same pipe or terminal through /proc/self/fd has flags of its own.
 * Where that is refused (a pipe another user made, mode 0600), the shared
 * fd is made non-blocking after all and put back at the end. */
static void take_dest(struct kiwi_output *o)
{
	struct stat st;
	int fd = o->dest_fd, flags;
	if (fd < 0 || fstat(fd, &st) < 0 || (flags = fcntl(fd, F_GETFL)) < 0)
		return;
	if (S_ISSOCK(st.st_mode)) {
		o->how = KIWI_DEST_SEND;
		return;
	}
	if (!S_ISFIFO(st.st_mode) && !isatty(fd))
		return;
	o->how = KIWI_DEST_NONBLOCK;
	if (flags & O_NONBLOCK)
		return;
	char path[32];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	int own = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (own >= 0) {
		o->out_fd = own;
		return;
	}
	if (fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0)
		o->restore_flags = flags;
	else
		o->how = KIWI_DEST_BLOCKING;
}

void kiwi_output_init(struct kiwi_output *o, int dest_fd, uint64_t limit)
{
	*o = (struct kiwi_output){ .read_fd = -1, .write_fd = -1, .dest_fd = dest_fd, .out_fd = dest_fd,
				   .restore_flags = -1, .limit = limit };
	take_dest(o);
}

int kiwi_output_open(struct kiwi_output *o, int dest_fd, uint64_t limit, kiwi_err *err)
{
	int p[2];
	kiwi_output_init(o, dest_fd, limit);
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

bool kiwi_output_wants_read(const struct kiwi_output *o)
{
	return o->read_fd >= 0 && o->pend_len < KIWI_OUTPUT_BUF;
}

bool kiwi_output_wants_write(const struct kiwi_output *o)
{
	return o->pend_len > 0;
}

bool kiwi_output_done(const struct kiwi_output *o)
{
	return o->read_fd < 0 && o->pend_len == 0;
}

/* Bytes the reader took (0 when it would block), or -1 with errno. Only
 * a file is written until all is taken. */
static ssize_t write_some(struct kiwi_output *o, const char *buf, size_t len)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = o->how == KIWI_DEST_SEND ? send(o->out_fd, buf + done, len - done, MSG_DONTWAIT)
						     : write(o->out_fd, buf + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && o->how != KIWI_DEST_BLOCKING)
			break;
		if (n < 0)
			return -1;
		if (n == 0) {
			errno = EIO;
			return -1;
		}
		done += (size_t)n;
	}
	return (ssize_t)done;
}

static void stall_ends(struct kiwi_output *o)
{
	if (!o->stalled_since)
		return;
	o->stalled_ns += (uint64_t)(kiwi_clock_ns(CLOCK_MONOTONIC) - o->stalled_since);
	o->stalled_since = 0;
}

/* Keeps what the reader did not take, or drops it once the run is over. */
static int keep(struct kiwi_output *o, const char *buf, size_t len)
{
	if (o->no_wait) {
		o->dropped += len;
		o->stalled |= len > 0;
		return 0;
	}
	if (!o->pend && !(o->pend = malloc(KIWI_OUTPUT_BUF))) {
		errno = ENOMEM;
		return -1;
	}
	if (o->pend_off + o->pend_len + len > KIWI_OUTPUT_BUF) {
		memmove(o->pend, o->pend + o->pend_off, o->pend_len);
		o->pend_off = 0;
	}
	memcpy(o->pend + o->pend_off + o->pend_len, buf, len);
	o->pend_len += len;
	if (o->pend_len == KIWI_OUTPUT_BUF && !o->stalled_since) {
		o->stalled = true;
		o->stalled_since = kiwi_clock_ns(CLOCK_MONOTONIC);
	}
	return 0;
}

/* Straight through while the reader keeps up, into the buffer (which has
 * room for len) when it does not. Order is kept: nothing goes straight
 * through while older bytes wait. */
static int pass_on(struct kiwi_output *o, const char *buf, size_t len)
{
	ssize_t n = o->pend_len ? 0 : write_some(o, buf, len);
	if (n < 0)
		return -1;
	return keep(o, buf + n, len - (size_t)n);
}

/* Our reader went away: so does the command's, and its next write meets
 * SIGPIPE, as it would outside. */
static void reader_gone(struct kiwi_output *o)
{
	stall_ends(o);
	o->dropped += o->pend_len;
	o->pend_len = o->pend_off = 0;
	if (o->read_fd >= 0)
		close(o->read_fd);
	o->read_fd = -1;
}

static int pass_failed(struct kiwi_output *o, kiwi_err *err)
{
	if (errno == EPIPE) {
		reader_gone(o);
		return 0;
	}
	return kiwi_error(err, errno, "output", "cannot pass the command's output on");
}

int kiwi_output_pump(struct kiwi_output *o, kiwi_err *err)
{
	char buf[16384];  /* small: every page touched counts in our peak RSS */
	while (kiwi_output_wants_read(o)) {
		size_t room = KIWI_OUTPUT_BUF - o->pend_len;
		ssize_t n = read(o->read_fd, buf, room < sizeof(buf) ? room : sizeof(buf));
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
		uint64_t left = o->bytes < o->limit ? o->limit - o->bytes : 0;
		size_t pass = (uint64_t)n < left ? (size_t)n : (size_t)left;
		o->bytes += (uint64_t)n;
		if (o->bytes > o->limit)
			o->truncated = true;
		if (pass && o->dest_fd >= 0 && pass_on(o, buf, pass) < 0)
			return pass_failed(o, err);
	}
	return o->read_fd >= 0;
}

int kiwi_output_flush(struct kiwi_output *o, kiwi_err *err)
{
	if (!o->pend_len)
		return 0;
	ssize_t n = write_some(o, o->pend + o->pend_off, o->pend_len);
	if (n < 0)
		return pass_failed(o, err);
	o->pend_off += (size_t)n;
	o->pend_len -= (size_t)n;
	if (!o->pend_len)
		o->pend_off = 0;
	if (n > 0)
		stall_ends(o);
	return 0;
}

void kiwi_output_stop_waiting(struct kiwi_output *o)
{
	o->no_wait = true;
	stall_ends(o);
	o->dropped += o->pend_len;
	o->stalled |= o->pend_len > 0;
	o->pend_len = o->pend_off = 0;
}

void kiwi_output_close(struct kiwi_output *o)
{
	stall_ends(o);
	if (o->read_fd >= 0)
		close(o->read_fd);
	if (o->write_fd >= 0)
		close(o->write_fd);
	o->read_fd = o->write_fd = -1;
	if (o->out_fd >= 0 && o->out_fd != o->dest_fd)
		close(o->out_fd);
	o->out_fd = o->dest_fd;
	if (o->restore_flags >= 0)
		(void)fcntl(o->dest_fd, F_SETFL, o->restore_flags);
	o->restore_flags = -1;
	free(o->pend);
	o->pend = NULL;
	o->dropped += o->pend_len;
	o->pend_len = o->pend_off = 0;
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
