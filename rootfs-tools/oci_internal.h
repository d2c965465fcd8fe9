/* SPDX-License-Identifier: Apache-2.0 */
/* Shared between the unpack, cache and pack modules of rootfs-tools. */
#ifndef KIWI_ROOTFS_OCI_INTERNAL_H
#define KIWI_ROOTFS_OCI_INTERNAL_H

#include "kiwi/oci_image.h"

/* Extracts every layer of img (blobs under layout_fd) into root_fd and
 * applies the deferred directory metadata. */
int kiwi_oci_extract_image(int layout_fd, const struct kiwi_image *img, int root_fd,
			   const struct kiwi_unpack_opts *o, kiwi_err *err);

/* Opens ref's layout and loads its image. */
int kiwi_oci_open_ref(const char *ref, const struct kiwi_unpack_opts *o, struct kiwi_layout *l,
		      struct kiwi_image *img, kiwi_err *err);

/* mkdir -p with mode for the directories it creates. */
int kiwi_oci_mkdir_p(const char *path, mode_t mode, kiwi_err *err);

/* Splits path into its directory (opened, O_PATH) and last component. */
int kiwi_oci_open_parent(const char *path, char **base, kiwi_err *err);

/* Writes key: [v...]; when v is NULL, key: null or nothing at all. */
void kiwi_oci_write_strv(kiwi_json_writer *w, const char *key, char **v, bool null_if_unset);

/* ---- oci_pack.c, shared with oci_snapshot.c ---- */

struct kiwi_layer_write_opts {
	enum kiwi_layer_compression compression;
	bool reproducible;             /* fixed mtimes (SOURCE_DATE_EPOCH or 0) */
	bool upper;                    /* the trees are overlayfs upper directories */
	const struct kiwi_image_idmap *ids;  /* NULL: ids as they are */
	/* No fsync of the layer: a snapshot is checked against its digest
	 * whenever it is read, so one a crash cut short is refused, not
	 * trusted; the wait for the disk would double its time. */
	bool no_sync;
	/* NULL, or the writer's scratch tag: its scratch files are named
	 * .tmp-<scratch>-..., which `kiwi-run gc` removes once the writer's
	 * record is unlocked (kiwi-run-session(1)). */
	const char *scratch;
};

/* The name of a scratch file: .tmp-<scratch>-<what> with a tag, else
 * <fallback>. */
void kiwi_oci_scratch_name(char *out, size_t len, const char *scratch, const char *what, const char *fallback);

/* Writes the trees as one layer into blobs_fd in one pass: *layer is the
 * blob's descriptor (no media type), diff_id (KIWI_DIGEST_MAX bytes) the
 * digest of the uncompressed tar. */
int kiwi_oci_write_layer(int blobs_fd, const struct kiwi_layer_tree *trees, size_t n,
			 const struct kiwi_layer_write_opts *o, struct kiwi_descriptor *layer,
			 char *diff_id, kiwi_err *err);
void kiwi_oci_emit_descriptor(kiwi_json_writer *w, const char *media_type, const struct kiwi_descriptor *d);
/* An image manifest: config, then base's layers (base NULL: none), then
 * layer; with annotation, one annotation of value. */
void kiwi_oci_emit_manifest(kiwi_json_writer *w, const struct kiwi_descriptor *config, const struct kiwi_image *base,
			    const char *layer_media_type, const struct kiwi_descriptor *layer, const char *annotation,
			    const char *value);
/* A config's "rootfs" (the base's diff_ids, then diff_id) and "history"
 * (the base's entries, then one of created_by); base NULL: none. */
void kiwi_oci_emit_layers(kiwi_json_writer *w, const struct kiwi_image *base, const kiwi_json *base_history,
			  const char *diff_id, const char *created, const char *created_by);
const char *kiwi_oci_layer_media_type(enum kiwi_layer_compression c);
/* Stores the writer's text as a blob (scratch: as in kiwi_layer_write_opts). */
int kiwi_oci_store_json(int blobs_fd, kiwi_json_writer *w, const char *scratch, struct kiwi_descriptor *d,
			kiwi_err *err);
/* <pid>-<64 random bits>: a name no other writer picks, in any pid
 * namespace. */
void kiwi_oci_unique(char *out, size_t len);
/* flock(op) on the directory name under dir_fd (a layout gains no file
 * for its locks); the lock goes when the returned fd is closed. */
int kiwi_oci_lock_dir(int dir_fd, const char *name, int op, kiwi_err *err);
/* A writer's shared lock on the layout's blobs/ directory, held from
 * before its first blob until index.json names them: `kiwi-run gc` takes
 * it exclusively (without waiting) before it removes a blob a killed
 * snapshot left unnamed, so that it never removes one a live writer is
 * about to name (blobs are content-addressed: two writers may make the
 * same one). */
int kiwi_oci_lock_writer(int layout_fd, kiwi_err *err);
/* Renames tmp to name in dir_fd. With a scratch tag, first links the
 * marker .tmp-<scratch>-blob-<name> to the same inode: the writer's claim
 * on the blob, should it die before index.json names it (`kiwi-run gc`
 * removes the blob if it is still that inode and nothing references it).
 * -1 with errno set. */
int kiwi_oci_commit_name(int dir_fd, const char *tmp, const char *name, const char *scratch);
/* Removes the writer's marker of digest's blob (once index.json is
 * written, or the write failed); nothing without a scratch tag. */
void kiwi_oci_drop_marker(int layout_fd, const char *scratch, const char *digest);
/* Rewrites index.json with every entry but the one tagged tag, then m,
 * under the layout's lock (flock on its directory, exclusive). */
int kiwi_oci_update_index(int layout_fd, const char *tag, const struct kiwi_descriptor *m,
			  const char *os, const char *arch, const char *scratch, kiwi_err *err);
/* A layout this writer made, after its write failed: removed whole, as if
 * never made, unless another writer has tagged into it (index.json) or is
 * writing it (its lock, kiwi_oci_lock_writer, is held). */
void kiwi_oci_remove_created(const char *path);
/* Makes the layout at path (and blobs/sha256, oci-layout) if missing;
 * *created says whether path itself was made. Returns its fd. */
int kiwi_oci_prepare_layout(const char *path, bool *created, kiwi_err *err);

#endif
