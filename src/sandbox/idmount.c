/* SPDX-License-Identifier: Apache-2.0 */
/* Idmapped trees for a root caller's sandbox (kiwi/idmount.h). */
#include "kiwi/idmount.h"
#include "kiwi/cleanup.h"
#include "kiwi/fileio.h"
#include "kiwi/spawn.h"
#include "kiwi/userns.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define STEP "idmap"

/* Overridden by the unit tests only. */
#ifndef KIWI_SUBUID_PATH
#define KIWI_SUBUID_PATH "/etc/subuid"
#endif
#ifndef KIWI_SUBGID_PATH
#define KIWI_SUBGID_PATH "/etc/subgid"
#endif

static int kiwi_start(const char *path, uint32_t *start, kiwi_err *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	if (fd >= 0 && kiwi_read_bounded(fd, 1 << 20, path, &text, &len, err) < 0)
		return -1;
	if (fd < 0 && errno != ENOENT)
		return kiwi_error(err, errno, STEP, "cannot read `%s`", path);
	if (!text || !kiwi_subid_find(text, len, KIWI_SUBID_OWNER, KIWI_SUBID_COUNT, start))
		return kiwi_error(err, EPERM, STEP,
				  "%s has no range of %u ids for `" KIWI_SUBID_OWNER "`, which a root caller's "
				  "sandbox maps its root to: run `kiwi-run doctor --fix`, or pass "
				  "--host-root-map to keep host root inside",
				  path, KIWI_SUBID_COUNT);
	return 0;
}

int kiwi_idmount_default_map(struct kiwi_idmap *m, kiwi_err *err)
{
	uint32_t u, g;
	if (kiwi_start(KIWI_SUBUID_PATH, &u, err) < 0 || kiwi_start(KIWI_SUBGID_PATH, &g, err) < 0)
		return -1;
	*m = (struct kiwi_idmap){
		.uid = { { 0, u, KIWI_SUBID_COUNT } }, .n_uid = 1,
		.gid = { { 0, g, KIWI_SUBID_COUNT } }, .n_gid = 1,
	};
	return 0;
}

/* A user namespace of map m, held by an fd alone: a child is made in it
 * only for the kernel to take the maps from, and killed at once; its
 * pidfd goes to t->holders, to be reaped later. */
static int userns_of(const struct kiwi_idmap *m, struct kiwi_idmounts *t, kiwi_err *err)
{
	int pidfd = -1;
	pid_t parent = getpid();
	pid_t pid = kiwi_spawn(CLONE_NEWUSER, -1, &pidfd, err);
	if (pid < 0)
		return -1;
	if (pid == 0) {
		/* kiwi-run killed before this line: nobody would end us. */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
			_exit(0);
		for (;;)
			pause();
	}
	t->holders[t->n_holders++] = pidfd;
	int fd = -1;
	if (kiwi_userns_write_maps(pid, m, false, err) == 0) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
		/* The pid cannot be reused before we reap it. */
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			kiwi_error(err, errno, STEP, "cannot open `%s`", path);
	}
	syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
	return fd;
}

/* A detached clone of path (of its whole tree when recursive). */
static int clone_tree(const char *path, bool recursive, const char *step, const char *what, kiwi_err *err)
{
	int tree = open_tree(AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (recursive ? AT_RECURSIVE : 0));
	if (tree < 0)
		return kiwi_error(err, errno, step, "cannot use %s `%s`", what, path);
	return tree;
}

/* The clone tree (taken) seen through the user namespace userns. */
static int idmap_tree(int tree_fd, int userns, bool recursive, const char *what, const char *path, kiwi_err *err)
{
	_cleanup_close_ int tree = tree_fd;
	unsigned rec = recursive ? AT_RECURSIVE : 0;
	/* Private: a clone is a peer of its source, and a mount the sandbox
	 * then made on it would propagate to the host's. */
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t)userns,
				   .propagation = MS_PRIVATE };
	if (mount_setattr(tree, "", AT_EMPTY_PATH | rec, &attr, sizeof(attr)) < 0) {
		if (errno == EINVAL || errno == EPERM || errno == EOPNOTSUPP)
			return kiwi_error(err, EOPNOTSUPP, STEP,
					  "cannot idmap %s `%s`: its filesystem (or one mounted below it) "
					  "cannot be idmapped on this kernel; pass --host-root-map to run with "
					  "the host's root as the sandbox's", what, path);
		return kiwi_error(err, errno, STEP, "cannot idmap %s `%s`", what, path);
	}
	return TAKE_FD(tree);
}

int kiwi_idmount_rootfs(const char *rootfs, pid_t pid, int pidfd, kiwi_err *err)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
	_cleanup_close_ int ns = open(path, O_RDONLY | O_CLOEXEC);
	if (ns < 0)
		return kiwi_error(err, errno, STEP, "cannot open `%s`", path);
	/* Alive after the open: the pid was the sandbox's, not a reuse. */
	if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0)
		return kiwi_error(err, errno, STEP, "the sandbox ended before its rootfs was idmapped");
	int tree = clone_tree(rootfs, false, STEP, "rootfs", err);
	return tree < 0 ? -1 : idmap_tree(tree, ns, false, "rootfs", rootfs, err);
}

/* User namespaces already made for a bind owner: most binds share one. */
struct owner_ns {
	uid_t uid;
	gid_t gid;
	int fd;
};

static int owner_userns(const struct kiwi_idmap *sandbox, const struct stat *st, struct owner_ns *cache,
			size_t *n, struct kiwi_idmounts *t, kiwi_err *err)
{
	for (size_t i = 0; i < *n; i++)
		if (cache[i].uid == st->st_uid && cache[i].gid == st->st_gid)
			return cache[i].fd;
	/* The owner, and no one else, is the sandbox's root. */
	struct kiwi_idmap m = {
		.uid = { { (uint32_t)st->st_uid, sandbox->uid[0].outside, 1 } }, .n_uid = 1,
		.gid = { { (uint32_t)st->st_gid, sandbox->gid[0].outside, 1 } }, .n_gid = 1,
	};
	int fd = userns_of(&m, t, err);
	if (fd < 0)
		return -1;
	cache[*n] = (struct owner_ns){ st->st_uid, st->st_gid, fd };
	(*n)++;
	return fd;
}

static int make_binds(const struct kiwi_sandbox_config *cfg, struct kiwi_idmounts *out, struct owner_ns *cache,
		      size_t *n_cache, kiwi_err *err)
{
	for (size_t i = 0; i < cfg->n_binds; i++) {
		const char *src = cfg->binds[i].source;
		/* The owner of the tree cloned, not of whatever the path
		 * named a moment before. */
		_cleanup_close_ int tree = clone_tree(src, true, "bind", "bind source", err);
		struct stat st;
		if (tree < 0)
			return -1;
		if (fstat(tree, &st) < 0)
			return kiwi_error(err, errno, "bind", "cannot use bind source `%s`", src);
		int ns = owner_userns(cfg->idmap, &st, cache, n_cache, out, err);
		if (ns < 0 || (out->binds[i] = idmap_tree(TAKE_FD(tree), ns, true, "bind source", src, err)) < 0)
			return -1;
	}
	return 0;
}

int kiwi_idmounts_make(const struct kiwi_sandbox_config *cfg, struct kiwi_idmounts *out, kiwi_err *err)
{
	*out = (struct kiwi_idmounts){ .rootfs_dir = -1, .rootfs = -1, .n = cfg->n_binds };
	out->binds = malloc((cfg->n_binds + 1) * sizeof(int));
	out->holders = malloc((cfg->n_binds + 1) * sizeof(int));  /* one per owner at most */
	if (!out->binds || !out->holders)
		return kiwi_error(err, ENOMEM, STEP, "cannot allocate the idmapped binds");
	for (size_t i = 0; i < cfg->n_binds; i++)
		out->binds[i] = -1;
	struct owner_ns *cache = calloc(cfg->n_binds + 1, sizeof(*cache));
	size_t n_cache = 0;
	int r = cache ? make_binds(cfg, out, cache, &n_cache, err)
		      : kiwi_error(err, ENOMEM, STEP, "cannot allocate the idmapped binds");
	for (size_t i = 0; i < n_cache; i++)
		close(cache[i].fd);
	free(cache);
	if (r < 0)
		kiwi_idmounts_release(out);
	return r;
}

int kiwi_idmount_give_pipes(const int *fds, size_t n, uint32_t uid, uint32_t gid, kiwi_err *err)
{
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		if (fds[i] < 0 || fstat(fds[i], &st) < 0 || !S_ISFIFO(st.st_mode))
			continue;
		if (fchown(fds[i], uid, gid) < 0)
			return kiwi_error(err, errno, STEP, "cannot give the output pipes to the sandbox's root");
	}
	return 0;
}

/* The outside id of inside 0 in /proc/PID/NAME. */
static int outside_of_0(pid_t pid, const char *name, uint32_t *out)
{
	struct kiwi_id_extent map[340];   /* the kernel's most */
	int n = kiwi_userns_read_map(pid, name, map, KIWI_ARRAY_SIZE(map));
	for (int i = 0; i < n; i++)
		if (map[i].inside == 0) {
			*out = map[i].outside;
			return 0;
		}
	return -1;
}

int kiwi_idmount_root_of(pid_t pid, uint32_t *uid, uint32_t *gid)
{
	return outside_of_0(pid, "uid_map", uid) < 0 || outside_of_0(pid, "gid_map", gid) < 0 ? -1 : 0;
}

void kiwi_idmounts_close(struct kiwi_idmounts *t)
{
	if (t->rootfs_dir >= 0)
		close(t->rootfs_dir);
	if (t->rootfs >= 0)
		close(t->rootfs);
	t->rootfs = t->rootfs_dir = -1;
	for (size_t i = 0; t->binds && i < t->n; i++)
		if (t->binds[i] >= 0)
			close(t->binds[i]);
	free(t->binds);
	t->binds = NULL;
	t->n = 0;
}

void kiwi_idmounts_release(struct kiwi_idmounts *t)
{
	kiwi_idmounts_close(t);
	for (size_t i = 0; t->holders && i < t->n_holders; i++) {
		siginfo_t info;
		waitid(P_PIDFD, (id_t)t->holders[i], &info, WEXITED);
		close(t->holders[i]);
	}
	free(t->holders);
	t->holders = NULL;
	t->n_holders = 0;
}
