/* SPDX-License-Identifier: Apache-2.0 */
/* What an OCI image layout names (kiwi/layout_refs.h): every descriptor
 * of its index.json and, in turn, of each index and manifest it names. */
#include "kiwi/layout_refs.h"
#include "kiwi/cleanup.h"
#include "kiwi/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bounds on what a hostile layout can make the walk do. */
#define MAX_DEPTH 8
#define MAX_READS 4096

void kiwi_layout_refs_clear(struct kiwi_layout_refs *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->v[i]);
	free(r->v);
	*r = (struct kiwi_layout_refs){ 0 };
}

bool kiwi_layout_refs_has(const struct kiwi_layout_refs *r, const char *digest)
{
	for (size_t i = 0; i < r->n; i++)
		if (!strcmp(r->v[i], digest))
			return true;
	return false;
}

static int refs_add(struct kiwi_layout_refs *r, const char *digest)
{
	if (kiwi_layout_refs_has(r, digest))
		return 0;
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 16;
		char **v = realloc(r->v, cap * sizeof(*v));
		if (!v)
			return -1;
		r->v = v;
		r->cap = cap;
	}
	if (!(r->v[r->n] = strdup(digest)))
		return -1;
	r->n++;
	return 0;
}

bool kiwi_layout_digest_form(const char *d)
{
	const char *colon = strchr(d, ':');
	size_t alg = colon ? (size_t)(colon - d) : 0;
	return alg && alg < 32 && strspn(d, "abcdefghijklmnopqrstuvwxyz0123456789+._-") == alg && d[0] != '.' &&
	       colon[1] && strlen(colon + 1) < 256 &&
	       strspn(colon + 1, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789=_-") ==
		       strlen(colon + 1);
}

struct walk {
	kiwi_layout_read_fn read;
	void *ctx;
	struct kiwi_layout_refs *r;
};

static int walk_file(struct walk *w, const char *path, int depth);

/* Every descriptor in j (an object with a "digest"), at any depth, is a
 * reference; an index's or a manifest's blob is read in turn. -1: one
 * could not be, so what the layout names is not known. */
static int walk_json(struct walk *w, const kiwi_json *j, int depth)
{
	const char *d = kiwi_json_string(kiwi_json_get(j, "digest"));
	const char *mt = kiwi_json_string(kiwi_json_get(j, "mediaType"));
	if (d && refs_add(w->r, d) < 0)
		return -1;
	if (d && mt && (strstr(mt, "manifest") || strstr(mt, "index"))) {
		char path[320];
		if (!kiwi_layout_digest_form(d))
			return -1;
		snprintf(path, sizeof(path), "blobs/%.*s/%s", (int)(strchr(d, ':') - d), d, strchr(d, ':') + 1);
		if (walk_file(w, path, depth + 1) < 0)
			return -1;
	}
	for (size_t i = 0; i < kiwi_json_len(j); i++)
		if (walk_json(w, kiwi_json_at(j, i), depth) < 0)
			return -1;
	return 0;
}

/* index.json (missing: it names nothing) or a blob, bounded in depth and
 * in count. */
static int walk_file(struct walk *w, const char *path, int depth)
{
	if (depth > MAX_DEPTH || ++w->r->reads > MAX_READS)
		return -1;
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int got = w->read(w->ctx, path, &text, &len);
	if (got != 0)
		return got == 1 && depth == 0 ? 0 : -1;
	_cleanup_json_ kiwi_json *j = kiwi_json_parse(text, len, NULL);
	return j ? walk_json(w, j, depth) : -1;
}

int kiwi_layout_refs_read(kiwi_layout_read_fn read, void *ctx, struct kiwi_layout_refs *r)
{
	struct walk w = { .read = read, .ctx = ctx, .r = r };
	return walk_file(&w, "index.json", 0);
}
