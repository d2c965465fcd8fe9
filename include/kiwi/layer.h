/* SPDX-License-Identifier: Apache-2.0 */
/* Safe extraction of OCI layers (tar, tar+gzip, tar+zstd) into a directory.
 *
 * Every path is resolved from the destination with openat2(RESOLVE_IN_ROOT |
 * RESOLVE_NO_MAGICLINKS), or an equivalent walk where openat2 is missing,
 * so symlinks, including ones planted by an earlier layer, resolve inside
 * the destination as they will at run time; final components are never
 * followed. Names climbing out with `..`, absolute
 * names and whiteouts of `.`/`..` are refused naming the layer and entry.
 * The blob is hashed as libarchive reads it and checked against its
 * descriptor at the end, so nothing is trusted that was not verified: the
 * caller extracts into a scratch directory and discards it on failure. */
#ifndef KIWI_LAYER_H
#define KIWI_LAYER_H

#include <stdbool.h>
#include <stdint.h>

#include "kiwi/err.h"

#define KIWI_LAYER_DEFAULT_MAX_SIZE (8ULL << 30)
#define KIWI_LAYER_DEFAULT_MAX_ENTRIES 4000000ULL

enum kiwi_layer_compression {
	KIWI_LAYER_TAR,
	KIWI_LAYER_GZIP,
	KIWI_LAYER_ZSTD,
};

struct kiwi_extract_stats {
	uint64_t entries;
	uint64_t bytes;            /* file data written */
	uint64_t blob_bytes;       /* compressed bytes read and verified */
	uint64_t devices_skipped;  /* device nodes not created (no CAP_MKNOD) */
	uint64_t owners_skipped;   /* entries whose owner could not be applied */
	uint64_t xattrs_skipped;   /* security.* (and others) not restored */
	unsigned layers;
};

typedef void (*kiwi_extract_progress)(void *arg, const struct kiwi_extract_stats *st);

struct kiwi_extract_map {
	const char *from, *to;    /* cleaned paths, "" for the root */
};

struct kiwi_extract_opts {
	uint64_t max_size;         /* bound on file data, all layers together */
	uint64_t max_entries;      /* bound on entries, all layers together */
	bool keep_capabilities;    /* restore security.capability xattrs */
	bool plain;                /* a plain tar (oci-archive): no whiteouts */
	kiwi_extract_progress progress; /* called every few MiB, may be NULL */
	void *progress_arg;
	/* Into an overlayfs upper directory (a session's restore,
	 * kiwi/fslayer.h): a whiteout becomes a 0:0 character device and an
	 * opaque marker its directory's user.overlay.opaque=y, where an
	 * unpack removes what lower layers put there; overlayfs's own
	 * xattrs in the layer are never restored. */
	bool overlay;
	/* Where entries go: one at or below map[i].from moves to map[i].to
	 * instead (the longest from wins; "" matches every entry); one no
	 * from matches is passed over. n_map 0: every entry where it is. */
	const struct kiwi_extract_map *map;
	size_t n_map;
	/* Checked before each entry: a signal handler sets it to stop early
	 * (the caller then removes the scratch directory). May be NULL. */
	const volatile int *cancel;
};

/* Returns the compression for a layer media type, or -1 when unsupported. */
int kiwi_layer_compression_of(const char *media_type);

typedef struct kiwi_extract kiwi_extract;

/* root_fd stays owned by the caller and must outlive the extractor. */
kiwi_extract *kiwi_extract_new(int root_fd, const struct kiwi_extract_opts *opts);
void kiwi_extract_free(kiwi_extract *x);

/* Applies one layer read from blob_fd. digest/size are the descriptor's
 * (digest NULL skips verification: only for archives already verified).
 * diff_id, when not NULL, is the image config's digest of the uncompressed
 * tar, checked over the whole decompressed stream; a layer that does not
 * match fails (the caller then removes what it extracted).
 * label names the layer in errors ("layer 2/3 sha256:ab12..."). */
int kiwi_extract_layer(kiwi_extract *x, int blob_fd, enum kiwi_layer_compression comp,
		       const char *digest, int64_t size, const char *diff_id, const char *label,
		       kiwi_err *err);

/* Sets directory modes and mtimes, deferred so that later entries could be
 * written into them and did not disturb them. Call once, after the last layer. */
int kiwi_extract_finish(kiwi_extract *x, kiwi_err *err);

const struct kiwi_extract_stats *kiwi_extract_get_stats(const kiwi_extract *x);

/* Removes path (relative to dir_fd, never following symlinks) and, for a
 * directory, everything below it. ENOENT is not an error. */
int kiwi_remove_tree_at(int dir_fd, const char *name, kiwi_err *err);

static inline void kiwi_extract_freep(kiwi_extract **x)
{
	kiwi_extract_free(*x);
}
#define _cleanup_extract_ __attribute__((cleanup(kiwi_extract_freep)))

#endif
