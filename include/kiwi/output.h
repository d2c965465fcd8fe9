/* SPDX-License-Identifier: Apache-2.0 */
/* The command's stdout and stderr: captured through pipes, passed on to
 * kiwi-run's own stdout/stderr or to files, each bounded by a ceiling. */
#ifndef KIWI_OUTPUT_H
#define KIWI_OUTPUT_H

#include <stdbool.h>
#include <stdint.h>

#include "kiwi/err.h"

/* The last bytes of a stream, kept for a verdict: a ring over buf. */
struct kiwi_tail {
	char *buf;
	size_t size;
	uint64_t written;   /* bytes seen in all; the ring holds the last min(written, size) */
};

/* Appends to the ring. */
void kiwi_tail_add(struct kiwi_tail *t, const char *data, size_t len);
/* Copies the ring in order into out (at least t->size bytes); returns the length. */
size_t kiwi_tail_copy(const struct kiwi_tail *t, char *out);

/* How bytes reach the destination without ever blocking the event loop. */
enum kiwi_output_dest {
	KIWI_DEST_BLOCKING,  /* a file or /dev/null: a write ends by itself */
	KIWI_DEST_NONBLOCK,  /* a pipe or terminal, written through a non-blocking fd */
	KIWI_DEST_SEND,      /* a socket: send(MSG_DONTWAIT), its flags untouched */
};

/* Bytes the reader has not taken yet, at most this many per stream; past
 * it the pipe is no longer read and the command waits in its write. */
#define KIWI_OUTPUT_BUF (64 * 1024)

struct kiwi_output {
	int read_fd;        /* our end of the pipe, non-blocking; -1 at EOF */
	int write_fd;       /* the sandbox's end, closed in the parent after clone */
	int dest_fd;        /* where the bytes go (not owned) */
	int out_fd;         /* what is written to: dest_fd, or our own non-blocking
			     * opening of the same pipe or terminal (owned) */
	enum kiwi_output_dest how;
	int restore_flags;  /* >= 0: dest_fd's flags, set O_NONBLOCK by us */
	char *pend;         /* NULL until the reader first falls behind */
	size_t pend_off, pend_len;
	uint64_t limit;     /* bytes passed on at most */
	uint64_t bytes;     /* bytes the command wrote, passed on or not */
	uint64_t dropped;   /* bytes never passed on because the reader stalled */
	bool truncated;     /* bytes > limit */
	bool no_wait;       /* the run is over: what the reader does not take at once is dropped */
	bool stalled;       /* the buffer filled: the command was paused for the reader */
	int64_t stalled_since;  /* CLOCK_MONOTONIC when the buffer filled; 0: not full */
	uint64_t stalled_ns;    /* time paused in all */
	struct kiwi_tail *tail;  /* NULL, or keeps the last bytes, passed on or not */
};

/* Sets o up with no pipe yet (a pty's master is read instead) and prepares
 * dest_fd, not owned, for writes that never block. */
void kiwi_output_init(struct kiwi_output *o, int dest_fd, uint64_t limit);
/* kiwi_output_init() and the pipe. */
int kiwi_output_open(struct kiwi_output *o, int dest_fd, uint64_t limit, kiwi_err *err);
/* Whether to poll read_fd for input: open, and room in the buffer. */
bool kiwi_output_wants_read(const struct kiwi_output *o);
/* Whether to poll out_fd for POLLOUT: bytes wait for the reader. */
bool kiwi_output_wants_write(const struct kiwi_output *o);
/* Moves what is in the pipe now, as far as the buffer allows. Returns 1
 * while the pipe is open, 0 at EOF, -1 on error. Past the ceiling bytes
 * are read and dropped, so the command never blocks on the ceiling. */
int kiwi_output_pump(struct kiwi_output *o, kiwi_err *err);
/* Passes buffered bytes on, once out_fd is writable. 0, or -1 on error. */
int kiwi_output_flush(struct kiwi_output *o, kiwi_err *err);
/* The run is over: drops what waits for the reader, and from now on what
 * it does not take at once. */
void kiwi_output_stop_waiting(struct kiwi_output *o);
/* Neither pipe nor buffer holds anything more. */
bool kiwi_output_done(const struct kiwi_output *o);
/* Closes the pipe and our destination fd, frees the buffer; idempotent. */
void kiwi_output_close(struct kiwi_output *o);

#endif
