/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the registry's state-file parser (`kiwi-run list`
 * and `kill` read these files). Properties: never crashes; what it accepts
 * is within the documented ranges, every string is terminated, and writing
 * the entry out and parsing it again gives the same entry. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kiwi/registry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Field by field: the struct has padding that neither side sets. */
static int same(const struct kiwi_registry_entry *a, const struct kiwi_registry_entry *b)
{
	return !strcmp(a->id, b->id) && a->pid == b->pid && a->supervisor_pid == b->supervisor_pid &&
	       a->uid == b->uid && !strcmp(a->phase, b->phase) && !strcmp(a->cgroup, b->cgroup) &&
	       !strcmp(a->network, b->network) && !strcmp(a->command, b->command) &&
	       a->started_ns == b->started_ns;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kiwi_registry_entry e, again;
	kiwi_err err = { 0 };
	if (kiwi_registry_parse((const char *)data, size, &e, &err) < 0) {
		if (!err.msg[0])
			abort();
		return 0;
	}
	if (e.pid <= 0 || e.supervisor_pid <= 0 || e.started_ns < 0 || strlen(e.id) != KIWI_REGISTRY_ID_LEN ||
	    memchr(e.phase, 0, sizeof(e.phase)) == NULL || memchr(e.cgroup, 0, sizeof(e.cgroup)) == NULL ||
	    memchr(e.network, 0, sizeof(e.network)) == NULL || memchr(e.command, 0, sizeof(e.command)) == NULL)
		abort();
	char *text = kiwi_registry_format(&e);
	if (!text)
		return 0;
	if (kiwi_registry_parse(text, strlen(text), &again, &err) < 0 || !same(&e, &again))
		abort();
	free(text);
	return 0;
}
