/* SPDX-License-Identifier: Apache-2.0 */
/* config.json from a bundle: outside input that kiwi-run's OCI runtime
 * parses before it creates anything. Properties: a refusal always says
 * why (step and message), and an accepted config is consistent: every
 * array the parser hands on is NULL-terminated where it says so, and its
 * counts match. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kiwi/oci_config.h"

static void check(const struct kiwi_oci_config *c)
{
	if (!c->root_path || !c->oci_version)
		abort();
	if (c->has_process && (!c->process.args || !c->process.args[0] || !c->process.env || !c->process.cwd))
		abort();
	for (size_t i = 0; i < c->n_mounts; i++) {
		const struct kiwi_oci_mount *m = &c->mounts[i];
		if (!m->destination || m->destination[0] != '/' || !m->type || !m->data)
			abort();
		if (m->bind && !m->source)
			abort();
		for (char **d = m->data; *d; d++)
			if (!(*d)[0])
				abort();
	}
	for (size_t i = 0; i < c->n_sysctl; i++)
		if (!c->sysctl[2 * i] || !c->sysctl[2 * i + 1] || strchr(c->sysctl[2 * i], '/'))
			abort();
	for (size_t k = 0; k < KIWI_OCI_HOOK_KINDS; k++)
		for (size_t i = 0; i < c->n_hooks[k]; i++)
			/* env NULL: the hook runs with the runtime's own */
			if (!c->hooks[k][i].argv || !c->hooks[k][i].argv[0])
				abort();
	if ((c->new_ns & c->join_ns) != 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	kiwi_err err = { 0 };
	struct kiwi_oci_config *c = NULL;
	if (kiwi_oci_config_parse((const char *)data, size, &c, &err) < 0) {
		if (c || !err.step[0] || !err.msg[0])
			abort();
		return 0;
	}
	check(c);
	kiwi_oci_config_free(c);
	return 0;
}
