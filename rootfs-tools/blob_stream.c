/* SPDX-License-Identifier: Apache-2.0 */
#include "blob_stream.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define READ_CHUNK (1U << 20)
#define OUT_CHUNK (256U << 10)

struct blob_stream {
	int blob_fd;
	enum kiwi_layer_compression comp;
	kiwi_hasher *h;
	kiwi_hasher *tar_h;
	int64_t size;
	int pipe_r, pipe_w;
	pthread_t thread;
	uint64_t count; /* written by the thread, read atomically by progress */
	struct blob_stream_result res;
	unsigned char *in;
	char *out;
};

static la_ssize_t blob_read(struct archive *a, void *arg, const void **out)
{
	struct blob_stream *s = arg;
	ssize_t n;
	do
		n = read(s->blob_fd, s->in, READ_CHUNK);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		if (a)
			archive_set_error(a, errno, "cannot read the blob");
		return -1;
	}
	uint64_t count = __atomic_add_fetch(&s->count, (uint64_t)n, __ATOMIC_RELAXED);
	if (s->h)
		kiwi_hasher_update(s->h, s->in, (size_t)n);
	if (s->size >= 0 && count > (uint64_t)s->size) {
		s->res.too_long = true;
		if (a)
			archive_set_error(a, EFBIG, "the blob is longer than its descriptor says");
		return -1;
	}
	*out = s->in;
	return n;
}

static bool write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return false;
		buf += n;
		len -= (size_t)n;
	}
	return true;
}

static void fail(struct blob_stream *s, struct archive *a)
{
	if (s->res.errnum)
		return;
	s->res.errnum = archive_errno(a) > 0 ? archive_errno(a) : EIO;
	snprintf(s->res.why, sizeof(s->res.why), "%s", archive_error_string(a) ? archive_error_string(a) : "read error");
}

/* Decompresses into the pipe until the data ends or the reader hangs up. */
static void pump(struct blob_stream *s, struct archive *a)
{
	struct archive_entry *e;
	int r = archive_read_next_header(a, &e);
	if (r == ARCHIVE_EOF)
		return;
	if (r < ARCHIVE_WARN)
		return fail(s, a);
	for (;;) {
		la_ssize_t n = archive_read_data(a, s->out, OUT_CHUNK);
		if (n == 0)
			return;
		if (n < 0)
			return fail(s, a);
		if (s->tar_h)
			kiwi_hasher_update(s->tar_h, s->out, (size_t)n);
		/* EPIPE: the extractor is done (end of archive, or an error). */
		if (!write_all(s->pipe_w, s->out, (size_t)n))
			return;
	}
}

static void *run(void *arg)
{
	struct blob_stream *s = arg;
	/* A write to the closed pipe must fail with EPIPE, not kill us. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	struct archive *a = archive_read_new();
	if (!a) {
		s->res.errnum = ENOMEM;
	} else {
		/* raw: the filter's output as one entry, whatever it holds. */
		archive_read_support_format_raw(a);
		archive_read_support_format_empty(a); /* a 0-byte blob */
		if (s->comp == KIWI_LAYER_GZIP)
			archive_read_support_filter_gzip(a);
		else if (s->comp == KIWI_LAYER_ZSTD)
			archive_read_support_filter_zstd(a);
		if (archive_read_open(a, s, NULL, blob_read, NULL) != ARCHIVE_OK)
			fail(s, a);
		else
			pump(s, a);
	}
	close(s->pipe_w);
	s->pipe_w = -1;
	/* Hash what was not needed (padding, trailers, or all of it after an
	 * error) so the digest covers the whole blob. */
	const void *buf;
	while (!s->res.too_long && blob_read(NULL, s, &buf) > 0)
		;
	archive_read_free(a);
	return NULL;
}

struct blob_stream *blob_stream_start(int blob_fd, enum kiwi_layer_compression comp,
				      kiwi_hasher *h, kiwi_hasher *tar_h, int64_t size,
				      kiwi_err *err)
{
	struct blob_stream *s = calloc(1, sizeof(*s));
	int p[2] = { -1, -1 };
	if (!s || !(s->in = malloc(READ_CHUNK)) || !(s->out = malloc(OUT_CHUNK)) ||
	    pipe2(p, O_CLOEXEC) < 0) {
		kiwi_error(err, errno ? errno : ENOMEM, "unpack", "cannot set up the layer reader");
		goto fail;
	}
	s->blob_fd = blob_fd;
	s->comp = comp;
	s->h = h;
	s->tar_h = tar_h;
	s->size = size;
	s->pipe_r = p[0];
	s->pipe_w = p[1];
	(void)fcntl(p[1], F_SETPIPE_SZ, 1 << 20); /* fewer switches between the two sides */
	(void)posix_fadvise(blob_fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	int e = pthread_create(&s->thread, NULL, run, s);
	if (e) {
		kiwi_error(err, e, "unpack", "cannot start the decompression thread");
		goto fail;
	}
	return s;
fail:
	if (p[0] >= 0) {
		close(p[0]);
		close(p[1]);
	}
	if (s) {
		free(s->in);
		free(s->out);
		free(s);
	}
	return NULL;
}

int blob_stream_fd(const struct blob_stream *s)
{
	return s->pipe_r;
}

int blob_stream_drain(struct blob_stream *s, uint64_t max)
{
	/* Not s->out: the thread is still writing from it. */
	char buf[64U << 10];
	uint64_t total = 0;
	for (;;) {
		ssize_t n = read(s->pipe_r, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return (int)n;
		total += (uint64_t)n;
		if (total > max) {
			errno = EFBIG;
			return -1;
		}
	}
}

uint64_t blob_stream_count(const struct blob_stream *s)
{
	return __atomic_load_n(&s->count, __ATOMIC_RELAXED);
}

void blob_stream_finish(struct blob_stream *s, struct blob_stream_result *res)
{
	close(s->pipe_r);
	pthread_join(s->thread, NULL);
	*res = s->res;
	res->count = s->count;
	free(s->in);
	free(s->out);
	free(s);
}
