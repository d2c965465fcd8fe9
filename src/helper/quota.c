/* SPDX-License-Identifier: Apache-2.0 */
/* Per-user quotas: max slots of a kind, each an flock'd file in a
 * root-only directory. The kernel drops a lock when its holder ends,
 * however it ends, so a count can never drift. */
#include "helper_int.h"
#include "kiwi/cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* The test build keeps its own, beside its config (src/helper/meson.build). */
#ifndef KIWI_HELPER_STATE_DIR
#define KIWI_HELPER_STATE_DIR "/run/kiwi/helper"
#endif
#define QUOTA_DIR KIWI_HELPER_STATE_DIR

static int make_dir(kiwi_err *err)
{
	char parent[PATH_MAX] = QUOTA_DIR;
	if ((mkdir(dirname(parent), 0755) < 0 && errno != EEXIST) || (mkdir(QUOTA_DIR, 0700) < 0 && errno != EEXIST))
		return kiwi_error(err, errno, "quota", "cannot create `%s`", QUOTA_DIR);
	struct stat st;
	if (lstat(QUOTA_DIR, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022))
		return kiwi_error(err, EPERM, "quota", "`%s` is not a root-only directory", QUOTA_DIR);
	return 0;
}

int helper_quota_take(const char *kind, uid_t uid, unsigned max, kiwi_err *err)
{
	if (make_dir(err) < 0)
		return -1;
	for (unsigned i = 0; i < max; i++) {
		char path[128];
		snprintf(path, sizeof(path), QUOTA_DIR "/%s-%u-%u.lock", kind, (unsigned)uid, i);
		int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0)
			return kiwi_error(err, errno, "quota", "cannot open `%s`", path);
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return fd;
		close(fd);
	}
	return kiwi_error(err, EDQUOT, "quota", "over quota: you already hold %u %s (max_%s in the helper config)",
			  max, kind, kind);
}
