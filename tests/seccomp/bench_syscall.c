/* SPDX-License-Identifier: Apache-2.0 */
/* What the filter costs per system call: tight loops of cheap syscalls,
 * unconfined and then in a child under the default profile (or the profile
 * given), in ns per call. getpid and read sit low in the syscall table,
 * getrandom high, and ioctl goes through argument checks.
 * Usage: bench_seccomp_syscall [iterations] [profile.json] */
#include "kiwi/seccomp.h"

#include <fcntl.h>
#include <linux/filter.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Thread CPU time, not wall time: the filter runs on the calling thread,
 * and preemption by other load on the machine does not count. */
static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

enum { GETPID, READ, GETRANDOM, IOCTL, N_CALLS };

static void call(int which, int fd, char *buf)
{
	int avail;
	switch (which) {
	case GETPID: syscall(SYS_getpid); break;
	case READ: (void)!read(fd, buf, 1); break;
	case GETRANDOM: syscall(SYS_getrandom, buf, 1, 0); break;
	default: ioctl(fd, FIONREAD, &avail); break;
	}
}

/* The best of 5 rounds of n calls, in ns per call. */
static void run_loops(const char *label, long n)
{
	int zero = open("/dev/zero", O_RDONLY | O_CLOEXEC);
	char buf[8];
	double best[N_CALLS];
	for (int k = 0; k < N_CALLS; k++) {
		best[k] = 1e18;
		for (int round = 0; round < 5; round++) {
			double t0 = now_ns();
			for (long i = 0; i < n; i++)
				call(k, zero, buf);
			double per = (now_ns() - t0) / (double)n;
			best[k] = per < best[k] ? per : best[k];
		}
	}
	printf("%-12s getpid %6.1f  read %6.1f  getrandom %6.1f  ioctl %6.1f  ns/call (best of 5, CPU time)\n",
	       label, best[GETPID], best[READ], best[GETRANDOM], best[IOCTL]);
	fflush(stdout);
	close(zero);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	struct kiwi_seccomp *f;
	kiwi_err err = { 0 };
	int rc = argc > 2 ? kiwi_seccomp_compile_file(argv[2], &f, &err) : kiwi_seccomp_compile_default(&f, &err);
	if (rc < 0) {
		fprintf(stderr, "bench_seccomp_syscall: %s\n", err.msg);
		return 1;
	}
	printf("%ld calls each; profile %s (%u BPF instructions)\n", n, argc > 2 ? argv[2] : "default",
	       kiwi_seccomp_program(f)->len);
	run_loops("unconfined", n);
	pid_t pid = fork();
	if (pid == 0) {
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || kiwi_seccomp_load(f, &err) < 0)
			_exit(1);
		run_loops("filtered", n);
		_exit(0);
	}
	int status;
	waitpid(pid, &status, 0);
	kiwi_seccomp_free(f);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
