/* SPDX-License-Identifier: Apache-2.0 */
/* Image layouts: references, index walking, manifest and config parsing. */
#include "kiwi/oci_image.h"
#include "kiwi/cleanup.h"
#include "oci_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#define MAX_INDEX_BYTES (4U << 20)
#define MAX_MANIFEST_BYTES (4U << 20)
#define MAX_CONFIG_BYTES (8U << 20)
#define MAX_INDEX_DEPTH 8
#define MAX_CANDIDATES 4096
#define MAX_LAYERS 1024

#define MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"

static bool is_index_type(const char *mt)
{
	return mt && (!strcmp(mt, MT_OCI_INDEX) || !strcmp(mt, MT_DOCKER_LIST));
}

static bool is_manifest_type(const char *mt)
{
	return mt && (!strcmp(mt, MT_OCI_MANIFEST) || !strcmp(mt, MT_DOCKER_MANIFEST));
}

int kiwi_image_ref_parse(const char *s, struct kiwi_image_ref *ref, kiwi_err *err)
{
	*ref = (struct kiwi_image_ref){ 0 };
	if (!s || !*s)
		return kiwi_error(err, EINVAL, "ref", "empty image reference");
	_cleanup_free_ char *copy = strdup(s);
	if (!copy)
		return kiwi_error(err, ENOMEM, "ref", "cannot copy `%s`", s);
	char *base = strrchr(copy, '/');
	base = base ? base + 1 : copy;
	char *at = strchr(base, '@');
	char *colon = at ? NULL : strrchr(base, ':');
	if (at) {
		*at = '\0';
		enum kiwi_digest_alg alg;
		if (kiwi_digest_parse(at + 1, &alg, NULL, err) < 0)
			return kiwi_error_wrap(err, "reference `%s`", s);
		ref->digest = strdup(at + 1);
	} else if (colon) {
		*colon = '\0';
		if (!colon[1])
			return kiwi_error(err, EINVAL, "ref", "reference `%s` has an empty tag", s);
		ref->tag = strdup(colon + 1);
	}
	if (!copy[0]) {
		kiwi_image_ref_clear(ref);
		return kiwi_error(err, EINVAL, "ref", "reference `%s` has no path", s);
	}
	ref->path = TAKE_PTR(copy);
	if ((at && !ref->digest) || (colon && !ref->tag)) {
		kiwi_image_ref_clear(ref);
		return kiwi_error(err, ENOMEM, "ref", "cannot parse `%s`", s);
	}
	return 0;
}

void kiwi_image_ref_clear(struct kiwi_image_ref *ref)
{
	free(ref->path);
	free(ref->tag);
	free(ref->digest);
	*ref = (struct kiwi_image_ref){ 0 };
}

static char **strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
	return NULL;
}

void kiwi_image_config_clear(struct kiwi_image_config *c)
{
	strv_free(c->env);
	strv_free(c->entrypoint);
	strv_free(c->cmd);
	free(c->working_dir);
	free(c->user);
	free(c->os);
	free(c->architecture);
	*c = (struct kiwi_image_config){ 0 };
}

void kiwi_image_clear(struct kiwi_image *img)
{
	free(img->manifest.media_type);
	free(img->config_desc.media_type);
	for (size_t i = 0; i < img->n_layers; i++)
		free(img->layers[i].media_type);
	free(img->layers);
	free(img->diff_ids);
	kiwi_image_config_clear(&img->config);
	free(img->manifest_json);
	free(img->config_json);
	*img = (struct kiwi_image){ 0 };
}

static int parse_descriptor(const kiwi_json *j, const char *what, struct kiwi_descriptor *d,
			    kiwi_err *err)
{
	const char *mt = kiwi_json_string(kiwi_json_get(j, "mediaType"));
	const char *digest = kiwi_json_string(kiwi_json_get(j, "digest"));
	long long size;
	if (kiwi_json_type_of(j) != KIWI_JSON_OBJECT || !mt || !digest ||
	    !kiwi_json_int(kiwi_json_get(j, "size"), &size) || size < 0)
		return kiwi_error(err, EINVAL, "manifest",
				  "%s is not a descriptor with mediaType, digest and size", what);
	enum kiwi_digest_alg alg;
	if (kiwi_digest_parse(digest, &alg, NULL, err) < 0)
		return kiwi_error_wrap(err, "%s", what);
	d->media_type = strdup(mt);
	if (!d->media_type)
		return kiwi_error(err, ENOMEM, "manifest", "cannot copy %s", what);
	snprintf(d->digest, sizeof(d->digest), "%s", digest);
	d->size = size;
	return 0;
}

/* A manifest reachable from index.json, with what was said about it on
 * the way: the ref name (its own or an enclosing index's), its platform
 * and the digests of the indexes it was found through. */
struct candidate {
	struct kiwi_descriptor d;
	const char *ref;
	char platform[128];
	char via[MAX_INDEX_DEPTH][KIWI_DIGEST_MAX];
	unsigned depth;
};

struct walk {
	int layout_fd;
	struct candidate *c;
	size_t n;
	char path[MAX_INDEX_DEPTH][KIWI_DIGEST_MAX];
	kiwi_json *docs[MAX_INDEX_DEPTH + 1]; /* kept alive: candidates point into them */
	size_t n_docs;
};

static void platform_of(const kiwi_json *desc, char *out, size_t len)
{
	const kiwi_json *p = kiwi_json_get(desc, "platform");
	const char *os = kiwi_json_string(kiwi_json_get(p, "os"));
	const char *arch = kiwi_json_string(kiwi_json_get(p, "architecture"));
	const char *variant = kiwi_json_string(kiwi_json_get(p, "variant"));
	if (!os || !arch)
		out[0] = '\0';
	else
		snprintf(out, len, "%s/%s%s%s", os, arch, variant ? "/" : "", variant ? variant : "");
}

static int walk_index(struct walk *w, const kiwi_json *index, unsigned depth, const char *ref,
		      kiwi_err *err);

static int walk_nested(struct walk *w, const struct kiwi_descriptor *d, unsigned depth,
		       const char *ref, kiwi_err *err)
{
	if (depth >= MAX_INDEX_DEPTH)
		return kiwi_error(err, ELOOP, "index", "indexes nest deeper than %d at %s",
				  MAX_INDEX_DEPTH, d->digest);
	for (unsigned i = 0; i < depth; i++)
		if (!strcmp(w->path[i], d->digest))
			return kiwi_error(err, ELOOP, "index", "index %s includes itself", d->digest);
	_cleanup_free_ char *text = NULL;
	size_t len;
	if (kiwi_blob_read(w->layout_fd, d->digest, d->size, MAX_INDEX_BYTES, &text, &len, err) < 0)
		return kiwi_error_wrap(err, "nested index");
	kiwi_json *doc = kiwi_json_parse(text, len, err);
	if (!doc)
		return kiwi_error_wrap(err, "index %s", d->digest);
	if (w->n_docs >= KIWI_ARRAY_SIZE(w->docs)) {
		kiwi_json_free(doc);
		return kiwi_error(err, E2BIG, "index", "too many nested indexes");
	}
	w->docs[w->n_docs++] = doc;
	snprintf(w->path[depth], sizeof(w->path[depth]), "%s", d->digest);
	return walk_index(w, doc, depth + 1, ref, err);
}

static int walk_index(struct walk *w, const kiwi_json *index, unsigned depth, const char *ref,
		      kiwi_err *err)
{
	const kiwi_json *list = kiwi_json_get(index, "manifests");
	if (kiwi_json_type_of(list) != KIWI_JSON_ARRAY)
		return kiwi_error(err, EINVAL, "index", "the index has no `manifests` array");
	for (size_t i = 0; i < kiwi_json_len(list); i++) {
		const kiwi_json *dj = kiwi_json_at(list, i);
		struct kiwi_descriptor d = { 0 };
		if (parse_descriptor(dj, "an index entry", &d, err) < 0)
			return -1;
		const char *own = kiwi_json_string(
			kiwi_json_get(kiwi_json_get(dj, "annotations"), KIWI_OCI_REF_ANNOTATION));
		const char *r = own ? own : ref;
		int rc = 0;
		if (is_index_type(d.media_type)) {
			rc = walk_nested(w, &d, depth, r, err);
			free(d.media_type);
		} else if (is_manifest_type(d.media_type) && w->n < MAX_CANDIDATES) {
			struct candidate *c = &w->c[w->n++];
			*c = (struct candidate){ .d = d, .ref = r, .depth = depth };
			platform_of(dj, c->platform, sizeof(c->platform));
			memcpy(c->via, w->path, sizeof(c->via));
		} else {
			free(d.media_type); /* attestations, artifacts: not images */
			if (w->n >= MAX_CANDIDATES)
				rc = kiwi_error(err, E2BIG, "index", "more than %d manifests", MAX_CANDIDATES);
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}

static bool platform_matches(const char *have, const char *want)
{
	size_t wl = strlen(want);
	/* "linux/arm64" accepts any variant; "linux/arm/v7" only that one. */
	return !have[0] || (!strncmp(have, want, wl) && (have[wl] == '\0' || have[wl] == '/'));
}

static bool candidate_wanted(const struct candidate *c, const char *tag, const char *digest)
{
	if (tag && (!c->ref || strcmp(c->ref, tag)))
		return false;
	if (!digest || !strcmp(c->d.digest, digest))
		return true;
	for (unsigned i = 0; i < c->depth; i++)
		if (!strcmp(c->via[i], digest))
			return true;
	return false;
}

static int choose(struct walk *w, const char *tag, const char *digest, const char *platform,
		  struct kiwi_descriptor *out, kiwi_err *err)
{
	const struct candidate *pick = NULL;
	size_t named = 0;
	char tags[256] = "";
	for (size_t i = 0; i < w->n; i++) {
		const struct candidate *c = &w->c[i];
		if (c->ref && strlen(tags) + strlen(c->ref) + 3 < sizeof(tags) && !strstr(tags, c->ref))
			snprintf(tags + strlen(tags), sizeof(tags) - strlen(tags), "%s%s",
				 tags[0] ? ", " : "", c->ref);
		if (!candidate_wanted(c, tag, digest))
			continue;
		named++;
		if (!platform_matches(c->platform, platform))
			continue;
		if (pick && strcmp(pick->d.digest, c->d.digest))
			return kiwi_error(err, EINVAL, "select",
					  "the layout holds several %s images; name one with :TAG or @DIGEST (tags: %s)",
					  platform, tags[0] ? tags : "none");
		pick = c;
	}
	if (!pick && !named)
		return kiwi_error(err, ENOENT, "select", "no image %s%s in the layout (tags: %s)",
				  tag ? "tagged " : "", tag ? tag : digest ? digest : "at all",
				  tags[0] ? tags : "none");
	if (!pick)
		return kiwi_error(err, ENOENT, "select", "no image for platform %s (try --platform)", platform);
	*out = pick->d;
	out->media_type = strdup(pick->d.media_type);
	return out->media_type ? 0 : kiwi_error(err, ENOMEM, "select", "out of memory");
}

static int read_layout_file(int layout_fd, const char *name, size_t max, kiwi_json **out,
			    kiwi_err *err)
{
	_cleanup_close_ int fd = openat(layout_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return kiwi_error(err, errno, "layout", "cannot open `%s` (is this an OCI image layout?)", name);
	_cleanup_free_ char *text = NULL;
	size_t len;
	if (kiwi_read_bounded(fd, max, name, &text, &len, err) < 0)
		return -1;
	*out = kiwi_json_parse(text, len, err);
	return *out ? 0 : kiwi_error_wrap(err, "`%s`", name);
}

static int select_manifest(int layout_fd, const char *tag, const char *digest, const char *platform,
			   struct kiwi_descriptor *out, kiwi_err *err)
{
	_cleanup_json_ kiwi_json *layout = NULL;
	if (read_layout_file(layout_fd, "oci-layout", 4096, &layout, err) < 0)
		return -1;
	const char *ver = kiwi_json_string(kiwi_json_get(layout, "imageLayoutVersion"));
	if (!ver || strncmp(ver, "1.", 2))
		return kiwi_error(err, ENOTSUP, "layout", "unsupported imageLayoutVersion `%s`",
				  ver ? ver : "(missing)");
	struct walk w = { .layout_fd = layout_fd };
	w.c = calloc(MAX_CANDIDATES, sizeof(*w.c));
	if (!w.c)
		return kiwi_error(err, ENOMEM, "index", "out of memory");
	int rc = read_layout_file(layout_fd, "index.json", MAX_INDEX_BYTES, &w.docs[0], err);
	if (rc == 0) {
		w.n_docs = 1;
		rc = walk_index(&w, w.docs[0], 0, NULL, err);
	}
	if (rc == 0)
		rc = choose(&w, tag, digest, platform ? platform : KIWI_OCI_DEFAULT_PLATFORM, out, err);
	for (size_t i = 0; i < w.n; i++)
		free(w.c[i].d.media_type);
	for (size_t i = 0; i < w.n_docs; i++)
		kiwi_json_free(w.docs[i]);
	free(w.c);
	return rc;
}

static int strv_from_json(const kiwi_json *j, const char *what, char ***out, kiwi_err *err)
{
	*out = NULL;
	if (!j || kiwi_json_type_of(j) == KIWI_JSON_NULL)
		return 0;
	if (kiwi_json_type_of(j) != KIWI_JSON_ARRAY)
		return kiwi_error(err, EINVAL, "config", "`%s` is not an array", what);
	size_t n = kiwi_json_len(j);
	char **v = calloc(n + 1, sizeof(*v));
	if (!v)
		return kiwi_error(err, ENOMEM, "config", "out of memory for `%s`", what);
	for (size_t i = 0; i < n; i++) {
		const char *s = kiwi_json_string(kiwi_json_at(j, i));
		if (!s || !(v[i] = strdup(s))) {
			strv_free(v);
			return kiwi_error(err, EINVAL, "config", "`%s` holds a non-string", what);
		}
	}
	*out = v;
	return 0;
}

static int str_from_json(const kiwi_json *j, const char *what, char **out, kiwi_err *err)
{
	*out = NULL;
	if (!j || kiwi_json_type_of(j) == KIWI_JSON_NULL)
		return 0;
	const char *s = kiwi_json_string(j);
	if (!s)
		return kiwi_error(err, EINVAL, "config", "`%s` is not a string", what);
	*out = strdup(s);
	return *out ? 0 : kiwi_error(err, ENOMEM, "config", "out of memory");
}

int kiwi_image_config_parse(const kiwi_json *root, struct kiwi_image_config *cfg, kiwi_err *err)
{
	*cfg = (struct kiwi_image_config){ 0 };
	if (kiwi_json_type_of(root) != KIWI_JSON_OBJECT)
		return kiwi_error(err, EINVAL, "config", "the image config is not an object");
	const kiwi_json *c = kiwi_json_get(root, "config");
	if (c && kiwi_json_type_of(c) != KIWI_JSON_OBJECT && kiwi_json_type_of(c) != KIWI_JSON_NULL)
		return kiwi_error(err, EINVAL, "config", "`config` is not an object");
	if (strv_from_json(kiwi_json_get(c, "Env"), "Env", &cfg->env, err) < 0 ||
	    strv_from_json(kiwi_json_get(c, "Entrypoint"), "Entrypoint", &cfg->entrypoint, err) < 0 ||
	    strv_from_json(kiwi_json_get(c, "Cmd"), "Cmd", &cfg->cmd, err) < 0 ||
	    str_from_json(kiwi_json_get(c, "WorkingDir"), "WorkingDir", &cfg->working_dir, err) < 0 ||
	    str_from_json(kiwi_json_get(c, "User"), "User", &cfg->user, err) < 0 ||
	    str_from_json(kiwi_json_get(root, "os"), "os", &cfg->os, err) < 0 ||
	    str_from_json(kiwi_json_get(root, "architecture"), "architecture", &cfg->architecture, err) < 0) {
		kiwi_image_config_clear(cfg);
		return -1;
	}
	return 0;
}

int kiwi_image_diff_ids_parse(const kiwi_json *root, size_t n_layers,
			      char (**out)[KIWI_DIGEST_MAX], kiwi_err *err)
{
	*out = NULL;
	const kiwi_json *rootfs = kiwi_json_get(root, "rootfs");
	const char *type = kiwi_json_string(kiwi_json_get(rootfs, "type"));
	const kiwi_json *ids = kiwi_json_get(rootfs, "diff_ids");
	if (!type || strcmp(type, "layers") || kiwi_json_type_of(ids) != KIWI_JSON_ARRAY)
		return kiwi_error(err, EINVAL, "config",
				  "`rootfs` is not an object with type \"layers\" and a `diff_ids` array");
	if (kiwi_json_len(ids) != n_layers)
		return kiwi_error(err, EINVAL, "config", "`rootfs.diff_ids` has %zu entries for %zu layers",
				  kiwi_json_len(ids), n_layers);
	char (*v)[KIWI_DIGEST_MAX] = calloc(n_layers + 1, sizeof(*v));
	if (!v)
		return kiwi_error(err, ENOMEM, "config", "out of memory");
	for (size_t i = 0; i < n_layers; i++) {
		const char *id = kiwi_json_string(kiwi_json_at(ids, i));
		enum kiwi_digest_alg alg;
		if (!id || kiwi_digest_parse(id, &alg, NULL, err) < 0) {
			free(v);
			if (!id)
				return kiwi_error(err, EINVAL, "config", "diff_id of layer %zu is not a string", i + 1);
			return kiwi_error_wrap(err, "diff_id of layer %zu", i + 1);
		}
		snprintf(v[i], sizeof(v[i]), "%s", id);
	}
	*out = v;
	return 0;
}

static int parse_manifest(struct kiwi_image *img, const kiwi_json *m, kiwi_err *err)
{
	long long schema;
	if (!kiwi_json_int(kiwi_json_get(m, "schemaVersion"), &schema) || schema != 2)
		return kiwi_error(err, EINVAL, "manifest", "schemaVersion is not 2");
	const char *mt = kiwi_json_string(kiwi_json_get(m, "mediaType"));
	if (mt && !is_manifest_type(mt))
		return kiwi_error(err, EINVAL, "manifest", "mediaType `%s` is not an image manifest", mt);
	if (parse_descriptor(kiwi_json_get(m, "config"), "the config descriptor", &img->config_desc, err) < 0)
		return -1;
	const kiwi_json *layers = kiwi_json_get(m, "layers");
	size_t n = kiwi_json_len(layers);
	if (kiwi_json_type_of(layers) != KIWI_JSON_ARRAY || n > MAX_LAYERS)
		return kiwi_error(err, EINVAL, "manifest", "`layers` is not an array of at most %d", MAX_LAYERS);
	img->layers = calloc(n + 1, sizeof(*img->layers));
	if (!img->layers)
		return kiwi_error(err, ENOMEM, "manifest", "out of memory");
	for (size_t i = 0; i < n; i++) {
		char what[48];
		snprintf(what, sizeof(what), "layer %zu", i + 1);
		if (parse_descriptor(kiwi_json_at(layers, i), what, &img->layers[i], err) < 0)
			return -1;
		img->n_layers++;
		if (kiwi_layer_compression_of(img->layers[i].media_type) < 0)
			return kiwi_error(err, ENOTSUP, "manifest", "layer %zu has unsupported media type `%s`",
					  i + 1, img->layers[i].media_type);
	}
	return 0;
}

int kiwi_image_load(int layout_fd, const char *tag, const char *digest, const char *platform,
		    struct kiwi_image *img, kiwi_err *err)
{
	*img = (struct kiwi_image){ 0 };
	if (select_manifest(layout_fd, tag, digest, platform, &img->manifest, err) < 0)
		return -1;
	size_t len;
	int rc = kiwi_blob_read(layout_fd, img->manifest.digest, img->manifest.size,
				MAX_MANIFEST_BYTES, &img->manifest_json, &len, err);
	_cleanup_json_ kiwi_json *m = rc < 0 ? NULL : kiwi_json_parse(img->manifest_json, len, err);
	if (!m || parse_manifest(img, m, err) < 0) {
		kiwi_error_wrap(err, "manifest %s", img->manifest.digest);
		kiwi_image_clear(img);
		return -1;
	}
	rc = kiwi_blob_read(layout_fd, img->config_desc.digest, img->config_desc.size,
			    MAX_CONFIG_BYTES, &img->config_json, &len, err);
	_cleanup_json_ kiwi_json *c = rc < 0 ? NULL : kiwi_json_parse(img->config_json, len, err);
	if (!c || kiwi_image_config_parse(c, &img->config, err) < 0 ||
	    kiwi_image_diff_ids_parse(c, img->n_layers, &img->diff_ids, err) < 0) {
		kiwi_error_wrap(err, "config %s", img->config_desc.digest);
		kiwi_image_clear(img);
		return -1;
	}
	return 0;
}

void kiwi_oci_write_strv(kiwi_json_writer *w, const char *key, char **v, bool null_if_unset)
{
	if (!v && !null_if_unset)
		return;
	kiwi_jw_key(w, key);
	if (!v) {
		kiwi_jw_null(w);
		return;
	}
	kiwi_jw_open_array(w);
	for (size_t i = 0; v[i]; i++)
		kiwi_jw_string(w, v[i]);
	kiwi_jw_close_array(w);
}

static void write_descriptor(kiwi_json_writer *w, const struct kiwi_descriptor *d)
{
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "mediaType");
	kiwi_jw_string(w, d->media_type);
	kiwi_jw_key(w, "digest");
	kiwi_jw_string(w, d->digest);
	kiwi_jw_key(w, "size");
	kiwi_jw_int(w, d->size);
	kiwi_jw_close_object(w);
}

/* The run-time defaults, as the keys of an image config's "config". */
static void write_config_fields(kiwi_json_writer *w, const struct kiwi_image_config *c)
{
	kiwi_oci_write_strv(w, "Env", c->env, true);
	kiwi_oci_write_strv(w, "Entrypoint", c->entrypoint, true);
	kiwi_oci_write_strv(w, "Cmd", c->cmd, true);
	kiwi_jw_key(w, "WorkingDir");
	kiwi_jw_string(w, c->working_dir);
	kiwi_jw_key(w, "User");
	kiwi_jw_string(w, c->user);
}

int kiwi_image_describe(const struct kiwi_image *img, kiwi_json_writer *w, kiwi_err *err)
{
	(void)err;
	int64_t total = img->config_desc.size;
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "manifest");
	write_descriptor(w, &img->manifest);
	kiwi_jw_key(w, "config");
	write_descriptor(w, &img->config_desc);
	kiwi_jw_key(w, "platform");
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "os");
	kiwi_jw_string(w, img->config.os);
	kiwi_jw_key(w, "architecture");
	kiwi_jw_string(w, img->config.architecture);
	kiwi_jw_close_object(w);
	kiwi_jw_key(w, "runtime");
	kiwi_jw_open_object(w);
	write_config_fields(w, &img->config);
	kiwi_jw_close_object(w);
	kiwi_jw_key(w, "layers");
	kiwi_jw_open_array(w);
	for (size_t i = 0; i < img->n_layers; i++) {
		write_descriptor(w, &img->layers[i]);
		total += img->layers[i].size;
	}
	kiwi_jw_close_array(w);
	kiwi_jw_key(w, "totalSize");
	kiwi_jw_int(w, total);
	kiwi_jw_close_object(w);
	return 0;
}

int kiwi_image_config_save(int dir_fd, const char *name, const char *manifest_digest,
			   const struct kiwi_image_config *cfg, kiwi_err *err)
{
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(true);
	if (!w)
		return kiwi_error(err, ENOMEM, "config", "cannot write `%s`", name);
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "manifest");
	kiwi_jw_string(w, manifest_digest);
	kiwi_jw_key(w, "os");
	kiwi_jw_string(w, cfg->os);
	kiwi_jw_key(w, "architecture");
	kiwi_jw_string(w, cfg->architecture);
	kiwi_jw_key(w, "config");
	kiwi_jw_open_object(w);
	write_config_fields(w, cfg);
	kiwi_jw_close_object(w);
	kiwi_jw_close_object(w);
	size_t len;
	const char *text = kiwi_jw_text(w, &len);
	_cleanup_close_ int fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
	if (fd < 0)
		return kiwi_error(err, errno, "config", "cannot create `%s`", name);
	if (write(fd, text, len) != (ssize_t)len)
		return kiwi_error(err, errno ? errno : EIO, "config", "cannot write `%s`", name);
	return 0;
}

int kiwi_image_config_load(const char *path, struct kiwi_image_config *cfg, kiwi_err *err)
{
	_cleanup_json_ kiwi_json *j = kiwi_json_parse_file(path, MAX_CONFIG_BYTES, err);
	if (!j)
		return -1;
	return kiwi_image_config_parse(j, cfg, err) < 0 ? kiwi_error_wrap(err, "`%s`", path) : 0;
}
