/* SPDX-License-Identifier: Apache-2.0 */
#include "kiwi/spawn.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

/* Our own copy of the kernel's struct clone_args (version 2, with cgroup):
 * <linux/sched.h> and glibc's <sched.h> do not mix cleanly. */
struct kiwi_clone_args {
	uint64_t flags;
	uint64_t pidfd;
	uint64_t child_tid;
	uint64_t parent_tid;
	uint64_t exit_signal;
	uint64_t stack;
	uint64_t stack_size;
	uint64_t tls;
	uint64_t set_tid;
	uint64_t set_tid_size;
	uint64_t cgroup;
};

pid_t kiwi_spawn(uint64_t ns_flags, int cgroup_fd, int *pidfd, kiwi_err *err)
{
	int fd = -1;
	struct kiwi_clone_args args = {
		.flags = ns_flags | CLONE_PIDFD,
		.pidfd = (uint64_t)(uintptr_t)&fd,
		/* With CLONE_PARENT the child signals our parent as we do,
		 * and clone3 insists on 0 here. */
		.exit_signal = (ns_flags & CLONE_PARENT) ? 0 : SIGCHLD,
	};
	if (cgroup_fd >= 0) {
		args.flags |= CLONE_INTO_CGROUP;
		args.cgroup = (uint64_t)cgroup_fd;
	}
	long pid = syscall(SYS_clone3, &args, sizeof(args));
	if (pid < 0)
		return kiwi_error(err, errno, "clone3", "cannot create the sandbox's namespaces");
	if (pid > 0)
		*pidfd = fd;
	return (pid_t)pid;
}
