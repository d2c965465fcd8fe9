/* SPDX-License-Identifier: Apache-2.0 */
/* start, kill, delete and the container's pids: each works from the state
 * directory alone, so the kiwi-run that created the container may be long
 * gone. The transitions and their refusals are the runtime-spec's. */
#include "oci_int.h"
#include "kiwi/cgroup.h"
#include "kiwi/cleanup.h"
#include "kiwi/oci_runtime.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static int load_locked(const char *root, const char *id, struct kiwi_oci_state *st, int *lock, kiwi_err *err)
{
	*lock = kiwi_oci_lock(root, id, err);
	if (*lock < 0)
		return -1;
	if (kiwi_oci_state_load(root, id, st, err) < 0) {
		close(*lock);
		*lock = -1;
		return -1;
	}
	return 0;
}

/* Waits until the process behind pidfd has ended (not necessarily been
 * reaped: that is its parent's business, the shim's). Bounded, as runc's
 * wait is: an init of a pid namespace only ends once every other process
 * of it has been reaped, and those may have a parent that does not reap. */
static int wait_exit(int pidfd, const char *id, kiwi_err *err)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };
	int r;
	while ((r = poll(&p, 1, KIWI_OCI_KILL_WAIT_MS)) < 0 && errno == EINTR)
		;
	if (r == 0)
		return kiwi_error(err, ETIMEDOUT, "delete",
				  "the init of `%s` did not end within %d s of SIGKILL (are the container's "
				  "processes reaped by their parent?)", id, KIWI_OCI_KILL_WAIT_MS / 1000);
	return 0;
}

static int run_hooks_of(const struct kiwi_oci_state *st, enum kiwi_oci_hook_kind kind, enum kiwi_oci_status s,
			kiwi_err *warning)
{
	_cleanup_oci_config_ struct kiwi_oci_config *cfg = NULL;
	kiwi_err e = { 0 };
	/* The bundle is the caller's: if it is gone, so are the hooks. */
	if (kiwi_oci_config_load(st->bundle, &cfg, &e) < 0 || !cfg->n_hooks[kind])
		return 0;
	_cleanup_free_ char *text = kiwi_oci_state_text(st, s);
	if (text && kiwi_oci_run_hooks(cfg, kind, text, &e) < 0) {
		if (warning)
			*warning = e;
		return -1;
	}
	return 0;
}

/* After the byte: the init keeps its end open until its execve closes it
 * (close-on-exec), so EOF means the program runs (or the init died). */
static int await_exec(int fifo, int pidfd, kiwi_err *err)
{
	struct pollfd p[2] = { { .fd = fifo, .events = POLLIN }, { .fd = pidfd, .events = POLLIN } };
	for (;;) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return kiwi_error(err, errno, "start", "cannot wait for the container's program");
		}
		char byte;
		if (p[0].revents && read(fifo, &byte, 1) == 0)
			return 0;
		if (p[1].revents)
			return kiwi_error(err, ESRCH, "start", "the container's init ended before its program ran");
	}
}

/* Opens exec.fifo for reading, which lets the init's blocked open for
 * writing complete; its byte says it goes on to exec. */
static int release(const char *dir, int pidfd, kiwi_err *err)
{
	char path[4400];
	snprintf(path, sizeof(path), "%s/" KIWI_OCI_FIFO, dir);
	_cleanup_close_ int fifo = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fifo < 0)
		return kiwi_error(err, errno, "start", "cannot open `%s`", path);
	struct pollfd p[2] = { { .fd = fifo, .events = POLLIN }, { .fd = pidfd, .events = POLLIN } };
	for (;;) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return kiwi_error(err, errno, "start", "cannot wait for the container's init");
		}
		char byte;
		if ((p[0].revents & POLLIN) && read(fifo, &byte, 1) == 1)
			break;
		if (p[1].revents)
			return kiwi_error(err, ESRCH, "start", "the container's init ended before it was started");
	}
	if (unlink(path) < 0)
		return kiwi_error(err, errno, "start", "cannot remove `%s`", path);
	return await_exec(fifo, pidfd, err);
}

int kiwi_oci_start(const char *root, const char *id, kiwi_err *err)
{
	struct kiwi_oci_state st;
	_cleanup_close_ int lock = -1, pidfd = -1;
	if (load_locked(root, id, &st, &lock, err) < 0)
		return -1;
	enum kiwi_oci_status s = kiwi_oci_state_status(root, &st, &pidfd);
	int r = 0;
	if (s != KIWI_OCI_CREATED) {
		r = kiwi_error(err, EINVAL, "start", s == KIWI_OCI_STOPPED ? "cannot start a container that has stopped"
									  : "cannot start an already running container");
	} else {
		char dir[4352];
		snprintf(dir, sizeof(dir), "%s/%s", root, id);
		r = release(dir, pidfd, err);
	}
	if (r == 0) {
		/* A poststart hook's failure is a warning (runtime-spec). */
		kiwi_err warning = { 0 };
		if (run_hooks_of(&st, KIWI_OCI_HOOK_POSTSTART, KIWI_OCI_RUNNING, &warning) < 0)
			kiwi_error(err, warning.errnum, "warning", "%s", warning.msg);
	}
	kiwi_oci_state_clear(&st);
	return r;
}

/* Every process in the init's pid namespace, which is the container's
 * own when it has one: /proc is scanned for the same ns/pid inode. */
static int ns_pids(pid_t init, pid_t **out, size_t *n, kiwi_err *err)
{
	char path[64];
	struct stat want, st;
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)init);
	*out = NULL;
	*n = 0;
	if (stat(path, &want) < 0)
		return kiwi_error(err, errno, "ps", "cannot read the pid namespace of %d", (int)init);
	/* A container in our own pid namespace: its processes cannot be
	 * told from the host's, and the init is all that is known. */
	if (stat("/proc/self/ns/pid", &st) == 0 && st.st_ino == want.st_ino && st.st_dev == want.st_dev) {
		if (!(*out = malloc(sizeof(**out))))
			return kiwi_error(err, ENOMEM, "ps", "cannot allocate the pid list");
		(*out)[0] = init;
		*n = 1;
		return 0;
	}
	DIR *d = opendir("/proc");
	if (!d)
		return kiwi_error(err, errno, "ps", "cannot read /proc");
	size_t cap = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (*end || pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/ns/pid", pid);
		if (stat(path, &st) < 0 || st.st_ino != want.st_ino || st.st_dev != want.st_dev)
			continue;
		if (*n == cap) {
			cap = cap ? 2 * cap : 16;
			pid_t *more = realloc(*out, cap * sizeof(**out));
			if (!more) {
				closedir(d);
				free(*out);
				*out = NULL;
				return kiwi_error(err, ENOMEM, "ps", "cannot allocate the pid list");
			}
			*out = more;
		}
		(*out)[(*n)++] = (pid_t)pid;
	}
	closedir(d);
	return 0;
}

int kiwi_oci_pids(const char *root, const char *id, pid_t **pids, size_t *n, kiwi_err *err)
{
	struct kiwi_oci_state st;
	_cleanup_close_ int pidfd = -1;
	*pids = NULL;
	*n = 0;
	if (kiwi_oci_state_load(root, id, &st, err) < 0)
		return -1;
	enum kiwi_oci_status s = kiwi_oci_state_status(root, &st, &pidfd);
	int r = s == KIWI_OCI_STOPPED ? 0 : ns_pids(st.pid, pids, n, err);
	kiwi_oci_state_clear(&st);
	return r;
}

int kiwi_oci_kill(const char *root, const char *id, int sig, bool all, kiwi_err *err)
{
	struct kiwi_oci_state st;
	_cleanup_close_ int pidfd = -1;
	if (kiwi_oci_state_load(root, id, &st, err) < 0)
		return -1;
	enum kiwi_oci_status s = kiwi_oci_state_status(root, &st, &pidfd);
	kiwi_oci_state_clear(&st);
	if (s == KIWI_OCI_STOPPED)
		return kiwi_error(err, ESRCH, "kill", "container `%s` is not running", id);
	if (all) {
		_cleanup_free_ pid_t *pids = NULL;
		size_t n;
		if (ns_pids(st.pid, &pids, &n, err) < 0)
			return -1;
		for (size_t i = 0; i < n; i++)
			if (pids[i] != st.pid)
				kill(pids[i], sig);
	}
	if (syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0) < 0 && errno != ESRCH)
		return kiwi_error(err, errno, "kill", "cannot send signal %d to `%s`", sig, id);
	return 0;
}

static void remove_state(const char *root, const char *id)
{
	char dir[4352];
	if (kiwi_oci_state_dir(root, id, dir, sizeof(dir), NULL) == 0)
		kiwi_oci_state_dir_remove(dir);
}

int kiwi_oci_delete(const char *root, const char *id, bool force, kiwi_err *err)
{
	struct kiwi_oci_state st;
	_cleanup_close_ int lock = -1, pidfd = -1;
	if (load_locked(root, id, &st, &lock, err) < 0) {
		/* A create killed before it wrote state.json leaves its
		 * directory (its init ends with it: the sync socket closes). */
		char dir[4352], path[4400], fifo[4400];
		if (!force || kiwi_oci_state_dir(root, id, dir, sizeof(dir), NULL) < 0)
			return -1;
		snprintf(path, sizeof(path), "%s/state.json", dir);
		snprintf(fifo, sizeof(fifo), "%s/" KIWI_OCI_FIFO, dir);
		/* exec.fifo marks it as a container's: nothing else is removed. */
		if (access(fifo, F_OK) == 0 && access(path, F_OK) < 0) {
			kiwi_oci_pending_cgroup_collect(dir);
			remove_state(root, id);
			*err = (kiwi_err){ 0 };
			return 0;
		}
		return -1;
	}
	enum kiwi_oci_status s = kiwi_oci_state_status(root, &st, &pidfd);
	/* A created container has run nothing of the user's: runc deletes it
	 * without --force, and so does kiwi-run. */
	if (s == KIWI_OCI_RUNNING && !force) {
		kiwi_oci_state_clear(&st);
		return kiwi_error(err, EBUSY, "delete", "cannot delete container `%s` that is not stopped: running", id);
	}
	if (s != KIWI_OCI_STOPPED) {
		/* The init is pid 1 of its namespace when it has one of its
		 * own: the kernel takes every other process with it. */
		_cleanup_free_ pid_t *pids = NULL;
		size_t n = 0;
		if (ns_pids(st.pid, &pids, &n, NULL) == 0)
			for (size_t i = 0; i < n; i++)
				kill(pids[i], SIGKILL);
		syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
		if (wait_exit(pidfd, id, err) < 0) {
			kiwi_oci_state_clear(&st);
			return -1;
		}
	}
	/* Anything left in its cgroup (processes of a shared pid namespace)
	 * ends with it; on failure the state stays for another try. */
	if (st.cgroup[0] && st.cgroup_owned && kiwi_cgroup_remove_path(st.cgroup, err) < 0) {
		kiwi_oci_state_clear(&st);
		return -1;
	}
	/* The parents create made go too, each once it is empty. */
	if (st.cgroup[0] && st.cgroup_top[0])
		kiwi_cgroup_remove_parents(st.cgroup, st.cgroup_top);
	remove_state(root, id);
	/* A poststop hook's failure is a warning (runtime-spec). */
	kiwi_err warning = { 0 };
	if (run_hooks_of(&st, KIWI_OCI_HOOK_POSTSTOP, KIWI_OCI_STOPPED, &warning) < 0)
		kiwi_error(err, warning.errnum, "warning", "%s", warning.msg);
	kiwi_oci_state_clear(&st);
	return 0;
}
