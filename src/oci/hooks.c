/* SPDX-License-Identifier: Apache-2.0 */
/* OCI hooks: each one a program run with the container's state on its
 * stdin, in whatever namespaces the caller is in at that point of the
 * lifecycle (create.c, init.c and lifecycle.c choose the moment). */
#include "oci_int.h"
#include "kiwi/cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif

_Noreturn static void exec_hook(const struct kiwi_oci_hook *h, int in)
{
	if (dup2(in, 0) < 0)
		_exit(126);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	execve(h->path, h->argv, h->env ? h->env : environ);
	_exit(127);
}

static int run_one(const struct kiwi_oci_hook *h, const char *kind, const char *state, kiwi_err *err)
{
	int pipefd[2];
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return kiwi_error(err, errno, "hook", "cannot create a pipe for a %s hook", kind);
	pid_t pid = fork();
	if (pid < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		return kiwi_error(err, errno, "hook", "cannot fork the %s hook `%s`", kind, h->path);
	}
	if (pid == 0) {
		close(pipefd[1]);
		exec_hook(h, pipefd[0]);
	}
	close(pipefd[0]);
	_cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	/* A hook that does not read its stdin gets EPIPE here, not us a
	 * SIGPIPE: MSG_NOSIGNAL does not apply to pipes, so it is ignored. */
	size_t len = strlen(state);
	struct sigaction ign = { .sa_handler = SIG_IGN }, old;
	sigaction(SIGPIPE, &ign, &old);
	(void)!write(pipefd[1], state, len);
	sigaction(SIGPIPE, &old, NULL);
	close(pipefd[1]);
	if (h->timeout_s && pidfd >= 0) {
		struct pollfd p = { .fd = pidfd, .events = POLLIN };
		int r;
		do
			r = poll(&p, 1, h->timeout_s * 1000);
		while (r < 0 && errno == EINTR);
		if (r == 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			return kiwi_error(err, ETIMEDOUT, "hook", "%s hook `%s` timed out after %d s", kind, h->path,
					  h->timeout_s);
		}
	}
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return kiwi_error(err, errno, "hook", "cannot wait for the %s hook `%s`", kind, h->path);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFSIGNALED(status))
		return kiwi_error(err, 0, "hook", "%s hook `%s` was killed by signal %d", kind, h->path, WTERMSIG(status));
	return kiwi_error(err, 0, "hook", "%s hook `%s` exited with status %d", kind, h->path, WEXITSTATUS(status));
}

int kiwi_oci_run_hooks(const struct kiwi_oci_config *cfg, enum kiwi_oci_hook_kind kind, const char *state_json,
		       kiwi_err *err)
{
	for (size_t i = 0; i < cfg->n_hooks[kind]; i++)
		if (run_one(&cfg->hooks[kind][i], kiwi_oci_hook_kind_name(kind), state_json, err) < 0)
			return -1;
	return 0;
}
