/* SPDX-License-Identifier: Apache-2.0 */
/* The caller's sandbox, named by a pidfd and checked before anything is
 * done to it. The pidfd closes the pid-reuse race: /proc/<pid> is opened
 * first, then the pidfd is asked whether its process still lives; if it
 * does, its pid cannot have been reused, so the directory is its. */
#include "helper_int.h"
#include "kiwi/cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#define STEP "sandbox"

/* 0: alive; ESRCH: gone; anything else: not a pidfd. EPERM (a process we
 * may not signal) still means alive: signal 0 is only a probe. */
static int pidfd_probe(int pidfd)
{
	if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == 0 || errno == EPERM)
		return 0;
	return errno;
}

/* The pid the pidfd names, in our pid namespace ("Pid:" in its fdinfo,
 * -1 once the process is reaped). */
static int pidfd_pid(int pidfd, pid_t *pid, kiwi_err *err)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (n < 0)
		return kiwi_error(err, errno, STEP, "cannot read the fd's fdinfo");
	buf[n] = '\0';
	const char *p = strstr(buf, "\nPid:\t");
	if (!p)
		return kiwi_error(err, EBADF, STEP, "the fd sent is not a pidfd");
	long v = strtol(p + 6, NULL, 10);
	if (v <= 0)
		return kiwi_error(err, ESRCH, STEP, "the sandbox's process is gone");
	*pid = (pid_t)v;
	return 0;
}

static int open_procdir(int pidfd, pid_t pid, kiwi_err *err)
{
	char path[32];
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	struct statfs sf;
	if (fd < 0 || fstatfs(fd, &sf) < 0)
		return kiwi_error(err, errno, STEP, "the sandbox's process is gone");
	if (sf.f_type != PROC_SUPER_MAGIC)
		return kiwi_error(err, EXDEV, STEP, "/proc is not a procfs");
	/* Now the check that makes the directory the pidfd's process. */
	int r = pidfd_probe(pidfd);
	if (r)
		return kiwi_error(err, r, STEP, r == ESRCH ? "the sandbox's process ended (its pid may be reused)"
							   : "the fd sent is not a pidfd");
	return TAKE_FD(fd);
}

/* Real, effective, saved and filesystem uids all the caller's. */
static int check_uids(int procfd, uid_t caller, kiwi_err *err)
{
	char buf[4096];
	_cleanup_close_ int fd = openat(procfd, "status", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (n < 0)
		return kiwi_error(err, errno, STEP, "cannot read the sandbox process's status");
	buf[n] = '\0';
	const char *p = strstr(buf, "\nUid:");
	unsigned u[4];
	if (!p || sscanf(p + 5, "%u %u %u %u", &u[0], &u[1], &u[2], &u[3]) != 4)
		return kiwi_error(err, EIO, STEP, "cannot read the sandbox process's uids");
	for (int i = 0; i < 4; i++)
		if (u[i] != caller)
			return kiwi_error(err, EPERM, STEP, "the process is not yours (uid %u)", u[i]);
	return 0;
}

static int same_file(int a, int b)
{
	struct stat sa, sb;
	return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* A user namespace the caller owns, made directly from ours. */
static int check_userns(int procfd, uid_t caller, struct helper_sandbox *sb, kiwi_err *err)
{
	/* Opening it is a ptrace read check, made with the caller's rights. */
	_cleanup_close_ int ns = openat(procfd, "ns/user", O_RDONLY | O_CLOEXEC);
	if (ns < 0)
		return kiwi_error(err, errno, STEP, "cannot open the process's user namespace (not yours?)");
	uid_t owner = (uid_t)-1;
	if (ioctl(ns, NS_GET_NSTYPE) != CLONE_NEWUSER || ioctl(ns, NS_GET_OWNER_UID, &owner) < 0)
		return kiwi_error(err, EINVAL, STEP, "not a user namespace");
	if (owner != caller)
		return kiwi_error(err, EPERM, STEP, "the process's user namespace is not yours (owner %u)",
				  (unsigned)owner);
	_cleanup_close_ int parent = ioctl(ns, NS_GET_PARENT);
	_cleanup_close_ int ours = open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC);
	if (parent < 0 || ours < 0 || !same_file(parent, ours))
		return kiwi_error(err, EPERM, STEP, "the process is not in a user namespace made directly "
						   "from the host's");
	struct stat st;
	if (fstat(ns, &st) < 0)
		return kiwi_error(err, errno, STEP, "cannot stat the user namespace");
	sb->userns_dev = st.st_dev;
	sb->userns_ino = st.st_ino;
	return 0;
}

int helper_sandbox_open(int pidfd, uid_t caller, struct helper_sandbox *sb, kiwi_err *err)
{
	*sb = (struct helper_sandbox)HELPER_SANDBOX_INIT;
	sb->pidfd = pidfd;
	if (pidfd_probe(pidfd) == EBADF || pidfd_probe(pidfd) == EINVAL)
		return kiwi_error(err, EBADF, STEP, "the fd sent is not a pidfd");
	if (pidfd_pid(pidfd, &sb->pid, err) < 0)
		return -1;
	sb->procfd = open_procdir(pidfd, sb->pid, err);
	if (sb->procfd < 0 || check_uids(sb->procfd, caller, err) < 0 ||
	    check_userns(sb->procfd, caller, sb, err) < 0)
		return -1;
	return 0;
}

bool helper_sandbox_alive(const struct helper_sandbox *sb)
{
	return sb->pidfd >= 0 && pidfd_probe(sb->pidfd) == 0;
}

bool helper_sandbox_same(const struct helper_sandbox *a, const struct helper_sandbox *b)
{
	return a->pid == b->pid && a->userns_dev == b->userns_dev && a->userns_ino == b->userns_ino;
}

int helper_sandbox_netns(const struct helper_sandbox *sb, kiwi_err *err)
{
	_cleanup_close_ int ns = openat(sb->procfd, "ns/net", O_RDONLY | O_CLOEXEC);
	if (ns < 0)
		return kiwi_error(err, errno, STEP, "cannot open the sandbox's network namespace");
	if (ioctl(ns, NS_GET_NSTYPE) != CLONE_NEWNET)
		return kiwi_error(err, EINVAL, STEP, "not a network namespace");
	_cleanup_close_ int owner = ioctl(ns, NS_GET_USERNS);
	struct stat st;
	if (owner < 0 || fstat(owner, &st) < 0 || st.st_dev != sb->userns_dev || st.st_ino != sb->userns_ino)
		return kiwi_error(err, EPERM, STEP, "the sandbox's network namespace is not owned by its user "
						   "namespace (the host's, or someone else's)");
	/* Still the same process: the namespace is the sandbox's. */
	if (pidfd_probe(sb->pidfd))
		return kiwi_error(err, ESRCH, STEP, "the sandbox's process ended");
	return TAKE_FD(ns);
}

int helper_sandbox_userns(const struct helper_sandbox *sb, kiwi_err *err)
{
	_cleanup_close_ int ns = openat(sb->procfd, "ns/user", O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (ns < 0 || fstat(ns, &st) < 0)
		return kiwi_error(err, errno, STEP, "cannot open the sandbox's user namespace");
	if (st.st_dev != sb->userns_dev || st.st_ino != sb->userns_ino)
		return kiwi_error(err, EPERM, STEP, "the sandbox's process is in another user namespace now");
	if (pidfd_probe(sb->pidfd))
		return kiwi_error(err, ESRCH, STEP, "the sandbox's process ended");
	return TAKE_FD(ns);
}

void helper_sandbox_close(struct helper_sandbox *sb)
{
	if (sb->procfd >= 0)
		close(sb->procfd);
	if (sb->pidfd >= 0)
		close(sb->pidfd);
	*sb = (struct helper_sandbox)HELPER_SANDBOX_INIT;
}
