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

#if defined(__x86_64__)
/* The child's whole life, after clone3 returns 0 in it on holder_stack:
 * close(hold_w), read(hold_r, stack, 1), exit(0). System calls only: it
 * shares our memory and thread pointer, so no libc (errno is ours). */
static long clone3_holder(struct kiwi_clone_args *args, int hold_r, int hold_w)
{
	register long rax __asm__("rax") = SYS_clone3;
	register long rdi __asm__("rdi") = (long)(uintptr_t)args;
	register long rsi __asm__("rsi") = (long)sizeof(*args);
	register long r8 __asm__("r8") = hold_r;
	register long r9 __asm__("r9") = hold_w;
	__asm__ volatile("syscall\n\t"
			 "test %%rax, %%rax\n\t"
			 "jnz 1f\n\t"
			 "mov %%r9, %%rdi\n\t"
			 "mov $3, %%eax\n\t"      /* close */
			 "syscall\n\t"
			 "mov %%r8, %%rdi\n\t"
			 "lea -16(%%rsp), %%rsi\n\t"
			 "mov $1, %%edx\n\t"
			 "xor %%eax, %%eax\n\t"   /* read */
			 "syscall\n\t"
			 "xor %%edi, %%edi\n\t"
			 "mov $60, %%eax\n\t"     /* exit */
			 "syscall\n\t"
			 "hlt\n\t"
			 "1:"
			 : "+r"(rax)
			 : "r"(rdi), "r"(rsi), "r"(r8), "r"(r9)
			 : "rcx", "r11", "rdx", "memory");
	return rax;
}

pid_t kiwi_spawn_holder(uint64_t ns_flags, int cgroup_fd, int hold_r, int hold_w, int *pidfd, kiwi_err *err)
{
	/* One holder at a time (pid 1's cgroup namespace, reaped before the
	 * next could be made): the stack is only read into. */
	static char holder_stack[256] __attribute__((aligned(16)));
	int fd = -1;
	struct kiwi_clone_args args = {
		.flags = ns_flags | CLONE_VM | CLONE_PIDFD,
		.pidfd = (uint64_t)(uintptr_t)&fd,
		.exit_signal = SIGCHLD,
		.stack = (uint64_t)(uintptr_t)holder_stack,
		.stack_size = sizeof(holder_stack),
	};
	if (cgroup_fd >= 0) {
		args.flags |= CLONE_INTO_CGROUP;
		args.cgroup = (uint64_t)cgroup_fd;
	}
	long pid = clone3_holder(&args, hold_r, hold_w);
	if (pid < 0)
		return kiwi_error(err, (int)-pid, "clone3", "cannot create the sandbox's namespaces");
	*pidfd = fd;
	return (pid_t)pid;
}
#else
pid_t kiwi_spawn_holder(uint64_t ns_flags, int cgroup_fd, int hold_r, int hold_w, int *pidfd, kiwi_err *err)
{
	pid_t pid = kiwi_spawn(ns_flags, cgroup_fd, pidfd, err);
	if (pid == 0) {
		char b;
		close(hold_w);
		(void)!read(hold_r, &b, 1);
		_exit(0);
	}
	return pid;
}
#endif
