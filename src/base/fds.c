/* SPDX-License-Identifier: Apache-2.0 */
/* The fds a process keeps: for the children that outlive their parent's
 * work (the egress table's holder, kiwi-helper's keepers), which must hold
 * nothing but what they keep alive. */
#include "kiwi/fds.h"

#include <fcntl.h>
#include <stdbool.h>
#include <unistd.h>

void kiwi_fds_keep_only(const int *keep, size_t n)
{
	int k[8], null = open("/dev/null", O_RDWR | O_CLOEXEC);
	size_t m = 0;
	for (size_t i = 0; i < n && m < 8; i++)
		if (keep[i] >= 0)
			k[m++] = keep[i];
	for (size_t i = 1; i < m; i++)   /* sorted, so the gaps are ranges */
		for (size_t j = i; j > 0 && k[j - 1] > k[j]; j--) {
			int t = k[j];
			k[j] = k[j - 1];
			k[j - 1] = t;
		}
	for (int fd = 0; fd < 3 && null >= 0; fd++) {
		bool kept = false;
		for (size_t i = 0; i < m; i++)
			kept |= k[i] == fd;
		if (!kept)
			dup2(null, fd);
	}
	unsigned lo = 3;
	for (size_t i = 0; i < m; i++) {
		if ((unsigned)k[i] > lo)
			close_range(lo, (unsigned)k[i] - 1, 0);
		if ((unsigned)k[i] + 1 > lo)
			lo = (unsigned)k[i] + 1;
	}
	close_range(lo, ~0u, 0);
}
