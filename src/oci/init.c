/* SPDX-License-Identifier: Apache-2.0 */
/* The container's init, child side of clone3. Unlike `kiwi-run run`'s pid 1
 * (src/sandbox/init.c), which forks the command and supervises it, the OCI init
 * becomes the user process itself: the shim waits for this very pid.
 * One flat list of steps; #1..#3 are mirrored in create.c. */
#include "oci_int.h"
#include "kiwi/sync.h"
#include "kiwi/cleanup.h"
#include "kiwi/net.h"
#include "kiwi/oci_runtime.h"
#include "kiwi/seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* Our own fds move above the preserved range, so that none of them is
 * taken for one of the caller's fds 3..3+N-1. */
static int move_above(int fd, int min)
{
	if (fd < 0 || fd >= min)
		return fd;
	int n = fcntl(fd, F_DUPFD_CLOEXEC, min);
	close(fd);
	return n;
}

static int join_namespaces(const struct kiwi_oci_config *cfg, kiwi_err *err)
{
	for (size_t i = 0; i < cfg->n_namespaces; i++) {
		const struct kiwi_oci_namespace *ns = &cfg->namespaces[i];
		/* pid is joined by the parent, before clone3 (pid_for_children). */
		if (!ns->path || ns->type == CLONE_NEWPID)
			continue;
		_cleanup_close_ int fd = open(ns->path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return kiwi_error(err, errno, "namespaces", "cannot open namespace `%s`", ns->path);
		if (setns(fd, ns->type) < 0)
			return kiwi_error(err, errno, "namespaces", "cannot join namespace `%s`", ns->path);
	}
	return 0;
}

static int set_names(const struct kiwi_oci_config *cfg, kiwi_err *err)
{
	if (cfg->hostname && sethostname(cfg->hostname, strlen(cfg->hostname)) < 0)
		return kiwi_error(err, errno, "hostname", "cannot set hostname `%s`", cfg->hostname);
	if (cfg->domainname && setdomainname(cfg->domainname, strlen(cfg->domainname)) < 0)
		return kiwi_error(err, errno, "hostname", "cannot set domainname `%s`", cfg->domainname);
	return 0;
}

static int write_file(const char *path, const char *text, kiwi_err *err)
{
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		return kiwi_error(err, errno, "process", "cannot write `%s` to `%s`", text, path);
	return 0;
}

/* The fds of the process: 0-2, the preserved 3..3+N-1 (inheritable), all
 * others close at exec. */
static int settle_fds(int preserve, kiwi_err *err)
{
	if (syscall(SYS_close_range, 3 + preserve, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
		return kiwi_error(err, errno, "fds", "cannot mark inherited fds close-on-exec");
	for (int fd = 3; fd < 3 + preserve; fd++)
		if (fcntl(fd, F_SETFD, 0) < 0 && errno != EBADF)
			return kiwi_error(err, errno, "fds", "cannot pass fd %d", fd);
	return 0;
}

/* Everything between the id maps and pivot_root. */
static int build(const struct oci_init_args *a, int *rootfd, kiwi_err *err)
{
	const struct kiwi_oci_config *cfg = a->cfg;
	bool userns = cfg->new_ns & CLONE_NEWUSER;
	/* Root of the new user namespace, whoever we were outside. */
	if (userns && (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0))
		return kiwi_error(err, errno, "user", "cannot become root in the user namespace (is 0 mapped?)");
	if (join_namespaces(cfg, err) < 0 || set_names(cfg, err) < 0)
		return -1;
	/* A new network namespace starts with lo down; runc brings it up. */
	if ((cfg->new_ns & CLONE_NEWNET) && kiwi_net_loopback_up(err) < 0)
		return -1;
	/* Relative bind sources are relative to the bundle. */
	if (chdir(a->bundle) < 0)
		return kiwi_error(err, errno, "rootfs", "cannot enter the bundle `%s`", a->bundle);
	return kiwi_oci_prepare_rootfs(cfg, a->rootfs, userns, a->bind_trees, rootfd, err);
}

/* #2: createRuntime hooks run in the runtime's namespaces, by the parent;
 * createContainer hooks here, in the container's, before pivot_root. */
static int creation_hooks(const struct oci_init_args *a, kiwi_err *err)
{
	const struct kiwi_oci_config *cfg = a->cfg;
	struct kiwi_sync_msg m = { .type = OCI_SYNC_HOOKS };
	if (cfg->n_hooks[KIWI_OCI_HOOK_PRESTART] || cfg->n_hooks[KIWI_OCI_HOOK_CREATE_RUNTIME]) {
		if (kiwi_sync_send(a->sock, &m) < 0 || kiwi_sync_recv(a->sock, &m, 0) <= 0 ||
		    m.type != OCI_SYNC_HOOKS_DONE)
			_exit(1);   /* the parent failed and says why */
	}
	return kiwi_oci_run_hooks(cfg, KIWI_OCI_HOOK_CREATE_CONTAINER, a->state_json, err);
}

/* After pivot_root: the process as config.json describes it. */
static int become_process(struct oci_init_args *a, struct kiwi_mask_source *masks, char *prog, size_t len,
			  kiwi_err *err)
{
	const struct kiwi_oci_config *cfg = a->cfg;
	const struct kiwi_oci_process *p = &cfg->process;
	if (kiwi_oci_finish_rootfs(cfg, masks, err) < 0)
		return -1;
	if (p->has_oom_score_adj) {
		char v[16];
		snprintf(v, sizeof(v), "%d", p->oom_score_adj);
		if (write_file("/proc/self/oom_score_adj", v, err) < 0)
			return -1;
	}
	if (setsid() < 0)
		return kiwi_error(err, errno, "process", "cannot start a session");
	if (p->terminal && kiwi_oci_setup_console(a->console_sock, p, err) < 0)
		return -1;
	if (kiwi_oci_set_rlimits(p, err) < 0)
		return -1;
	umask(p->umask_text ? p->umask : 022);
	/* Without no_new_privs an unprivileged process may not load a filter,
	 * so then it goes on before the uid changes (as runc does). */
	if (a->seccomp && !p->no_new_privileges && kiwi_seccomp_load(a->seccomp, err) < 0)
		return -1;
	if (kiwi_oci_env_with_home(p, &a->env, err) < 0)
		return -1;
	bool may_setgroups = !(cfg->new_ns & CLONE_NEWUSER) || geteuid() == 0;
	if (kiwi_oci_become_user(p, may_setgroups && a->may_setgroups, err) < 0)
		return -1;
	if (chdir(p->cwd) < 0)
		return kiwi_error(err, errno, "cwd", "cannot enter working directory `%s`", p->cwd);
	if (kiwi_oci_find_program(p, prog, len, err) < 0)
		return -1;
	return settle_fds(a->preserve_fds, err);
}

/* #3 done: wait for `start`, then exec. A failure here can only be told
 * on the container's stderr: create has returned already. */
_Noreturn static void await_start(const struct oci_init_args *a, int fifo_path, const char *prog)
{
	kiwi_err err = { 0 };
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fifo_path);
	int fifo = open(path, O_WRONLY | O_CLOEXEC);
	if (fifo < 0) {
		kiwi_error(&err, errno, "start", "cannot open exec.fifo (is /proc mounted in the container?)");
		goto fail;
	}
	if (write(fifo, "0", 1) != 1) {
		kiwi_error(&err, errno, "start", "cannot signal the start");
		goto fail;
	}
	/* The write end stays open (close-on-exec) through the startContainer
	 * hooks: `start` waits for its EOF, so that its poststart hooks run
	 * only once the program has been executed, as the spec orders. */
	close(fifo_path);
	if (kiwi_oci_run_hooks(a->cfg, KIWI_OCI_HOOK_START_CONTAINER, a->state_json, &err) < 0)
		goto fail;
	if (a->seccomp && a->cfg->process.no_new_privileges && kiwi_seccomp_load(a->seccomp, &err) < 0)
		goto fail;
	execve(prog, a->cfg->process.args, a->env);
	kiwi_error(&err, errno, "exec", "cannot execute `%s`", prog);
fail:;
	char text[1024];
	kiwi_error_format(&err, text, sizeof(text));
	dprintf(2, "kiwi-run: %s\n", text);
	_exit(err.errnum == ENOENT ? 127 : 126);
}

_Noreturn void kiwi_oci_init_main(const struct oci_init_args *args)
{
	struct oci_init_args a = *args;
	const int floor = 3 + a.preserve_fds;
	kiwi_err err = { 0 };
	struct kiwi_sync_msg m = { 0 };
	_cleanup_close_ int rootfd = -1;
	_cleanup_(kiwi_mount_mask_source_close) struct kiwi_mask_source masks = { .fd = -1 };
	char prog[4096];

	a.sock = move_above(a.sock, floor);
	a.fifo_path = move_above(a.fifo_path, floor);
	a.console_sock = move_above(a.console_sock, floor);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);

	/* #1: the parent writes our id maps. */
	if (kiwi_sync_recv(a.sock, &m, 0) <= 0 || m.type != OCI_SYNC_GO)
		_exit(1);
	/* #1's message carries what only the parent knows: our pid outside
	 * and whether setgroups is allowed. The hooks get the state. */
	a.may_setgroups = m.flags != 0;
	struct kiwi_oci_state st = *a.state;
	st.pid = m.value;
	_cleanup_free_ char *state_json = kiwi_oci_state_text(&st, KIWI_OCI_CREATING);
	a.state_json = state_json ? state_json : "{}";
	if (build(&a, &rootfd, &err) < 0 || creation_hooks(&a, &err) < 0)
		goto fail;
	/* The parent opened the fifo (O_PATH); it is written through
	 * /proc/self/fd after pivot_root. */
	int fifo_path = a.fifo_path;
	if (kiwi_oci_pivot(rootfd, a.cfg, &masks, &err) < 0 ||
	    become_process(&a, &masks, prog, sizeof(prog), &err) < 0)
		goto fail;
	kiwi_mount_mask_source_close(&masks);
	if (a.console_sock >= 0)
		close(a.console_sock);

	/* #3: ready; from here on only `start` moves us on. */
	m = (struct kiwi_sync_msg){ .type = OCI_SYNC_READY };
	if (kiwi_sync_send(a.sock, &m) < 0)
		_exit(1);
	close(a.sock);
	await_start(&a, fifo_path, prog);

fail:
	m = (struct kiwi_sync_msg){ .type = OCI_SYNC_ERROR, .err = err };
	kiwi_sync_send(a.sock, &m);
	_exit(1);
}
