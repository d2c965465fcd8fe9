/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi_mount_new_fs (kiwi/mount.h), on its own: kiwi-helper, which builds
 * a loop-backed layer (loopfs.c) but nothing else of the mount code,
 * compiles it in too. */
#include "kiwi/mount.h"
#include "kiwi/cleanup.h"

#include <errno.h>
#include <sys/mount.h>

int kiwi_mount_new_fs(const char *fstype, const char *const *opts, unsigned attrs, kiwi_err *err)
{
	_cleanup_close_ int fsfd = fsopen(fstype, FSOPEN_CLOEXEC);
	if (fsfd < 0)
		return kiwi_error(err, errno, "mount", "cannot open a %s filesystem", fstype);
	for (; opts && opts[0]; opts += 2)
		if ((opts[1][0] ? fsconfig(fsfd, FSCONFIG_SET_STRING, opts[0], opts[1], 0)
				: fsconfig(fsfd, FSCONFIG_SET_FLAG, opts[0], NULL, 0)) < 0)
			return kiwi_error(err, errno, "mount", "%s rejects %s=%s", fstype, opts[0], opts[1]);
	if (fsconfig(fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return kiwi_error(err, errno, "mount", "cannot create a %s filesystem", fstype);
	int mfd = fsmount(fsfd, FSMOUNT_CLOEXEC, attrs);
	if (mfd < 0)
		return kiwi_error(err, errno, "mount", "cannot mount a %s filesystem", fstype);
	return mfd;
}
