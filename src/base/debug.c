/* SPDX-License-Identifier: Apache-2.0 */
#include "kiwi/debug.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

int64_t kiwi_debug_clock(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void kiwi_debug_step(const struct kiwi_debug *d, const char *who, int64_t began, const char *step,
		     const char *fmt, ...)
{
	int saved = errno;
	int64_t now = kiwi_debug_clock();
	char line[512];
	char took[32] = "-";   /* a moment, not a span */
	if (began)
		snprintf(took, sizeof(took), "%.3fms", (double)(now - began) / 1e6);
	int n = snprintf(line, sizeof(line), "kiwi-run: debug: +%.3fms %s %s %s", (double)(now - d->t0) / 1e6,
			 who, step, took);
	if (n > 0 && (size_t)n < sizeof(line) - 2) {
		line[n++] = ' ';
		/* Room for the text and its NUL, one byte kept for the newline;
		 * longer details are cut. */
		size_t room = sizeof(line) - (size_t)n - 1;
		va_list ap;
		va_start(ap, fmt);
		int m = vsnprintf(line + n, room, fmt, ap);
		va_end(ap);
		if (m > 0)
			n += (size_t)m < room ? m : (int)room - 1;
	}
	if (n > 0 && (size_t)n < sizeof(line) - 1) {
		line[n++] = '\n';
		(void)!write(d->fd, line, (size_t)n);
	}
	errno = saved;
}
