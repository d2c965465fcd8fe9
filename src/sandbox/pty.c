/* SPDX-License-Identifier: Apache-2.0 */
#include "kiwi/pty.h"
#include "kiwi/cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* Debian 12's glibc headers may lack it (Linux 4.13). */
#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif

int kiwi_pty_open(const struct winsize *ws, int *master, int *slave, kiwi_err *err)
{
	/* The new devpts instance's own ptmx, not /dev/ptmx of some other
	 * mount: the slave must be numbered in the sandbox's instance. */
	_cleanup_close_ int m = open("/dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0)
		return kiwi_error(err, errno, "tty", "cannot open the sandbox's /dev/pts/ptmx");
	int unlock = 0;
	if (ioctl(m, TIOCSPTLCK, &unlock) < 0)
		return kiwi_error(err, errno, "tty", "cannot unlock the pseudo-terminal");
	if (ioctl(m, TIOCSWINSZ, ws) < 0)
		return kiwi_error(err, errno, "tty", "cannot set the terminal's window size");
	int s = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (s < 0)
		return kiwi_error(err, errno, "tty", "cannot open the pseudo-terminal's slave");
	*slave = s;
	*master = TAKE_FD(m);
	return 0;
}

bool kiwi_pty_is_master(int fd)
{
	struct stat st;
	unsigned int n;
	/* Every ptmx, whichever devpts it belongs to, is char 5:2, and only a
	 * master answers TIOCGPTN. */
	return fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == 5 &&
	       minor(st.st_rdev) == 2 && ioctl(fd, TIOCGPTN, &n) == 0;
}

void kiwi_pty_caller_winsize(int in_fd, int out_fd, struct winsize *ws)
{
	if (ioctl(in_fd, TIOCGWINSZ, ws) == 0 && ws->ws_row && ws->ws_col)
		return;
	if (out_fd >= 0 && ioctl(out_fd, TIOCGWINSZ, ws) == 0 && ws->ws_row && ws->ws_col)
		return;
	*ws = (struct winsize){ .ws_row = 24, .ws_col = 80 };
}

/* The terminal the handlers below put back, and what they replaced. */
static struct kiwi_term *guarded;
static struct sigaction guard_saved[NSIG];
static bool guard_set[NSIG];

/* Async-signal-safe: tcsetattr is an ioctl, sigaction, kill and raise are
 * on the POSIX list. */
static void give_terminal_back(int sig)
{
	int saved_errno = errno;
	struct kiwi_term *t = guarded;
	if (t)
		tcsetattr(t->fd, TCSADRAIN, &t->saved);
	if (sig == SIGTSTP) {
		kill(getpid(), SIGSTOP);
		/* Continued: the session goes on, raw again. */
		if (t)
			tcsetattr(t->fd, TCSADRAIN, &t->raw_mode);
	} else {
		/* The previous action, once the handler returns (a fault then
		 * recurs and meets it, ASan's report included). */
		sigaction(sig, &guard_saved[sig], NULL);
		raise(sig);
	}
	errno = saved_errno;
}

static bool ends_or_stops(int sig)
{
	static const int sigs[] = {
		SIGALRM, SIGVTALRM, SIGPROF, SIGPWR, SIGXCPU, SIGXFSZ, SIGSTKFLT, SIGIO,
		SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS, SIGTSTP,
	};
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(sigs); i++)
		if (sigs[i] == sig)
			return true;
	return sig >= SIGRTMIN && sig <= SIGRTMAX;
}

static void guard_signals(struct kiwi_term *t)
{
	struct sigaction sa = { .sa_handler = give_terminal_back };
	sigset_t blocked;
	sigprocmask(SIG_SETMASK, NULL, &blocked);
	sigfillset(&sa.sa_mask);
	guarded = t;
	for (int sig = 1; sig < NSIG; sig++) {
		guard_set[sig] = false;
		if (!ends_or_stops(sig) || sigismember(&blocked, sig) ||
		    sigaction(sig, NULL, &guard_saved[sig]) < 0 || guard_saved[sig].sa_handler == SIG_IGN)
			continue;
		guard_set[sig] = sigaction(sig, &sa, NULL) == 0;
	}
}

static void unguard_signals(void)
{
	for (int sig = 1; sig < NSIG; sig++)
		if (guard_set[sig]) {
			sigaction(sig, &guard_saved[sig], NULL);
			guard_set[sig] = false;
		}
	guarded = NULL;
}

int kiwi_term_raw(struct kiwi_term *t, int fd, kiwi_err *err)
{
	*t = (struct kiwi_term){ .fd = fd };
	if (!isatty(fd))
		return 0;
	if (tcgetattr(fd, &t->saved) < 0)
		return kiwi_error(err, errno, "tty", "cannot read the terminal's mode");
	t->raw_mode = t->saved;
	cfmakeraw(&t->raw_mode);
	guard_signals(t);
	/* TCSADRAIN, not TCSAFLUSH: what was typed ahead goes to the sandbox. */
	if (tcsetattr(fd, TCSADRAIN, &t->raw_mode) < 0) {
		unguard_signals();
		return kiwi_error(err, errno, "tty", "cannot put the terminal in raw mode");
	}
	t->raw = true;
	return 0;
}

void kiwi_term_restore(struct kiwi_term *t)
{
	if (!t->raw)
		return;
	int saved = errno;
	/* Interrupted by a signal or not, the mode must come back. */
	while (tcsetattr(t->fd, TCSADRAIN, &t->saved) < 0 && errno == EINTR)
		;
	t->raw = false;
	unguard_signals();
	errno = saved;
}

void kiwi_pty_input_init(struct kiwi_pty_input *in, int in_fd, int master)
{
	in->in_fd = in_fd;
	in->master = master;
	/* Only a terminal is relayed: see kiwi/pty.h. */
	in->done = !isatty(in_fd);
	in->off = in->len = 0;
}

bool kiwi_pty_input_wants_read(const struct kiwi_pty_input *in)
{
	return !in->done && in->len == 0;
}

bool kiwi_pty_input_wants_write(const struct kiwi_pty_input *in)
{
	return in->len > in->off;
}

enum kiwi_pty_input_state kiwi_pty_input_read(struct kiwi_pty_input *in)
{
	/* One read: the fd is the caller's and stays blocking (O_NONBLOCK
	 * would change it for the caller's shell too); poll said it is ready. */
	ssize_t n = read(in->in_fd, in->buf, sizeof(in->buf));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return KIWI_PTY_INPUT_OPEN;
	if (n > 0) {
		in->off = 0;
		in->len = (size_t)n;
		return KIWI_PTY_INPUT_OPEN;
	}
	/* A terminal reads 0 or EIO only once it is gone. */
	in->done = true;
	return KIWI_PTY_INPUT_HANGUP;
}

void kiwi_pty_input_write(struct kiwi_pty_input *in)
{
	while (in->off < in->len) {
		ssize_t n = write(in->master, in->buf + in->off, in->len - in->off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			/* EIO: every slave is closed, no one will read it. */
			in->done = true;
			break;
		}
		in->off += (size_t)n;
	}
	in->off = in->len = 0;
}
