/* SPDX-License-Identifier: Apache-2.0 */
/* The OCI runtime: containers that outlive the kiwi-run process that made
 * them. Each lives in a state directory <root>/<id> holding state.json
 * (the runtime-spec state plus what kill and delete need) and, between
 * create and start, exec.fifo, on which the container's init waits just
 * before it executes the user process. The commands and their errors are
 * those of runc; kiwi-run-oci(1) describes them. */
#ifndef KIWI_OCI_RUNTIME_H
#define KIWI_OCI_RUNTIME_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "kiwi/err.h"
#include "kiwi/json.h"

/* The runtime-spec version kiwi-run implements and writes. */
#define KIWI_OCI_VERSION "1.1.0"

enum kiwi_oci_status {
	KIWI_OCI_CREATING,
	KIWI_OCI_CREATED,
	KIWI_OCI_RUNNING,
	KIWI_OCI_STOPPED,
};
const char *kiwi_oci_status_name(enum kiwi_oci_status s);

/* What state.json holds. */
struct kiwi_oci_state {
	char id[256];
	char bundle[4096];
	char rootfs[4096];
	pid_t pid;                 /* of the init, in our pid namespace */
	uint64_t start_time;       /* field 22 of /proc/<pid>/stat: tells a reused pid apart */
	char created[40];          /* RFC 3339, UTC */
	char cgroup[4096];         /* absolute path of the container's cgroup, "" when none */
	bool cgroup_owned;         /* kiwi-run made it, delete removes it */
	char cgroup_top[4096];     /* the highest cgroup kiwi-run made for it, "" none: delete
				    * removes the parents up to it when they are empty */
	uid_t owner;
	char *annotations;         /* JSON object text, or NULL */
};

/* The container's status now. With pidfd non-NULL and the init alive, a
 * pidfd of it is returned there (else -1): signals sent through it cannot
 * reach a process that took the pid over. */
enum kiwi_oci_status kiwi_oci_state_status(const char *root, const struct kiwi_oci_state *st, int *pidfd);

/* An id that is a safe file name: [A-Za-z0-9_.+-], not "." or "..", at
 * most 255 bytes. */
int kiwi_oci_check_id(const char *id, kiwi_err *err);
/* Reads <root>/<id>/state.json; a missing container is ENOENT with the
 * message runc prints ("container does not exist"). */
int kiwi_oci_state_load(const char *root, const char *id, struct kiwi_oci_state *st, kiwi_err *err);
int kiwi_oci_state_save(const char *root, const struct kiwi_oci_state *st, kiwi_err *err);
void kiwi_oci_state_clear(struct kiwi_oci_state *st);
/* The runtime-spec state object, as `state` prints it. */
void kiwi_oci_write_state(kiwi_json_writer *w, const struct kiwi_oci_state *st, enum kiwi_oci_status s);
/* Takes an exclusive lock on the container's state directory (serialises
 * start, kill and delete of one container); returns the lock's fd. */
int kiwi_oci_lock(const char *root, const char *id, kiwi_err *err);

struct kiwi_oci_create_opts {
	const char *root;          /* the state root, created when missing */
	const char *id;
	const char *bundle;        /* directory holding config.json */
	const char *pid_file;      /* NULL: none */
	const char *console_socket;/* NULL: none; required with process.terminal */
	int preserve_fds;          /* fds 3..3+N-1 pass to the container */
	bool for_run;              /* `run` waits for the init itself (no PDEATHSIG games) */
	/* `run` in the foreground without --console-socket: a process.terminal
	 * pty's master comes back here (-1 without a terminal), for the caller
	 * to relay, as runc run does. NULL: a terminal needs --console-socket. */
	int *console_master;
	/* Called with messages worth a debug log line; may be NULL. */
	void (*note)(const char *msg);
	/* Called with warnings (a capability this kernel lacks); may be NULL. */
	void (*warn)(const char *msg);
};

/* create: builds the container and leaves its init blocked on exec.fifo.
 * Returns the init's pid; *pidfd (when non-NULL) gets a pidfd of it. */
pid_t kiwi_oci_create(const struct kiwi_oci_create_opts *o, int *pidfd, kiwi_err *err);
/* start, kill, delete: on success err may still hold a warning (step
 * "warning": a poststart or poststop hook failed, which the runtime-spec
 * makes a warning). */
/* start: releases a created container and runs the poststart hooks. */
int kiwi_oci_start(const char *root, const char *id, kiwi_err *err);
/* kill: sig to the init, or with all to every process of its cgroup. */
int kiwi_oci_kill(const char *root, const char *id, int sig, bool all, kiwi_err *err);
/* delete: removes a stopped (or, with force, any) container, its cgroup
 * and state, then runs the poststop hooks. */
int kiwi_oci_delete(const char *root, const char *id, bool force, kiwi_err *err);
/* The pids of the container's processes (its cgroup, or the init alone). */
int kiwi_oci_pids(const char *root, const char *id, pid_t **pids, size_t *n, kiwi_err *err);

struct kiwi_oci_exec_opts {
	const char *root, *id;
	const char *process_file;  /* --process: a runtime-spec process object */
	char **args;               /* else the command (NULL-terminated) ... */
	char **env;                /* ... with these KEY=VALUE set (NULL-terminated or NULL) */
	const char *cwd;           /* NULL: the config's */
	const char *user;          /* "UID[:GID]", NULL: the config's */
	uint32_t *gids;            /* --additional-gids */
	size_t n_gids;
	char **caps;               /* --cap, added to every set but inheritable */
	size_t n_caps;
	bool tty, no_new_privs;
	const char *console_socket, *pid_file;
	int preserve_fds;
	const char *cgroup;        /* --cgroup: an existing sub-cgroup of the container's, or NULL */
};

/* exec: starts a process in the container's namespaces and cgroup, with
 * its seccomp filter; returns its pid (a child of the caller) and, when
 * pidfd is non-NULL, a pidfd of it. */
pid_t kiwi_oci_exec(const struct kiwi_oci_exec_opts *o, int *pidfd, kiwi_err *err);

/* CVE-2019-5736 (src/oci/sealed.c): re-executes the calling program from a
 * sealed memfd copy of itself, unless it runs from one already (then 0). */
int kiwi_oci_reexec_sealed(char **argv, kiwi_err *err);
bool kiwi_oci_running_sealed(void);

/* A signal by name ("KILL", "SIGKILL") or number; -1 when unknown. */
int kiwi_oci_signal_from_name(const char *s);

/* The documents of `spec` and `features`. */
void kiwi_oci_write_spec(kiwi_json_writer *w, bool rootless, unsigned uid, unsigned gid);
void kiwi_oci_write_features(kiwi_json_writer *w);

#endif
