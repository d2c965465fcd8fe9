/* SPDX-License-Identifier: Apache-2.0 */
#include "kiwi/caps.h"

#include <errno.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Raw capset rather than libcap's cap_set_proc: this runs between fork and
 * exec, where allocating is best avoided, and it is three calls. */
int kiwi_caps_drop_all(kiwi_err *err)
{
	/* With SECBIT_NOROOT, exec as uid 0 grants no capabilities even if a
	 * set were left non-empty; locking the bits keeps the command from
	 * undoing them. Needs CAP_SETPCAP, so it comes first. */
	unsigned long bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED |
			     SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED |
			     SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
			     SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
	if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) < 0)
		return kiwi_error(err, errno, "caps", "cannot lock securebits");

	/* The kernel may know capabilities newer than our headers: drop until
	 * it says EINVAL (no such capability) instead of trusting CAP_LAST_CAP.
	 * One call per capability: this runs on every sandbox start. */
	for (int cap = 0;; cap++) {
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0)
			continue;
		if (errno == EINVAL && cap > 0)
			break;
		return kiwi_error(err, errno, "caps", "cannot drop bounding capability %d", cap);
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		return kiwi_error(err, errno, "caps", "cannot clear the ambient set");

	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = { 0 };
	if (syscall(SYS_capset, &hdr, data) < 0)
		return kiwi_error(err, errno, "caps", "cannot clear permitted, effective and inheritable sets");

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return kiwi_error(err, errno, "caps", "cannot set no_new_privs");
	return 0;
}
