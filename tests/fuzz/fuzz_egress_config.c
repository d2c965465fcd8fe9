/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the egress flag parser: the input is a list of
 * KEY=VALUE lines fed to kiwi_egress_config_add, then the cross checks
 * (IPv4 and IPv6 CIDRs, private_network's private-only rule).
 * Properties: never crashes, a refused value changes no list, and what it
 * keeps stays within the documented bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kiwi/egress.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	struct kiwi_egress_config c;
	kiwi_egress_config_init(&c);
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *eq = strchr(line, '=');
		if (!eq)
			continue;
		*eq = '\0';
		kiwi_err err = { 0 };
		size_t cidrs = c.n_allow_cidrs, cidrs6 = c.n_allow_cidrs6, hosts = c.n_allow_hosts,
		       ports = c.n_allow_ports;
		if (kiwi_egress_config_add(&c, line, eq + 1, &err) < 0 &&
		    (c.n_allow_cidrs != cidrs || c.n_allow_cidrs6 != cidrs6 || c.n_allow_hosts != hosts ||
		     c.n_allow_ports != ports || !err.msg[0]))
			abort();
		for (size_t i = 0; i < c.n_allow_cidrs6; i++) {
			const struct kiwi_cidr6 *r = &c.allow_cidrs6[i];
			if (r->prefix > 128)
				abort();
			/* no host bits after the prefix */
			for (unsigned b = r->prefix; b < 128; b++)
				if (r->addr[b / 8] & (0x80 >> (b % 8)))
					abort();
		}
		if (c.n_allow_cidrs > KIWI_EGRESS_MAX_CIDRS || c.n_allow_cidrs6 > KIWI_EGRESS_MAX_CIDRS ||
		    c.n_allow_hosts > KIWI_EGRESS_MAX_HOSTS ||
		    c.n_allow_ports > KIWI_EGRESS_MAX_PORTS || c.pool.prefix < 8 || c.pool.prefix > 30)
			abort();
		for (size_t i = 0; i < c.n_allow_hosts; i++)
			if (strlen(c.allow_hosts[i].name) > KIWI_EGRESS_NAME_MAX)
				abort();
	}
	kiwi_egress_config_check(&c, NULL);
	free(text);
	return 0;
}
