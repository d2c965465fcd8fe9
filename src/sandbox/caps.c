/* SPDX-License-Identifier: Apache-2.0 */
#include "kiwi/caps.h"

#include <errno.h>
#include <stdint.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static int capset_to(uint32_t permitted, uint32_t inheritable)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = {
		{ .effective = permitted, .permitted = permitted, .inheritable = inheritable },
	};
	return (int)syscall(SYS_capset, &hdr, data);
}

/* Raw capset rather than libcap's cap_set_proc: this runs between fork and
 * exec, where allocating is best avoided, and it is a few calls. */
int kiwi_caps_drop_all_but(uint32_t keep, kiwi_err *err)
{
	/* With SECBIT_NOROOT, exec as uid 0 grants no capabilities even if a
	 * set were left non-empty; locking the bits keeps the command from
	 * undoing them. Needs CAP_SETPCAP, so it comes first. What is kept
	 * crosses exec as ambient capabilities, raised before raising is
	 * locked. */
	unsigned long bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED |
			     SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED |
			     SECBIT_KEEP_CAPS_LOCKED;
	unsigned long no_raise = SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
	if (prctl(PR_SET_SECUREBITS, bits | (keep ? 0 : no_raise), 0, 0, 0) < 0)
		return kiwi_error(err, errno, "caps", "cannot lock securebits");

	/* The kernel may know capabilities newer than our headers: drop until
	 * it says EINVAL (no such capability) instead of trusting CAP_LAST_CAP.
	 * One call per capability: this runs on every sandbox start. */
	for (int cap = 0;; cap++) {
		if ((cap < 32 && (keep & (1u << cap))) || prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0)
			continue;
		if (errno == EINVAL && cap > 0)
			break;
		return kiwi_error(err, errno, "caps", "cannot drop bounding capability %d", cap);
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		return kiwi_error(err, errno, "caps", "cannot clear the ambient set");
	if (keep) {
		if (capset_to(keep | (1u << CAP_SETPCAP), keep) < 0)
			return kiwi_error(err, errno, "caps", "cannot narrow the capability sets");
		for (int cap = 0; cap < 32; cap++)
			if ((keep & (1u << cap)) && prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0) < 0)
				return kiwi_error(err, errno, "caps", "cannot keep capability %d across exec", cap);
		if (prctl(PR_SET_SECUREBITS, bits | no_raise, 0, 0, 0) < 0)
			return kiwi_error(err, errno, "caps", "cannot lock securebits");
	}
	if (capset_to(keep, keep) < 0)
		return kiwi_error(err, errno, "caps", "cannot clear permitted, effective and inheritable sets");

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return kiwi_error(err, errno, "caps", "cannot set no_new_privs");
	return 0;
}
