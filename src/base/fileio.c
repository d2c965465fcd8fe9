/* SPDX-License-Identifier: Apache-2.0 */
#include "kiwi/fileio.h"
#include "kiwi/cleanup.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

int kiwi_read_bounded(int fd, size_t max, const char *what, char **out, size_t *len, kiwi_err *err)
{
	_cleanup_free_ char *buf = malloc(max + 1);
	if (!buf)
		return kiwi_error(err, ENOMEM, "read", "cannot read %s", what);
	size_t used = 0;
	for (;;) {
		ssize_t n = read(fd, buf + used, max + 1 - used);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return kiwi_error(err, errno, "read", "cannot read %s", what);
		if (n == 0)
			break;
		used += (size_t)n;
		if (used > max)
			return kiwi_error(err, EFBIG, "read", "%s is larger than %zu bytes", what, max);
	}
	buf[used] = '\0';
	*len = used;
	*out = TAKE_PTR(buf);
	return 0;
}
