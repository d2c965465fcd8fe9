/* SPDX-License-Identifier: Apache-2.0 */
/* The scheduler's latency hint: a short custom slice (Linux 6.12's EEVDF,
 * sched_attr::sched_runtime for SCHED_OTHER). Not a larger share of the
 * CPU: a task with a shorter slice gets earlier deadlines, so on waking
 * it preempts a task that runs on (a CPU hog) instead of waiting out that
 * task's slice. For the processes that only pass a session's requests on
 * (supervisor, pid 1, exec leaders), each run a few microseconds long. */
#ifndef KIWI_SLICE_H
#define KIWI_SLICE_H

/* Ours and our future children's, from here on; our policy and nice
 * value stay as they are. 0, or -1 with errno (a real-time policy, which
 * has no slice; an older kernel takes the call and ignores the slice). */
int kiwi_slice_short(void);

/* The default slice again, if kiwi_slice_short() set ours: for a
 * sandboxed command, which gets no hint of ours. */
void kiwi_slice_default(void);

#endif
