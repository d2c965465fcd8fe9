/* SPDX-License-Identifier: Apache-2.0 */
#include "kiwi/userns.h"
#include "kiwi/cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

static int write_proc_file(pid_t pid, const char *name, const char *text, kiwi_err *err)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return kiwi_error(err, errno, "userns", "cannot open `%s`", path);
	/* The host's procfs, checked: never a file something else mounted
	 * there. */
	struct statfs sf;
	if (fstatfs(fd, &sf) < 0 || sf.f_type != PROC_SUPER_MAGIC)
		return kiwi_error(err, EXDEV, "userns", "`%s` is not on a procfs", path);
	size_t len = strlen(text);
	/* The kernel takes a map in a single write, or not at all. */
	ssize_t n = write(fd, text, len);
	if (n < 0 || (size_t)n != len)
		return kiwi_error(err, n < 0 ? errno : EIO, "userns", "cannot write `%s` to `%s`",
				  text, path);
	return 0;
}

int kiwi_userns_map_self(pid_t child, kiwi_err *err)
{
	char map[64];
	if (write_proc_file(child, "setgroups", "deny", err) < 0)
		return -1;
	snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)getuid());
	if (write_proc_file(child, "uid_map", map, err) < 0)
		return -1;
	snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)getgid());
	return write_proc_file(child, "gid_map", map, err);
}
