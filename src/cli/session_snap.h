/* SPDX-License-Identifier: Apache-2.0 */
/* `session snapshot` and `session create --from` (kiwi-run-session(1)):
 * the CLI's side, which writes and reads the OCI image layout. */
#ifndef KIWI_CLI_SESSION_SNAP_H
#define KIWI_CLI_SESSION_SNAP_H

#include "run.h"
#include "kiwi/digest.h"
#include "kiwi/session.h"

int kiwi_cli_session_snapshot(int argc, char **argv);

/* A snapshot to restore, its layer checked against its digest. */
struct session_from {
	char ref[4200];             /* absolute; "" until --from */
	bool image_based;           /* a->image is set to it; else the layer goes over --rootfs */
	const struct kiwi_sandbox_config *cfg;
	/* The layer as the check saw it, and its blob opened by the caller
	 * (a->cfg.restore_fd once armed; -1 before). */
	char media_type[128], digest[KIWI_DIGEST_MAX], diff_id[KIWI_DIGEST_MAX];
	long long size;
	int blob;
};

/* --from REF: checks the snapshot (kiwi-rootfs snapshot-check) and opens its
 * layer's blob as the caller; an image-based one becomes a->image. Prints
 * the error and returns KIWI_EXIT_FAILED. */
int session_from_take(struct session_from *f, struct run_args *a, const char *ref);
/* After the arguments: the restore hook of a->cfg. */
int session_from_arm(struct session_from *f, struct run_args *a);

/* An image reference with its path made absolute (the supervisor keeps
 * it for the snapshots of a session made from it). */
int session_abs_ref(const char *ref, char *out, size_t len, kiwi_err *err);

#endif
