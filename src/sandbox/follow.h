/* SPDX-License-Identifier: Apache-2.0 */
/* What kiwi-run's side follows while a sandbox runs (sandbox.c), shared
 * with a session's part of it (session_follow.c). Internal to
 * src/sandbox/. */
#ifndef KIWI_FOLLOW_H
#define KIWI_FOLLOW_H

#include "kiwi/cgroup.h"
#include "kiwi/egress.h"
#include "kiwi/output.h"
#include "kiwi/pty.h"
#include "kiwi/registry.h"
#include "kiwi/sandbox.h"
#include "kiwi/sync.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Everything the parent follows while the sandbox runs. */
struct follow {
	const struct kiwi_sandbox_config *cfg;
	struct kiwi_sandbox_result *res;
	kiwi_err *err;
	int sock, pidfd, sigfd, timerfd;
	struct kiwi_output out, errout;
	struct kiwi_cgroup *cg;   /* NULL: no limits asked for */
	struct kiwi_egress *egress;  /* NULL: no network of our own */
	struct kiwi_egress *audited; /* whose audit to read: egress, or kiwi-helper's caller half */
	struct kiwi_registry *reg;   /* the entry for `kiwi-run list`, once made */
	int64_t register_at;      /* CLOCK_MONOTONIC when to make it; 0 once tried */
	pid_t pid;                /* the sandbox's init */
	int audit_fd;             /* the network audit's log; -1: none */
	int layer_fd;             /* the writable layer, when binds are layered or a session; else -1 */
	bool layer_in_place;      /* its layered binds were bound in place: nothing to land */
	int master;               /* --tty: the pty's master, from the sandbox; else -1 */
	struct kiwi_term term;    /* --tty: the caller's terminal, raw while the session runs */
	struct kiwi_pty_input in; /* --tty: our stdin to the master */
	int64_t exec_mono;
	bool failed, exited, init_gone, killing, grace_armed, hung_up;
	bool sync_eof;            /* pid 1 closed its end: the pidfd says when it is gone */
	bool signalled;           /* a signal was forwarded: see ended_for_a_reason() */
	/* A session: execs running now, and when the last one ended. */
	struct kiwi_session_hooks *session;
	int cg_leaf_fd;           /* a session's pid 1 starts in <cgroup>/keeper; else -1 */
	int seal_fd;              /* the SEAL client waiting for pid 1's purge; else -1 */
	int userns_fd, netns_fd;  /* a session with egress: its namespaces, for the seal; else -1 */
	int sealed_audit_fd;      /* then the network audit's log, handed to each exec; else -1 */
	bool sealed;              /* the network is gone for good */
	int execs;
	int64_t idle_since, ready_at;
	/* The next exec's cgroup, with its leader started ahead in it once
	 * warm_ready (warm_up()); warm_off: this session cannot. */
	struct kiwi_cgroup *warm_cg;
	uint32_t warm_number;
	bool warm_ready, warm_off;
	int64_t warm_until;       /* then the warm cgroup and its leader go, unused */
	int creator_fd;           /* a pidfd of `session create`, until it is gone; else -1 */
	/* The exec cgroups it removes itself (KIWI_EXEC_CGROUP_SESSION_REMOVES):
	 * once pid 1 says their exec's leader is gone (ended), at the first
	 * exec's end that finds them empty. */
	struct exec_cgroup {
		struct kiwi_cgroup *cg;
		uint64_t id;          /* its directory's inode, as pid 1 names it */
		bool ended;
	} exec_cgs[16];
	size_t n_exec_cgs;
	bool *helper_binds;       /* not root, on kiwi-helper's range: the binds whose tree it makes */
};

/* The timerfd, ns from now (0: at once). */
void follow_arm_timer(struct follow *f, uint64_t ns);
/* A message of type to pid 1, with sig as its value. */
void follow_send_to_init(struct follow *f, enum kiwi_sync_type type, int sig);
/* Ends the whole sandbox at once (cgroup.kill, else pid 1's SIGKILL to all). */
void follow_kill(struct follow *f);
/* Keeps the first error, then follow_kill(). */
void follow_fail_and_kill(struct follow *f, const kiwi_err *e);
/* The entry `kiwi-run list` shows; 0, or -1 with res->registry_error. */
int follow_register(struct follow *f, pid_t pid);
/* Sessions (session_follow.c): ends it, why for the evidence. */
void follow_session_end(struct follow *f, const char *why);
/* The session's timer fired: its bounds, the warm leader's 2 s. */
void follow_session_timer(struct follow *f);
/* Pid 1's KIWI_SYNC_EXEC_WARMED. */
void follow_warmed(struct follow *f, int why);
/* Pid 1 is cloned: the session is listed while it builds itself. */
void follow_session_cloned(struct follow *f);
/* An exec's leader is gone (KIWI_SYNC_EXEC_END): running is how many are
 * left, cgroup its exec's cgroup id (0: none), reported whether it told
 * its client the end and the client has gone (KIWI_SYNC_EXEC_REPORTED:
 * else the client reads and removes the cgroup itself); the ended execs'
 * cgroups left empty go. */
void follow_exec_ended(struct follow *f, int running, uint64_t cgroup, bool reported);
/* The session's end: its cgroup's removal takes what is left of them. */
void follow_forget_exec_cgroups(struct follow *f);
/* Pid 1 is up: the creator told, the first exec warmed once it has gone. */
void follow_session_ready(struct follow *f);
/* `session create` has left: the first exec is warmed up now. */
void follow_creator_gone(struct follow *f);
/* The session's controllers handed to its children. */
int follow_session_controllers(struct follow *f, uint32_t flags);
/* Pid 1's count of running execs (EXEC_BEGIN, EXEC_END). */
void follow_exec_count(struct follow *f, int running);
/* Pid 1's purge done (verify): the network goes, the SEAL client hears. */
void follow_session_seal(struct follow *f, int reaped);
/* A client on the session's socket: exec, snapshot, tally, seal, destroy. */
void follow_session_client(struct follow *f);

#endif
