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

struct kiwi_output {
	int read_fd;        /* our end of the pipe, non-blocking; -1 at EOF */
	int write_fd;       /* the sandbox's end, closed in the parent after clone */
	int dest_fd;        /* where the bytes go */
	uint64_t limit;     /* bytes passed on at most */
	uint64_t bytes;     /* bytes the command wrote, passed on or not */
	bool truncated;     /* bytes > limit */
	struct kiwi_tail *tail;  /* NULL, or keeps the last bytes, passed on or not */
};

/* Creates the pipe; dest_fd is not owned. */
int kiwi_output_open(struct kiwi_output *o, int dest_fd, uint64_t limit, kiwi_err *err);
/* Moves what is in the pipe now. Returns 1 while the pipe is open, 0 at
 * EOF, -1 on error. Past the ceiling bytes are read and dropped, so the
 * command never blocks on a full pipe. */
int kiwi_output_pump(struct kiwi_output *o, kiwi_err *err);
void kiwi_output_close(struct kiwi_output *o);

#endif
