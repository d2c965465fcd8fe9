/* SPDX-License-Identifier: Apache-2.0 */
/* What to run and what happened: the contract between a CLI front end and
 * the launcher. kiwi_sandbox_run() holds the whole launch sequence. */
#ifndef KIWI_SANDBOX_H
#define KIWI_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "kiwi/cgroup.h"
#include "kiwi/egress.h"
#include "kiwi/err.h"
#include "kiwi/net_audit.h"

struct kiwi_seccomp;
struct kiwi_egress;
struct kiwi_egress_config;
struct kiwi_debug;
struct kiwi_tail;
struct kiwi_helper;
struct kiwi_idmap;

struct kiwi_bind {
	const char *source;       /* host path */
	const char *dest;         /* path inside the rootfs */
	bool read_only;
	/* Written through the sandbox's layer (kiwi/fslayer.h): counted
	 * against disk_bytes, its changes handled by ws_mode at the end. */
	bool layered;
};

struct kiwi_sandbox_result;

/* A session (kiwi-run-session(1), kiwi/keeper.h): pid 1 starts no command
 * but keeps the sandbox for the execs that connect to listen_fd, until a
 * destroy, an idle or lifetime bound, or a kill ends it. */
struct kiwi_session_hooks {
	char id[16];               /* the registry id the session goes by */
	int listen_fd;             /* SOCK_SEQPACKET, listening: exec and destroy clients */
	uint64_t idle_timeout_ns;  /* no exec running this long ends it; 0: never */
	uint64_t max_lifetime_ns;  /* from ready; 0: no bound */
	/* Called once, when pid 1 is cloned (before the session is
	 * registered), while it builds the sandbox: what the caller can do
	 * then rather than before (the listening socket, listen_fd). -1 with
	 * err ends the session. */
	int (*cloned)(void *ctx, kiwi_err *err);
	/* Called once, when the sandbox is ready and registered. */
	void (*ready)(void *ctx, const struct kiwi_sandbox_result *res);
	void *ctx;
	/* `session snapshot` (op 's'): conn is the client's connection, layer
	 * the writable layer's root (kiwi/fslayer.h; -1: none), cg the
	 * session's cgroup (NULL: none). Runs in the supervisor's loop. */
	void (*snapshot)(void *ctx, int conn, int layer, struct kiwi_cgroup *cg);
	/* Out: what ended it ("destroy", "idle_timeout", "max_lifetime";
	 * NULL: pid 1 died), and the destroy client's connection (-1: none),
	 * answered by the caller once everything is removed. */
	const char *end_reason;
	int destroy_fd;
	/* Out, from pid 1 before ready (-1 and 0 until then): the sandbox's
	 * procfs, the caller's to close, and its mount namespace's id (0:
	 * this kernel gives none) and nsfs inode, the witnesses of a clean
	 * end. */
	int procfs_fd;
	uint64_t mntns_id;
	uint64_t mntns_ino;
	/* Out, once cloned: pid 1's pid on the host (0 until then). */
	pid_t init_pid;
	/* Out, at the end: the session's network namespace, held from clone
	 * on so that pid 1's exit does not let it go (the kernel's worker that
	 * frees it waits on RCU grace periods which pid 1's teardown of its
	 * mounts would queue behind). The caller closes it once the evidence
	 * is sent; -1: none. */
	int netns_fd;
};

/* The supervisor's ops besides exec ('x'), snapshot ('s') and destroy
 * ('d'), each the first byte of a new connection's first message
 * (kiwi/session.h):
 * SEAL, the switch to verify (kiwi-run-phase(1)): every process but pid 1
 * killed and reaped, then the network taken away for good
 * (kiwi_egress_seal); answered with a kiwi_session_seal_reply once done. */
#define KIWI_SESSION_OP_SEAL 'v'
struct kiwi_session_seal_reply {
	int32_t ok;
	int32_t reaped;            /* processes killed and reaped */
	kiwi_err err;
};
/* EXEC_BEFORE_VERIFY: an exec ('x') for phase install, which must not run
 * in a session verify sealed: refused (a KIWI_EXEC_FAILED whose step is
 * KIWI_SESSION_STEP_SEALED) once it is sealed. Any exec is refused while
 * the seal is under way: pid 1 would start it after its purge, where the
 * purge cannot reach it. */
#define KIWI_SESSION_OP_EXEC_BEFORE_VERIFY 'i'
/* The second byte of an exec's ('x', 'i') first message: the supervisor
 * gives the exec its cgroup (KIWI_EXEC_CGROUP, kiwi/keeper.h), where a
 * client that sends one byte brings one it made. */
#define KIWI_SESSION_EXEC_CGROUP_FROM_SESSION 'c'
#define KIWI_SESSION_STEP_SEALED "session_sealed"
/* TALLY: where the session's egress audit stands (a mark, kiwi/egress.h)
 * and whether it is sealed; with has_since, a second message holds the
 * tally of the attempts since that mark. An exec asks before it starts
 * and once it ended: its verdict's egress fields. Once sealed, the reply
 * carries the network audit's log socket (kiwi/net_audit.h) instead, for
 * the exec to read. */
#define KIWI_SESSION_OP_TALLY 'a'
struct kiwi_session_tally_request {
	char op;                   /* KIWI_SESSION_OP_TALLY */
	uint8_t has_since;
	uint8_t pad[6];
	struct kiwi_egress_mark since;
};
struct kiwi_session_tally_reply {
	struct kiwi_egress_mark mark;
	uint32_t sealed;
	uint32_t has_tally;
};

struct kiwi_sandbox_config {
	const char *rootfs;
	const char *hostname;     /* default "kiwi" */
	const char *cwd;          /* inside the sandbox; default "/" */
	char *const *argv;        /* the command, NULL-terminated */
	char *const *envp;        /* the complete environment, NULL-terminated */
	const struct kiwi_bind *binds;
	size_t n_binds;
	const int *preserve_fds;  /* kept open (without CLOEXEC) across exec */
	size_t n_preserve_fds;
	bool rw_root;
	const struct kiwi_seccomp *seccomp;  /* loaded last before exec; NULL: none */

	/* Standard streams. stdin_null: /dev/null instead of the caller's
	 * stdin (always when that is a terminal). stdout and stderr always go
	 * through pipes to *_dest, each passed on up to output_limit bytes. */
	bool stdin_null;
	int stdout_dest;
	int stderr_dest;
	uint64_t output_limit;
	bool output_limit_kill;   /* kill the sandbox once a stream passes the limit */
	struct kiwi_tail *stdout_tail, *stderr_tail;  /* NULL, or keep each stream's last bytes */
	/* A pseudo-terminal of the sandbox's own devpts is the command's
	 * stdin, stdout, stderr and controlling terminal (stdin_null and
	 * stderr_dest unused). kiwi-run relays its stdin to it, in raw mode
	 * when that is a terminal, and its output to stdout_dest, as one
	 * stream bounded by output_limit. */
	bool tty;

	uint64_t timeout_ns;      /* wall clock from exec; 0: none */
	uint64_t kill_grace_ns;   /* on timeout: SIGTERM to all, SIGKILL this much later */
	uint64_t disk_bytes;      /* the writable layer's size; 0: KIWI_FSLAYER_DEFAULT_SIZE */
	int ws_mode;              /* enum kiwi_ws_mode: what becomes of layered binds' changes */
	int disk_backend;         /* enum kiwi_disk_backend: what holds the layer */
	const char *disk_dir;     /* KIWI_DISK_LOOP: where its image is; NULL: the default */
	int disk_fd;              /* KIWI_DISK_LOOP: set by kiwi_sandbox_run, the image's mount */

	/* Any limit set: the sandbox gets a cgroup of its own under
	 * cgroup_parent (NULL: the default) and starts inside it. */
	struct kiwi_cgroup_limits limits;
	/* >0: RLIMIT_NPROC inside as well, and instead of pids_max where the
	 * host offers no cgroup v2 pids controller (a hybrid host). It bounds
	 * the processes of the sandbox's user namespace, but not of one whose
	 * uid 0 is the host's (a root caller's default map): the kernel
	 * exempts the host's root. */
	int64_t pids_rlimit;
	const char *cgroup_parent;
	/* A cgroup even without limits, where the host gives one: its removal
	 * proves that nothing started in the sandbox outlived it. */
	bool own_cgroup;

	bool landlock;            /* a Landlock ruleset under the mounts, where the kernel has it */

	/* NULL: the network namespace holds only lo. Else a veth to the host
	 * filtered by a per-sandbox nftables table there. */
	const struct kiwi_egress_config *egress;

	/* Shown by `kiwi-run list`: the phase a `kiwi-run phase` runs; NULL
	 * for a plain run. */
	const char *phase;

	/* With no egress: the network audit (kiwi/net_audit.h). Still no way
	 * out, but every packet tried is logged, refused at once and reported
	 * in net_attempts. */
	bool net_audit;

	/* The user namespace's id maps. NULL: the caller's own uid and gid at
	 * 0 (root: see host_root_map). Else written by kiwi-run when root or when the
	 * map is the caller's own ids alone, by kiwi-helper(8) otherwise. */
	const struct kiwi_idmap *idmap;
	/* Root, no idmap: the sandbox's ids 0..65535 are kiwi's range of
	 * /etc/subuid and /etc/subgid, and the rootfs and binds idmapped
	 * mounts (kiwi/idmount.h), unless host_root_map asks for today's
	 * 0 0 1 (--host-root-map). */
	bool host_root_map;
	/* Set by kiwi_sandbox_run itself when it chose that default map. */
	bool idmounts;
	/* The ids pid 1 and the command take on inside (mapped ones); 0:0
	 * unless --user said otherwise. */
	uint32_t uid, gid;

	/* --debug: each setup step with its timing on stderr; NULL: off, at
	 * no cost (see kiwi/debug.h). */
	const struct kiwi_debug *debug;

	/* NULL: a run. Else a session: argv is not run. */
	struct kiwi_session_hooks *session;
	/* `session create --from`: fills the upper directories of the
	 * writable layer (kiwi/fslayer.h; layer is its root), in the sandbox
	 * before any overlay is mounted. NULL: nothing to restore. */
	int (*restore)(void *arg, int layer, kiwi_err *err);
	void *restore_arg;
	/* > 2: an fd of the caller's the restore reads (the snapshot's blob,
	 * opened as the caller: pid 1 may not reach the layout by path). Kept
	 * across pid 1's close-fds, closed once the filesystem is built. */
	int restore_fd;
};

struct kiwi_sandbox_result {
	char id[16];              /* the registry's id (kiwi-run list, kill); "" until registered */
	bool started;             /* the command was exec'd */
	int exit_code;            /* the command's code, or -1 */
	int signal;               /* the signal that killed it, or 0 */
	struct timespec started_at;    /* CLOCK_REALTIME when the run began */
	uint64_t wall_ns;         /* exec to exit */
	uint64_t cpu_user_us;
	uint64_t cpu_sys_us;
	bool timed_out;
	bool output_limit_hit;    /* and the sandbox was killed for it */
	bool killed_whole;        /* pid 1 itself died by a signal (OOM, external kill) */
	uint64_t stdout_bytes, stderr_bytes;
	bool stdout_truncated, stderr_truncated;
	bool output_stalled;      /* a reader stopped taking output: the command was paused for it */
	uint64_t output_stalled_ns;  /* how long, the longer of the two streams */
	uint64_t output_dropped;  /* bytes a stalled reader never got (the run ended first) */
	bool disk_full;           /* the writable layer was full at some point */
	uint64_t disk_used_kib;   /* its peak use */
	int disk_backend;         /* enum kiwi_disk_backend: what held it */
	/* Layered binds were bound in place: this kernel's tmpfs holds no
	 * user xattrs (kiwi_fslayer_holds_xattrs), so --disk did not bound
	 * them and nothing was landed. */
	bool binds_in_place;
	/* ws_mode KIWI_WS_LAYER: the layer (kiwi/fslayer.h), until
	 * kiwi_sandbox_result_release(). */
	bool has_layer;
	int layer_fd;
	int landlock_abi;         /* enforced Landlock ABI; 0: none (not asked, or no kernel support) */
	bool has_cgroup;          /* then cgroup_name and cg are set */
	char cgroup_name[256];
	struct kiwi_cgroup_stats cg;
	/* What bounded the processes: the cgroup's pids.max, RLIMIT_NPROC,
	 * or nothing. */
	enum { KIWI_PIDS_UNBOUNDED, KIWI_PIDS_CGROUP, KIWI_PIDS_RLIMIT } pids_bound;
	bool memory_bound;        /* memory.max held it */
	/* Set when something kiwi-run made could not be removed (its cgroup):
	 * a leak for `kiwi-run gc` and for the caller to hear of. */
	bool cleanup_failed;
	kiwi_err cleanup_error;
	/* Set when the sandbox could not be entered in the registry (it ran
	 * on, but `kiwi-run list` did not show it). */
	bool registry_failed;
	kiwi_err registry_error;
	/* Live until kiwi_sandbox_result_release(), so that the verdict is
	 * written before the (slower) network teardown. */
	struct kiwi_egress *egress;
	/* The network asked for ("none", "egress", "audit"), set before
	 * anything is made, so that a run that failed early still says it. */
	const char *network;
	bool net_audit;           /* the audit ran: net_attempts is the whole story */
	struct kiwi_net_attempts net_attempts;
	/* A session's exec: the egress attempts made while it ran
	 * (kiwi/egress.h), freed by kiwi_sandbox_result_release(). */
	struct kiwi_egress_tally *egress_tally;
	/* Instead, for a caller that is not root: the kiwi-helper(8) session
	 * holding them. */
	struct kiwi_helper *helper;
};

/* Runs the command to completion. Returns 0 once it ran (whatever its
 * status), -1 with err set when the sandbox could not be built or the
 * command could not be executed (err->step "exec"). Nothing in cfg may
 * point into the memory the kernel placed the process's arguments and
 * environment in (copy them first, as kiwi-run's main() does): the
 * sandbox's pid 1 blanks both before it forks the command. */
int kiwi_sandbox_run(const struct kiwi_sandbox_config *cfg,
		     struct kiwi_sandbox_result *res, kiwi_err *err);

/* Releases what outlives kiwi_sandbox_run() for the verdict's sake (the
 * egress veth and table). Call once the verdict is out. */
int kiwi_sandbox_result_release(struct kiwi_sandbox_result *res, kiwi_err *err);

/* The exit status kiwi-run reports for a run: the command's own code,
 * 128+N for signal N, 126/127 for exec failures, 125 for our own. */
int kiwi_sandbox_exit_status(const struct kiwi_sandbox_result *res, const kiwi_err *err, bool failed);

#endif
