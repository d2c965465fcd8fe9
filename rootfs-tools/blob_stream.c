/* SPDX-License-Identifier: Apache-2.0 */
#include "blob_stream.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#define CHUNK (1U << 20)
#define SLOTS 4

/* A bounded queue of CHUNK-sized buffers handed from one thread to the
 * next in order: no copy, no pipe. */
struct ring {
	unsigned char *buf[SLOTS];
	size_t len[SLOTS];
	unsigned head, tail, filled; /* head: next to fill; tail: next to take */
	bool eof;                   /* the producer is done: nothing more after filled */
};

struct blob_stream {
	int blob_fd;
	enum kiwi_layer_compression comp;
	kiwi_hasher *h;
	kiwi_hasher *tar_h;
	int64_t size;
	pthread_mutex_t lock;
	pthread_cond_t cond;   /* broadcast on every change of either ring or flag */
	struct ring in;        /* the blob, read and hashed (reader thread -> inflater) */
	struct ring out;       /* the tar stream (inflater -> extractor) */
	bool inflater_done;    /* it takes no more input: the reader only hashes */
	bool reader_gone;      /* the extractor stopped: the inflater stops */
	bool held;             /* the extractor holds out's tail slot */
	pthread_t reader, inflater;
	uint64_t count;        /* written by the reader, read atomically by progress */
	struct blob_stream_result res;
};

/* The first failure of either thread is the one told. */
__attribute__((format(printf, 3, 4))) static void set_error(struct blob_stream *s, int errnum, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	pthread_mutex_lock(&s->lock);
	if (!s->res.errnum) {
		s->res.errnum = errnum;
		vsnprintf(s->res.why, sizeof(s->res.why), fmt, ap);
	}
	pthread_mutex_unlock(&s->lock);
	va_end(ap);
}

/* Producer side: waits for a free slot; NULL once stop says so. */
static unsigned char *ring_claim(struct blob_stream *s, struct ring *r, const bool *stop)
{
	pthread_mutex_lock(&s->lock);
	while (r->filled == SLOTS && !*stop)
		pthread_cond_wait(&s->cond, &s->lock);
	unsigned char *b = *stop ? NULL : r->buf[r->head];
	pthread_mutex_unlock(&s->lock);
	return b;
}

static void ring_publish(struct blob_stream *s, struct ring *r, size_t len)
{
	pthread_mutex_lock(&s->lock);
	r->len[r->head] = len;
	r->head = (r->head + 1) % SLOTS;
	r->filled++;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

static void ring_end(struct blob_stream *s, struct ring *r)
{
	pthread_mutex_lock(&s->lock);
	r->eof = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

/* Consumer side: waits for a filled slot; false at the end (or on stop). */
static bool ring_take(struct blob_stream *s, struct ring *r, const bool *stop, const unsigned char **buf,
		      size_t *len)
{
	pthread_mutex_lock(&s->lock);
	while (!r->filled && !r->eof && !(stop && *stop))
		pthread_cond_wait(&s->cond, &s->lock);
	bool ok = r->filled && !(stop && *stop);
	if (ok) {
		*buf = r->buf[r->tail];
		*len = r->len[r->tail];
	}
	pthread_mutex_unlock(&s->lock);
	return ok;
}

static void ring_release(struct blob_stream *s, struct ring *r)
{
	pthread_mutex_lock(&s->lock);
	r->tail = (r->tail + 1) % SLOTS;
	r->filled--;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

/* Reads one chunk into buf, hashes and counts it: its length, 0 at the
 * end, -1 on an error or a byte past the descriptor's size. */
static ssize_t read_chunk(struct blob_stream *s, unsigned char *buf)
{
	ssize_t n;
	do
		n = read(s->blob_fd, buf, CHUNK);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		set_error(s, errno, "%s", "cannot read the blob");
		return -1;
	}
	uint64_t count = __atomic_add_fetch(&s->count, (uint64_t)n, __ATOMIC_RELAXED);
	if (s->h)
		kiwi_hasher_update(s->h, buf, (size_t)n);
	if (s->size >= 0 && count > (uint64_t)s->size) {
		s->res.too_long = true; /* read by finish, after the join */
		set_error(s, EFBIG, "%s", "the blob is longer than its descriptor says");
		return -1;
	}
	return n;
}

/* The reader: each chunk of the blob is hashed, then inflated from the
 * same buffer, so no rewrite of the file between two reads could part
 * what is checked from what is unpacked. Once the inflater is done (the
 * end of the data, or an error), the rest is hashed all the same so the
 * digest covers the whole blob. */
static void *reader_main(void *arg)
{
	struct blob_stream *s = arg;
	unsigned char *spare = NULL;
	for (;;) {
		unsigned char *b = ring_claim(s, &s->in, &s->inflater_done);
		if (!b && !spare && !(spare = malloc(CHUNK))) {
			set_error(s, ENOMEM, "%s", "cannot hash the blob");
			break;
		}
		ssize_t n = read_chunk(s, b ? b : spare);
		if (n <= 0)
			break;
		if (b)
			ring_publish(s, &s->in, (size_t)n);
	}
	ring_end(s, &s->in);
	free(spare);
	return NULL;
}

/* Hands a filled output chunk to the extractor, after hashing it for the
 * diff_id. */
static void emit(struct blob_stream *s, unsigned char *b, size_t len)
{
	if (s->tar_h)
		kiwi_hasher_update(s->tar_h, b, len);
	ring_publish(s, &s->out, len);
}

/* zstd, with libzstd directly: it inflates into the extractor's buffers. */
static void inflate_zstd(struct blob_stream *s, const unsigned char *first, size_t first_len)
{
	ZSTD_DStream *z = ZSTD_createDStream();
	if (!z) {
		set_error(s, ENOMEM, "%s", "cannot set up zstd");
		return;
	}
	const unsigned char *src = first;
	size_t src_len = first_len, ret = 0;
	ZSTD_outBuffer out = { .size = CHUNK };
	do {
		ZSTD_inBuffer in = { .src = src, .size = src_len };
		bool full; /* a full output may leave more inside zstd: call again */
		do {
			if (!out.dst && !(out.dst = ring_claim(s, &s->out, &s->reader_gone)))
				goto done;
			ret = ZSTD_decompressStream(z, &out, &in);
			if (ZSTD_isError(ret)) {
				set_error(s, EINVAL, "Zstd decompression failed: %s", ZSTD_getErrorName(ret));
				goto done;
			}
			full = out.pos == out.size;
			if (full) {
				emit(s, out.dst, out.pos);
				out = (ZSTD_outBuffer){ .size = CHUNK };
			}
		} while (in.pos < in.size || full);
		ring_release(s, &s->in);
	} while (ring_take(s, &s->in, NULL, &src, &src_len));
	if (out.dst && out.pos)
		emit(s, out.dst, out.pos);
	if (ret) /* a frame begun and not ended */
		set_error(s, EINVAL, "%s", "Truncated zstd input");
done:
	ZSTD_freeDStream(z);
}

/* libarchive's read callback over the input ring; first: the chunk the
 * inflater already took to look at. */
struct feed {
	struct blob_stream *s;
	const unsigned char *first;
	size_t first_len;
	bool held;
};

static la_ssize_t feed_read(struct archive *a, void *arg, const void **buf)
{
	(void)a;
	struct feed *f = arg;
	size_t len = f->first_len;
	if (f->first) {
		*buf = f->first;
		f->first = NULL;
		return (la_ssize_t)len;
	}
	if (f->held)
		ring_release(f->s, &f->s->in);
	f->held = ring_take(f->s, &f->s->in, NULL, (const unsigned char **)buf, &len);
	return f->held ? (la_ssize_t)len : 0;
}

static void fail(struct blob_stream *s, struct archive *a)
{
	set_error(s, archive_errno(a) > 0 ? archive_errno(a) : EIO, "%s",
		  archive_error_string(a) ? archive_error_string(a) : "read error");
}

/* gzip, an uncompressed tar, or a "zstd" layer that is no zstd (read raw,
 * as libarchive always did): libarchive's filters, the filter's output as
 * one raw entry. */
static void inflate_archive(struct blob_stream *s, const unsigned char *first, size_t first_len)
{
	struct feed f = { .s = s, .first = first, .first_len = first_len, .held = true };
	struct archive *a = archive_read_new();
	if (!a) {
		set_error(s, ENOMEM, "%s", "cannot set up the decompressor");
		return;
	}
	archive_read_support_format_raw(a);
	archive_read_support_format_empty(a); /* a 0-byte blob */
	if (s->comp == KIWI_LAYER_GZIP)
		archive_read_support_filter_gzip(a);
	else if (s->comp == KIWI_LAYER_ZSTD)
		archive_read_support_filter_zstd(a);
	struct archive_entry *e;
	int r = archive_read_open(a, &f, NULL, feed_read, NULL);
	if (r == ARCHIVE_OK)
		r = archive_read_next_header(a, &e);
	if (r != ARCHIVE_OK && r != ARCHIVE_EOF && r != ARCHIVE_WARN)
		fail(s, a);
	while (r == ARCHIVE_OK || r == ARCHIVE_WARN) {
		unsigned char *b = ring_claim(s, &s->out, &s->reader_gone);
		la_ssize_t n = b ? archive_read_data(a, b, CHUNK) : 0;
		if (n < 0)
			fail(s, a);
		if (n <= 0)
			break;
		emit(s, b, (size_t)n);
	}
	archive_read_free(a);
}

static void *inflater_main(void *arg)
{
	struct blob_stream *s = arg;
	const unsigned char *first;
	size_t len;
	if (ring_take(s, &s->in, NULL, &first, &len)) {
		/* The zstd frame's magic number, little-endian. */
		bool zstd = s->comp == KIWI_LAYER_ZSTD && len >= 4 && first[0] == 0x28 && first[1] == 0xb5 &&
			    first[2] == 0x2f && first[3] == 0xfd;
		if (zstd)
			inflate_zstd(s, first, len);
		else
			inflate_archive(s, first, len);
	}
	ring_end(s, &s->out);
	pthread_mutex_lock(&s->lock);
	s->inflater_done = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

static void free_stream(struct blob_stream *s)
{
	for (int i = 0; i < SLOTS; i++) {
		free(s->in.buf[i]);
		free(s->out.buf[i]);
	}
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

struct blob_stream *blob_stream_start(int blob_fd, enum kiwi_layer_compression comp,
				      kiwi_hasher *h, kiwi_hasher *tar_h, int64_t size,
				      kiwi_err *err)
{
	struct blob_stream *s = calloc(1, sizeof(*s));
	if (!s) {
		kiwi_error(err, ENOMEM, "unpack", "cannot set up the layer reader");
		return NULL;
	}
	s->blob_fd = blob_fd;
	s->comp = comp;
	s->h = h;
	s->tar_h = tar_h;
	s->size = size;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	for (int i = 0; i < SLOTS; i++)
		if (!(s->in.buf[i] = malloc(CHUNK)) || !(s->out.buf[i] = malloc(CHUNK))) {
			free_stream(s);
			kiwi_error(err, ENOMEM, "unpack", "cannot set up the layer reader");
			return NULL;
		}
	(void)posix_fadvise(blob_fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	int e = pthread_create(&s->reader, NULL, reader_main, s);
	if (e) {
		free_stream(s);
		kiwi_error(err, e, "unpack", "cannot start the layer reader thread");
		return NULL;
	}
	e = pthread_create(&s->inflater, NULL, inflater_main, s);
	if (e) {
		pthread_mutex_lock(&s->lock);
		s->inflater_done = true;
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
		pthread_join(s->reader, NULL);
		free_stream(s);
		kiwi_error(err, e, "unpack", "cannot start the decompression thread");
		return NULL;
	}
	return s;
}

la_ssize_t blob_stream_read(struct archive *a, void *arg, const void **buf)
{
	(void)a;
	struct blob_stream *s = arg;
	if (s->held)
		ring_release(s, &s->out);
	size_t len;
	s->held = ring_take(s, &s->out, NULL, (const unsigned char **)buf, &len);
	return s->held ? (la_ssize_t)len : 0;
}

int blob_stream_drain(struct blob_stream *s, uint64_t max)
{
	uint64_t total = 0;
	const void *buf;
	for (;;) {
		la_ssize_t n = blob_stream_read(NULL, s, &buf);
		if (n == 0)
			return 0;
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
	pthread_mutex_lock(&s->lock);
	s->reader_gone = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->inflater, NULL);
	pthread_join(s->reader, NULL);
	*res = s->res;
	res->count = s->count;
	free_stream(s);
}
