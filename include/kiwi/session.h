/* SPDX-License-Identifier: Apache-2.0 */
/* Sessions (kiwi-run-session(1)): one sandbox across many commands, with
 * no daemon. `session create` forks a supervisor that runs the sandbox
 * (kiwi_sandbox_run with kiwi_session_hooks) until the session ends; the
 * sandbox's pid 1 is a keeper (kiwi/keeper.h). The supervisor is listed in
 * the registry like a run's kiwi-run, and listens on <registry>/<id>.sock,
 * in the caller's own registry directory (closed to others), checking each
 * client's credentials. This module is the clients' side: exec, destroy. */
#ifndef KIWI_SESSION_H
#define KIWI_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "kiwi/err.h"
#include "kiwi/registry.h"
#include "kiwi/sandbox.h"

/* The session id names (a unique prefix of 4 digits or more will do),
 * which must be the caller's and a session; *entry gets its registry entry. */
int kiwi_session_find(const char *id, struct kiwi_registry_entry *entry, kiwi_err *err);
/* The path of a session's socket. */
int kiwi_session_socket_path(const char *id, char *out, size_t len, bool create_dir, kiwi_err *err);
/* Connects to the session's supervisor and says what for ('x' exec,
 * 'd' destroy). Returns the connection. */
int kiwi_session_connect(const struct kiwi_registry_entry *e, char op, kiwi_err *err);
/* The same with a whole request (its first byte the op). */
int kiwi_session_request(const struct kiwi_registry_entry *e, const void *req, size_t len, kiwi_err *err);
/* The request sent first, before the registry is read, where a whole id
 * names the socket (the caller's own directory, which no one else may
 * write; the supervisor checks the peer's uid): the supervisor sets to
 * work while the caller looks the session up. -1 when id is a prefix or
 * nothing answers there: then kiwi_session_find says why. */
int kiwi_session_reach(const char *id, const void *req, size_t len);
/* KIWI_SESSION_OP_TALLY (kiwi/sandbox.h): *r; with since and tally, the
 * attempts since that mark (freed with free()); *audit_fd (NULL: closed):
 * a sealed session's network audit log, else -1. */
int kiwi_session_tally(const struct kiwi_registry_entry *e, const struct kiwi_egress_mark *since,
		       struct kiwi_session_tally_reply *r, struct kiwi_egress_tally **tally, int *audit_fd,
		       kiwi_err *err);

/* The switch to verify (kiwi-run-phase(1)): asks the supervisor to kill
 * every process of the session but its pid 1 and to take its network
 * away for good, and waits until both are done. *reaped: how many
 * processes were killed. */
int kiwi_session_seal(const struct kiwi_registry_entry *e, int *reaped, kiwi_err *err);

struct kiwi_debug;

struct kiwi_session_exec {
	char *const *argv;
	char *const *envp;
	const char *cwd;
	bool tty;
	bool keep_background;
	/* phase install: refused, atomically, once verify sealed the session
	 * (KIWI_SESSION_OP_EXEC_BEFORE_VERIFY) */
	bool before_verify;
	uint64_t timeout_ns;      /* 0: none */
	uint64_t kill_grace_ns;
	uint64_t output_limit;    /* 0: none */
	bool output_limit_kill;
	int stdout_dest, stderr_dest;
	struct kiwi_tail *stdout_tail, *stderr_tail;
	const struct kiwi_debug *debug;  /* --debug; NULL: off */
};

/* Runs one command in the session: the result is a run's, for that exec
 * alone (its own cgroup below the session's, where there is one). 0 once
 * it ran, -1 with err when it could not be started. */
int kiwi_session_exec(const struct kiwi_registry_entry *e, const struct kiwi_session_exec *x,
		      struct kiwi_sandbox_result *res, kiwi_err *err);

/* `session cp`: copies into the session (in: fd is read, the file at
 * inside, an absolute path, is made with mode, whole or not at all) or out
 * of it (fd is written), by the exec leader with the session's ids. */
int kiwi_session_copy(const struct kiwi_registry_entry *e, bool in, const char *inside, int fd, mode_t mode,
		      kiwi_err *err);

/* ---- snapshot (src/session/snapshot.c) ---- */

#define KIWI_SNAPSHOT_MAX_TREES 8

/* What a snapshot reads: the session's writable layer and, in it, the
 * upper directories ("root", "bind0"...) with where each goes in the
 * image ("" for the root, "workspace"). */
struct kiwi_snapshot_source {
	const char *image;        /* the session's image reference; NULL: made from --rootfs */
	const char *names[KIWI_SNAPSHOT_MAX_TREES];
	const char *dests[KIWI_SNAPSHOT_MAX_TREES];
	size_t n;
};

/* Supervisor side, for the 's' client conn: freezes the session's cgroup
 * where there is one (cgroup.freeze), sends the layer's fd and src, and,
 * frozen, waits for the client to finish (or die) before thawing. */
void kiwi_session_serve_snapshot(int conn, int layer, struct kiwi_cgroup *cg, const struct kiwi_snapshot_source *src);

/* Client side: the supervisor's answer. The session stays frozen (when
 * frozen) until kiwi_session_snapshot_end. */
struct kiwi_session_snapshot {
	int conn, layer;
	bool frozen;
	char *text;               /* holds src's strings */
	struct kiwi_snapshot_source src;
};
int kiwi_session_snapshot_begin(const struct kiwi_registry_entry *e, struct kiwi_session_snapshot *s, kiwi_err *err);
void kiwi_session_snapshot_end(struct kiwi_session_snapshot *s);

/* The scratch a snapshot's writer makes in the layout (src/session/scratch.c):
 * begin records layout (absolute) and a fresh tag in the caller's registry,
 * locked (fd, which the writer inherits: the lock lives as long as it
 * does); the writer names its scratch .tmp-<tag>-... (kiwi-rootfs snapshot
 * --scratch); end removes the record (failed, with scratch of the writer's
 * left in the layout: unlocks it only, for gc). gc removes, for each record whose
 * writer is gone, the blobs it committed that nothing in the layout names
 * (*blobs), that scratch (*files; and a layout the writer made that holds
 * nothing else), then the record (*records); a layout another writer is
 * writing keeps its record for a later gc. */
struct kiwi_snapshot_scratch {
	char tag[16];
	int fd;
	char layout[4096];        /* its absolute path */
};
int kiwi_session_scratch_begin(const char *layout, struct kiwi_snapshot_scratch *s, kiwi_err *err);
void kiwi_session_scratch_end(struct kiwi_snapshot_scratch *s, bool failed);
int kiwi_session_scratch_gc(unsigned *records, unsigned *files, unsigned *blobs, kiwi_err *err);

/* What the supervisor checked once the session was gone, for `destroy`. */
struct kiwi_session_evidence {
	const char *reason;       /* what ended it */
	int processes_left;       /* in the session's pid namespace, after the end */
	int mount_ns_users;       /* processes still in its mount namespace */
	int cgroup_removed;       /* 1, 0, or -1: there was none */
	int network_removed;      /* 1, 0, or -1: there was none */
	bool socket_removed;
	const char *workspace;    /* "landed", "discarded", "failed", or NULL: none */
	kiwi_err cleanup_error;   /* errnum 0: none */
};

/* The evidence as one JSON object with a newline; the caller frees it. */
char *kiwi_session_evidence_json(const char *id, const struct kiwi_session_evidence *ev);
/* Processes of the host whose pid namespace has inode pidns, and whose
 * mount namespace has inode mntns (0: not counted), in one pass over
 * /proc: the fallback where the witnesses below are missing. */
void kiwi_session_ns_users(uint64_t pidns, uint64_t mntns, int *pids, int *mnts);
/* The processes a session's own procfs (kiwi_session_hooks.procfs_fd)
 * lists: every one of its pid namespace, zombies too; -1 if procfs is not
 * a procfs or cannot be read. */
int kiwi_session_pidns_tasks(int procfs);

#endif
