/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-helper's privileges. The scheme (kiwi-helper(8), SECURITY):
 *   exec (setuid): ruid = caller, euid = suid = 0, every capability
 *   read the config and take the quota slot as root (egid 0), then once,
 *   for good: ruid = suid = 0, euid = fsuid = the caller (gids: the
 *   caller's, saved 0), and only the capabilities
 *   the caller's allowed operations need (CAP_SETUID/CAP_SETGID for id
 *   maps, CAP_NET_ADMIN for the veth and the table, CAP_CHOWN to hand a
 *   cgroup over, CAP_SYS_ADMIN to mount and idmap a disk layer).
 * Acting as the caller makes the kernel check every file and namespace
 * we touch against the caller's own rights, and makes us the owner of
 * the caller's user namespaces (which uid_map writes and veths into them
 * need). Keeping 0 as the real and saved uid means the caller can neither
 * signal nor ptrace us: a kill -9 of the helper cannot leave its veth
 * behind. Raw capset: the sets are two 32-bit words, no libcap needed. */
#include "helper_int.h"

#include <errno.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define BIT(c) (1ull << (c))

static uid_t caller_uid = (uid_t)-1;   /* set once, by helper_drop_to_caller() */
static gid_t caller_gid = (gid_t)-1;
static uint64_t held;                  /* the permitted set now */

/* Held but never effective outside helper_override_begin/end. */
#define RAISED_ONLY (BIT(CAP_DAC_OVERRIDE) | BIT(CAP_SYS_NICE) | BIT(CAP_SYS_ADMIN))

uint64_t helper_caps_for(unsigned ops)
{
	uint64_t caps = 0;
	if (ops & KIWI_HELPER_OP_IDMAP)
		caps |= BIT(CAP_SETUID) | BIT(CAP_SETGID);
	/* CAP_SETUID here too: back from euid 0 to the caller after
	 * helper_root_begin() is a change to an id we no longer hold. It
	 * adds little: with ruid 0 we may take euid 0 without it anyway. */
	if (ops & (KIWI_HELPER_OP_EGRESS_PREPARE | KIWI_HELPER_OP_EGRESS_ATTACH))
		caps |= BIT(CAP_NET_ADMIN) | BIT(CAP_SETUID);
	/* The cgroup is made and filled as euid 0 (root owns the files, no
	 * capability needed); handing it to the caller is a chown. */
	if (ops & (KIWI_HELPER_OP_CGROUP_PREPARE | KIWI_HELPER_OP_CGROUP_ATTACH))
		caps |= BIT(CAP_SETUID) | helper_caps_cgroup_held();
	/* Moving a task across cpusets asks for CAP_SYS_NICE over it unless
	 * our permitted set covers its own (cap_safe_nice()): the sandbox's
	 * pid 1 holds every capability in its user namespace. */
	if (ops & KIWI_HELPER_OP_CGROUP_ATTACH)
		caps |= BIT(CAP_CHOWN) | BIT(CAP_SYS_NICE);
	/* The image is made as euid 0 in root's directory, on root's loop
	 * devices; ext4 is mounted and idmapped with CAP_SYS_ADMIN. */
	if (ops & KIWI_HELPER_OP_DISK)
		caps |= BIT(CAP_SETUID) | helper_caps_mount();
	/* bind: the owner's user namespace gets a map onto the sandbox's
	 * root (CAP_SETUID, CAP_SETGID), the tree is cloned and idmapped
	 * with CAP_SYS_ADMIN, raised only around it. */
	if (ops & KIWI_HELPER_OP_BIND)
		caps |= BIT(CAP_SETUID) | BIT(CAP_SETGID) | BIT(CAP_SYS_ADMIN);
	return caps;
}

uint64_t helper_caps_mount(void)
{
	return BIT(CAP_SYS_ADMIN);
}

uint64_t helper_caps_cgroup_held(void)
{
	return BIT(CAP_DAC_OVERRIDE);
}

static int set_caps(uint64_t permitted, uint64_t effective, kiwi_err *err)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = {
		{ .permitted = (uint32_t)permitted, .effective = (uint32_t)effective },
		{ .permitted = (uint32_t)(permitted >> 32), .effective = (uint32_t)(effective >> 32) },
	};
	if (syscall(SYS_capset, &hdr, data) < 0)
		return kiwi_error(err, errno, "caps", "cannot set the capabilities");
	return 0;
}

static int hold_caps(uint64_t caps, kiwi_err *err)
{
	if (set_caps(caps, caps & ~RAISED_ONLY, err) < 0)
		return -1;
	held = caps;
	return 0;
}

static int cut_bounding_set(uint64_t keep, kiwi_err *err)
{
	/* Until EINVAL: the kernel may know capabilities our headers do not. */
	for (int cap = 0;; cap++) {
		if (cap < 64 && (keep & BIT(cap)))
			continue;
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0)
			continue;
		if (errno == EINVAL && cap > 0)
			return 0;
		return kiwi_error(err, errno, "caps", "cannot drop bounding capability %d", cap);
	}
}

int helper_drop_to_caller(uid_t uid, gid_t gid, uint64_t caps, kiwi_err *err)
{
	/* uid changes stop touching capabilities (we set them ourselves,
	 * below), root gains nothing at an exec, and neither can be undone. */
	unsigned long bits = SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_NOROOT |
			     SECBIT_NOROOT_LOCKED | SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
			     SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
	if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) < 0)
		return kiwi_error(err, errno, "caps", "cannot lock the securebits");
	if (cut_bounding_set(caps, err) < 0)
		return -1;
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		return kiwi_error(err, errno, "caps", "cannot clear the ambient set");
	/* The caller's groups stay: files are opened with its rights. The
	 * saved gid stays 0, so that helper_root_begin() can take gid 0
	 * back with euid 0 and what we make in root's directories is
	 * root:root (gids give no right to signal or ptrace us). */
	if (setresgid(gid, gid, 0) < 0)
		return kiwi_error(err, errno, "setresgid", "cannot take the caller's gid %u", (unsigned)gid);
	if (setresuid(0, uid, 0) < 0)
		return kiwi_error(err, errno, "setresuid", "cannot take the caller's uid %u", (unsigned)uid);
	caller_uid = uid;
	caller_gid = gid;
	if (hold_caps(caps, err) < 0)
		return -1;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return kiwi_error(err, errno, "caps", "cannot set no_new_privs");
	/* A credential change resets it to fs.suid_dumpable, which an admin
	 * may have set to 1. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return kiwi_error(err, errno, "caps", "cannot make the helper non-dumpable");
	return 0;
}

int helper_caps_limit(uint64_t caps, kiwi_err *err)
{
	return hold_caps(caps & held, err);
}

int helper_override_begin(uint64_t caps, kiwi_err *err)
{
	if ((caps & RAISED_ONLY & held) != caps)
		return kiwi_error(err, EPERM, "caps", "a capability to raise is not held");
	if (helper_root_begin(err) < 0)
		return -1;
	if (set_caps(held, (held & ~RAISED_ONLY) | caps, err) < 0) {
		helper_root_end();
		return -1;
	}
	return 0;
}

void helper_override_end(void)
{
	/* Failing here would leave the override on: stop. */
	if (set_caps(held, held & ~RAISED_ONLY, NULL) < 0)
		_exit(125);
	helper_root_end();
}

int helper_root_begin(kiwi_err *err)
{
	if (setresuid(-1, 0, -1) < 0)
		return kiwi_error(err, errno, "setresuid", "cannot become root again");
	if (setresgid(-1, 0, -1) < 0) {
		helper_root_end();
		return kiwi_error(err, errno, "setresgid", "cannot take gid 0 again");
	}
	return 0;
}

void helper_root_end(void)
{
	/* Back to the caller; failing here would leave us root: stop. */
	if (caller_uid == (uid_t)-1 || setresgid(-1, caller_gid, -1) < 0 || setresuid(-1, caller_uid, -1) < 0)
		_exit(125);
}
