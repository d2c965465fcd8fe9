/* SPDX-License-Identifier: Apache-2.0 */
/* The container lifecycle commands: create, start, run, kill, delete, ps.
 * Flags and their spellings are runc's, since the shim and podman pass
 * them as runc takes them. */
#include "cli.h"
#include "cmd_oci.h"
#include "kiwi/cleanup.h"
#include "kiwi/oci_runtime.h"
#include "kiwi/pty.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

enum {
	O_BUNDLE = 'b',
	O_DETACH = 'd',
	O_PID_FILE = 0x100,
	O_CONSOLE_SOCKET,
	O_PRESERVE_FDS,
	O_NO_PIVOT,
	O_NO_NEW_KEYRING,
	O_KEEP,
};

static const struct option create_options[] = {
	{ "bundle", required_argument, NULL, O_BUNDLE },
	{ "pid-file", required_argument, NULL, O_PID_FILE },
	{ "console-socket", required_argument, NULL, O_CONSOLE_SOCKET },
	{ "preserve-fds", required_argument, NULL, O_PRESERVE_FDS },
	{ "no-pivot", no_argument, NULL, O_NO_PIVOT },
	{ "no-new-keyring", no_argument, NULL, O_NO_NEW_KEYRING },
	{ "detach", no_argument, NULL, O_DETACH },
	{ "keep", no_argument, NULL, O_KEEP },
	{ 0 },
};

struct create_args {
	struct kiwi_oci_create_opts o;
	bool detach, keep;
};

/* Parses create's (and run's) flags and the id. */
static int parse_create(const char *cmd, int argc, char **argv, bool is_run, struct create_args *a)
{
	a->o = (struct kiwi_oci_create_opts){ .root = kiwi_oci_g.root, .bundle = ".", .note = kiwi_oci_note,
					       .warn = kiwi_oci_warn };
	int c;
	opterr = 0;
	while ((c = getopt_long_only(argc, argv, is_run ? "+b:d" : "+b:", create_options, NULL)) != -1) {
		switch (c) {
		case O_BUNDLE: a->o.bundle = optarg; break;
		case O_PID_FILE: a->o.pid_file = optarg; break;
		case O_CONSOLE_SOCKET: a->o.console_socket = optarg; break;
		case O_PRESERVE_FDS: {
			char *end;
			long n = strtol(optarg, &end, 10);
			if (!optarg[0] || *end || n < 0 || n > 65536)
				return kiwi_oci_usage(cmd, "--preserve-fds `%s` is not a count of fds", optarg);
			a->o.preserve_fds = (int)n;
			break;
		}
		case O_NO_PIVOT:
			return kiwi_oci_usage(cmd, "--no-pivot is refused: kiwi-run always uses pivot_root, "
					      "which chroot cannot replace safely");
		case O_NO_NEW_KEYRING: break;   /* kiwi-run never makes a session keyring */
		case O_DETACH:
			if (!is_run)
				return kiwi_oci_usage(cmd, "unknown option `%s`", argv[optind - 1]);
			a->detach = true;
			break;
		case O_KEEP:
			if (!is_run)
				return kiwi_oci_usage(cmd, "unknown option `%s`", argv[optind - 1]);
			a->keep = true;
			break;
		default:
			return kiwi_oci_usage(cmd, "unknown option `%s`", argv[optind - 1]);
		}
	}
	if (optind != argc - 1)
		return kiwi_oci_usage(cmd, "takes exactly one container id after the options");
	a->o.id = argv[optind];
	return 0;
}

/* The id is the one positional argument of most commands. */
static const char *only_id(const char *cmd, int argc, char **argv)
{
	if (argc != 2 || argv[1][0] == '-') {
		kiwi_oci_usage(cmd, "takes exactly one container id");
		return NULL;
	}
	return argv[1];
}

static int report_warning(const kiwi_err *err)
{
	if (!strcmp(err->step, "warning"))
		kiwi_oci_log("warning", "%s", err->msg);
	return 0;
}

int kiwi_oci_cmd_create(int argc, char **argv)
{
	struct create_args a = { 0 };
	kiwi_err err = { 0 };
	if (parse_create("create", argc, argv, false, &a))
		return 1;
	if (kiwi_oci_create(&a.o, NULL, &err) < 0)
		return kiwi_oci_fail(&err);
	return 0;
}

int kiwi_oci_cmd_start(int argc, char **argv)
{
	const char *id = only_id("start", argc, argv);
	kiwi_err err = { 0 };
	if (!id)
		return 1;
	if (kiwi_oci_start(kiwi_oci_g.root, id, &err) < 0)
		return kiwi_oci_fail(&err);
	return report_warning(&err);
}

/* The signals run and exec pass on to the process, blocked and read
 * through a signalfd. */
static void forwarded_set(sigset_t *set)
{
	static const int fwd[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH };
	sigemptyset(set);
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(fwd); i++)
		sigaddset(set, fwd[i]);
}

static int forwarded_signals(void)
{
	sigset_t set;
	forwarded_set(&set);
	sigprocmask(SIG_BLOCK, &set, NULL);
	return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

/* Signals to us go on to the container's init, as runc run does. */
int kiwi_oci_wait_forwarding(int pidfd)
{
	_cleanup_close_ int sfd = forwarded_signals();
	struct pollfd p[2] = { { .fd = pidfd, .events = POLLIN }, { .fd = sfd, .events = POLLIN } };
	for (;;) {
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[0].revents)
			break;
		struct signalfd_siginfo si;
		while (sfd >= 0 && read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
			syscall(SYS_pidfd_send_signal, pidfd, (int)si.ssi_signo, NULL, 0);
	}
	siginfo_t info = { 0 };
	if (waitid(P_PIDFD, (id_t)pidfd, &info, WEXITED) < 0)
		return 1;
	return info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
}

/* Whatever the master holds, to stdout; false once it is drained for good
 * (EIO: every slave closed). */
static bool pump_out(int master)
{
	char buf[4096];
	ssize_t n = read(master, buf, sizeof(buf));
	if (n <= 0)
		return n < 0 && (errno == EAGAIN || errno == EINTR);
	for (ssize_t off = 0; off < n;) {
		ssize_t w = write(STDOUT_FILENO, buf + off, (size_t)(n - off));
		if (w < 0 && errno != EINTR && errno != EAGAIN)
			return true;   /* our reader went away: keep draining */
		off += w > 0 ? w : 0;
	}
	return true;
}

/* run's foreground terminal, as runc run without --console-socket: our
 * terminal raw, keystrokes to the master, its output to our stdout, the
 * window size followed, the other signals forwarded to the init. */
static int relay_console(int pidfd, int master)
{
	_cleanup_close_ int sfd = forwarded_signals();
	struct winsize ws;
	fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK);
	struct kiwi_term term = { 0 };
	kiwi_err e = { 0 };
	if (kiwi_term_raw(&term, STDIN_FILENO, &e) < 0)
		kiwi_oci_log("warning", "%s", e.msg);
	struct kiwi_pty_input in;
	kiwi_pty_input_init(&in, STDIN_FILENO, master);
	bool open = true;
	for (;;) {
		struct pollfd p[4] = { { .fd = pidfd, .events = POLLIN }, { .fd = sfd, .events = POLLIN },
				       { .fd = open ? master : -1, .events = POLLIN | (kiwi_pty_input_wants_write(&in) ? POLLOUT : 0) },
				       { .fd = kiwi_pty_input_wants_read(&in) ? STDIN_FILENO : -1, .events = POLLIN } };
		if (poll(p, 4, -1) < 0 && errno != EINTR)
			break;
		if (p[2].revents & (POLLIN | POLLHUP | POLLERR))
			open = pump_out(master);
		if (p[2].revents & POLLOUT)
			kiwi_pty_input_write(&in);
		if (p[3].revents && kiwi_pty_input_read(&in) == KIWI_PTY_INPUT_HANGUP)
			syscall(SYS_pidfd_send_signal, pidfd, SIGHUP, NULL, 0);
		struct signalfd_siginfo si;
		while (p[1].revents && read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
			if (si.ssi_signo != SIGWINCH) {
				syscall(SYS_pidfd_send_signal, pidfd, (int)si.ssi_signo, NULL, 0);
				continue;
			}
			kiwi_pty_caller_winsize(STDIN_FILENO, STDOUT_FILENO, &ws);
			if (isatty(STDIN_FILENO) || isatty(STDOUT_FILENO))
				ioctl(master, TIOCSWINSZ, &ws);
		}
		if (p[0].revents)
			break;
	}
	/* The program is gone: what it wrote last is still in the master. */
	while (open && pump_out(master))
		if (poll(&(struct pollfd){ .fd = master, .events = POLLIN }, 1, 0) <= 0)
			break;
	kiwi_term_restore(&term);
	siginfo_t info = { 0 };
	if (waitid(P_PIDFD, (id_t)pidfd, &info, WEXITED) < 0)
		return 1;
	return info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
}

int kiwi_oci_cmd_run(int argc, char **argv)
{
	struct create_args a = { 0 };
	kiwi_err err = { 0 };
	if (parse_create("run", argc, argv, true, &a))
		return 1;
	a.o.for_run = !a.detach;
	if (!a.detach) {
		/* Blocked from here on, so that a signal sent once the program
		 * runs (or sooner) waits to be forwarded instead of ending us.
		 * The init and the hooks unblock everything for themselves. */
		sigset_t set;
		forwarded_set(&set);
		sigprocmask(SIG_BLOCK, &set, NULL);
	}
	_cleanup_close_ int master = -1;
	if (!a.detach && !a.o.console_socket)
		a.o.console_master = &master;
	_cleanup_close_ int pidfd = -1;
	if (kiwi_oci_create(&a.o, &pidfd, &err) < 0)
		return kiwi_oci_fail(&err);
	if (master >= 0 && (isatty(STDIN_FILENO) || isatty(STDOUT_FILENO))) {
		/* Before start: the program may ask for its size at once.
		 * Without a terminal of ours, consoleSize stays. */
		struct winsize ws;
		kiwi_pty_caller_winsize(STDIN_FILENO, STDOUT_FILENO, &ws);
		ioctl(master, TIOCSWINSZ, &ws);
	}
	if (kiwi_oci_start(a.o.root, a.o.id, &err) < 0) {
		kiwi_oci_fail(&err);
		kiwi_err e2 = { 0 };
		kiwi_oci_delete(a.o.root, a.o.id, true, &e2);
		return 1;
	}
	report_warning(&err);
	if (a.detach)
		return 0;
	int status = master >= 0 ? relay_console(pidfd, master) : kiwi_oci_wait_forwarding(pidfd);
	if (!a.keep) {
		err = (kiwi_err){ 0 };
		if (kiwi_oci_delete(a.o.root, a.o.id, false, &err) < 0)
			kiwi_oci_fail(&err);
		else
			report_warning(&err);
	}
	return status;
}

int kiwi_oci_cmd_kill(int argc, char **argv)
{
	static const struct option opts[] = { { "all", no_argument, NULL, 'a' }, { 0 } };
	bool all = false;
	int c;
	opterr = 0;
	while ((c = getopt_long_only(argc, argv, "+a", opts, NULL)) != -1) {
		if (c != 'a')
			return kiwi_oci_usage("kill", "unknown option `%s`", argv[optind - 1]);
		all = true;
	}
	if (optind != argc - 1 && optind != argc - 2)
		return kiwi_oci_usage("kill", "takes a container id and an optional signal");
	const char *id = argv[optind];
	int sig = SIGTERM;
	if (optind == argc - 2 && (sig = kiwi_oci_signal_from_name(argv[optind + 1])) < 0)
		return kiwi_oci_usage("kill", "unknown signal `%s`", argv[optind + 1]);
	kiwi_err err = { 0 };
	if (kiwi_oci_kill(kiwi_oci_g.root, id, sig, all, &err) < 0)
		return kiwi_oci_fail(&err);
	return 0;
}

int kiwi_oci_cmd_delete(int argc, char **argv)
{
	static const struct option opts[] = { { "force", no_argument, NULL, 'f' }, { 0 } };
	bool force = false;
	int c;
	opterr = 0;
	while ((c = getopt_long_only(argc, argv, "+f", opts, NULL)) != -1) {
		if (c != 'f')
			return kiwi_oci_usage("delete", "unknown option `%s`", argv[optind - 1]);
		force = true;
	}
	if (optind != argc - 1)
		return kiwi_oci_usage("delete", "takes exactly one container id");
	kiwi_err err = { 0 };
	if (kiwi_oci_delete(kiwi_oci_g.root, argv[optind], force, &err) < 0) {
		/* runc: deleting what is not there with --force is no error. */
		if (force && err.errnum == ENOENT)
			return 0;
		return kiwi_oci_fail(&err);
	}
	return report_warning(&err);
}

int kiwi_oci_cmd_ps(int argc, char **argv)
{
	static const struct option opts[] = { { "format", required_argument, NULL, 'f' }, { 0 } };
	const char *format = "table";
	int c;
	opterr = 0;
	while ((c = getopt_long_only(argc, argv, "+f:", opts, NULL)) != -1) {
		if (c != 'f')
			return kiwi_oci_usage("ps", "unknown option `%s`", argv[optind - 1]);
		format = optarg;
	}
	if (strcmp(format, "table") && strcmp(format, "json"))
		return kiwi_oci_usage("ps", "--format `%s` is neither table nor json", format);
	if (optind != argc - 1)
		return kiwi_oci_usage("ps", "takes exactly one container id (ps options are not supported)");
	_cleanup_free_ pid_t *pids = NULL;
	size_t n = 0;
	kiwi_err err = { 0 };
	if (kiwi_oci_pids(kiwi_oci_g.root, argv[optind], &pids, &n, &err) < 0)
		return kiwi_oci_fail(&err);
	if (!strcmp(format, "json")) {
		printf("[");
		for (size_t i = 0; i < n; i++)
			printf("%s%d", i ? "," : "", (int)pids[i]);
		printf("]\n");
	} else {
		printf("PID\n");
		for (size_t i = 0; i < n; i++)
			printf("%d\n", (int)pids[i]);
	}
	return fflush(stdout) == 0 ? 0 : 1;
}
