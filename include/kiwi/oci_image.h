/* SPDX-License-Identifier: Apache-2.0 */
/* OCI images: reading an image layout (or an oci-archive tarball of one),
 * choosing a manifest by tag, digest and platform, unpacking its layers
 * safely (see kiwi/layer.h), packing a directory into a layout, and the
 * cache of read-only unpacked roots that kiwi-run uses as lower layers.
 *
 * References: "PATH", "PATH:TAG", "PATH@sha256:HEX". PATH is a layout
 * directory or an oci-archive (.tar of a layout). */
#ifndef KIWI_OCI_IMAGE_H
#define KIWI_OCI_IMAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "kiwi/digest.h"
#include "kiwi/err.h"
#include "kiwi/json.h"
#include "kiwi/layer.h"

#define KIWI_OCI_REF_ANNOTATION "org.opencontainers.image.ref.name"
#define KIWI_OCI_DEFAULT_PLATFORM "linux/amd64"

struct kiwi_descriptor {
	char *media_type;
	char digest[KIWI_DIGEST_MAX];
	int64_t size;
};

/* The run-time defaults an image carries; arrays are NULL-terminated,
 * NULL when the image does not set them. */
struct kiwi_image_config {
	char **env;
	char **entrypoint;
	char **cmd;
	char *working_dir;
	char *user;
	char *os;
	char *architecture;
};

struct kiwi_image {
	struct kiwi_descriptor manifest;
	struct kiwi_descriptor config_desc;
	struct kiwi_descriptor *layers;
	size_t n_layers;
	struct kiwi_image_config config;
	/* The config's rootfs.diff_ids, one per layer, in layer order: the
	 * digests of the uncompressed tars, checked while unpacking. */
	char (*diff_ids)[KIWI_DIGEST_MAX];
	char *manifest_json; /* verified raw bytes */
	char *config_json;
};

struct kiwi_image_ref {
	char *path;
	char *tag;    /* NULL when not given */
	char *digest; /* NULL when not given */
};

int kiwi_image_ref_parse(const char *s, struct kiwi_image_ref *ref, kiwi_err *err);
void kiwi_image_ref_clear(struct kiwi_image_ref *ref);

/* Reads oci-layout and index.json under layout_fd, follows nested indexes
 * (verified, depth-bounded, cycles refused) and loads the chosen manifest
 * and config. platform is "os/arch[/variant]", NULL for the default. */
int kiwi_image_load(int layout_fd, const char *tag, const char *digest, const char *platform,
		    struct kiwi_image *img, kiwi_err *err);
void kiwi_image_clear(struct kiwi_image *img);
void kiwi_image_config_clear(struct kiwi_image_config *cfg);

/* Parses an image config blob's run-time defaults. */
int kiwi_image_config_parse(const kiwi_json *root, struct kiwi_image_config *cfg, kiwi_err *err);

/* Parses an image config's rootfs: type "layers" and exactly n_layers
 * well-formed diff_ids. *out (caller frees) holds them in layer order. */
int kiwi_image_diff_ids_parse(const kiwi_json *root, size_t n_layers,
			      char (**out)[KIWI_DIGEST_MAX], kiwi_err *err);

/* An opened reference: the layout directory, extracted to a scratch
 * directory first when the reference names an oci-archive. */
struct kiwi_layout {
	int fd;
	char *scratch; /* the scratch directory to remove, or NULL */
};

int kiwi_layout_open(const char *path, const struct kiwi_extract_opts *xo, struct kiwi_layout *l,
		     kiwi_err *err);
void kiwi_layout_close(struct kiwi_layout *l);

/* NULL wherever a struct kiwi_unpack_opts is taken means all defaults. */
struct kiwi_unpack_opts {
	struct kiwi_extract_opts extract;
	const char *platform;
	struct kiwi_extract_stats *stats; /* filled when not NULL */
};

/* Unpacks ref into dest, which must not exist (an empty directory is
 * replaced). Works in a scratch directory beside dest and renames it into
 * place at the end: on failure nothing is left. img may be NULL. */
int kiwi_image_unpack(const char *ref, const char *dest, const struct kiwi_unpack_opts *o,
		      struct kiwi_image *img, kiwi_err *err);

/* ---- the cache ---- */

/* /var/lib/kiwi/images for root, else $XDG_CACHE_HOME/kiwi/images
 * (~/.cache/kiwi/images). Caller frees. */
char *kiwi_image_cache_default(void);

/* For kiwi-run --image: makes sure ref is unpacked in cache_dir (NULL for
 * the default), keyed by manifest digest, doing the work once even when
 * several processes ask at the same time (an unpack with
 * keep_capabilities is a separate entry). Returns the read-only rootfs path
 * in *rootfs_out (caller frees) and the image's run-time defaults in *cfg.
 * When pin_fd is not NULL it receives a descriptor holding a shared lock
 * that keeps `gc` away from the entry; close it when the sandbox is gone. */
int kiwi_image_ensure_unpacked(const char *ref, const char *cache_dir,
			       const struct kiwi_unpack_opts *o, char **rootfs_out,
			       struct kiwi_image_config *cfg, int *pin_fd, kiwi_err *err);

struct kiwi_gc_stats {
	unsigned removed;
	unsigned kept;
	unsigned busy;
};

/* Removes cache entries not used for older_than seconds and not pinned,
 * and scratch directories of interrupted unpacks. */
int kiwi_image_cache_gc(const char *cache_dir, int64_t older_than, struct kiwi_gc_stats *st,
			kiwi_err *err);

/* Writes / reads the image.json kept beside a cached rootfs. */
int kiwi_image_config_save(int dir_fd, const char *name, const char *manifest_digest,
			   const struct kiwi_image_config *cfg, kiwi_err *err);
int kiwi_image_config_load(const char *path, struct kiwi_image_config *cfg, kiwi_err *err);

/* ---- packing ---- */

struct kiwi_pack_opts {
	char **entrypoint;     /* NULL-terminated or NULL */
	char **cmd;
	char **env;
	const char *working_dir;
	const char *user;
	bool reproducible;     /* fixed mtimes (SOURCE_DATE_EPOCH or 0), no names */
	enum kiwi_layer_compression compression;
	const char *platform;  /* NULL: linux/amd64 */
};

/* Packs dir into a one-layer image in the layout at ref's path (created if
 * missing), tagged with ref's tag. Writes the manifest digest to digest_out
 * (KIWI_DIGEST_MAX bytes) when not NULL. */
int kiwi_image_pack(const char *dir, const char *ref, const struct kiwi_pack_opts *o,
		    char *digest_out, kiwi_err *err);

/* ---- snapshots: overlay upper directories as one more layer ---- */

/* One line of an id map (/proc/PID/uid_map): inside, outside, count. */
struct kiwi_id_range {
	int64_t inside, outside, count;
};

/* The ids the image gets for the host's: a rootless session's files are
 * its owner's on the host and root's inside. */
struct kiwi_image_idmap {
	const struct kiwi_id_range *uids, *gids;
	size_t n_uids, n_gids;
};

/* A directory placed in a layer at prefix ("" for the root). */
struct kiwi_layer_tree {
	int dir_fd;
	const char *prefix;
};

/* The manifest annotation that says what a snapshot goes on: "image" (its
 * config lists the base's layers, then the snapshot's), or "rootfs" (the
 * layer alone, over the --rootfs DIR given to `session create --from`). */
#define KIWI_SNAPSHOT_BASE_ANNOTATION "run.kiwi.snapshot.base"

struct kiwi_snapshot_opts {
	const struct kiwi_layer_tree *trees;  /* overlayfs upper directories, read through these fds only */
	size_t n_trees;
	const struct kiwi_image_idmap *ids;         /* NULL: ids as they are */
	const char *base;                     /* the image below (a reference); NULL: the layer alone */
	enum kiwi_layer_compression compression;
	/* NULL, or a tag for the scratch files it makes in the layout
	 * (.tmp-<scratch>-...), by which `kiwi-run gc` finds what a writer
	 * killed midway left. */
	const char *scratch;
};

struct kiwi_snapshot_result {
	struct kiwi_descriptor layer;         /* media_type NULL */
	char diff_id[KIWI_DIGEST_MAX];
	char manifest[KIWI_DIGEST_MAX];
};

/* Writes the trees as one layer (an overlay whiteout, a 0:0 character
 * device, becomes .wh.NAME, an opaque directory .wh..wh..opq; overlayfs's
 * own xattrs are dropped; owners, modes, other xattrs and hardlinks are
 * kept) into the layout at ref's path (made if missing), on top of base's
 * layers and config, tagged with ref's tag. A layout this call made is
 * removed on failure; the blobs of one it did not are left for gc. */
int kiwi_image_snapshot(const char *ref, const struct kiwi_snapshot_opts *o, struct kiwi_snapshot_result *out,
			kiwi_err *err);

/* A snapshot's layer, as the restore needs it: the caller opens the blob
 * (as itself, before any sandbox exists) and says what it must be. */
struct kiwi_snapshot_layer {
	char media_type[128];
	char digest[KIWI_DIGEST_MAX];
	int64_t size;
	char diff_id[KIWI_DIGEST_MAX];
};

/* Checks that ref is a snapshot and its layer's blob has its digest;
 * *base gets its kind ("image", "rootfs"), *layer (may be NULL) that layer. */
int kiwi_image_snapshot_check(const char *ref, const char **base, struct kiwi_snapshot_layer *layer, kiwi_err *err);
/* Applies the snapshot layer read from blob (checked against l as it is
 * read) below root_fd in one pass, each entry moved by map
 * (kiwi_extract_opts) into an overlayfs upper directory, in overlayfs's
 * form (kiwi_extract_opts' overlay). Resolves no path outside root_fd. */
int kiwi_image_snapshot_restore(const struct kiwi_snapshot_layer *l, int blob, int root_fd,
				const struct kiwi_extract_map *map, size_t n_map, kiwi_err *err);

/* Describes an image as JSON: manifest, config, layers, sizes. */
int kiwi_image_describe(const struct kiwi_image *img, kiwi_json_writer *w, kiwi_err *err);

#endif
