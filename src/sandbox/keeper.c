/* SPDX-License-Identifier: Apache-2.0 */
/* A session's pid 1 and its exec leaders (kiwi/keeper.h). Pid 1 only
 * forks: each exec's connection goes to a leader of its own, which reads
 * the request, starts the command the way a run's pid 1 does, and ends
 * the exec's tree. A leader that misbehaves (or is killed by the command,
 * which runs as the same user) costs its own exec, never the session. */
#include "kiwi/keeper.h"
#include "init.h"
#include "kiwi/cleanup.h"
#include "kiwi/fds.h"
#include "kiwi/fslayer.h"
#include "kiwi/openat2.h"
#include "kiwi/pty.h"
#include "kiwi/seccomp.h"
#include "kiwi/spawn.h"
#include "kiwi/sync.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* How many execs may run in one session at once. */
#define KIWI_KEEPER_MAX_EXECS 256

/* ---- the exec leader ------------------------------------------------- */

static void send_exec(int conn, enum kiwi_exec_type type, const kiwi_err *err)
{
	struct kiwi_exec_msg m = { .type = type, .mono_ns = kiwi_clock_ns(CLOCK_MONOTONIC) };
	if (err)
		m.err = *err;
	kiwi_exec_send(conn, &m, -1);
}

struct leader {
	int conn, sfd;
	struct kiwi_exec_request req;
	char **envp;              /* the session's environment, the exec's over it */
	pid_t cmd;
	bool keep_background, done;
	int status;
};

/* Reaps one child; the command's status is kept. */
static pid_t reap_one(struct leader *l, int flags)
{
	int status;
	pid_t p = waitpid(-1, &status, flags);
	if (p > 0 && p == l->cmd) {
		l->status = status;
		l->done = true;
	}
	return p;
}

/* Kills every process below us: each round kills our children, whose own
 * children the kernel then hands to us (we are a subreaper), until none is
 * left. Fork bombs lose: a killed process forks no more. */
static void kill_tree(struct leader *l)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)getpid());
	for (int round = 0; round < 10000; round++) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		char text[4096];
		ssize_t n = fd >= 0 ? read(fd, text, sizeof(text) - 1) : -1;
		if (fd >= 0)
			close(fd);
		text[n > 0 ? n : 0] = '\0';
		int killed = 0;
		for (char *p = text, *end; *p; p = end) {
			long pid = strtol(p, &end, 10);
			if (end == p)
				break;
			if (pid > 0 && kill((pid_t)pid, SIGKILL) == 0)
				killed++;
		}
		/* Exactly those: a blocking wait for more would wait on an
		 * orphan handed to us meanwhile, alive until the next round. */
		for (int i = 0; i < killed; i++)
			reap_one(l, 0);
		while (reap_one(l, WNOHANG) > 0)
			;
		if (!killed && reap_one(l, WNOHANG) < 0 && errno == ECHILD)
			return;
	}
}

/* The session's environment (create's), then the exec's: a later NAME=
 * replaces an earlier one. */
static int merge_env(struct leader *l, char *const *base)
{
	size_t n = 0, k = 0;
	for (char *const *e = base; e && *e; e++)
		n++;
	for (char **e = l->req.envp; *e; e++)
		n++;
	l->envp = calloc(n + 1, sizeof(*l->envp));
	if (!l->envp)
		return -1;
	for (int pass = 0; pass < 2; pass++)
		for (char *const *e = pass ? l->req.envp : base; e && *e; e++) {
			size_t klen = strcspn(*e, "=") + 1, i = 0;
			while (i < k && strncmp(l->envp[i], *e, klen))
				i++;
			l->envp[i] = *e;
			if (i == k)
				k++;
		}
	return 0;
}

/* Waits for GO (the client has moved us into the exec's cgroup): nothing
 * the command starts may be born outside it. */
static int wait_go(struct leader *l)
{
	struct kiwi_exec_msg m;
	int fd;
	int r = kiwi_exec_recv(l->conn, &m, 0, &fd);
	if (fd >= 0)
		close(fd);
	return r > 0 && m.type == KIWI_EXEC_GO ? 0 : -1;
}

/* --tty: the command's terminal, from the sandbox's own devpts. */
static int open_exec_pty(struct leader *l, kiwi_err *err)
{
	struct winsize ws = { .ws_row = l->req.rows ? l->req.rows : 24, .ws_col = l->req.cols ? l->req.cols : 80 };
	int master, slave;
	if (kiwi_pty_open(&ws, &master, &slave, err) < 0)
		return -1;
	struct kiwi_exec_msg m = { .type = KIWI_EXEC_PTY };
	int r = kiwi_exec_send(l->conn, &m, master);
	close(master);
	for (int i = 0; i < 3; i++) {
		if (l->req.fds[i] >= 0)
			close(l->req.fds[i]);
		l->req.fds[i] = slave;
	}
	return r < 0 ? kiwi_error(err, errno, "tty", "cannot pass the terminal to kiwi-run") : 0;
}

/* The command's configuration: the session's, with the exec's argv,
 * environment, working directory and terminal. */
static void exec_config(const struct leader *l, const struct kiwi_init_args *args, struct kiwi_sandbox_config *cfg)
{
	*cfg = *args->cfg;
	cfg->argv = l->req.argv;
	cfg->envp = l->envp;
	cfg->cwd = l->req.cwd[0] ? l->req.cwd : args->cfg->cwd;
	cfg->tty = l->req.flags & KIWI_EXEC_TTY;
	cfg->preserve_fds = NULL;
	cfg->n_preserve_fds = 0;
}

/* The command's arguments to kiwi_init: cfg (exec_config's), and the
 * request's fds, /dev/null (null) where it sent none. */
static struct kiwi_init_args exec_args(const struct leader *l, const struct kiwi_init_args *args,
				       const struct kiwi_sandbox_config *cfg, int null)
{
	struct kiwi_init_args a = *args;
	a.cfg = cfg;
	a.stdin_fd = l->req.fds[0] >= 0 ? l->req.fds[0] : null;
	a.stdout_fd = l->req.fds[1] >= 0 ? l->req.fds[1] : null;
	a.stderr_fd = l->req.fds[2] >= 0 ? l->req.fds[2] : null;
	return a;
}

static void close_request_fds(struct leader *l)
{
	int closed = -1;
	for (int i = 0; i < 3; i++)
		if (l->req.fds[i] >= 0 && l->req.fds[i] != closed)
			close(closed = l->req.fds[i]);
}

static void send_started(struct leader *l, int64_t exec_ns)
{
	struct kiwi_exec_msg m = { .type = KIWI_EXEC_STARTED, .mono_ns = exec_ns };
	kiwi_exec_send(l->conn, &m, -1);
}

static int start(struct leader *l, const struct kiwi_init_args *args, kiwi_err *err)
{
	struct kiwi_sandbox_config cfg;
	exec_config(l, args, &cfg);
	_cleanup_close_ int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	struct kiwi_init_args a = exec_args(l, args, &cfg, null);
	int64_t exec_ns = 0;
	l->cmd = kiwi_init_start_command(&a, &exec_ns, err);
	close_request_fds(l);
	if (l->cmd < 0)
		return -1;
	send_started(l, exec_ns);
	return 0;
}

/* ---- page tables filled ahead ----------------------------------------- */

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

static int populate_segment(struct dl_phdr_info *info, size_t size, void *ctx)
{
	(void)size, (void)ctx;
	long page = sysconf(_SC_PAGESIZE);
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_R) || (ph->p_flags & PF_W))
			continue;
		uintptr_t start = (info->dlpi_addr + ph->p_vaddr) & ~(uintptr_t)(page - 1);
		uintptr_t end = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
		(void)madvise((void *)start, end - start, MADV_POPULATE_READ);
	}
	return 0;
}

/* A fork starts with none of our code's pages in its page tables (the
 * kernel copies only what a fault could not refill): each first call
 * into a page of kiwi-run or libc then faults, 2 to 3 us apiece here
 * traced: 35 in the leader during one exec (bench/RESULTS.md), 10 with
 * this. The warm leader maps them while it waits: read-only segments
 * only (no copy, no memory of its own but page tables). Not the command
 * made ahead: it runs little of our code before its execve, which then
 * unmaps every page populated, on the exec's time. Linux 5.14; before,
 * nothing. */
static void populate_code(void)
{
	dl_iterate_phdr(populate_segment, NULL);
}

/* ---- the command made ahead ------------------------------------------ */

/* A warm leader's next command, forked while no one waits for it: its
 * signals reset and its own session made, and with the built-in seccomp
 * profile (which allows what it does until its exec) Landlock and the
 * filter loaded too. It waits on ctl for the exec's request, which the
 * leader forwards once checked; *report is the start-up report's pipe,
 * as kiwi_init_start_command's. pid < 0: none (the leader forks one when
 * the request comes, as a cold leader does). */
struct ahead {
	pid_t pid;
	int ctl, report;
};

_Noreturn static void command_ahead_main(const struct kiwi_init_args *args, int ctl, int report)
{
	const struct kiwi_sandbox_config *session = args->cfg;
	kiwi_init_command_reset();
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	bool early = !session->seccomp || kiwi_seccomp_builtin(session->seccomp);
	kiwi_err err = { 0 };
	if (early && kiwi_init_command_restrict(session, &err) < 0)
		kiwi_init_command_failed(report, &err);
	struct leader l = { .conn = ctl, .cmd = -1 };
	_cleanup_free_ char *buf = NULL;
	if (kiwi_exec_recv_request(ctl, &l.req, &buf, &err) < 0)
		_exit(127);  /* the leader gave up on us: it reports for itself */
	if (merge_env(&l, session->envp) < 0) {
		kiwi_error(&err, ENOMEM, "exec", "cannot build the environment");
		kiwi_init_command_failed(report, &err);
	}
	struct kiwi_sandbox_config cfg;
	exec_config(&l, args, &cfg);
	struct kiwi_init_args a = exec_args(&l, args, &cfg, null);
	kiwi_init_command_exec(&a, report, early);
}

/* keep: the warm leader's own fd to pid 1, which the command never holds. */
static void make_command_ahead(const struct kiwi_init_args *args, int keep, struct ahead *a)
{
	int sp[2];
	kiwi_err err = { 0 };
	*a = (struct ahead){ .pid = -1, .ctl = -1, .report = -1 };
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		return;
	pid_t pid = kiwi_init_fork_command(&a->report, &err);
	if (pid == 0) {
		close(sp[0]);
		close(keep);
		command_ahead_main(args, sp[1], a->report);
	}
	close(sp[1]);
	if (pid < 0) {
		close(sp[0]);
		return;
	}
	a->pid = pid;
	a->ctl = sp[0];
}

static void drop_command_ahead(struct ahead *a)
{
	if (a->pid > 0)
		kill(a->pid, SIGKILL);
	kiwi_closep(&a->ctl);
	kiwi_closep(&a->report);
	a->pid = -1;
}

/* The request goes on to the command made ahead: 0, or -1 if it is gone
 * (a command of the session may kill it: same user), and the leader
 * forks one as usual. */
static int hand_to_ahead(struct leader *l, struct ahead *a)
{
	kiwi_err lost = { 0 };
	if (a->pid <= 0 || kiwi_exec_send_request(a->ctl, &l->req, &lost) < 0) {
		drop_command_ahead(a);
		return -1;
	}
	close_request_fds(l);
	kiwi_closep(&a->ctl);
	return 0;
}

static int ahead_started(struct leader *l, struct ahead *a, kiwi_err *err)
{
	int64_t exec_ns = 0;
	l->cmd = kiwi_init_command_started(a->pid, TAKE_FD(a->report), &exec_ns, err);
	if (l->cmd < 0)
		return -1;
	send_started(l, exec_ns);
	return 0;
}

static void report_exit(struct leader *l, int layer)
{
	uint64_t used = 0;
	bool full = false;
	if (layer >= 0)
		kiwi_fslayer_usage(layer, &used, &full);
	struct rusage ru;
	getrusage(RUSAGE_CHILDREN, &ru);
	struct kiwi_exec_msg m = {
		.type = KIWI_EXEC_EXIT,
		.value = l->status,
		.mono_ns = kiwi_clock_ns(CLOCK_MONOTONIC),
		.utime_us = (uint64_t)ru.ru_utime.tv_sec * 1000000 + (uint64_t)ru.ru_utime.tv_usec,
		.stime_us = (uint64_t)ru.ru_stime.tv_sec * 1000000 + (uint64_t)ru.ru_stime.tv_usec,
		.disk_full = full,
		.disk_used_kib = used,
		.disk_backend = layer >= 0 ? (uint32_t)kiwi_fslayer_backend(layer) : KIWI_DISK_TMPFS,
	};
	kiwi_exec_send(l->conn, &m, -1);
}

/* Follows the command: a KILL from the client (its timeout, a forwarded
 * signal) reaches it, the client's going away ends the exec. */
static void follow_command(struct leader *l)
{
	struct pollfd pfd[2] = { { .fd = l->conn, .events = POLLIN }, { .fd = l->sfd, .events = POLLIN } };
	for (;;) {
		while (!l->done && reap_one(l, WNOHANG) > 0)
			;
		if (l->done)
			return;
		if (poll(pfd, 2, -1) < 0 && errno != EINTR)
			_exit(1);
		if (pfd[1].revents) {
			struct signalfd_siginfo si;
			while (read(l->sfd, &si, sizeof(si)) > 0)
				;
		}
		if (pfd[0].revents) {
			struct kiwi_exec_msg m;
			int fd, r = kiwi_exec_recv(l->conn, &m, MSG_DONTWAIT, &fd);
			if (fd >= 0)
				close(fd);
			if (r == 0 || (r < 0 && errno != EAGAIN)) {
				kill_tree(l);  /* the client is gone: so is its exec */
				_exit(1);
			}
			if (r > 0 && m.type == KIWI_EXEC_KILL && m.value == SIGKILL)
				kill_tree(l);
			else if (r > 0 && m.type == KIWI_EXEC_KILL && kill(-l->cmd, m.value) < 0)
				kill(l->cmd, m.value);
		}
	}
}

/* KIWI_EXEC_UNTIL_CLOSED: until the client has closed its end (true), or
 * gone quiet for KIWI_EXEC_LINGER_MS; whatever it still sends is dropped. */
static bool wait_closed(int conn)
{
	struct pollfd pfd = { .fd = conn, .events = POLLIN };
	char drop[sizeof(struct kiwi_exec_msg)];
	for (;;) {
		if (poll(&pfd, 1, KIWI_EXEC_LINGER_MS) <= 0)
			return false;
		ssize_t n = recv(conn, drop, sizeof(drop), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			return true;
	}
}

/* Copies between two fds; 0, or -1 with errno. */
static int copy_fd(int in, int out)
{
	char buf[65536];
	for (;;) {
		ssize_t n = read(in, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return (int)n;
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(out, buf + off, (size_t)(n - off));
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				return -1;
			off += w;
		}
	}
}

static int open_inside(const char *path, int flags, mode_t mode)
{
	struct open_how how = { .flags = (uint64_t)(flags | O_CLOEXEC | O_NOCTTY), .mode = mode,
				.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	return kiwi_openat2(AT_FDCWD, path, &how);
}

/* `session cp` into the session: a hidden file beside the target, renamed
 * over it once whole, so that a copy that does not fit (the layer's bound)
 * or is cut off leaves nothing. */
static int copy_in(const char *path, int src, mode_t mode, kiwi_err *err)
{
	char dir[4096], tmp[4200];
	const char *slash = strrchr(path, '/');
	if (!slash || !slash[1] || strlen(path) >= sizeof(dir))
		return kiwi_error(err, EINVAL, "cp", "`%s` is not an absolute path to a file", path);
	snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
	_cleanup_close_ int dfd = open_inside(dir, O_RDONLY | O_DIRECTORY, 0);
	if (dfd < 0)
		return kiwi_error(err, errno, "cp", "cannot open `%s` in the session", dir);
	snprintf(tmp, sizeof(tmp), ".kiwi-cp.%d.%s", (int)getpid(), slash + 1);
	_cleanup_close_ int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
				      mode ? mode : 0644);
	if (fd < 0)
		return kiwi_error(err, errno, "cp", "cannot create a file in `%s`", dir);
	if (copy_fd(src, fd) < 0 || fsync(fd) < 0 || renameat(dfd, tmp, dfd, slash + 1) < 0) {
		int e = errno;
		unlinkat(dfd, tmp, 0);
		return kiwi_error(err, e, "cp", "cannot write `%s` in the session", path);
	}
	return 0;
}

static int copy_out(const char *path, int dst, kiwi_err *err)
{
	_cleanup_close_ int fd = open_inside(path, O_RDONLY | O_NOFOLLOW, 0);
	struct stat st;
	if (fd < 0)
		return kiwi_error(err, errno, "cp", "cannot open `%s` in the session", path);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return kiwi_error(err, EINVAL, "cp", "`%s` is not a regular file", path);
	if (copy_fd(fd, dst) < 0)
		return kiwi_error(err, errno, "cp", "cannot read `%s` in the session", path);
	return 0;
}

/* A copy instead of a command: the leader does it, with the session's ids. */
_Noreturn static void leader_copy(struct leader *l)
{
	kiwi_err err = { 0 };
	bool in = l->req.flags & KIWI_EXEC_COPY_IN;
	int fd = in ? l->req.fds[0] : l->req.fds[1];
	struct kiwi_exec_msg m = { .type = KIWI_EXEC_STARTED, .mono_ns = kiwi_clock_ns(CLOCK_MONOTONIC) };
	kiwi_exec_send(l->conn, &m, -1);
	if (fd < 0)
		kiwi_error(&err, EBADF, "cp", "no file to copy");
	else if (in)
		copy_in(l->req.argv[0], fd, l->req.mode, &err);
	else
		copy_out(l->req.argv[0], fd, &err);
	if (err.step[0]) {
		send_exec(l->conn, KIWI_EXEC_FAILED, &err);
		_exit(1);
	}
	for (int i = 0; i < 3; i++)
		if (l->req.fds[i] >= 0)
			close(l->req.fds[i]);
	l->status = 0;
	report_exit(l, -1);
	_exit(0);
}

/* How the leader came to be, for READY: in the exec's cgroup from its
 * first instruction, or outside it with clone3's errno (0: not asked). */
struct birth {
	bool in_cgroup;
	int clone_errno;
};

_Noreturn static void leader_main(int conn, const struct kiwi_init_args *args, int layer, struct birth b,
				  struct ahead *ahead)
{
	struct leader l = { .conn = conn, .cmd = -1 };
	kiwi_err err = { 0 };
	_cleanup_free_ char *buf = NULL;
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	l.sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	if (l.sfd < 0 || kiwi_exec_recv_request(conn, &l.req, &buf, &err) < 0)
		goto fail;
	l.keep_background = l.req.flags & KIWI_EXEC_KEEP_BACKGROUND;
	/* What the command leaves behind comes to us, to be ended with it,
	 * unless it is to live on: then it goes to pid 1 as usual. */
	if (!l.keep_background && prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) {
		kiwi_error(&err, errno, "exec", "cannot become the exec's subreaper");
		goto fail;
	}
	if ((l.req.flags & KIWI_EXEC_TTY) && open_exec_pty(&l, &err) < 0)
		goto fail;
	/* Born in the exec's cgroup, or with none asked for (clone3 not
	 * tried): nothing for the client to move, no GO to wait for. A
	 * command made ahead gets its request at once, before READY: it
	 * starts while the client hears of us. */
	bool going = (l.req.flags & KIWI_EXEC_GO_IF_MOVED) && (b.in_cgroup || !b.clone_errno);
	bool copy = l.req.flags & (KIWI_EXEC_COPY_IN | KIWI_EXEC_COPY_OUT);
	bool handed = going && !copy && hand_to_ahead(&l, ahead) == 0;
	if (!handed && merge_env(&l, args->cfg->envp) < 0) {
		kiwi_error(&err, ENOMEM, "exec", "cannot build the environment");
		goto fail;
	}
	int self = (int)syscall(SYS_pidfd_open, getpid(), 0);
	struct kiwi_exec_msg ready = { .type = KIWI_EXEC_READY, .value = b.clone_errno,
				       .flags = (b.in_cgroup ? KIWI_EXEC_IN_CGROUP : 0) | (going ? KIWI_EXEC_GOING : 0) };
	if (self < 0 || kiwi_exec_send(conn, &ready, self) < 0) {
		kiwi_error(&err, errno, "exec", "cannot hand the client a pidfd");
		goto fail;
	}
	close(self);
	if (!going && wait_go(&l) < 0)
		_exit(1);
	if (copy) {
		drop_command_ahead(ahead);
		leader_copy(&l);
	}
	if (!handed)
		drop_command_ahead(ahead);
	if ((handed ? ahead_started(&l, ahead, &err) : start(&l, args, &err)) < 0)
		goto fail;
	follow_command(&l);
	if (!l.keep_background)
		kill_tree(&l);
	report_exit(&l, layer);
	/* Exit 0: reported, and the client is done with the exec's cgroup
	 * (pid 1 tells the supervisor, which removes it: KIWI_SYNC_EXEC_REPORTED). */
	if ((l.req.flags & KIWI_EXEC_UNTIL_CLOSED) && !wait_closed(l.conn))
		_exit(2);
	_exit(0);
fail:
	/* A command made ahead never runs without its client. */
	drop_command_ahead(ahead);
	send_exec(conn, KIWI_EXEC_FAILED, &err);
	_exit(1);
}

/* ---- pid 1 ----------------------------------------------------------- */

/* The next exec's leader, started ahead in that exec's cgroup
 * (KIWI_SYNC_EXEC_WARM): it waits on ctl for the exec's connection. cg
 * stays open until then: should the leader be gone (verify's purge, or a
 * command that killed it), the exec's leader is started there as usual. */
struct warm {
	pid_t pid;                /* 0: none waits */
	int ctl, cg;
};

struct keeper {
	int sock, sfd, layer;
	pid_t leaders[KIWI_KEEPER_MAX_EXECS];
	uint64_t leader_cgroups[KIWI_KEEPER_MAX_EXECS];  /* each leader's exec cgroup id; 0: none */
	size_t n_leaders;
	struct warm warm;
};

/* A cgroup's id as the supervisor sees it too: its directory's inode. */
static uint64_t cgroup_id(int cg)
{
	struct stat st;
	return cg >= 0 && fstat(cg, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* BEGIN or END of the exec whose cgroup is cgroup (0: none): the
 * supervisor counts them, and removes an ended exec's cgroup. */
static void tell_supervisor(struct keeper *k, enum kiwi_sync_type type, uint64_t cgroup, uint32_t flags)
{
	struct kiwi_sync_msg m = { .type = type, .value = (int32_t)k->n_leaders, .flags = flags,
				   .mono_ns = kiwi_clock_ns(CLOCK_MONOTONIC), .cgroup_id = cgroup };
	kiwi_sync_send(k->sock, &m);
}

static void add_leader(struct keeper *k, pid_t pid, int cg)
{
	k->leader_cgroups[k->n_leaders] = cgroup_id(cg);
	k->leaders[k->n_leaders++] = pid;
	tell_supervisor(k, KIWI_SYNC_EXEC_BEGIN, k->leader_cgroups[k->n_leaders - 1], 0);
}

static void forget_warm_leader(struct keeper *k)
{
	k->warm.pid = 0;
	kiwi_closep(&k->warm.ctl);
}

static void reap(struct keeper *k)
{
	pid_t p;
	int status;
	while ((p = waitpid(-1, &status, WNOHANG)) > 0) {
		if (p == k->warm.pid)
			forget_warm_leader(k);
		for (size_t i = 0; i < k->n_leaders; i++)
			if (k->leaders[i] == p) {
				uint64_t cg = k->leader_cgroups[i];
				k->n_leaders--;
				k->leaders[i] = k->leaders[k->n_leaders];
				k->leader_cgroups[i] = k->leader_cgroups[k->n_leaders];
				tell_supervisor(k, KIWI_SYNC_EXEC_END, cg,
						WIFEXITED(status) && WEXITSTATUS(status) == 0 ? KIWI_SYNC_EXEC_REPORTED : 0);
				break;
			}
	}
}

/* The switch to verify (kiwi-run-phase(1)): every process of the session
 * but pid 1 is killed, kept ones and running execs alike, and reaped
 * before the supervisor hears of it. kill(-1) from pid 1 reaches the whole
 * pid namespace but pid 1; a fork racing it fails (the parent has a fatal
 * signal pending), and orphans come to pid 1, so once no child is left
 * and kill(-1, 0) finds no one, nothing runs. */
static void purge(struct keeper *k)
{
	int reaped = 0;
	for (int round = 0; round < 1000; round++) {
		if (kill(-1, SIGKILL) < 0 && errno == ESRCH)
			break;
		pid_t p;
		while ((p = waitpid(-1, NULL, 0)) > 0 || (p < 0 && errno == EINTR))
			reaped += p > 0;
	}
	/* The leaders went too: their clients hear EOF. A warm one's exec
	 * will have its leader started in its cgroup when it comes. */
	k->n_leaders = 0;
	forget_warm_leader(k);
	struct kiwi_sync_msg m = { .type = KIWI_SYNC_PURGED, .value = reaped,
				   .mono_ns = kiwi_clock_ns(CLOCK_MONOTONIC) };
	kiwi_sync_send(k->sock, &m);
	tell_supervisor(k, KIWI_SYNC_EXEC_END, 0, 0);
}

/* The leader, in the exec's cgroup from its first instruction when the
 * client sent one: clone3(CLONE_INTO_CGROUP) takes the cgroup core's
 * fork lock as a reader, where moving it afterwards through cgroup.procs
 * takes it as a writer and waits an RCU grace period (milliseconds,
 * bench/RESULTS.md). The kernel checks our right to it as for a write to
 * cgroup.procs (the client delegated that file, kiwi-run-session(1)); when
 * it refuses (an older kernel, a cgroup namespace that does not see the
 * cgroup under nsdelegate, a map the client could not delegate to), the
 * leader is forked as before and says why in READY: the client moves it
 * in itself, and --debug shows the errno. */
static pid_t fork_leader(int exec_cg, struct birth *b)
{
	*b = (struct birth){ 0 };
	if (exec_cg < 0)
		return fork();
	kiwi_err err = { 0 };
	int pidfd = -1;
	pid_t pid = kiwi_spawn(0, exec_cg, &pidfd, &err);
	if (pid > 0)
		close(pidfd);
	if (pid >= 0) {
		b->in_cgroup = true;
		return pid;
	}
	b->clone_errno = err.errnum ? err.errnum : EINVAL;
	return fork();
}

static void new_exec(struct keeper *k, int conn, int exec_cg, const struct kiwi_init_args *args)
{
	if (k->n_leaders == KIWI_KEEPER_MAX_EXECS) {
		kiwi_err err = { 0 };
		kiwi_error(&err, EAGAIN, "exec", "the session runs %d execs already", KIWI_KEEPER_MAX_EXECS);
		send_exec(conn, KIWI_EXEC_FAILED, &err);
		close(conn);
		return;
	}
	struct birth b;
	pid_t pid = fork_leader(exec_cg, &b);
	if (pid == 0) {
		close(k->sock);
		close(k->sfd);
		/* The cgroup's directory would reach the host's cgroup tree
		 * (openat ".."): the command never sees it. Nor does this
		 * leader keep the warm leader's (it is not its exec's). */
		if (exec_cg >= 0)
			close(exec_cg);
		if (k->warm.cg != exec_cg)
			kiwi_closep(&k->warm.cg);
		kiwi_closep(&k->warm.ctl);
		/* The parent-death signal was pid 1's: a leader outlives no
		 * session anyway, the pid namespace ends with pid 1. */
		struct ahead none = { .pid = -1, .ctl = -1, .report = -1 };
		leader_main(conn, args, k->layer, b, &none);
	}
	close(conn);
	if (pid > 0)
		add_leader(k, pid, exec_cg);
}

/* A warm leader: forked like any exec's, then idle until its exec's
 * connection comes (or pid 1 closes ctl: the session ends). */
_Noreturn static void warm_leader_main(int ctl, const struct kiwi_init_args *args, int layer)
{
	char byte;
	int conn = -1;
	ssize_t n;
	struct ahead ahead;
	make_command_ahead(args, ctl, &ahead);
	populate_code();
	do
		n = kiwi_recv_fd(ctl, &byte, 1, 0, &conn);
	while (n < 0 && errno == EINTR);
	if (n != 1 || conn < 0) {
		drop_command_ahead(&ahead);
		_exit(0);
	}
	close(ctl);
	leader_main(conn, args, layer, (struct birth){ .in_cgroup = true }, &ahead);
}

/* KIWI_SYNC_EXEC_WARM: the leader is started in the cgroup now, or not at
 * all (no fallback to a fork outside it: the exec would lose its cgroup). */
static void warm_up(struct keeper *k, int cg, const struct kiwi_init_args *args)
{
	struct kiwi_sync_msg m = { .type = KIWI_SYNC_EXEC_WARMED };
	int ctl[2] = { -1, -1 }, pidfd = -1;
	kiwi_err err = { 0 };
	pid_t pid = -1;
	if (k->warm.cg >= 0 || cg < 0)
		m.value = EBUSY;
	else if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) < 0)
		m.value = errno;
	else if ((pid = kiwi_spawn(0, cg, &pidfd, &err)) < 0)
		m.value = err.errnum ? err.errnum : EINVAL;
	if (pid == 0) {
		close(ctl[0]);
		close(k->sock);
		close(k->sfd);
		close(cg);
		warm_leader_main(ctl[1], args, k->layer);
	}
	kiwi_closep(&pidfd);
	kiwi_closep(&ctl[1]);
	if (pid > 0) {
		k->warm = (struct warm){ .pid = pid, .ctl = ctl[0], .cg = cg };
	} else {
		kiwi_closep(&ctl[0]);
		kiwi_closep(&cg);
	}
	kiwi_sync_send(k->sock, &m);
}

/* KIWI_SYNC_EXEC_WARMED_ONE: the exec the warm leader waits for. */
static void new_warm_exec(struct keeper *k, int conn, const struct kiwi_init_args *args)
{
	char byte = 0;
	if (k->warm.cg < 0) {
		kiwi_err err = { 0 };
		kiwi_error(&err, EPROTO, "exec", "the session has no exec started ahead");
		send_exec(conn, KIWI_EXEC_FAILED, &err);
		close(conn);
		return;
	}
	if (k->warm.pid > 0 && k->n_leaders < KIWI_KEEPER_MAX_EXECS &&
	    kiwi_send_fd(k->warm.ctl, &byte, 1, conn) == 1) {
		close(conn);
		add_leader(k, k->warm.pid, k->warm.cg);
	} else {
		new_exec(k, conn, k->warm.cg, args);
	}
	forget_warm_leader(k);
	kiwi_closep(&k->warm.cg);
}

/* What later execs use of the configuration (the base environment, the
 * binds' paths for Landlock) is on kiwi-run's heap (main() copies its
 * arguments), never in the memory pid 1 blanked: no copy is needed. */
_Noreturn void kiwi_keeper_main(const struct kiwi_init_args *args, int layer)
{
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	struct keeper k = { .sock = args->sock, .layer = layer, .sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK),
			    .warm = { .ctl = -1, .cg = -1 } };
	if (k.sfd < 0)
		_exit(1);
	struct pollfd pfd[2] = { { .fd = k.sock, .events = POLLIN }, { .fd = k.sfd, .events = POLLIN } };
	for (;;) {
		reap(&k);
		if (poll(pfd, 2, -1) < 0 && errno != EINTR)
			_exit(1);
		if (pfd[1].revents) {
			struct signalfd_siginfo si;
			while (read(k.sfd, &si, sizeof(si)) > 0)
				;
		}
		if (!pfd[0].revents)
			continue;
		struct kiwi_sync_msg m;
		int fds[2];
		int r = kiwi_sync_recv_fds(k.sock, &m, MSG_DONTWAIT, fds);
		int fd = fds[0];
		_cleanup_close_ int exec_cg = fds[1];
		if (r == 0 || (r < 0 && errno != EAGAIN))
			_exit(0);  /* the supervisor is gone: so is the session */
		if (r > 0 && m.type == KIWI_SYNC_EXEC_CONN && fd >= 0 && (m.flags & KIWI_SYNC_EXEC_WARMED_ONE))
			new_warm_exec(&k, TAKE_FD(fd), args);
		else if (r > 0 && m.type == KIWI_SYNC_EXEC_CONN && fd >= 0)
			new_exec(&k, TAKE_FD(fd), exec_cg, args);
		else if (r > 0 && m.type == KIWI_SYNC_EXEC_WARM)
			warm_up(&k, TAKE_FD(fd), args);
		else if (r > 0 && m.type == KIWI_SYNC_EXEC_COOL)
			kiwi_closep(&k.warm.cg);  /* its leader, killed, is reaped as any child */
		else if (r > 0 && m.type == KIWI_SYNC_PURGE)
			purge(&k);
		else if (r > 0 && m.type == KIWI_SYNC_KILL && m.value == SIGKILL)
			_exit(0);  /* the session's end: the namespace goes with pid 1 */
		else if (r > 0 && m.type == KIWI_SYNC_KILL)
			kill(-1, m.value);
		if (fd >= 0)
			close(fd);
	}
}
