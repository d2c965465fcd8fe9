/* SPDX-License-Identifier: Apache-2.0 */
/* Scope-bound cleanup. Initialise fds to -1 and pointers to NULL; hand a
 * resource on with TAKE_FD / TAKE_PTR so the cleanup does not release it. */
#ifndef KIWI_CLEANUP_H
#define KIWI_CLEANUP_H

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))

static inline void kiwi_freep(void *p)
{
	free(*(void **)p);
}

/* Also called by hand on a struct's fd: -1 afterwards, so that the
 * struct's own close does not close the number again (by then another
 * open may have been given it). */
static inline void kiwi_closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
		*fd = -1;
	}
}

#define _cleanup_free_ _cleanup_(kiwi_freep)
#define _cleanup_close_ _cleanup_(kiwi_closep)

#define TAKE_FD(fd) ({ int take_fd_ = (fd); (fd) = -1; take_fd_; })
#define TAKE_PTR(p) ({ __typeof__(p) take_ptr_ = (p); (p) = NULL; take_ptr_; })

#define KIWI_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
