/* SPDX-License-Identifier: Apache-2.0 */
/* The compressed side of a layer, private to rootfs-tools: a thread reads
 * the blob, hashes and counts it (stopping at the first byte past the
 * descriptor's size), decompresses it with libarchive's gzip/zstd filters,
 * hashes the tar stream it writes into a pipe (the diff_id), and the
 * extractor reads the pipe. Inflating and creating files use two cores. */
#ifndef KIWI_ROOTFS_BLOB_STREAM_H
#define KIWI_ROOTFS_BLOB_STREAM_H

#include <stdbool.h>
#include <stdint.h>

#include "kiwi/digest.h"
#include "kiwi/layer.h"

struct blob_stream;

/* h (may be NULL) is fed every byte of the blob; size < 0: no bound.
 * tar_h (may be NULL) is fed every byte of the decompressed stream, in
 * the thread, before the byte enters the pipe: it is complete once the
 * reader has seen the end of the pipe (blob_stream_drain). */
struct blob_stream *blob_stream_start(int blob_fd, enum kiwi_layer_compression comp,
				      kiwi_hasher *h, kiwi_hasher *tar_h, int64_t size,
				      kiwi_err *err);
/* The read end of the tar stream. */
int blob_stream_fd(const struct blob_stream *s);
/* Compressed bytes read so far (safe to call while the thread runs). */
uint64_t blob_stream_count(const struct blob_stream *s);

/* Reads and discards what the extractor left in the pipe after the end of
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

/* Closes the tar side (the thread stops decompressing), lets the thread
 * hash the rest of the blob, joins it and frees s. */
void blob_stream_finish(struct blob_stream *s, struct blob_stream_result *res);

#endif
