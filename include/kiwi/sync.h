/* SPDX-License-Identifier: Apache-2.0 */
/* Parent <-> init messages over one SOCK_SEQPACKET socketpair: each
 * message is one fixed-size packet, so a half-read is impossible. The
 * numbered steps (#1...) are mirrored in sandbox.c and init.c. */
#ifndef KIWI_SYNC_H
#define KIWI_SYNC_H

#include <stddef.h>
#include <stdint.h>

#include "kiwi/err.h"

enum kiwi_sync_type {
	KIWI_SYNC_MAPS_DONE = 1,  /* parent -> init  #1: id maps written */
	KIWI_SYNC_EXEC_OK,        /* init -> parent  #2: the command was exec'd */
	KIWI_SYNC_ERROR,          /* init -> parent  #2: setup or exec failed */
	KIWI_SYNC_SIGNAL,         /* parent -> init  forward value as a signal */
	KIWI_SYNC_EXIT,           /* init -> parent  #3: the command ended */
	KIWI_SYNC_KILL,           /* parent -> init  signal value to every process */
	KIWI_SYNC_AUDIT_FD,       /* init -> parent  before #2: the network audit's
				   * NFLOG socket rides along (SCM_RIGHTS) */
	KIWI_SYNC_PTY,            /* init -> parent  #2: the pty master rides along */
	KIWI_SYNC_LAYER_FD,       /* init -> parent  before #2: the writable layer's
				   * root rides along (kiwi/fslayer.h) */
	/* Sessions (kiwi/keeper.h): */
	KIWI_SYNC_EXEC_CONN,      /* parent -> init  an exec client's connection rides along,
				   * with the exec's cgroup when the client sent one */
	KIWI_SYNC_EXEC_BEGIN,     /* init -> parent  an exec leader started; value: how many run */
	KIWI_SYNC_EXEC_END,       /* init -> parent  an exec leader ended; value: how many run */
	KIWI_SYNC_PURGE,          /* parent -> init  kill every process but pid 1, wait for all */
	KIWI_SYNC_PURGED,         /* init -> parent  done; value: how many were killed */
	KIWI_SYNC_WITNESS,        /* init -> parent  a session, before #2: the sandbox's own
	                           * procfs rides along, ns_id is its mount namespace's */
	KIWI_SYNC_CGROUP_FD,      /* parent -> init  a session, before #1: the session's
				   * cgroup rides along, for the root of pid 1's cgroup
				   * namespace (init.c, cgroupns_at) */
	KIWI_SYNC_DISK_FD,        /* parent -> init  before #1: the disk layer kiwi-helper
	                           * made rides along, to take the reserved disk_fd */
	KIWI_SYNC_BIND_FD,        /* parent -> init  before #1: bind value's idmapped tree from
	                           * kiwi-helper rides along, to take its reserved fd */
	KIWI_SYNC_EXEC_WARM,      /* parent -> init  a session: the next exec's cgroup rides
	                           * along; pid 1 starts that exec's leader in it now */
	KIWI_SYNC_EXEC_WARMED,    /* init -> parent  value: 0, the leader waits; else why not */
	KIWI_SYNC_EXEC_COOL,      /* parent -> init  the warmed exec's cgroup is gone, unused,
	                           * its leader killed with it: pid 1 lets go of its fd */
};

#define KIWI_SYNC_DISK_FULL 1u  /* the writable layer was full at some point */
#define KIWI_SYNC_BINDS_IN_PLACE 4u  /* EXIT: layered binds were bound in place */
/* MAPS_DONE: kiwi-helper moved pid 1 into its cgroup after clone, so the
 * cgroup namespace made at clone is rooted at the caller's cgroup: pid 1
 * makes a new one, rooted at the sandbox's cgroup. */
#define KIWI_SYNC_NEW_CGROUPNS 2u
/* init -> parent, EXEC_OK of a session: pid 1's cgroup namespace is rooted
 * at the session's cgroup (else at its leaf, keeper). */
#define KIWI_SYNC_CGROUPNS_AT_SESSION 8u
/* EXEC_CONN: no cgroup rides along: the exec is the one warmed up last
 * (KIWI_SYNC_EXEC_WARM). */
#define KIWI_SYNC_EXEC_WARMED_ONE 16u
/* EXEC_END: the leader reported the exec's end and its client has gone
 * (it exited 0 after KIWI_EXEC_UNTIL_CLOSED): the session may remove the
 * exec's cgroup. Killed or failed, its client reads and removes it. */
#define KIWI_SYNC_EXEC_REPORTED 32u

struct kiwi_sync_msg {
	uint32_t type;
	int32_t value;            /* SIGNAL: signo; EXIT: wait status */
	int64_t mono_ns;          /* EXEC_OK, EXIT: CLOCK_MONOTONIC */
	int64_t real_ns;          /* EXEC_OK: CLOCK_REALTIME */
	uint64_t utime_us;        /* EXIT: all reaped processes of the sandbox */
	uint64_t stime_us;
	uint32_t flags;           /* EXIT: KIWI_SYNC_DISK_FULL */
	uint64_t disk_used_kib;   /* EXIT: the writable layer's peak use */
	uint64_t ns_id;           /* WITNESS: the mount namespace's id, 0: unknown */
	uint64_t ns_ino;          /* WITNESS: its nsfs inode, which every kernel gives */
	uint64_t cgroup_id;       /* EXEC_BEGIN, EXEC_END: the exec's cgroup (its directory's inode); 0: none */
	kiwi_err err;             /* ERROR */
};

int kiwi_sync_send(int sock, const struct kiwi_sync_msg *m);
/* Sends m with a copy of fd attached. */
int kiwi_sync_send_fd(int sock, const struct kiwi_sync_msg *m, int fd);
/* Sends m with copies of the n_fds fds (at most 2) attached. */
int kiwi_sync_send_fds(int sock, const struct kiwi_sync_msg *m, const int *fds, size_t n_fds);
/* Returns 1 with a message, 0 on EOF (the other side is gone), -1 on error.
 * An fd that came along is closed. */
int kiwi_sync_recv(int sock, struct kiwi_sync_msg *m, int flags);
/* The same; an fd that came along (close-on-exec) goes to *fd, else -1. */
int kiwi_sync_recv_fd(int sock, struct kiwi_sync_msg *m, int flags, int *fd);
/* The same with up to two fds: fds[0], fds[1] get them in order, -1 for
 * those that did not come (a third is closed). */
int kiwi_sync_recv_fds(int sock, struct kiwi_sync_msg *m, int flags, int fds[2]);
int64_t kiwi_clock_ns(int clock);

#endif
