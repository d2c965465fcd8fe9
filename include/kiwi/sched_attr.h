/* SPDX-License-Identifier: Apache-2.0 */
/* struct sched_attr of sched_setattr(2) and sched_getattr(2), up to the
 * utilization clamps (its second version, 56 bytes), which glibc does not
 * declare: <linux/sched/types.h> clashes with <sched.h>. */
#ifndef KIWI_SCHED_ATTR_H
#define KIWI_SCHED_ATTR_H

#include <stdint.h>

struct kiwi_sched_attr {
	uint32_t size, policy;
	uint64_t flags;
	int32_t nice;
	uint32_t priority;
	uint64_t runtime, deadline, period;
	uint32_t util_min, util_max;
};

#define KIWI_SCHED_FLAG_RESET_ON_FORK 0x01u
#define KIWI_SCHED_FLAG_UTIL_CLAMP (0x20u | 0x40u)   /* _MIN | _MAX */

#endif
