/* SPDX-License-Identifier: Apache-2.0 */
/* --debug: every setup step with its timing, one line each on stderr:
 *
 *   kiwi-run: debug: +1.234ms run clone3 0.105ms ns=user,mnt,pid,net,uts,ipc,cgroup pid=4242
 *                    ^ since start ^ who ^ step ^ how long  ^ details
 *
 * A step that is a moment rather than a span ("started") shows `-` for
 * how long. "who" is `run` for kiwi-run itself and `init` for the sandbox's pid 1,
 * which writes its own lines to the same stderr (its fd 2 is kiwi-run's
 * until the command runs) on the same CLOCK_MONOTONIC, so nothing crosses
 * the sync socket for it. Each line is one write(2) of less than PIPE_BUF:
 * lines never mix, though the two sides' lines may interleave.
 *
 * Off costs nothing: the configuration holds a NULL pointer, every call
 * goes through KIWI_DEBUG, which tests it first, and KIWI_DEBUG_NOW gives
 * 0 without reading the clock. */
#ifndef KIWI_DEBUG_H
#define KIWI_DEBUG_H

#include <stdint.h>

struct kiwi_debug {
	int fd;          /* where the lines go (2) */
	int64_t t0;      /* CLOCK_MONOTONIC when kiwi-run began */
};

int64_t kiwi_debug_clock(void);
/* Writes one line for a step that began at `began` (a kiwi_debug_clock()
 * value) and ends now. Allocation-free: it runs in the sandbox's init too. */
void kiwi_debug_step(const struct kiwi_debug *d, const char *who, int64_t began, const char *step,
		     const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#define KIWI_DEBUG_NOW(d) ((d) ? kiwi_debug_clock() : 0)
#define KIWI_DEBUG(d, ...)                          \
	do {                                        \
		if (d)                              \
			kiwi_debug_step(d, __VA_ARGS__); \
	} while (0)

#endif
