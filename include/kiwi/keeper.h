/* SPDX-License-Identifier: Apache-2.0 */
/* A session's pid 1 and its execs (kiwi-run-session(1)).
 *
 * A session is a sandbox whose pid 1 starts no command of its own: it
 * keeps the namespaces alive and, for each `session exec`, forks an exec
 * leader. The connection to the exec client (a SOCK_SEQPACKET socket the
 * session's supervisor accepted and checked) is handed to pid 1 with
 * KIWI_SYNC_EXEC_CONN; from then on the client talks to the leader alone:
 *
 *   client -> supervisor  'x' (or 'i') and KIWI_SESSION_EXEC_CGROUP_FROM_SESSION:
 *                      the supervisor gives the exec its own cgroup,
 *                      <session>/exec-<number>: the one it made ahead, whose
 *                      leader pid 1 started in it then (KIWI_SYNC_EXEC_WARM,
 *                      once the session is ready), else one made now
 *   supervisor -> client KIWI_EXEC_CGROUP: value the number, flags
 *                      KIWI_EXEC_CGROUP_MADE (none: the exec has no cgroup of
 *                      its own) and KIWI_EXEC_CGROUP_WARM; then the connection
 *                      goes on to pid 1 (with that cgroup's directory, or to
 *                      the leader waiting in it). An older client sends 'x'
 *                      alone, with an O_DIRECTORY fd of a cgroup it made.
 *   client -> leader   KIWI_EXEC_REQUEST + strings, stdin/stdout/stderr fds
 *   leader -> client   KIWI_EXEC_READY + a pidfd of the leader: flags
 *                      KIWI_EXEC_IN_CGROUP when pid 1 started it in the
 *                      exec's cgroup (clone3 CLONE_INTO_CGROUP), else value
 *                      is clone3's errno (0: no cgroup came, or an older
 *                      pid 1) and the client moves it in (cgroup.procs)
 *   client -> leader   KIWI_EXEC_GO, unless READY said KIWI_EXEC_GOING: the
 *                      client asked for that with KIWI_EXEC_GO_IF_MOVED, and
 *                      the leader, with nothing to be moved, went on at once
 *   leader -> client   KIWI_EXEC_STARTED, or KIWI_EXEC_FAILED with the error
 *   client -> leader   KIWI_EXEC_KILL (timeout, signals) at any time
 *   leader -> client   KIWI_EXEC_EXIT once the command and, unless kept,
 *                      everything it started are gone; with
 *                      KIWI_EXEC_UNTIL_CLOSED it stays until the client
 *                      closes, and the exec's cgroup goes when pid 1 has
 *                      reaped it: removed by the supervisor where CGROUP
 *                      said KIWI_EXEC_CGROUP_SESSION_REMOVES, else by the
 *                      client (which closes first, then waits for it)
 *
 * The leader started ahead also forks its command's process ahead: signals
 * reset, a session of its own, and, with the built-in seccomp profile,
 * Landlock and the filter loaded; it gets the request from the leader and
 * only sets up its fds and working directory before its exec. Any other
 * profile is loaded last, as a cold leader's command does.
 *
 * The leader is a child subreaper: whatever the command leaves behind is
 * re-parented to it, so it can end the exec's whole tree without a cgroup.
 * The command gets the session's own rules: the same ids, no capability,
 * no_new_privs, the session's seccomp filter, loaded last. */
#ifndef KIWI_KEEPER_H
#define KIWI_KEEPER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiwi/err.h"

enum kiwi_exec_type {
	KIWI_EXEC_REQUEST = 0x4b45,
	KIWI_EXEC_READY,
	KIWI_EXEC_GO,
	KIWI_EXEC_STARTED,
	KIWI_EXEC_FAILED,
	KIWI_EXEC_KILL,
	KIWI_EXEC_EXIT,
	KIWI_EXEC_PTY,            /* leader -> client, before READY with KIWI_EXEC_TTY: the master */
	KIWI_EXEC_SNAPSHOT,       /* supervisor -> snapshot client: the writable layer (kiwi/session.h) */
	KIWI_EXEC_CGROUP,         /* supervisor -> exec client, first: the exec's cgroup */
};

#define KIWI_EXEC_KEEP_BACKGROUND 1u   /* REQUEST: leave what the command started running */
/* REQUEST: the command's stdin, stdout and stderr are a pty of the
 * sandbox's devpts, its controlling terminal; the master goes to the
 * client (KIWI_EXEC_PTY), which relays it. */
#define KIWI_EXEC_TTY 2u

/* REQUEST: no command: the leader copies a file itself, with the
 * session's ids, argv[0] naming the path inside (resolved with
 * RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, a regular file only). COPY_IN
 * reads fd 0 into a new file beside it, renamed over it once whole;
 * COPY_OUT writes the file to fd 1. */
#define KIWI_EXEC_COPY_IN 4u
#define KIWI_EXEC_COPY_OUT 8u
/* REQUEST: GO is only worth waiting for when the client has the leader to
 * move: a leader born in the exec's cgroup (or with none to be in) starts
 * the command after READY without it, and says so with KIWI_EXEC_GOING.
 * A round trip less, two wakeups fewer, on every exec. Older leaders
 * ignore the flag and wait for GO, which the client then sends. */
#define KIWI_EXEC_GO_IF_MOVED 16u
/* REQUEST: after EXIT the leader stays until the client closes the
 * connection (at most KIWI_EXEC_LINGER_MS), so that its exit, which
 * tears down a copy of pid 1's address space, runs after the client's
 * and not on its time: the client is woken onto the leader's CPU. Older
 * leaders exit at once, as a client that wants them gone first closes. */
#define KIWI_EXEC_UNTIL_CLOSED 32u
#define KIWI_EXEC_LINGER_MS 2000

/* CGROUP: value is the number of the exec's cgroup, <session>/ followed by
 * KIWI_EXEC_CGROUP_LEAF; without KIWI_EXEC_CGROUP_MADE the exec has none. */
#define KIWI_EXEC_CGROUP_LEAF "exec-%08x"
#define KIWI_EXEC_CGROUP_MADE 1u
/* CGROUP: made ahead, with the exec's leader waiting in it. */
#define KIWI_EXEC_CGROUP_WARM 2u
/* CGROUP: the session removes it once the exec's leader is gone (the
 * client reads it, and neither waits for the leader nor removes it). */
#define KIWI_EXEC_CGROUP_SESSION_REMOVES 4u
/* READY: the leader was born in the exec's cgroup. */
#define KIWI_EXEC_IN_CGROUP 1u
/* READY: the leader goes on without GO (KIWI_EXEC_GO_IF_MOVED). */
#define KIWI_EXEC_GOING 2u

/* Bounds of a request: the strings are argv, then env, then cwd, each
 * NUL-terminated, packed after the header. */
#define KIWI_EXEC_REQUEST_MAX (256 * 1024)
#define KIWI_EXEC_MAX_ARGS 4096

struct kiwi_exec_msg {
	uint32_t type;
	uint32_t flags;           /* REQUEST: KIWI_EXEC_* */
	uint32_t argc, envc;      /* REQUEST */
	int32_t value;            /* KILL: signo; EXIT: wait status */
	uint32_t disk_full;       /* EXIT: the session's layer was full at the exec's end */
	uint64_t disk_used_kib;   /* EXIT: what the layer held then */
	uint32_t disk_backend;    /* EXIT: enum kiwi_disk_backend, what holds it */
	int64_t mono_ns;          /* STARTED, EXIT: CLOCK_MONOTONIC */
	uint64_t utime_us;        /* EXIT: the exec's reaped processes */
	uint64_t stime_us;
	uint16_t rows, cols;      /* REQUEST with KIWI_EXEC_TTY */
	uint32_t mode;            /* REQUEST with KIWI_EXEC_COPY_IN: the new file's */
	kiwi_err err;             /* FAILED */
};

struct kiwi_exec_request {
	uint32_t flags;
	char **argv;              /* NULL-terminated */
	char **envp;              /* NULL-terminated */
	const char *cwd;
	int fds[3];               /* stdin, stdout, stderr; -1: /dev/null */
	uint16_t rows, cols;      /* KIWI_EXEC_TTY: the terminal's size */
	uint32_t mode;            /* KIWI_EXEC_COPY_IN: the new file's permission bits */
};

/* Client side: sends the request (fds attached). */
int kiwi_exec_send_request(int conn, const struct kiwi_exec_request *r, kiwi_err *err);
/* Leader side: reads and checks one request; *buf holds the strings. */
int kiwi_exec_recv_request(int conn, struct kiwi_exec_request *r, char **buf, kiwi_err *err);
/* Sends/receives one fixed-size message, with at most one fd. */
int kiwi_exec_send(int conn, const struct kiwi_exec_msg *m, int fd);
/* 1 with a message, 0 at EOF, -1 on error; *fd gets an attached fd or -1. */
int kiwi_exec_recv(int conn, struct kiwi_exec_msg *m, int flags, int *fd);

struct kiwi_init_args;
/* Pid 1 of a session, once the sandbox is built: never returns. */
/* layer: the writable layer's root (kiwi/fslayer.h), -1 for none: each
 * exec's verdict says how full it was at the exec's end. */
_Noreturn void kiwi_keeper_main(const struct kiwi_init_args *args, int layer);

#endif
