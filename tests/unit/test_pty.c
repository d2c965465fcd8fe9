/* SPDX-License-Identifier: Apache-2.0 */
/* The pty module on the host's own devpts: opening a pair, telling a
 * master from anything else, raw mode and its restoration, and the input
 * relay from one terminal to another. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <termios.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kiwi/pty.h"

static void open_pair(int *master, int *slave, unsigned short rows, unsigned short cols)
{
	struct winsize ws = { .ws_row = rows, .ws_col = cols };
	kiwi_err e = { 0 };
	if (access("/dev/pts/ptmx", R_OK | W_OK) < 0)
		cr_skip_test("no usable /dev/pts/ptmx here");
	cr_assert_eq(kiwi_pty_open(&ws, master, slave, &e), 0, "%s", e.msg);
}

Test(pty, opens_a_pair_with_its_size)
{
	int m, s;
	open_pair(&m, &s, 33, 101);
	struct winsize got;
	cr_assert_eq(ioctl(s, TIOCGWINSZ, &got), 0);
	cr_assert_eq(got.ws_row, 33);
	cr_assert_eq(got.ws_col, 101);
	cr_assert(isatty(s));
	cr_assert(fcntl(m, F_GETFD) & FD_CLOEXEC);
	cr_assert(fcntl(s, F_GETFD) & FD_CLOEXEC);
	/* What one side writes, the other reads. */
	cr_assert_eq(write(m, "x\n", 2), 2);
	char buf[8];
	cr_assert_eq(read(s, buf, sizeof(buf)), 2);
	close(m);
	close(s);
}

Test(pty, only_a_master_is_a_master)
{
	int m, s, p[2];
	open_pair(&m, &s, 24, 80);
	cr_assert(pipe(p) == 0);
	int null = open("/dev/null", O_RDWR);
	cr_assert(kiwi_pty_is_master(m));
	cr_assert(!kiwi_pty_is_master(s));
	cr_assert(!kiwi_pty_is_master(p[0]));
	cr_assert(!kiwi_pty_is_master(null));
	cr_assert(!kiwi_pty_is_master(-1));
	close(m);
	close(s);
	close(p[0]);
	close(p[1]);
	close(null);
}

Test(pty, caller_winsize_falls_back)
{
	int m, s, p[2];
	open_pair(&m, &s, 40, 120);
	cr_assert(pipe(p) == 0);
	struct winsize ws;
	kiwi_pty_caller_winsize(s, -1, &ws);
	cr_assert(ws.ws_row == 40 && ws.ws_col == 120);
	kiwi_pty_caller_winsize(p[0], s, &ws);  /* stdin a pipe: stdout's */
	cr_assert(ws.ws_row == 40 && ws.ws_col == 120);
	kiwi_pty_caller_winsize(p[0], p[1], &ws);  /* no terminal at all */
	cr_assert(ws.ws_row == 24 && ws.ws_col == 80);
	close(m);
	close(s);
	close(p[0]);
	close(p[1]);
}

Test(pty, raw_mode_is_restored)
{
	int m, s;
	open_pair(&m, &s, 24, 80);
	struct termios before, during, after;
	cr_assert_eq(tcgetattr(s, &before), 0);
	struct kiwi_term t;
	kiwi_err e = { 0 };
	cr_assert_eq(kiwi_term_raw(&t, s, &e), 0, "%s", e.msg);
	cr_assert(t.raw);
	cr_assert_eq(tcgetattr(s, &during), 0);
	cr_assert(!(during.c_lflag & (ICANON | ECHO | ISIG)));
	kiwi_term_restore(&t);
	kiwi_term_restore(&t);  /* twice is harmless */
	cr_assert_eq(tcgetattr(s, &after), 0);
	cr_assert_eq(after.c_lflag, before.c_lflag);
	cr_assert_eq(after.c_iflag, before.c_iflag);
	cr_assert_eq(after.c_oflag, before.c_oflag);
	cr_assert_eq(memcmp(after.c_cc, before.c_cc, sizeof(after.c_cc)), 0);
	close(m);
	close(s);
}

Test(pty, raw_mode_leaves_a_non_terminal_alone)
{
	int p[2];
	cr_assert(pipe(p) == 0);
	struct kiwi_term t;
	kiwi_err e = { 0 };
	cr_assert_eq(kiwi_term_raw(&t, p[0], &e), 0);
	cr_assert(!t.raw);
	kiwi_term_restore(&t);
	close(p[0]);
	close(p[1]);
}

/* The caller's terminal (a second pty: we type into its master) relayed to
 * the sandbox's master; the sandbox's slave reads it. */
Test(pty, input_is_relayed_and_a_hangup_seen)
{
	int caller_m, caller_s, m, s;
	open_pair(&caller_m, &caller_s, 24, 80);
	open_pair(&m, &s, 24, 80);
	struct kiwi_term raw;
	kiwi_err e = { 0 };
	cr_assert_eq(kiwi_term_raw(&raw, caller_s, &e), 0);
	struct kiwi_pty_input in;
	kiwi_pty_input_init(&in, caller_s, m);
	cr_assert(kiwi_pty_input_wants_read(&in));
	cr_assert_eq(write(caller_m, "echo hi\n", 8), 8);
	struct pollfd p = { .fd = caller_s, .events = POLLIN };
	cr_assert_eq(poll(&p, 1, 10000), 1);
	cr_assert_eq(kiwi_pty_input_read(&in), KIWI_PTY_INPUT_OPEN);
	cr_assert(kiwi_pty_input_wants_write(&in));
	kiwi_pty_input_write(&in);
	cr_assert(!kiwi_pty_input_wants_write(&in));
	/* The caller's side is raw: the bytes came as typed. */
	char buf[32] = { 0 };
	cr_assert_eq(read(s, buf, sizeof(buf)), 8);
	cr_assert_str_eq(buf, "echo hi\n");
	/* The caller's terminal goes away. */
	close(caller_m);
	cr_assert_eq(kiwi_pty_input_read(&in), KIWI_PTY_INPUT_HANGUP);
	cr_assert(!kiwi_pty_input_wants_read(&in));
	close(caller_s);
	close(m);
	close(s);
}

Test(pty, a_pipe_gives_no_input)
{
	int m, s, p[2];
	open_pair(&m, &s, 24, 80);
	cr_assert(pipe(p) == 0);
	struct kiwi_pty_input in;
	kiwi_pty_input_init(&in, p[0], m);
	cr_assert(!kiwi_pty_input_wants_read(&in));
	close(m);
	close(s);
	close(p[0]);
	close(p[1]);
}

/* A signal that ends the process gives the terminal back first. */
Test(pty, a_fatal_signal_restores_the_mode)
{
	int m, s;
	open_pair(&m, &s, 24, 80);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		struct kiwi_term t;
		kiwi_err e = { 0 };
		signal(SIGALRM, SIG_DFL);
		if (kiwi_term_raw(&t, s, &e) < 0)
			_exit(1);
		raise(SIGALRM);
		_exit(2);  /* not reached */
	}
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM, "status %#x", status);
	struct termios after;
	cr_assert_eq(tcgetattr(s, &after), 0);
	cr_assert(after.c_lflag & ICANON);
	cr_assert(after.c_lflag & ECHO);
	close(m);
	close(s);
}
