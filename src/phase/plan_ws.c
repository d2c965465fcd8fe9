/* SPDX-License-Identifier: Apache-2.0 */
/* Reading the workspace for the planner. Untrusted code wrote it, so every
 * path is resolved beneath the directory fd with openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS), or, where openat2 is
 * missing, by a walk that opens one component at a time with O_NOFOLLOW.
 * Only regular files are read, O_NONBLOCK so that a FIFO cannot hang the
 * open, and never more than a fixed number of bytes. */
#include "plan_int.h"
#include "kiwi/cleanup.h"
#include "kiwi/fileio.h"
#include "kiwi/openat2.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

bool kiwi_plan_force_walk;
#define SYMLINK_REFUSED "`%s` in the workspace is or passes through a symlink; kiwi-run reads only regular files there"
static bool no_openat2; /* learnt once from ENOSYS */

/* One component at a time; every component must be what it claims (a
 * directory on the way, anything at the end), never a symlink. The paths
 * the planner asks for are constants without "." or "..". */
static int walk_open(int dirfd, const char *path, int flags)
{
	char buf[256];
	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return errno = ENAMETOOLONG, -1;
	_cleanup_close_ int at = -1;
	char *save = NULL;
	char *comp = strtok_r(buf, "/", &save);
	while (comp) {
		char *next = strtok_r(NULL, "/", &save);
		if (!strcmp(comp, "..") || !strcmp(comp, "."))
			return errno = EXDEV, -1;
		/* O_PATH|O_NOFOLLOW opens a symlink itself, so fstat sees it. */
		int fd = openat(at >= 0 ? at : dirfd, comp, (next ? O_PATH : flags) | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return -1;
		struct stat st;
		int bad = fstat(fd, &st) < 0 ? errno : S_ISLNK(st.st_mode) ? ELOOP
						 : next && !S_ISDIR(st.st_mode) ? ENOTDIR : 0;
		if (bad) {
			close(fd);
			return errno = bad, -1;
		}
		kiwi_closep(&at);
		at = fd;
		comp = next;
	}
	if (at < 0)
		return errno = EINVAL, -1;
	return TAKE_FD(at);
}

static int open_beneath(int dirfd, const char *path, int flags)
{
	if (!no_openat2 && !kiwi_plan_force_walk) {
		struct open_how how = {
			.flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC),
			.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
		};
		int fd = kiwi_openat2(dirfd, path, &how);
		/* Older seccomp profiles answer EPERM for syscalls they do not
		 * know; the walk is as safe, only slower. */
		if (fd >= 0 || (errno != ENOSYS && errno != EPERM))
			return fd;
		if (errno == ENOSYS)
			no_openat2 = true;
	}
	return walk_open(dirfd, path, flags);
}

/* O_PATH|O_NOFOLLOW opens a final symlink itself; any other error than
 * "absent" is the workspace's fault and is reported with the path. */
int plan_ws_kind(int dirfd, const char *path, enum plan_kind *kind, bool *exec, kiwi_err *err)
{
	*kind = PLAN_ABSENT;
	if (exec)
		*exec = false;
	_cleanup_close_ int fd = open_beneath(dirfd, path, O_PATH);
	if (fd < 0 && (errno == ENOENT || errno == ENOTDIR))
		return 0;
	if (fd < 0 && errno == ELOOP)
		return kiwi_error(err, 0, "plan", SYMLINK_REFUSED, path);
	if (fd < 0)
		return kiwi_error(err, errno, "plan", "cannot look at `%s` in the workspace", path);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return kiwi_error(err, errno, "plan", "cannot stat `%s` in the workspace", path);
	if (S_ISLNK(st.st_mode))
		return kiwi_error(err, 0, "plan", SYMLINK_REFUSED, path);
	if (S_ISDIR(st.st_mode)) {
		*kind = PLAN_DIR;
		return 0;
	}
	if (!S_ISREG(st.st_mode))
		return kiwi_error(err, 0, "plan", "`%s` in the workspace is not a regular file", path);
	*kind = PLAN_FILE;
	if (exec)
		*exec = (st.st_mode & 0111) != 0;
	return 0;
}

static int open_regular(int dirfd, const char *path, kiwi_err *err)
{
	_cleanup_close_ int fd = open_beneath(dirfd, path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
	if (fd < 0 && errno == ELOOP)
		return kiwi_error(err, 0, "plan", SYMLINK_REFUSED, path);
	if (fd < 0)
		return kiwi_error(err, errno, "plan", "cannot open `%s` in the workspace", path);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return kiwi_error(err, errno, "plan", "cannot stat `%s` in the workspace", path);
	if (!S_ISREG(st.st_mode))
		return kiwi_error(err, 0, "plan", "`%s` in the workspace is not a regular file", path);
	return TAKE_FD(fd);
}

int plan_ws_read(int dirfd, const char *path, size_t max, char **out, size_t *len, kiwi_err *err)
{
	_cleanup_close_ int fd = open_regular(dirfd, path, err);
	if (fd < 0)
		return -1;
	char what[300];
	snprintf(what, sizeof(what), "`%s` in the workspace", path);
	if (kiwi_read_bounded(fd, max, what, out, len, err) < 0) {
		if (err)
			snprintf(err->step, sizeof(err->step), "plan");
		return -1;
	}
	return 0;
}

int plan_ws_read_head(int dirfd, const char *path, size_t max, char **out, size_t *len, kiwi_err *err)
{
	_cleanup_close_ int fd = open_regular(dirfd, path, err);
	if (fd < 0)
		return -1;
	_cleanup_free_ char *buf = malloc(max + 1);
	if (!buf)
		return kiwi_error(err, ENOMEM, "plan", "cannot read `%s`", path);
	size_t used = 0;
	while (used < max) {
		ssize_t n = read(fd, buf + used, max - used);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return kiwi_error(err, errno, "plan", "cannot read `%s` in the workspace", path);
		if (n == 0)
			break;
		used += (size_t)n;
	}
	buf[used] = '\0';
	*len = used;
	*out = TAKE_PTR(buf);
	return 0;
}

void plan_strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* requirements*.txt, where * is letters, digits, '.', '_' or '-': a name
 * that needs quoting anywhere is no requirements file of a real project. */
static bool is_requirements_name(const char *name)
{
	size_t n = strlen(name);
	if (n < strlen("requirements.txt") || strncmp(name, "requirements", 12) || strcmp(name + n - 4, ".txt"))
		return false;
	return strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

static int requirements_order(const void *a, const void *b)
{
	const char *x = *(char *const *)a, *y = *(char *const *)b;
	bool xfirst = !strcmp(x, "requirements.txt"), yfirst = !strcmp(y, "requirements.txt");
	if (xfirst != yfirst)
		return xfirst ? -1 : 1;
	return strcmp(x, y);
}

static void closedirp(DIR **d)
{
	if (*d)
		closedir(*d);
}

int plan_ws_requirements(int dirfd, char ***names, size_t *n, kiwi_err *err)
{
	*names = NULL;
	*n = 0;
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return kiwi_error(err, errno, "plan", "cannot list the workspace");
	__attribute__((cleanup(closedirp))) DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return kiwi_error(err, errno, "plan", "cannot list the workspace");
	}
	_cleanup_(plan_strv_free_p) char **v = calloc(PLAN_MAX_REQUIREMENTS + 1, sizeof(*v));
	if (!v)
		return kiwi_error(err, ENOMEM, "plan", "cannot list the workspace");
	size_t count = 0;
	struct dirent *e;
	while ((errno = 0, e = readdir(d))) {
		if (!is_requirements_name(e->d_name))
			continue;
		if (count == PLAN_MAX_REQUIREMENTS)
			return kiwi_error(err, E2BIG, "plan",
					  "more than %d requirements*.txt files in the workspace", PLAN_MAX_REQUIREMENTS);
		if (!(v[count++] = strdup(e->d_name)))
			return kiwi_error(err, ENOMEM, "plan", "cannot list the workspace");
	}
	if (errno)
		return kiwi_error(err, errno, "plan", "cannot list the workspace");
	qsort(v, count, sizeof(*v), requirements_order);
	*names = TAKE_PTR(v);
	*n = count;
	return 0;
}
