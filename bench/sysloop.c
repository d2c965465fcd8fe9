/* SPDX-License-Identifier: Apache-2.0 */
/* A tight system-call loop for bench/syscall-cost.sh: prints the CPU
 * nanoseconds per call (CPU time, not wall time, so other work on the
 * machine moves it little).  sysloop getpid|read|ioctl N */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	long n = atol(argv[2]);
	int fd = open("/dev/zero", O_RDONLY);
	char c;
	int avail;
	struct timespec a, b;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
	for (long i = 0; i < n; i++) {
		if (!strcmp(argv[1], "getpid"))
			syscall(SYS_getpid);
		else if (!strcmp(argv[1], "read"))
			(void)!read(fd, &c, 1);
		else
			ioctl(fd, FIONREAD, &avail);
	}
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
	double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
	printf("%.1f\n", ns / (double)n);
	return 0;
}
