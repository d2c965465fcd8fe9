/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-pause: the sandbox ("pause") container of the CRI tests
 * (tests/oci/cri). A pod's first process holds its namespaces open and,
 * when the pod shares one pid namespace, reaps the orphans that land on
 * it. It does nothing else: it waits for SIGINT or SIGTERM (exit 0) and
 * reaps every child on SIGCHLD. Static: the pause image has no libc. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <signal.h>
#include <sys/wait.h>

int main(void)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	for (;;) {
		int sig = 0;
		if (sigwait(&set, &sig) != 0)
			continue;
		if (sig != SIGCHLD)
			return 0;
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
	}
}
