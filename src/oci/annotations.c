/* SPDX-License-Identifier: Apache-2.0 */
/* The kiwi phase policy through annotations, so that a pod spec can ask for
 * install or verify (kiwi-run-oci(1), ANNOTATIONS):
 *   io.kiwi.phase  = install | verify
 *   io.kiwi.egress = none | pod
 * verify never has a network: the container gets a fresh network namespace
 * holding only lo, whatever network the config (the pod) gives it. install
 * may keep the pod's network, and only when kiwi-run runs as root (as
 * kiwi-run's own egress needs root). kiwi-run's filtered egress (nft, veth)
 * is not built for OCI containers: the pod's network is the orchestrator's
 * to filter (a NetworkPolicy), so other egress values are refused. */
#include "oci_int.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Makes the container's network namespace a new, empty one. */
static void network_none(struct kiwi_oci_config *cfg)
{
	for (size_t i = 0; i < cfg->n_namespaces; i++)
		if (cfg->namespaces[i].type == CLONE_NEWNET) {
			cfg->namespaces[i].path = NULL;
			cfg->join_ns &= ~(uint64_t)CLONE_NEWNET;
			cfg->new_ns |= CLONE_NEWNET;
			return;
		}
	/* The array has room for one more (parsed with a spare slot). */
	cfg->namespaces[cfg->n_namespaces++] = (struct kiwi_oci_namespace){ .type = CLONE_NEWNET };
	cfg->new_ns |= CLONE_NEWNET;
}

static int check_keys(const struct kiwi_oci_config *cfg, kiwi_err *err)
{
	for (size_t i = 0; cfg->annotations && i < kiwi_json_len(cfg->annotations); i++) {
		const char *key = kiwi_json_key_at(cfg->annotations, i);
		if (!strncmp(key, "io.kiwi.", 8) && strcmp(key, "io.kiwi.phase") && strcmp(key, "io.kiwi.egress"))
			return kiwi_error(err, EINVAL, "annotations",
					  "unknown annotation `%s` (io.kiwi.phase and io.kiwi.egress are known)", key);
	}
	return 0;
}

int kiwi_oci_apply_annotations(struct kiwi_oci_config *cfg, bool *network_forced, kiwi_err *err)
{
	const char *phase = kiwi_oci_annotation(cfg, "io.kiwi.phase");
	const char *egress = kiwi_oci_annotation(cfg, "io.kiwi.egress");
	*network_forced = false;
	if (check_keys(cfg, err) < 0)
		return -1;
	if (phase && strcmp(phase, "install") && strcmp(phase, "verify"))
		return kiwi_error(err, EINVAL, "annotations", "io.kiwi.phase `%s` is neither install nor verify", phase);
	if (egress && strcmp(egress, "none") && strcmp(egress, "pod"))
		return kiwi_error(err, EINVAL, "annotations",
				  "io.kiwi.egress `%s` is not applied by the OCI runtime: `none`, or `pod` (the "
				  "orchestrator's network, filtered by it) in install", egress);
	bool keep = !phase || !strcmp(phase, "install");
	if (egress && !strcmp(egress, "pod")) {
		if (phase && !strcmp(phase, "verify"))
			return kiwi_error(err, EINVAL, "annotations", "io.kiwi.phase verify never has a network: "
					  "io.kiwi.egress `pod` contradicts it");
		if (phase && geteuid() != 0)
			return kiwi_error(err, EPERM, "annotations",
					  "io.kiwi.egress `pod` in install needs kiwi-run to run as root");
	}
	if (phase && !strcmp(phase, "install") && geteuid() != 0)
		keep = false;
	if (egress && !strcmp(egress, "none"))
		keep = false;
	if (!keep) {
		if (!cfg->namespaces)
			return kiwi_error(err, EINVAL, "annotations", "config.json lists no namespaces");
		network_none(cfg);
		*network_forced = true;
	}
	return 0;
}
