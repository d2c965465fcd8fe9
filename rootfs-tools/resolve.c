/* SPDX-License-Identifier: Apache-2.0 */
#include "resolve.h"
#include "kiwi/openat2.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_LINKS 40   /* the kernel's own limit */
#define MAX_DEPTH 256  /* directories held open while walking */

static bool no_openat2; /* learnt from ENOSYS once */

struct walk {
	int fds[MAX_DEPTH + 1]; /* fds[0] is the root; fds[depth] where we are */
	int depth;
	char rest[2 * PATH_MAX]; /* what is left to resolve */
};

static void walk_unwind(struct walk *w, int to)
{
	while (w->depth > to)
		close(w->fds[w->depth--]);
}

/* Puts target (a symlink's contents) in front of what is left. */
static int prepend(struct walk *w, const char *target, const char *after)
{
	size_t tl = strlen(target), al = strlen(after);
	if (tl + 1 + al + 1 > sizeof(w->rest))
		return -ENAMETOOLONG;
	memmove(w->rest + tl + 1, after, al + 1);
	memcpy(w->rest, target, tl);
	w->rest[tl] = '/';
	return 0;
}

/* Takes the next component off w->rest into comp: 1, 0 when none is left,
 * -ENAMETOOLONG for a name no directory can hold. */
static int next_component(struct walk *w, char *comp, bool *last)
{
	char *p = w->rest;
	while (*p == '/')
		p++;
	if (!*p)
		return 0;
	size_t n = strcspn(p, "/");
	if (n > NAME_MAX)
		return -ENAMETOOLONG;
	memcpy(comp, p, n);
	comp[n] = '\0';
	p += strcspn(p, "/");
	memmove(w->rest, p, strlen(p) + 1);
	const char *q = w->rest;
	while (*q == '/')
		q++;
	*last = !*q;
	return 1;
}

static int step(struct walk *w, const char *comp, bool last, int flags, int *links, int *out)
{
	int cur = w->fds[w->depth];
	if (!strcmp(comp, "."))
		return 0;
	if (!strcmp(comp, "..")) { /* the parent actually walked through, never above the root */
		walk_unwind(w, w->depth > 0 ? w->depth - 1 : 0);
		return 0;
	}
	int fd = openat(cur, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return -e;
	}
	if (S_ISLNK(st.st_mode) && (!last || !(flags & O_NOFOLLOW))) {
		char target[PATH_MAX];
		ssize_t n = readlinkat(fd, "", target, sizeof(target) - 1);
		close(fd);
		if (n < 0)
			return -errno;
		if (++*links > MAX_LINKS)
			return -ELOOP;
		target[n] = '\0';
		if (target[0] == '/') /* the image's own root */
			walk_unwind(w, 0);
		char after[2 * PATH_MAX];
		memcpy(after, w->rest, strlen(w->rest) + 1);
		return prepend(w, target, after);
	}
	if (last) {
		close(fd);
		*out = openat(cur, comp, flags | O_NOFOLLOW | O_CLOEXEC);
		return *out < 0 ? -errno : 0;
	}
	if (!S_ISDIR(st.st_mode)) {
		close(fd);
		return -ENOTDIR;
	}
	if (w->depth == MAX_DEPTH) {
		close(fd);
		return -ENAMETOOLONG;
	}
	w->fds[++w->depth] = fd;
	return 0;
}

static int walk_resolve(int root_fd, const char *path, int flags)
{
	struct walk *w = malloc(sizeof(*w));
	if (!w)
		return errno = ENOMEM, -1;
	w->depth = 0;
	w->fds[0] = openat(root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (w->fds[0] < 0 || strlen(path) >= PATH_MAX) {
		int e = w->fds[0] < 0 ? errno : ENAMETOOLONG;
		if (w->fds[0] >= 0)
			close(w->fds[0]);
		free(w);
		return errno = e, -1;
	}
	memcpy(w->rest, path, strlen(path) + 1);
	int links = 0, out = -1, r = 0;
	char comp[NAME_MAX + 1];
	bool last;
	while (r == 0 && out < 0) {
		int more = next_component(w, comp, &last);
		if (more <= 0) {
			r = more;
			break;
		}
		r = step(w, comp, last, flags, &links, &out);
	}
	/* Ended on ".", "..", a followed symlink's emptiness, or nothing at
	 * all: what we stand on is the answer. */
	if (r == 0 && out < 0) {
		out = openat(w->fds[w->depth], ".", (flags & ~O_NOFOLLOW) | O_CLOEXEC);
		if (out < 0)
			r = -errno;
	}
	walk_unwind(w, 0);
	close(w->fds[0]);
	free(w);
	if (r < 0)
		return errno = -r, -1;
	return out;
}

int kiwi_resolve_in_root(int root_fd, const char *path, int flags)
{
	if (!no_openat2) {
		struct open_how how = {
			.flags = (uint64_t)(flags | O_CLOEXEC),
			.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
		};
		int fd = kiwi_openat2(root_fd, path[0] ? path : ".", &how);
		/* Container profiles that predate openat2 answer ENOSYS, or EPERM
		 * for every syscall they do not know; the walk is as safe. */
		if (fd >= 0 || (errno != ENOSYS && errno != EPERM))
			return fd;
		if (errno == ENOSYS)
			no_openat2 = true;
	}
	return walk_resolve(root_fd, path, flags);
}
