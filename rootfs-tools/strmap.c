/* SPDX-License-Identifier: Apache-2.0 */
#include "strmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

static struct strmap_slot *probe(const struct strmap_slot *slots, size_t cap, const char *key)
{
	size_t i = hash(key) & (cap - 1);
	while (slots[i].key && strcmp(slots[i].key, key))
		i = (i + 1) & (cap - 1);
	return (struct strmap_slot *)&slots[i];
}

static bool grow(struct strmap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 256;
	struct strmap_slot *slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return false;
	for (size_t i = 0; i < m->cap; i++)
		if (m->slots[i].key)
			*probe(slots, cap, m->slots[i].key) = m->slots[i];
	free(m->slots);
	m->slots = slots;
	m->cap = cap;
	return true;
}

struct strmap_slot *strmap_find(const struct strmap *m, const char *key)
{
	if (!m->cap)
		return NULL;
	struct strmap_slot *s = probe(m->slots, m->cap, key);
	return s->key ? s : NULL;
}

struct strmap_slot *strmap_put(struct strmap *m, const char *key, bool *added)
{
	/* Keep the load under one half so probe chains stay short. */
	if ((m->n + 1) * 2 > m->cap && !grow(m))
		return NULL;
	struct strmap_slot *s = probe(m->slots, m->cap, key);
	*added = !s->key;
	if (!s->key) {
		s->key = strdup(key);
		if (!s->key)
			return NULL;
		s->val = NULL;
		m->n++;
	}
	return s;
}

void strmap_clear(struct strmap *m, bool free_vals)
{
	for (size_t i = 0; i < m->cap; i++) {
		free(m->slots[i].key);
		if (free_vals)
			free(m->slots[i].val);
	}
	free(m->slots);
	m->slots = NULL;
	m->cap = m->n = 0;
}
