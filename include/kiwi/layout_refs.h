/* SPDX-License-Identifier: Apache-2.0 */
/* What an OCI image layout names (src/session/layout_refs.c): the
 * digests its index.json names, through its indexes and manifests (OCI's
 * and Docker's), at any depth. `kiwi-run gc` removes a dead snapshot's
 * blob only when nothing names it. The layout is read through a callback,
 * so that the walk is fuzzed without a filesystem. */
#ifndef KIWI_LAYOUT_REFS_H
#define KIWI_LAYOUT_REFS_H

#include <stdbool.h>
#include <stddef.h>

struct kiwi_layout_refs {
	char **v;
	size_t n, cap;
	unsigned reads;
};

/* Reads path ("index.json", or "blobs/<alg>/<encoded>" of a digest in
 * OCI's form): 0 with *text (malloc'd) of *len bytes; 1: it is missing;
 * -1: it cannot be read. */
typedef int (*kiwi_layout_read_fn)(void *ctx, const char *path, char **text, size_t *len);

/* Fills r (empty before; kiwi_layout_refs_clear after, either way). -1:
 * an index or manifest could not be read or parsed, or the layout nests
 * deeper or names more than the walk's bounds: what it names is not
 * known. A missing index.json names nothing. */
int kiwi_layout_refs_read(kiwi_layout_read_fn read, void *ctx, struct kiwi_layout_refs *r);
bool kiwi_layout_refs_has(const struct kiwi_layout_refs *r, const char *digest);
void kiwi_layout_refs_clear(struct kiwi_layout_refs *r);

/* alg:encoded as OCI writes them, so that blobs/<alg>/<encoded> is a
 * path below blobs/ and nothing else. Pure code: fuzzed. */
bool kiwi_layout_digest_form(const char *digest);

#endif
