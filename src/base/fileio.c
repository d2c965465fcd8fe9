/* SPDX-License-Identifier: Apache-2.0 */
#include "kiwi/fileio.h"
#include "kiwi/cleanup.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int kiwi_read_bounded(int fd, size_t max, const char *what, char **out, size_t *len, kiwi_err *err)
{
	_cleanup_free_ char *buf = malloc(max + 1);
	if (!buf)
		return kiwi_error(err, ENOMEM, "read", "cannot read %s", what);
	size_t used = 0;
	for (;;) {
		ssize_t n = read(fd, buf + used, max + 1 - used);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return kiwi_error(err, errno, "read", "cannot read %s", what);
		if (n == 0)
			break;
		used += (size_t)n;
		if (used > max)
			return kiwi_error(err, EFBIG, "read", "%s is larger than %zu bytes", what, max);
	}
	buf[used] = '\0';
	*len = used;
	*out = TAKE_PTR(buf);
	return 0;
}

/* A sandbox that can write the directory the caller named (a workspace,
 * beside which verdicts and logs are often kept) may plant a symbolic
 * link, or a hard link to a host file it can see, where kiwi-run will
 * write; kiwi-run may be root. Neither is ever written through. */
static int check_output(int fd, const char *path, const char *step, const char *what, kiwi_err *err)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return kiwi_error(err, errno, step, "cannot use %s `%s`", what, path);
	if (!S_ISREG(st.st_mode))
		return 0;
	if (st.st_uid != geteuid())
		return kiwi_error(err, EPERM, step,
				  "%s `%s` belongs to uid %u: kiwi-run writes over no file but its caller's own",
				  what, path, (unsigned)st.st_uid);
	if (st.st_nlink > 1)
		return kiwi_error(err, EPERM, step,
				  "%s `%s` has %u names (hard links): kiwi-run does not write over it", what, path,
				  (unsigned)st.st_nlink);
	return 0;
}

static int refused_open(const char *path, const char *step, const char *what, kiwi_err *err)
{
	if (errno == ELOOP)
		return kiwi_error(err, ELOOP, step, "%s `%s` is a symbolic link: kiwi-run does not write through one",
				  what, path);
	if (errno == ENXIO)
		return kiwi_error(err, ENXIO, step, "%s `%s` is a FIFO that nothing reads: kiwi-run would wait on it "
				  "forever", what, path);
	return kiwi_error(err, errno, step, "cannot write %s `%s`", what, path);
}

/* /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N: links of the
 * host's own /dev and /proc to a file this process already holds (what
 * `--stdout >(tee log)` gives), never one a sandbox could plant. */
static bool names_own_fd(const char *path)
{
	static const char *const fds[] = { "/dev/fd/", "/proc/self/fd/" };
	if (!strcmp(path, "/dev/stdout") || !strcmp(path, "/dev/stderr"))
		return true;
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(fds); i++) {
		size_t n = strlen(fds[i]);
		if (!strncmp(path, fds[i], n) && path[n] && strspn(path + n, "0123456789") == strlen(path + n))
			return true;
	}
	return false;
}

int kiwi_open_output(const char *path, enum kiwi_open_output how, mode_t mode, const char *step, const char *what,
		     kiwi_err *err)
{
	/* O_NONBLOCK: a FIFO planted where the verdict goes would otherwise
	 * hold kiwi-run in open(2) for good; with it, a FIFO with no reader
	 * fails at once (ENXIO) and one with a reader opens. */
	int flags = O_WRONLY | O_CREAT | O_NOCTTY | O_CLOEXEC | O_NONBLOCK | (names_own_fd(path) ? 0 : O_NOFOLLOW);
	if (how == KIWI_OUTPUT_APPEND)
		flags |= O_APPEND;
	/* No O_TRUNC here: the file is checked before anything in it goes. */
	_cleanup_close_ int fd = open(path, flags, mode);
	if (fd < 0)
		return refused_open(path, step, what, err);
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0)
		return kiwi_error(err, errno, step, "cannot use %s `%s`", what, path);
	if (check_output(fd, path, step, what, err) < 0)
		return -1;
	struct stat st;
	if (how == KIWI_OUTPUT_TRUNC && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ftruncate(fd, 0) < 0)
		return kiwi_error(err, errno, step, "cannot truncate %s `%s`", what, path);
	return TAKE_FD(fd);
}

int kiwi_write_file_replace(const char *path, const char *tmp, const char *data, size_t len, mode_t mode,
			    const char *step, kiwi_err *err)
{
	struct stat st;
	if (lstat(path, &st) == 0 && !S_ISLNK(st.st_mode) && st.st_uid != geteuid())
		return kiwi_error(err, EPERM, step, "`%s` belongs to uid %u: kiwi-run replaces no file but its "
				  "caller's own", path, (unsigned)st.st_uid);
	/* A stale temporary (or a link planted in its place) goes first. */
	if (unlink(tmp) < 0 && errno != ENOENT)
		return kiwi_error(err, errno, step, "cannot remove `%s`", tmp);
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0)
		return kiwi_error(err, errno, step, "cannot create `%s`", tmp);
	size_t done = 0;
	while (done < len) {
		ssize_t n = write(fd, data + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int saved = n < 0 ? errno : EIO;
			unlink(tmp);
			return kiwi_error(err, saved, step, "cannot write `%s`", tmp);
		}
		done += (size_t)n;
	}
	/* rename replaces a link at path, never what it points to. */
	if (fsync(fd) < 0 || rename(tmp, path) < 0) {
		int saved = errno;
		unlink(tmp);
		return kiwi_error(err, saved, step, "cannot write `%s`", path);
	}
	return 0;
}

int kiwi_connect_unix_nofollow(const char *path, const char *step, kiwi_err *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	/* connect(2) has no O_NOFOLLOW: the socket is opened O_PATH without
	 * following, checked, and connected to through its /proc/self/fd
	 * name, which reaches that very inode. */
	_cleanup_close_ int at = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (at < 0 || fstat(at, &st) < 0)
		return kiwi_error(err, errno, step, "cannot connect to socket `%s`", path);
	/* O_PATH | O_NOFOLLOW opens a link itself rather than failing. */
	if (S_ISLNK(st.st_mode))
		return kiwi_error(err, ELOOP, step, "socket `%s` is a symbolic link: kiwi-run does not follow it", path);
	if (!S_ISSOCK(st.st_mode))
		return kiwi_error(err, ENOTSOCK, step, "`%s` is not a socket", path);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d", at);
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return kiwi_error(err, errno, step, "cannot connect to socket `%s`", path);
	return TAKE_FD(fd);
}
