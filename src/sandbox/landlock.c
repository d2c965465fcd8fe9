/* SPDX-License-Identifier: Apache-2.0 */
#include "kiwi/landlock.h"
#include "kiwi/cleanup.h"
#include "kiwi/openat2.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Debian 12's headers stop at ABI 2: the rights added since are spelled
 * out here, with the ABI that brought each. */
#define LL_FS_REFER (1ULL << 13)      /* ABI 2 */
#define LL_FS_TRUNCATE (1ULL << 14)   /* ABI 3 */
#define LL_FS_IOCTL_DEV (1ULL << 15)  /* ABI 5 */

#define LL_FS_V1 ((1ULL << 13) - 1)   /* execute .. make_sym */
#define LL_FILE_RIGHTS (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | \
			LANDLOCK_ACCESS_FS_READ_FILE | LL_FS_TRUNCATE | LL_FS_IOCTL_DEV)

#define LL_READ (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | \
		 LANDLOCK_ACCESS_FS_READ_DIR)
#define LL_ALL (LL_FS_V1 | LL_FS_REFER | LL_FS_TRUNCATE | LL_FS_IOCTL_DEV)
/* Device nodes are opened for writing (>/dev/null truncates) and
 * ioctl'd (terminals), but nothing is created in the read-only /dev. */
#define LL_DEV (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR | \
		LANDLOCK_ACCESS_FS_WRITE_FILE | LL_FS_TRUNCATE | LL_FS_IOCTL_DEV)

/* The ruleset attribute as of ABI 6; older kernels take the longer struct
 * as long as the fields they do not know are zero. Only the filesystem is
 * handled: TCP and signal scoping would break loopback servers and signals
 * sent to pid 1. */
struct ll_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};

static uint64_t handled_for_abi(int abi)
{
	uint64_t fs = LL_FS_V1;
	if (abi >= 2)
		fs |= LL_FS_REFER;
	if (abi >= 3)
		fs |= LL_FS_TRUNCATE;
	if (abi >= 5)
		fs |= LL_FS_IOCTL_DEV;
	return fs;
}

int kiwi_landlock_abi(void)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	return abi > 0 ? (int)abi : 0;
}

/* Allows `access` beneath path (or on it, for a file). A path this
 * sandbox lacks is skipped; symlinks are not followed, so a rule lands on
 * the place the launcher mounted and nowhere else. */
static int allow(int ruleset, const char *path, uint64_t access, uint64_t handled, kiwi_err *err)
{
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC,
		.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	_cleanup_close_ int fd = kiwi_openat2(AT_FDCWD, path, &how);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		return kiwi_error(err, errno, "landlock", "cannot open `%s` for a rule", path);
	}
	struct stat st;
	if (fstat(fd, &st) < 0)
		return kiwi_error(err, errno, "landlock", "cannot stat `%s`", path);
	struct landlock_path_beneath_attr rule = {
		.allowed_access = access & handled & (S_ISDIR(st.st_mode) ? ~0ULL : LL_FILE_RIGHTS),
		.parent_fd = fd,
	};
	if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) < 0)
		return kiwi_error(err, errno, "landlock", "cannot add a rule for `%s`", path);
	return 0;
}

static int add_rules(int ruleset, const struct kiwi_landlock_rules *r, uint64_t handled, kiwi_err *err)
{
	if (allow(ruleset, "/", r->root_writable ? LL_ALL : LL_READ, handled, err) < 0 ||
	    allow(ruleset, "/dev", LL_DEV, handled, err) < 0 ||
	    allow(ruleset, "/dev/shm", LL_ALL, handled, err) < 0 ||
	    allow(ruleset, "/tmp", LL_ALL, handled, err) < 0)
		return -1;
	for (size_t i = 0; i < r->n_binds; i++)
		if (allow(ruleset, r->binds[i].dest, r->binds[i].read_only ? LL_READ : LL_ALL,
			  handled, err) < 0)
			return -1;
	return 0;
}

int kiwi_landlock_restrict(const struct kiwi_landlock_rules *rules, kiwi_err *err)
{
	int abi = kiwi_landlock_abi();
	if (abi == 0)
		return 0;
	struct ll_ruleset_attr attr = { .handled_access_fs = handled_for_abi(abi) };
	_cleanup_close_ int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
	if (ruleset < 0)
		return kiwi_error(err, errno, "landlock", "cannot create a ruleset (ABI %d)", abi);
	if (add_rules(ruleset, rules, attr.handled_access_fs, err) < 0)
		return -1;
	if (syscall(SYS_landlock_restrict_self, ruleset, 0) < 0)
		return kiwi_error(err, errno, "landlock", "cannot restrict the command%s",
				  errno == EPERM ? " (no_new_privs must be set first)" : "");
	return abi;
}
