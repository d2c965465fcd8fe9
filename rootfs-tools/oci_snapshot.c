/* SPDX-License-Identifier: Apache-2.0 */
/* Session snapshots (kiwi-run-session(1)): a sandbox's overlay upper
 * directories as one more layer of an OCI image (kiwi/oci_image.h). */
#include "kiwi/cleanup.h"
#include "kiwi/oci_image.h"
#include "oci_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int copy_fd(int in, int out)
{
	for (;;) {
		ssize_t n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0);
		if (n == 0)
			return 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
	}
}

/* A base layer's blob in the new layout: already there, or the base's,
 * opened as every blob read is (kiwi_blob_open: no symlink on the way,
 * a regular file), then that inode linked (one filesystem) or copied
 * beside its name, and renamed into place (with the writer's marker:
 * kiwi_oci_commit_name). Its bytes were checked when the session was made
 * from the base; a restore checks every blob again. */
static int copy_blob(int from, int to, const char *digest, const char *scratch, kiwi_err *err)
{
	char dir[64], fallback[KIWI_DIGEST_MAX + 32], name[KIWI_DIGEST_MAX + 64], self[64];
	const char *hex = strchr(digest, ':') + 1;
	snprintf(dir, sizeof(dir), "blobs/%.*s", (int)(hex - 1 - digest), digest);
	if (mkdirat(to, dir, 0755) < 0 && errno != EEXIST)
		return kiwi_error(err, errno, "snapshot", "cannot make `%s` in the layout", dir);
	_cleanup_close_ int dir_fd = openat(to, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir_fd < 0)
		return kiwi_error(err, errno, "snapshot", "cannot open `%s` in the layout", dir);
	struct stat st;
	if (fstatat(dir_fd, hex, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
		return 0;
	_cleanup_close_ int in = kiwi_blob_open(from, digest, err);
	if (in < 0)
		return kiwi_error_wrap(err, "the base image");
	snprintf(fallback, sizeof(fallback), "%s.tmp-%d", hex, getpid());
	kiwi_oci_scratch_name(name, sizeof(name), scratch, hex, fallback);
	/* The inode opened and checked, never the name again: /proc's link
	 * to the fd (no /proc, another filesystem, or not the blob's owner
	 * under protected_hardlinks: a copy). */
	snprintf(self, sizeof(self), "/proc/self/fd/%d", in);
	if (linkat(AT_FDCWD, self, dir_fd, name, AT_SYMLINK_FOLLOW) < 0) {
		_cleanup_close_ int out = openat(dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
						 0644);
		if (out < 0 || copy_fd(in, out) < 0 || fsync(out) < 0)
			goto fail;
	}
	if (kiwi_oci_commit_name(dir_fd, name, hex, scratch) == 0)
		return 0;
fail:;
	int e = errno;
	unlinkat(dir_fd, name, 0);
	return kiwi_error(err, e, "snapshot", "cannot copy the base's blob %s", digest);
}

/* The base's config (everything it says, kept), its diff_ids and history
 * with the snapshot's appended; without a base, a config of the layer
 * alone. */
static void emit_config(kiwi_json_writer *w, const kiwi_json *base, const struct kiwi_image *img,
			const char *diff_id, const char *created)
{
	kiwi_jw_open_object(w);
	for (size_t i = 0; i < kiwi_json_len(base); i++) {
		const char *key = kiwi_json_key_at(base, i);
		if (key && strcmp(key, "rootfs") && strcmp(key, "history")) {
			kiwi_jw_key(w, key);
			kiwi_jw_value(w, kiwi_json_at(base, i));
		}
	}
	if (!base) {
		kiwi_jw_key(w, "created");
		kiwi_jw_string(w, created);
		kiwi_jw_key(w, "architecture");
		kiwi_jw_string(w, strchr(KIWI_OCI_DEFAULT_PLATFORM, '/') + 1);
		kiwi_jw_key(w, "os");
		kiwi_jw_string(w, "linux");
		kiwi_jw_key(w, "config");
		kiwi_jw_open_object(w);
		kiwi_jw_close_object(w);
	}
	kiwi_oci_emit_layers(w, img, kiwi_json_get(base, "history"), diff_id, created, "kiwi-run session snapshot");
	kiwi_jw_close_object(w);
}

/* Test only (kiwi-rootfs(1), ENVIRONMENT): the writer stops itself with
 * its blobs committed and index.json not yet written, so that a test can
 * kill it there. */
static void test_stop_point(void)
{
	const char *v = getenv("KIWI_ROOTFS_TEST_STOP_BEFORE_INDEX");
	if (v && !strcmp(v, "1"))
		raise(SIGSTOP);
}

/* The blobs written (the config and the manifest, then index.json). */
static int write_image(int layout_fd, int blobs_fd, const char *tag, const struct kiwi_snapshot_opts *o,
		       const struct kiwi_image *img, struct kiwi_descriptor *config, struct kiwi_descriptor *manifest,
		       struct kiwi_snapshot_result *out, kiwi_err *err)
{
	_cleanup_json_ kiwi_json *base = NULL;
	if (img && !(base = kiwi_json_parse(img->config_json, strlen(img->config_json), err)))
		return kiwi_error_wrap(err, "the base image's config");
	char created[40];
	time_t now = time(NULL);
	struct tm tm;
	strftime(created, sizeof(created), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
	_cleanup_jw_ kiwi_json_writer *cw = kiwi_jw_new(false);
	_cleanup_jw_ kiwi_json_writer *mw = kiwi_jw_new(false);
	if (!cw || !mw)
		return kiwi_error(err, ENOMEM, "snapshot", "out of memory");
	emit_config(cw, base, img, out->diff_id, created);
	if (kiwi_oci_store_json(blobs_fd, cw, o->scratch, config, err) < 0)
		return -1;
	kiwi_oci_emit_manifest(mw, config, img, kiwi_oci_layer_media_type(o->compression), &out->layer,
			       KIWI_SNAPSHOT_BASE_ANNOTATION, img ? "image" : "rootfs");
	const char *os = img && img->config.os ? img->config.os : "linux";
	const char *arch = img && img->config.architecture ? img->config.architecture
							   : strchr(KIWI_OCI_DEFAULT_PLATFORM, '/') + 1;
	if (kiwi_oci_store_json(blobs_fd, mw, o->scratch, manifest, err) < 0)
		return -1;
	test_stop_point();
	return kiwi_oci_update_index(layout_fd, tag, manifest, os, arch, o->scratch, err);
}

static int snapshot_into(int layout_fd, const char *tag, const struct kiwi_snapshot_opts *o,
			 const struct kiwi_layout *base_l, const struct kiwi_image *img,
			 struct kiwi_snapshot_result *out, kiwi_err *err)
{
	_cleanup_close_ int writing = kiwi_oci_lock_writer(layout_fd, err);
	if (writing < 0)
		return -1;
	_cleanup_close_ int blobs_fd = openat(layout_fd, "blobs/sha256", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (blobs_fd < 0)
		return kiwi_error(err, errno, "snapshot", "cannot open blobs/sha256");
	struct kiwi_descriptor config = { 0 }, manifest = { 0 };
	*out = (struct kiwi_snapshot_result){ 0 };
	const struct kiwi_layer_write_opts wo = { .compression = o->compression, .upper = true, .ids = o->ids,
						  .no_sync = true, .scratch = o->scratch };
	int rc = 0;
	for (size_t i = 0; rc == 0 && img && i < img->n_layers; i++)
		rc = copy_blob(base_l->fd, layout_fd, img->layers[i].digest, o->scratch, err);
	if (rc == 0)
		rc = kiwi_oci_write_layer(blobs_fd, o->trees, o->n_trees, &wo, &out->layer, out->diff_id, err);
	if (rc == 0)
		rc = write_image(layout_fd, blobs_fd, tag, o, img, &config, &manifest, out, err);
	/* index.json names them now: the writer's claims on its blobs go.
	 * A failed write keeps them, and kiwi-run its record, so that gc
	 * removes those blobs as a killed writer's. */
	if (rc < 0)
		return -1;
	for (size_t i = 0; img && i < img->n_layers; i++)
		kiwi_oci_drop_marker(layout_fd, o->scratch, img->layers[i].digest);
	kiwi_oci_drop_marker(layout_fd, o->scratch, out->layer.digest);
	kiwi_oci_drop_marker(layout_fd, o->scratch, config.digest);
	kiwi_oci_drop_marker(layout_fd, o->scratch, manifest.digest);
	memcpy(out->manifest, manifest.digest, KIWI_DIGEST_MAX);
	return 0;
}

int kiwi_image_snapshot(const char *ref, const struct kiwi_snapshot_opts *o, struct kiwi_snapshot_result *out,
			kiwi_err *err)
{
	struct kiwi_image_ref r;
	if (kiwi_image_ref_parse(ref, &r, err) < 0)
		return -1;
	int rc = -1;
	struct kiwi_layout base_l = { .fd = -1 };
	struct kiwi_image img = { 0 };
	const struct kiwi_unpack_opts uo = { 0 };
	bool created = false;
	int layout_fd = -1;
	if (r.digest)
		kiwi_error(err, EINVAL, "snapshot", "`%s`: a snapshot takes a tag, not a digest", ref);
	else if (!o->base || kiwi_oci_open_ref(o->base, &uo, &base_l, &img, err) == 0)
		layout_fd = kiwi_oci_prepare_layout(r.path, &created, err);
	if (layout_fd >= 0)
		rc = snapshot_into(layout_fd, r.tag ? r.tag : "latest", o, &base_l, o->base ? &img : NULL, out, err);
	if (layout_fd >= 0)
		close(layout_fd);
	if (rc < 0 && created)
		kiwi_oci_remove_created(r.path);
	if (o->base && base_l.fd >= 0) {
		kiwi_image_clear(&img);
		kiwi_layout_close(&base_l);
	}
	kiwi_image_ref_clear(&r);
	return rc;
}

/* ---- restoring ---- */

/* Which kind of snapshot the manifest says img is, or NULL: none of ours. */
static const char *snapshot_base(const struct kiwi_image *img)
{
	_cleanup_json_ kiwi_json *m = kiwi_json_parse(img->manifest_json, strlen(img->manifest_json), NULL);
	const char *base = kiwi_json_string(kiwi_json_get(kiwi_json_get(m, "annotations"),
							  KIWI_SNAPSHOT_BASE_ANNOTATION));
	return !base ? NULL : !strcmp(base, "image") ? "image" : !strcmp(base, "rootfs") ? "rootfs" : NULL;
}

/* Its size only: the digest is checked as the restore reads it (a blob
 * that fails there fails the create, which leaves nothing); hashing it
 * here as well cost 50 ms of a 300 ms restore of a 76 MiB blob. */
static int check_blob_size(int blob, const struct kiwi_descriptor *d, kiwi_err *err)
{
	struct stat st;
	if (fstat(blob, &st) < 0)
		return kiwi_error(err, errno, "snapshot", "cannot read the layer %s", d->digest);
	if (d->size >= 0 && st.st_size != d->size)
		return kiwi_error(err, EINVAL, "snapshot", "the layer %s holds %lld bytes, its descriptor says %lld: "
				  "refused", d->digest, (long long)st.st_size, (long long)d->size);
	return 0;
}

/* Opens ref, a snapshot: *base its kind, *blob its last layer's blob. */
static int open_snapshot(const char *ref, struct kiwi_layout *l, struct kiwi_image *img, const char **base,
			 int *blob, kiwi_err *err)
{
	const struct kiwi_unpack_opts uo = { 0 };
	if (kiwi_oci_open_ref(ref, &uo, l, img, err) < 0)
		return -1;
	*base = snapshot_base(img);
	if (!*base || !img->n_layers) {
		kiwi_image_clear(img);
		kiwi_layout_close(l);
		return kiwi_error(err, EINVAL, "snapshot", "`%s` is no snapshot of a kiwi-run session", ref);
	}
	*blob = kiwi_blob_open(l->fd, img->layers[img->n_layers - 1].digest, err);
	if (*blob < 0) {
		kiwi_image_clear(img);
		kiwi_layout_close(l);
		return kiwi_error_wrap(err, "snapshot `%s`", ref);
	}
	return 0;
}

int kiwi_image_snapshot_check(const char *ref, const char **base, struct kiwi_snapshot_layer *layer, kiwi_err *err)
{
	struct kiwi_layout l;
	struct kiwi_image img = { 0 };
	_cleanup_close_ int blob = -1;
	if (open_snapshot(ref, &l, &img, base, &blob, err) < 0)
		return -1;
	const struct kiwi_descriptor *d = &img.layers[img.n_layers - 1];
	int rc = check_blob_size(blob, d, err);
	if (rc < 0)
		kiwi_error_wrap(err, "snapshot `%s`", ref);
	else if (layer && snprintf(layer->media_type, sizeof(layer->media_type), "%s", d->media_type) >=
				  (int)sizeof(layer->media_type))
		rc = kiwi_error(err, EINVAL, "snapshot", "`%s`: the layer's media type is too long", ref);
	if (rc == 0 && layer) {
		memcpy(layer->digest, d->digest, sizeof(layer->digest));
		memcpy(layer->diff_id, img.diff_ids[img.n_layers - 1], sizeof(layer->diff_id));
		layer->size = d->size;
	}
	kiwi_image_clear(&img);
	kiwi_layout_close(&l);
	return rc;
}

int kiwi_image_snapshot_restore(const struct kiwi_snapshot_layer *l, int blob, int root_fd,
				const struct kiwi_extract_map *map, size_t n_map, kiwi_err *err)
{
	/* The blob's digest, checked as it is read, pins what is restored.
	 * The diff_id (the tar's digest) is a second claim of the same
	 * manifest's author and keys nothing here (no cache, unlike
	 * unpack's): not hashing the tar saves about a fifth of the CPU. */
	const struct kiwi_extract_opts o = { .overlay = true, .map = map, .n_map = n_map };
	kiwi_extract *x = kiwi_extract_new(root_fd, &o);
	int comp = kiwi_layer_compression_of(l->media_type);
	char label[96];
	snprintf(label, sizeof(label), "snapshot layer %.19s", l->digest);
	int rc = !x ? kiwi_error(err, ENOMEM, "snapshot", "out of memory")
	       : comp < 0 ? kiwi_error(err, EINVAL, "snapshot", "unknown layer type `%s`", l->media_type)
	       : kiwi_extract_layer(x, blob, (enum kiwi_layer_compression)comp, l->digest, l->size, NULL,
				    label, err);
	if (rc == 0)
		rc = kiwi_extract_finish(x, err);
	kiwi_extract_free(x);
	return rc;
}
