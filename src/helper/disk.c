/* SPDX-License-Identifier: Apache-2.0 */
/* The disk operation (kiwi-helper(8), DISK): a loop-backed ext4 layer for
 * a caller's sandbox, made exactly as root's kiwi-run makes one
 * (loopfs.c: an unnamed, sparse image file of root's, formatted by us,
 * never by the caller, on a loop device that clears itself), then
 * idmapped to the sandbox's user namespace, so that the filesystem's own
 * ids 0.. are the sandbox's 0.., and sent back as a detached mount the
 * sandbox attaches in its own mount namespace.
 *
 * The bound: the rule's max_disk per sandbox, and one disk per session
 * (so max_sandboxes disks per user). Nothing of it has a name that could
 * outlive its users; and at the session's end (the socket closed: kiwi-run
 * ended, however) the filesystem is shut down, so a caller that kept its
 * mount can write nothing more, and the image's blocks are freed. */
#include "serve.h"
#include "kiwi/cleanup.h"
#include "kiwi/loopfs.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#define STEP "disk"

static int check_size(const struct helper_session *s, int64_t size, kiwi_err *err)
{
	char want[32], max[32];
	kiwi_helper_format_size(size, want, sizeof(want));
	kiwi_helper_format_size(s->rule.max_disk, max, sizeof(max));
	if (size > s->rule.max_disk)
		return kiwi_error(err, EDQUOT, "policy", "a disk of %s is over your max_disk of %s (rule %zu of the "
				  "helper config)", want, max, s->rule.index);
	if ((uint64_t)size < KIWI_LOOPFS_MIN_SIZE)
		return kiwi_error(err, EINVAL, "request", "a disk of %s is smaller than ext4's 1M", want);
	return 0;
}

/* As euid 0 with CAP_SYS_ADMIN raised: the image and its mount, idmapped
 * through userns. */
static int make(struct helper_session *s, uint64_t size, int userns, kiwi_err *err)
{
	_cleanup_close_ int image = -1;
	_cleanup_close_ int mfd = kiwi_loopfs_create(NULL, size, 0, 0, &image, err);
	if (mfd < 0)
		return -1;
	/* Private: nothing the sandbox mounts on it propagates anywhere. */
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t)userns,
				   .propagation = MS_PRIVATE };
	if (mount_setattr(mfd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
		return kiwi_error(err, errno, STEP, "cannot idmap the disk to the sandbox's user namespace");
	s->disk_mnt = fcntl(mfd, F_DUPFD_CLOEXEC, 3);
	if (s->disk_mnt < 0)
		return kiwi_error(err, errno, STEP, "cannot keep the disk's mount");
	s->disk_image = TAKE_FD(image);
	return TAKE_FD(mfd);
}

int helper_disk(struct helper_session *s, const struct kiwi_helper_request *req, kiwi_err *err)
{
	if (check_size(s, req->disk_size, err) < 0)
		return -1;
	_cleanup_close_ int userns = helper_sandbox_userns(&s->sb, err);
	if (userns < 0 || helper_override_begin(helper_caps_mount(), err) < 0)
		return -1;
	int mfd = make(s, (uint64_t)req->disk_size, userns, err);
	helper_override_end();
	return mfd;
}

void helper_disk_teardown(struct helper_session *s)
{
	if (s->disk_mnt < 0)
		return;
	/* The session's end: root from here to the exit, as the cgroup's
	 * teardown (the way back to the caller's uid went with CAP_SETUID). */
	if (helper_override_begin(helper_caps_mount(), NULL) == 0)
		kiwi_loopfs_discard(s->disk_mnt);
	/* Shut down, it writes nothing more: its blocks go now, whoever
	 * still holds the mount. */
	off_t size = lseek(s->disk_image, 0, SEEK_END);
	if (size > 0)
		(void)fallocate(s->disk_image, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, size);
	close(s->disk_mnt);
	close(s->disk_image);
	s->disk_mnt = s->disk_image = -1;
}
