// SPDX-License-Identifier: Apache-2.0
#include "kiwi/slice.h"
#include "kiwi/sched_attr.h"

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The kernel's shortest (it clamps to 0.1 ms to 100 ms). */
#define SHORT_SLICE_NS 100000u

/* Copied into every child with the rest of our memory, as the slice is. */
static bool shortened;

/* The slice alone: the policy, nice value and reset-on-fork we were given
 * stay (a `nice`d caller stays niced). Only the fair policies have one. */
static int set_slice(uint64_t ns)
{
	struct kiwi_sched_attr attr = { 0 };
	if (syscall(SYS_sched_getattr, 0, &attr, sizeof(attr), 0) < 0)
		return -1;
	if (attr.policy != SCHED_OTHER && attr.policy != SCHED_BATCH && attr.policy != SCHED_IDLE)
		return -1;
	attr = (struct kiwi_sched_attr){ .size = sizeof(attr), .policy = attr.policy,
					 .flags = attr.flags & KIWI_SCHED_FLAG_RESET_ON_FORK, .nice = attr.nice,
					 .runtime = ns };
	return (int)syscall(SYS_sched_setattr, 0, &attr, 0);
}

int kiwi_slice_short(void)
{
	if (set_slice(SHORT_SLICE_NS) < 0)
		return -1;
	shortened = true;
	return 0;
}

void kiwi_slice_default(void)
{
	/* runtime 0: the default slice, no custom one. */
	if (shortened && set_slice(0) == 0)
		shortened = false;
}
