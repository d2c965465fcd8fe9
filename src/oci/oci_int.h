/* SPDX-License-Identifier: Apache-2.0 */
/* Inside the OCI runtime: the parent (create.c) and the container's init
 * (init.c) talk over one SOCK_SEQPACKET socketpair with the kiwi_sync_msg
 * packets of include/kiwi/sync.h, using the message types below. Steps #1..#3 are
 * mirrored on both sides. */
#ifndef KIWI_OCI_INT_H
#define KIWI_OCI_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "kiwi/err.h"
#include "kiwi/mount.h"
#include "kiwi/oci_config.h"
#include "kiwi/oci_runtime.h"

#define KIWI_OCI_FIFO "exec.fifo"
/* How long delete --force waits for a killed init, as runc (10 s). */
#define KIWI_OCI_KILL_WAIT_MS 10000

enum {
	OCI_SYNC_GO = 100,         /* parent -> init #1: id maps written, go on */
	OCI_SYNC_HOOKS,            /* init -> parent #2: mounts done, run createRuntime hooks */
	OCI_SYNC_HOOKS_DONE,       /* parent -> init #2 */
	OCI_SYNC_READY,            /* init -> parent #3: blocked on exec.fifo next */
	OCI_SYNC_ERROR,            /* init -> parent: setup failed (err) */
};

struct kiwi_seccomp;

/* What the init needs beyond the configuration. */
struct oci_init_args {
	const struct kiwi_oci_config *cfg;
	const char *bundle;        /* absolute */
	const char *rootfs;        /* absolute */
	const char *state_dir;     /* absolute; holds exec.fifo */
	int fifo_path;             /* O_PATH fd of exec.fifo, opened by the parent */
	int sock;                  /* the init's end of the sync socket */
	int console_sock;          /* connected --console-socket, or -1 */
	int preserve_fds;
	/* Per mount: a clone of its bind source opened by the parent, or -1
	 * (see create.c, open_bind_sources); NULL: none at all. */
	const int *bind_trees;
	const struct kiwi_seccomp *seccomp;   /* NULL: none */
	const struct kiwi_oci_state *state;   /* id, bundle, rootfs, annotations: for the hooks */
	/* Set by the init: */
	const char *state_json;    /* the state the hooks get on stdin */
	bool may_setgroups;        /* the user namespace allows setgroups */
	char **env;                /* process.env with HOME */
};

_Noreturn void kiwi_oci_init_main(const struct oci_init_args *a);

/* bindsrc.c, in the parent before the init is cloned: per mount, a clone of
 * its bind source (idmapped where asked) or -1; *trees NULL when none. */
int kiwi_oci_open_bind_sources(const struct kiwi_oci_config *cfg, const char *bundle, int floor, int **trees,
			       kiwi_err *err);
void kiwi_oci_close_bind_sources(const struct kiwi_oci_config *cfg, int **trees);
/* create.c: one id map of process pid ("uid_map", "gid_map"). */
int kiwi_oci_write_map(pid_t pid, const char *file, const struct kiwi_oci_idmap *m, size_t n, kiwi_err *err);

/* rootfs.c, in the init, in its mount namespace. */
int kiwi_oci_prepare_rootfs(const struct kiwi_oci_config *cfg, const char *rootfs, bool in_userns,
			    const int *bind_trees, int *rootfd_out, kiwi_err *err);
/* pivot_root, having made the mask source (kiwi/mount.h) while the host's
 * /dev is still in view; finish_rootfs masks with it. */
int kiwi_oci_pivot(int rootfd, const struct kiwi_oci_config *cfg, struct kiwi_mask_source *masks, kiwi_err *err);
int kiwi_oci_finish_rootfs(const struct kiwi_oci_config *cfg, struct kiwi_mask_source *masks, kiwi_err *err);

/* process.c: rlimits, user, capabilities, in the init. */
int kiwi_oci_set_rlimits(const struct kiwi_oci_process *p, kiwi_err *err);
int kiwi_oci_become_user(const struct kiwi_oci_process *p, bool may_setgroups, kiwi_err *err);
/* process.env, with HOME from the container's /etc/passwd when it has none. */
int kiwi_oci_env_with_home(const struct kiwi_oci_process *p, char ***env, kiwi_err *err);
/* The program's path, looked up in process.env's PATH like execvp. */
int kiwi_oci_find_program(const struct kiwi_oci_process *p, char *out, size_t len, kiwi_err *err);
/* A pty for the process: the master goes over the console socket, the
 * slave becomes stdio and the controlling terminal. */
int kiwi_oci_setup_console(int console_sock, const struct kiwi_oci_process *p, kiwi_err *err);

/* annotations.c: io.kiwi.phase and io.kiwi.egress; may turn the network
 * into a new, empty namespace (*network_forced). */
int kiwi_oci_apply_annotations(struct kiwi_oci_config *cfg, bool *network_forced, kiwi_err *err);

/* hooks.c: runs each hook of one kind with the state JSON on stdin. */
int kiwi_oci_run_hooks(const struct kiwi_oci_config *cfg, enum kiwi_oci_hook_kind kind, const char *state_json,
		       kiwi_err *err);

/* state.c */
/* The runtime-spec state object as text (malloc'd), or NULL. */
char *kiwi_oci_state_text(const struct kiwi_oci_state *st, enum kiwi_oci_status s);
int kiwi_oci_state_dir(const char *root, const char *id, char *out, size_t len, kiwi_err *err);
/* Removes a container's state directory and every file kiwi-run puts in it. */
void kiwi_oci_state_dir_remove(const char *dir);
/* The cgroup create made, named in the state directory until state.json
 * holds it, so that `delete --force` after a create killed in between
 * removes it (and the parents create made) too. */
int kiwi_oci_pending_cgroup_write(const char *dir, const char *cgroup, const char *top, kiwi_err *err);
void kiwi_oci_pending_cgroup_done(const char *dir);
void kiwi_oci_pending_cgroup_collect(const char *dir);
int kiwi_oci_proc_start_time(pid_t pid, uint64_t *start, char *state);
/* config.json linux.seccomp is compiled through the cache unless a bind
 * of the container reaches the cache directory (kiwi-run-seccomp(5)). */
int kiwi_oci_compile_seccomp(const struct kiwi_oci_config *cfg, struct kiwi_seccomp **out, kiwi_err *err);

#endif
