/* SPDX-License-Identifier: Apache-2.0 */
/* A pseudo-terminal for an interactive sandbox (--tty, `kiwi-run shell`).
 *
 * Child side: pid 1 opens the pty in the sandbox's own devpts instance, so
 * the slave is a /dev/pts/N of the sandbox and never one of the host's; the
 * master crosses the sync socket to kiwi-run.
 * Parent side: the caller's terminal in raw mode (always restored), the
 * window size, and the input relay from kiwi-run's stdin to the master. The
 * master's output goes through kiwi/output.h like a pipe's. */
#ifndef KIWI_PTY_H
#define KIWI_PTY_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <termios.h>

#include "kiwi/err.h"

/* Child side, after pivot_root: opens /dev/pts/ptmx, unlocks it, opens its
 * slave through the master (TIOCGPTPEER: no path lookup, so no other devpts
 * can be named) and sets the window size. Both fds are close-on-exec. */
int kiwi_pty_open(const struct winsize *ws, int *master, int *slave, kiwi_err *err);

/* Whether fd is the master side of a pty (what the parent accepts from the
 * sync socket and nothing else). */
bool kiwi_pty_is_master(int fd);

/* The window size of the caller's terminal: that of in_fd, else of out_fd,
 * else 24x80 when neither is a terminal. */
void kiwi_pty_caller_winsize(int in_fd, int out_fd, struct winsize *ws);

/* The caller's terminal. raw is true while saved holds the mode to put
 * back; restoring twice is harmless. */
struct kiwi_term {
	int fd;
	bool raw;
	struct termios saved;
	struct termios raw_mode;
};

/* Puts fd into raw mode when it is a terminal (else does nothing):
 * keystrokes, Ctrl-C and Ctrl-Z included, pass as bytes to the sandbox's
 * own line discipline.
 * While it is raw, every signal that would end or stop kiwi-run and that
 * the caller does not already block (the launcher blocks and forwards
 * INT, TERM, HUP, QUIT, USR1, USR2) puts the mode back first: the fatal
 * ones (ALRM, a fault, ABRT, the real-time ones...) then act as before
 * (the previous handler or the default), and TSTP stops kiwi-run with the
 * terminal cooked and makes it raw again on SIGCONT. One terminal per
 * process. Only SIGKILL and SIGSTOP leave it raw. */
int kiwi_term_raw(struct kiwi_term *t, int fd, kiwi_err *err);
void kiwi_term_restore(struct kiwi_term *t);

/* Input from kiwi-run's stdin to the master, through a small buffer so that
 * a program that does not read never blocks kiwi-run. Poll in_fd for
 * POLLIN while kiwi_pty_input_wants_read(), the master for POLLOUT while
 * kiwi_pty_input_wants_write().
 * Only a terminal is relayed. A stdin that is not one (a pipe, a file,
 * /dev/null) gives the pty no input at all, as `docker run -t` without -i
 * does: a pipe's end cannot be told to a program reliably through a pty
 * (^D is lost when a line editor switches the mode between the write and
 * the read), and a half-delivered input would be worse than none. */
struct kiwi_pty_input {
	int in_fd;          /* not owned */
	int master;         /* not owned */
	bool done;          /* no more input will be taken */
	size_t off, len;
	char buf[4096];
};

enum kiwi_pty_input_state {
	KIWI_PTY_INPUT_OPEN,
	KIWI_PTY_INPUT_HANGUP,  /* the caller's terminal went away */
};

void kiwi_pty_input_init(struct kiwi_pty_input *in, int in_fd, int master);
bool kiwi_pty_input_wants_read(const struct kiwi_pty_input *in);
bool kiwi_pty_input_wants_write(const struct kiwi_pty_input *in);
/* Reads what in_fd holds; HANGUP when the terminal is gone. */
enum kiwi_pty_input_state kiwi_pty_input_read(struct kiwi_pty_input *in);
/* Writes what is queued to the master; a master whose slave is gone drops it. */
void kiwi_pty_input_write(struct kiwi_pty_input *in);

#endif
