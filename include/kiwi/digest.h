/* SPDX-License-Identifier: Apache-2.0 */
/* OCI content digests ("sha256:<64 hex>", "sha512:<128 hex>"): parsing,
 * streaming computation through libcrypto's EVP, and verified reads of
 * content-addressed blobs. Nothing from an image is used before its digest
 * and size have been checked here. */
#ifndef KIWI_DIGEST_H
#define KIWI_DIGEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiwi/err.h"
#include "kiwi/fileio.h"

#define KIWI_DIGEST_MAX 136 /* "sha512:" + 128 hex + NUL, rounded up */

enum kiwi_digest_alg {
	KIWI_DIGEST_SHA256,
	KIWI_DIGEST_SHA512,
};

/* Checks the syntax of s ("alg:hex", lower-case hex of the right length).
 * On success fills *alg and, when hex is not NULL, points it at the hex. */
int kiwi_digest_parse(const char *s, enum kiwi_digest_alg *alg, const char **hex, kiwi_err *err);
const char *kiwi_digest_alg_name(enum kiwi_digest_alg alg);

/* A running hash that also counts bytes and enforces an upper bound. */
typedef struct kiwi_hasher kiwi_hasher;

kiwi_hasher *kiwi_hasher_new(enum kiwi_digest_alg alg);
void kiwi_hasher_free(kiwi_hasher *h);
void kiwi_hasher_update(kiwi_hasher *h, const void *buf, size_t len);
uint64_t kiwi_hasher_count(const kiwi_hasher *h);
/* Writes "alg:hex" into out (KIWI_DIGEST_MAX bytes). */
void kiwi_hasher_final(kiwi_hasher *h, char *out);

static inline void kiwi_hasher_freep(kiwi_hasher **h)
{
	kiwi_hasher_free(*h);
}
#define _cleanup_hasher_ __attribute__((cleanup(kiwi_hasher_freep)))

/* Opens blobs/<alg>/<hex> under the layout directory fd, refusing anything
 * but a regular file (no symlink may redirect a blob read). */
int kiwi_blob_open(int layout_fd, const char *digest, kiwi_err *err);

/* Reads a whole small blob (manifests, indexes, configs: at most max bytes),
 * checking its size against want_size (when >= 0) and its digest. The
 * result is NUL-terminated; *len excludes the NUL. */
int kiwi_blob_read(int layout_fd, const char *digest, int64_t want_size, size_t max,
		   char **out, size_t *len, kiwi_err *err);

/* Compares a finished hasher against the descriptor's digest and size. */
int kiwi_blob_check(kiwi_hasher *h, const char *digest, int64_t want_size, kiwi_err *err);


/* Digest of a memory buffer, "sha256:<hex>". */
void kiwi_digest_buf(enum kiwi_digest_alg alg, const void *buf, size_t len, char *out);

#endif
