/* SPDX-License-Identifier: Apache-2.0 */
/* The compressed side of a layer, private to rootfs-tools: one thread
 * reads the blob, hashes and counts it (stopping at the first byte past
 * the descriptor's size); a second inflates those same buffers (zstd with
 * libzstd, gzip through libarchive's filter) into the extractor's buffers
 * and hashes the tar stream (the diff_id); the extractor reads them as
 * libarchive's client buffers. Buffers pass between the three threads in
 * bounded rings, never copied through a pipe: hashing, inflating and
 * creating files share the cores with no copy of the tar in between. */
#ifndef KIWI_ROOTFS_BLOB_STREAM_H
#define KIWI_ROOTFS_BLOB_STREAM_H

#include <archive.h>
#include <stdbool.h>
#include <stdint.h>

#include "kiwi/digest.h"
#include "kiwi/layer.h"

struct blob_stream;

/* h (may be NULL) is fed every byte of the blob; size < 0: no bound.
 * tar_h (may be NULL) is fed every byte of the decompressed stream, in
 * the inflating thread, before the extractor sees the byte: it is complete
 * once the extractor has seen the end of the stream (blob_stream_drain). */
struct blob_stream *blob_stream_start(int blob_fd, enum kiwi_layer_compression comp,
				      kiwi_hasher *h, kiwi_hasher *tar_h, int64_t size,
				      kiwi_err *err);
/* libarchive's read callback (archive_read_open) over the tar stream,
 * arg the stream: a buffer valid until the next call, 0 at the end. */
la_ssize_t blob_stream_read(struct archive *a, void *arg, const void **buf);
/* Compressed bytes read so far (safe to call while the thread runs). */
uint64_t blob_stream_count(const struct blob_stream *s);

/* Reads and discards what the extractor left in the stream after the end of
 * the tar archive (its end blocks and padding), up to max bytes, so that
 * tar_h covers the whole stream. Returns 0 at the end of the stream, -1
 * with errno set (EFBIG: more than max bytes). */
int blob_stream_drain(struct blob_stream *s, uint64_t max);

struct blob_stream_result {
	bool too_long;     /* more bytes than the descriptor's size */
	int errnum;        /* reading or decompressing failed (0: fine) */
	char why[256];
	uint64_t count;    /* bytes read and hashed: the whole blob unless too_long */
};

/* Closes the tar side (the inflater stops), lets the reader hash the
 * rest of the blob, joins both threads and frees s. */
void blob_stream_finish(struct blob_stream *s, struct blob_stream_result *res);

#endif
