/* SPDX-License-Identifier: Apache-2.0 */
/* A string-keyed hash map (open addressing), private to rootfs-tools: the
 * extractor keeps one for paths touched by the current layer (whiteouts and
 * opaque directories only hide lower layers) and one for directory metadata
 * applied after the last layer. */
#ifndef KIWI_ROOTFS_STRMAP_H
#define KIWI_ROOTFS_STRMAP_H

#include <stdbool.h>
#include <stddef.h>

struct strmap_slot {
	char *key;
	void *val;
};

struct strmap {
	struct strmap_slot *slots;
	size_t cap; /* power of two, 0 before first insert */
	size_t n;
};

/* Returns the slot for key, inserting it (with val NULL) when absent;
 * NULL when out of memory. *added tells whether it is new. */
struct strmap_slot *strmap_put(struct strmap *m, const char *key, bool *added);
struct strmap_slot *strmap_find(const struct strmap *m, const char *key);
/* Frees keys and, when free_vals, values too; leaves m empty and reusable. */
void strmap_clear(struct strmap *m, bool free_vals);

#endif
