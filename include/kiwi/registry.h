/* SPDX-License-Identifier: Apache-2.0 */
/* The registry of running sandboxes, for `kiwi-run list` and `kill`: one
 * small JSON state file per sandbox, in a directory only its owner can
 * write:
 *   root       /run/kiwi/sandboxes/
 *   rootless   $XDG_RUNTIME_DIR/kiwi/sandboxes/ when that is the caller's own,
 *              else /tmp/kiwi-run-<uid>/ (made 0700, its owner checked; removed
 *              again when its last entry goes)
 *
 * Liveness is a lock, not a pid (as for cgroups and `kiwi-run gc`): the
 * kiwi-run that registered holds flock(LOCK_EX) on the file for as long as
 * it runs. The file is made unnamed (O_TMPFILE), locked and written, and only
 * then linked into the directory, so a name there is never unlocked while
 * its owner lives. A kiwi-run killed with SIGKILL leaves an unlocked file:
 * stale, skipped by list, removed by gc. */
#ifndef KIWI_REGISTRY_H
#define KIWI_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "kiwi/err.h"

#define KIWI_REGISTRY_ID_LEN 12   /* hex digits */
/* A state file is a few hundred bytes; anything larger is not ours. */
#define KIWI_REGISTRY_FILE_MAX 8192

struct kiwi_registry_entry {
	char id[KIWI_REGISTRY_ID_LEN + 1];
	pid_t pid;                 /* the sandbox's pid 1, as the host sees it */
	pid_t supervisor_pid;      /* the kiwi-run that follows it */
	uid_t uid;                 /* who started it */
	char phase[64];            /* "" for a plain run */
	char cgroup[256];          /* the cgroup's path in the hierarchy, "" for none */
	char network[16];          /* "none", "egress" or "audit", as made (a session's, pinned at create) */
	char command[256];         /* argv, space-joined, cut at 255 bytes */
	int64_t started_ns;        /* CLOCK_REALTIME */
	bool session;              /* a session (kiwi-run-session(1)): <id>.sock beside the entry */
	/* A session's network taken away (phase verify --session): it has the
	 * audit now, whatever network says. */
	bool sealed;
};

/* The network e has now: network, or "audit" once sealed. */
const char *kiwi_registry_network_now(const struct kiwi_registry_entry *e);

struct kiwi_registry;   /* a registration: the locked file and its directory */

/* A fresh random id, KIWI_REGISTRY_ID_LEN hex digits. */
int kiwi_registry_new_id(char id[KIWI_REGISTRY_ID_LEN + 1], kiwi_err *err);
/* s is an id or a prefix of one: min to KIWI_REGISTRY_ID_LEN lowercase
 * hex digits, nothing else. */
bool kiwi_registry_valid_id(const char *s, size_t min);

/* e->command from argv: space-joined, cut to the field, each byte that is
 * not valid UTF-8 (JSON holds nothing else) replaced by '?'. */
void kiwi_registry_set_command(struct kiwi_registry_entry *e, char *const *argv);

/* Writes e's state file and keeps it locked until kiwi_registry_remove().
 * The fd is close-on-exec: call it after clone, so no sandbox holds it.
 * (The launcher calls it once the sandbox has lived 100 ms: see
 * KIWI_REGISTER_DELAY_MS in sandbox.c.) */
int kiwi_registry_add(const struct kiwi_registry_entry *e, struct kiwi_registry **out, kiwi_err *err);
/* Replaces the state file with e's (the same id): a new file, locked,
 * renamed over the old, which stays locked until kiwi_registry_remove(). */
int kiwi_registry_update(struct kiwi_registry *r, const struct kiwi_registry_entry *e, kiwi_err *err);
/* The entry as written, sealed (a session's network taken away).
 * NULL-safe; nothing to do when it says so already. */
int kiwi_registry_set_sealed(struct kiwi_registry *r, kiwi_err *err);
/* Unlinks the file, drops the lock, frees. NULL-safe; never fails. */
void kiwi_registry_remove(struct kiwi_registry *r);

/* The caller's live sandboxes (stale entries are skipped, not removed),
 * oldest first. *out is freed by the caller. A registry directory that does
 * not exist yet is an empty list. */
int kiwi_registry_list(struct kiwi_registry_entry **out, size_t *n, kiwi_err *err);

/* Sends sig to the sandbox whose id is id (or a unique prefix of at least 4
 * digits). Only signals kiwi-run passes on to the command (TERM INT HUP QUIT
 * USR1 USR2) go to the kiwi-run that follows it; KILL goes to the sandbox's
 * pid 1 and ends the whole namespace at once. Every target is checked
 * through a pidfd to be that sandbox still, so a reused pid is never hit.
 */
int kiwi_registry_kill(const char *id, int sig, kiwi_err *err);
/* Whether kill takes sig. */
bool kiwi_registry_signal_ok(int sig);

/* The live entry that id names (or the one it is a unique prefix of, at
 * least 4 digits), with its state file open (*fd) so that its lock can be
 * checked again later. */
int kiwi_registry_find(const char *id, struct kiwi_registry_entry *e, int *fd, kiwi_err *err);
/* The same, for a caller that signals no pid but talks to the sandbox
 * through a socket of its own (a session), whose answer is the proof of
 * life: the entry's lock is held, by whom is not read. Reading
 * /proc/locks takes the kernel's file-lock rwsem for writing, which waits
 * for an RCU grace period: 7 to 13 ms on a loaded 2-core host. */
int kiwi_registry_find_held(const char *id, struct kiwi_registry_entry *e, int *fd, kiwi_err *err);
/* Where the caller's registry is (made when create); sessions keep their
 * sockets there, beside their entries. */
int kiwi_registry_dir(char *out, size_t len, bool create, kiwi_err *err);

/* Removes the caller's stale entries, and the sockets of sessions that
 * are gone; *removed counts the entries. */
int kiwi_registry_gc(unsigned *removed, kiwi_err *err);

/* Records beside the entries, <id><suffix> (id as kiwi_registry_new_id
 * makes, suffix such as ".scratch"): a file, locked by its writer for as
 * long as it lives, as an entry is, that says what to undo should the
 * writer die midway. add returns the locked fd (close-on-exec; a child
 * that inherits it holds the lock too); remove unlinks the record, then
 * closes fd. */
int kiwi_registry_record_add(const char *id, const char *suffix, const char *text, kiwi_err *err);
void kiwi_registry_record_remove(const char *id, const char *suffix, int fd);
/* For each record of suffix whose writer is gone (its lock free, taken
 * here): fn with its text; when fn returns 0 the record is removed and
 * counted in *removed. */
typedef int (*kiwi_registry_record_fn)(void *ctx, const char *id, const char *text, size_t len);
int kiwi_registry_record_gc(const char *suffix, kiwi_registry_record_fn fn, void *ctx, unsigned *removed,
			    kiwi_err *err);

/* Parses a state file's text into e (strict on types, missing keys and
 * ranges; unknown keys are ignored, for newer writers). Outside input:
 * fuzzed by tests/fuzz/fuzz_registry.c. */
int kiwi_registry_parse(const char *text, size_t len, struct kiwi_registry_entry *e, kiwi_err *err);
/* The state file's text for e; the caller frees it. NULL when out of memory. */
char *kiwi_registry_format(const struct kiwi_registry_entry *e);

#endif
