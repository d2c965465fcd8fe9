/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-helper's session: one caller, one sandbox, served until either
 * ends. */
#ifndef KIWI_HELPER_SERVE_H
#define KIWI_HELPER_SERVE_H

#include "helper_int.h"
#include "kiwi/cgroup.h"
#include "kiwi/egress.h"

struct helper_session {
	uid_t uid;
	gid_t gid;
	struct kiwi_helper_rule rule;
	unsigned ops_left;                 /* rule.ops less what was done for good */
	struct helper_idmap_allowed ids;
	int sandbox_slot, veth_slot;       /* quota locks */
	struct helper_sandbox sb;          /* bound by the first request naming one */
	struct kiwi_egress *egress;        /* prepared, and set up once attached */
	bool attached;
	struct kiwi_cgroup *cg;            /* cgroup-prepare's, removed at the end */
	int cg_leaf;                       /* a session's: cg's leaf "keeper", where pid 1 goes; -1: none */
	pid_t cg_keeper;                   /* holds cg's lock and the slot while it is populated */
	int disk_mnt, disk_image;          /* disk's mount and image, kept until the end */
	bool sandbox_ended;                /* its pidfd polled readable */
	unsigned requests;                 /* received, malformed ones too */
};

#define HELPER_SESSION_INIT { .sandbox_slot = -1, .veth_slot = -1, .sb = HELPER_SANDBOX_INIT, \
			      .disk_mnt = -1, .disk_image = -1, .cg_leaf = -1 }

/* Answers requests until the socket closes or the sandbox ends, then
 * removes everything made for it. Returns the exit status. */
int helper_serve(struct helper_session *s);
void helper_answer_error(int sock, const kiwi_err *err);
/* Reads and drops one request (closing any fds it carried). False when
 * the caller went away instead. */
bool helper_wait_request(void);

/* egress.c */
int helper_egress_prepare(struct helper_session *s, const struct kiwi_egress_config *c,
			  struct kiwi_egress_child *child, kiwi_err *err);
int helper_egress_attach(struct helper_session *s, uint16_t gate_dns, uint16_t gate_tcp, kiwi_err *err);
void helper_egress_teardown(struct helper_session *s);

/* disk.c: the disk's detached mount, idmapped to the bound sandbox (its
 * fd is the caller's to send and close; the session keeps its own). */
int helper_disk(struct helper_session *s, const struct kiwi_helper_request *req, kiwi_err *err);
/* Shuts the disk down and frees its blocks; the session's end (it stays
 * root, as helper_cgroup_teardown, which may follow). */
void helper_disk_teardown(struct helper_session *s);

/* bind.c: a clone of the tree source (the caller's own), idmapped so its
 * owner is the bound sandbox's root; the caller's to send and close. */
int helper_bind(struct helper_session *s, int source, kiwi_err *err);

/* cgroup_op.c */
int helper_cgroup_prepare(struct helper_session *s, const struct kiwi_helper_request *req, char *name,
			  size_t len, kiwi_err *err);
int helper_cgroup_attach(struct helper_session *s, kiwi_err *err);
/* Kills what is left, removes the cgroup; the session's last step (it
 * stays root). */
void helper_cgroup_teardown(struct helper_session *s);

#endif
