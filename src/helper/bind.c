/* SPDX-License-Identifier: Apache-2.0 */
/* The bind operation (kiwi-helper(8), BIND): a tree of the caller's own,
 * cloned and idmapped so that its owner is the sandbox's root, as root's
 * kiwi-run idmaps its binds (idmount.c). Without it, a sandbox whose map
 * the helper wrote from a range sees the caller's files as nobody's.
 *
 * The source is checked on the fd the caller sent, and the clone is made
 * from that fd: no path is looked up. The owner's user namespace maps the
 * source's owner (the caller) and group (one of the caller's) onto the
 * ids of the sandbox's root, one each: every other id in the tree stays
 * unmapped, so the sandbox gets over it what the caller has as owner,
 * never more. The clone is not recursive: a mount below the source (the
 * admin's, another user's) is not in it. */
#include "serve.h"
#include "kiwi/cleanup.h"
#include "kiwi/fds.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define STEP "bind"

static int check_source(const struct helper_session *s, int source, struct stat *st, kiwi_err *err)
{
	if (fstat(source, st) < 0)
		return kiwi_error(err, errno, STEP, "cannot stat the bind source");
	if (!S_ISDIR(st->st_mode) && !S_ISREG(st->st_mode))
		return kiwi_error(err, EINVAL, STEP, "the bind source is not a directory or a regular file");
	if (st->st_uid != s->uid)
		return kiwi_error(err, EPERM, STEP, "the bind source is not yours (owner %u)", (unsigned)st->st_uid);
	if (st->st_gid == s->gid)
		return 0;
	gid_t groups[256];
	int n = getgroups(256, groups);
	for (int i = 0; i < n; i++)
		if (groups[i] == st->st_gid)
			return 0;
	return kiwi_error(err, EPERM, STEP, "the bind source's group %u is not one of yours", (unsigned)st->st_gid);
}

/* The outside id of inside 0 in the sandbox's map name. */
static int root_of(const struct helper_sandbox *sb, const char *name, unsigned *out, kiwi_err *err)
{
	char buf[1024];
	_cleanup_close_ int fd = openat(sb->procfd, name, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (n < 0)
		return kiwi_error(err, errno, STEP, "cannot read the sandbox's %s", name);
	buf[n] = '\0';
	unsigned in, outside, count;
	for (char *line = buf; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
		if (sscanf(line, "%u %u %u", &in, &outside, &count) == 3 && in == 0) {
			*out = outside;
			return 0;
		}
	return kiwi_error(err, EINVAL, STEP, "the sandbox's %s maps no root (its maps are written first)", name);
}

static int write_map(pid_t pid, const char *name, unsigned in, unsigned out, kiwi_err *err)
{
	char path[64], map[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	int len = snprintf(map, sizeof(map), "%u %u 1\n", in, out);
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, map, (size_t)len) != len)
		return kiwi_error(err, errno, STEP, "cannot write the owner's %s", name);
	return 0;
}

/* A user namespace mapping the owner onto the sandbox's root, held by an
 * fd alone: a child of ours makes it, sends its fd (opening it from here
 * would be a ptrace check on a child that is not dumpable, as we are not)
 * and waits until the maps are written, then leaves. As euid 0: the
 * child's /proc files are root's. */
static int owner_userns(const struct stat *st, unsigned uid, unsigned gid, kiwi_err *err)
{
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		return kiwi_error(err, errno, STEP, "cannot make a socket pair");
	pid_t pid = fork();
	if (pid == 0) {
		close(sp[0]);
		int ns = unshare(CLONE_NEWUSER) == 0 ? open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC) : -1;
		char c = 'y';
		kiwi_send_fds(sp[1], &c, 1, &ns, ns >= 0);
		(void)!read(sp[1], &c, 1);   /* EOF: the parent is done with us */
		_exit(0);
	}
	close(sp[1]);
	char c;
	int fds[KIWI_MAX_PASSED_FDS], fd = -1;
	size_t n = 0;
	if (pid < 0)
		kiwi_error(err, errno, STEP, "cannot fork");
	else if (kiwi_recv_fds(sp[0], &c, 1, 0, fds, &n) != 1 || n != 1)
		kiwi_error(err, EPERM, STEP, "cannot make the owner's user namespace");
	else if (write_map(pid, "uid_map", (unsigned)st->st_uid, uid, err) < 0 ||
		 write_map(pid, "gid_map", (unsigned)st->st_gid, gid, err) < 0)
		close(fds[0]);
	else
		fd = fds[0];
	close(sp[0]);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	return fd;
}

/* As euid 0 with CAP_SYS_ADMIN raised. */
static int clone_idmapped(int source, const struct stat *st, unsigned uid, unsigned gid, kiwi_err *err)
{
	_cleanup_close_ int userns = owner_userns(st, uid, gid, err);
	if (userns < 0)
		return -1;
	_cleanup_close_ int tree = open_tree(source, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	if (tree < 0)
		return kiwi_error(err, errno, STEP, "cannot clone the bind source (not of the host's mount namespace?)");
	struct stat cloned;
	if (fstat(tree, &cloned) < 0 || cloned.st_dev != st->st_dev || cloned.st_ino != st->st_ino)
		return kiwi_error(err, EXDEV, STEP, "the clone is not the bind source checked");
	/* Private: a clone is a peer of its source, and what the sandbox
	 * mounted on it would propagate to the host's. */
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
				   .userns_fd = (uint64_t)userns, .propagation = MS_PRIVATE };
	if (mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
		return kiwi_error(err, errno == EINVAL || errno == EPERM ? EOPNOTSUPP : errno, STEP,
				  "cannot idmap the bind source: its filesystem cannot be idmapped on this kernel");
	return TAKE_FD(tree);
}

int helper_bind(struct helper_session *s, int source, kiwi_err *err)
{
	struct stat st;
	unsigned uid, gid;
	if (check_source(s, source, &st, err) < 0 || root_of(&s->sb, "uid_map", &uid, err) < 0 ||
	    root_of(&s->sb, "gid_map", &gid, err) < 0)
		return -1;
	if (helper_override_begin(helper_caps_mount(), err) < 0)
		return -1;
	int tree = clone_idmapped(source, &st, uid, gid, err);
	helper_override_end();
	return tree;
}
