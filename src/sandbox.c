/* SPDX-License-Identifier: Apache-2.0 */
/* The launch sequence, parent side, top to bottom. The child side is
 * init.c; steps #1..#3 are mirrored there. */
#include "init.h"
#include "sync.h"
#include "kiwi/cleanup.h"
#include "kiwi/sandbox.h"
#include "kiwi/spawn.h"
#include "kiwi/userns.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static const int forwarded_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };

/* What can be checked cheaply before any namespace exists, so that the
 * common mistakes fail fast with a plain message. */
static int check_config(const struct kiwi_sandbox_config *cfg, kiwi_err *err)
{
	struct stat st;
	if (!cfg->argv || !cfg->argv[0] || !cfg->argv[0][0])
		return kiwi_error(err, EINVAL, "args", "no command given (put it after `--`)");
	if (stat(cfg->rootfs, &st) < 0)
		return kiwi_error(err, errno, "rootfs", "cannot use rootfs `%s`", cfg->rootfs);
	if (!S_ISDIR(st.st_mode))
		return kiwi_error(err, ENOTDIR, "rootfs", "rootfs `%s` is not a directory", cfg->rootfs);
	for (size_t i = 0; i < cfg->n_binds; i++)
		if (stat(cfg->binds[i].source, &st) < 0)
			return kiwi_error(err, errno, "bind", "cannot use bind source `%s`",
					  cfg->binds[i].source);
	for (size_t i = 0; i < cfg->n_preserve_fds; i++)
		if (fcntl(cfg->preserve_fds[i], F_GETFD) < 0)
			return kiwi_error(err, errno, "fds", "fd %d to preserve is not open",
					  cfg->preserve_fds[i]);
	return 0;
}

static void handle_message(const struct kiwi_sync_msg *m, struct kiwi_sandbox_result *res,
			   int64_t *exec_mono, bool *failed, bool *exited, kiwi_err *err)
{
	switch (m->type) {
	case KIWI_SYNC_EXEC_OK:
		res->started = true;
		*exec_mono = m->mono_ns;
		break;
	case KIWI_SYNC_ERROR:
		*err = m->err;
		*failed = true;
		break;
	case KIWI_SYNC_EXIT:
		*exited = true;
		if (WIFSIGNALED(m->value))
			res->signal = WTERMSIG(m->value);
		else
			res->exit_code = WEXITSTATUS(m->value);
		res->wall_ns = m->mono_ns > *exec_mono ? (uint64_t)(m->mono_ns - *exec_mono) : 0;
		res->cpu_user_us = m->utime_us;
		res->cpu_sys_us = m->stime_us;
		break;
	default:
		break;
	}
}

/* #2, #3: follow the sandbox until its init is gone, forwarding signals. */
static int follow(int sock, int pidfd, struct kiwi_sandbox_result *res, kiwi_err *err)
{
	sigset_t fwd;
	sigemptyset(&fwd);
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(forwarded_signals); i++)
		sigaddset(&fwd, forwarded_signals[i]);
	_cleanup_close_ int sfd = signalfd(-1, &fwd, SFD_CLOEXEC | SFD_NONBLOCK);
	struct pollfd pfd[3] = {
		{ .fd = sock, .events = POLLIN },
		{ .fd = sfd, .events = POLLIN },
		{ .fd = pidfd, .events = POLLIN },
	};
	int64_t exec_mono = 0;
	bool failed = false, exited = false, init_gone = false;
	struct kiwi_sync_msg m;

	while (!init_gone) {
		if (poll(pfd, 3, -1) < 0 && errno != EINTR)
			return kiwi_error(err, errno, "wait", "cannot wait for the sandbox");
		if (pfd[0].revents) {
			int r = kiwi_sync_recv(sock, &m, MSG_DONTWAIT);
			if (r > 0)
				handle_message(&m, res, &exec_mono, &failed, &exited, err);
			else if (r == 0 || errno != EAGAIN)
				pfd[0].fd = -1;
		}
		if (pfd[1].revents) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
				struct kiwi_sync_msg s = { .type = KIWI_SYNC_SIGNAL, .value = (int32_t)si.ssi_signo };
				kiwi_sync_send(sock, &s);
			}
		}
		if (pfd[2].revents) {
			siginfo_t info;
			if (waitid(P_PIDFD, (id_t)pidfd, &info, WEXITED) == 0)
				init_gone = true;
		}
	}
	/* Messages sent just before init left are still queued. */
	while (kiwi_sync_recv(sock, &m, MSG_DONTWAIT) > 0)
		handle_message(&m, res, &exec_mono, &failed, &exited, err);
	if (failed)
		return -1;
	if (!exited)
		return kiwi_error(err, 0, "init", "the sandbox's init ended without reporting the command");
	return 0;
}

/* Creates the sandbox and follows it to the end. */
static int spawn_and_follow(const struct kiwi_sandbox_config *cfg, struct kiwi_sandbox_result *res,
			    kiwi_err *err)
{
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		return kiwi_error(err, errno, "socketpair", "cannot create the sync socket");
	_cleanup_close_ int sock = sp[0];
	int pidfd = -1;
	pid_t pid = kiwi_spawn(KIWI_SANDBOX_NAMESPACES, -1, &pidfd, err);
	if (pid == 0) {
		close(sock);
		kiwi_init_main(cfg, sp[1]);
	}
	close(sp[1]);
	if (pid < 0)
		return -1;
	_cleanup_close_ int pidfd_owned = pidfd;

	/* #1: id maps, then let the child go on. */
	struct kiwi_sync_msg go = { .type = KIWI_SYNC_MAPS_DONE };
	if (kiwi_userns_map_self(pid, err) < 0 || kiwi_sync_send(sock, &go) < 0) {
		if (!err->step[0])
			kiwi_error(err, errno, "sync", "cannot signal the sandbox");
		syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
		siginfo_t info;
		waitid(P_PIDFD, (id_t)pidfd, &info, WEXITED);
		return -1;
	}
	return follow(sock, pidfd, res, err);
}

int kiwi_sandbox_run(const struct kiwi_sandbox_config *cfg, struct kiwi_sandbox_result *res,
		     kiwi_err *err)
{
	*res = (struct kiwi_sandbox_result){ .exit_code = -1 };
	clock_gettime(CLOCK_REALTIME, &res->started_at);
	if (check_config(cfg, err) < 0)
		return -1;

	/* Signals to forward are blocked from before clone until the end, so
	 * none is lost between creating the sandbox and listening for them. */
	sigset_t fwd, old;
	sigemptyset(&fwd);
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(forwarded_signals); i++)
		sigaddset(&fwd, forwarded_signals[i]);
	sigprocmask(SIG_BLOCK, &fwd, &old);
	int r = spawn_and_follow(cfg, res, err);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return r;
}

int kiwi_sandbox_exit_status(const struct kiwi_sandbox_result *res, const kiwi_err *err, bool failed)
{
	if (failed) {
		if (!strcmp(err->step, "exec"))
			return err->errnum == ENOENT || err->errnum == ENOTDIR ? 127 : 126;
		return 125;
	}
	if (res->signal)
		return 128 + res->signal;
	return res->exit_code;
}
