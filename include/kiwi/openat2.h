/* SPDX-License-Identifier: Apache-2.0 */
/* openat2(2), with its one transient failure retried. */
#ifndef KIWI_OPENAT2_H
#define KIWI_OPENAT2_H

#include <errno.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

/* With RESOLVE_BENEATH or RESOLVE_IN_ROOT, a lookup that walks ".." fails
 * EAGAIN when a rename or a mount anywhere on the host raced it, so that
 * the kernel never has to trust a moved tree (openat2(2): "retry"). On a
 * host where sandboxes start in parallel, mounts happen all the time. The
 * bound keeps a host that mounts without pause from spinning us for ever. */
#define KIWI_OPENAT2_RETRIES 256

static inline int kiwi_openat2(int dirfd, const char *path, const struct open_how *how)
{
	for (int tries = 0;; tries++) {
		int fd = (int)syscall(SYS_openat2, dirfd, path, how, sizeof(*how));
		if (fd >= 0 || errno != EAGAIN || tries == KIWI_OPENAT2_RETRIES)
			return fd;
	}
}

#endif
