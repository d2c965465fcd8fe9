/* SPDX-License-Identifier: Apache-2.0 */
/* The cgroup operation. An unprivileged caller cannot move its sandbox
 * into a cgroup under the kiwi subtree even when that cgroup is delegated
 * to it: cgroup v2 asks for write access to cgroup.procs of the common
 * ancestor of source and destination too, and for a caller under
 * /user.slice and a cgroup under /kiwi.slice that is the root cgroup. So
 * the helper makes the cgroup as root (prepare), moves the sandbox's pid 1
 * in as root (attach), and only then delegates it: the caller owns the
 * directory and the files the kernel lists as delegatable, never the
 * limits. The move is by pid, and the caller reaps that pid, so it is
 * bracketed by two pidfd probes: if the process is still unreaped after
 * the write, the pid written was its own. */
#include "serve.h"
#include "kiwi/cleanup.h"
#include "kiwi/fds.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define STEP "cgroup"

/* The helper makes no cgroup but the subtree and the sandbox's own: a
 * parent below the subtree must exist already, or a caller could fill
 * the hierarchy with empty root-owned cgroups. */
static int check_parent_exists(const char *parent, const char *subtree, kiwi_err *err)
{
	char mount[256], path[512];
	if (!strcmp(parent, subtree))
		return 0;
	if (kiwi_cgroup_mount(mount, sizeof(mount), err) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s%s", mount, parent);
	struct stat st;
	if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
		return kiwi_error(err, ENOENT, STEP, "cgroup parent `%s` does not exist (the helper creates none "
				  "below %s but the sandbox's own)", parent, subtree);
	return 0;
}

int helper_cgroup_prepare(struct helper_session *s, const struct kiwi_helper_request *req, char *name,
			  size_t len, kiwi_err *err)
{
	if (s->cg)
		return kiwi_error(err, EEXIST, STEP, "this helper already made a cgroup (one per sandbox)");
	struct kiwi_cgroup_limits l;
	char parent[KIWI_HELPER_SUBTREE_MAX];
	if (kiwi_helper_cgroup_check(&s->rule, req, KIWI_HELPER_CONFIG, &l, parent, sizeof(parent), err) < 0)
		return -1;
	/* root: the subtree and the cgroup are root's, and stay so; the
	 * override for the subtree, in the hierarchy's 0555 root */
	if (helper_override_begin(helper_caps_cgroup_held(), err) < 0)
		return -1;
	/* What dead sessions left (no helper, keeper nor kiwi-run holds
	 * its lock) goes first: as kiwi-run gc would, sandbox and all. */
	unsigned collected;
	kiwi_cgroup_gc(s->rule.cgroup_subtree, &collected, NULL);
	int r = check_parent_exists(parent, s->rule.cgroup_subtree, err);
	if (r == 0)
		r = kiwi_cgroup_create(parent, &l, &s->cg, err);
	/* A session: no OOM group of its own (each exec's cgroup, made by the
	 * caller below it, is one), its controllers handed on to its
	 * children, and a leaf of root's for its pid 1, all made here, as
	 * root: the request says only "session", never a name or a file. */
	if (r == 0 && req->session &&
	    ((s->cg_leaf = kiwi_cgroup_open_leaf(s->cg, "keeper", err)) < 0 ||
	     kiwi_cgroup_enable_children(s->cg, err) < 0)) {
		if (s->cg_leaf >= 0)
			close(TAKE_FD(s->cg_leaf));
		kiwi_cgroup_destroy(TAKE_PTR(s->cg), NULL);
		r = -1;
	}
	helper_override_end();
	if (r < 0)
		return -1;
	snprintf(name, len, "%s", kiwi_cgroup_name(s->cg));
	return 0;
}

/* The pid the attach may have written belongs to a stranger: every task
 * in the cgroup goes to the root cgroup (never to one the caller
 * controls), and the cgroup goes. Nothing is killed: they are not ours. */
static bool empty_into(int fd, const char *root_procs)
{
	char procs[8192];
	_cleanup_close_ int in = fd < 0 ? -1 : openat(fd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
	ssize_t n = in < 0 ? -1 : read(in, procs, sizeof(procs) - 1);
	if (n < 0)
		return false;
	procs[n] = '\0';
	for (char *line = strtok(procs, "\n"); line; line = strtok(NULL, "\n")) {
		_cleanup_close_ int out = open(root_procs, O_WRONLY | O_CLOEXEC);
		if (out >= 0 && write(out, line, strlen(line)) < 0)
			continue;
	}
	return true;
}

static void evacuate(struct helper_session *s)
{
	char mount[256], root_procs[300], leaf[PATH_MAX];
	if (kiwi_cgroup_mount(mount, sizeof(mount), NULL) < 0)
		return;
	snprintf(root_procs, sizeof(root_procs), "%s/cgroup.procs", mount);
	snprintf(leaf, sizeof(leaf), "%s/keeper", kiwi_cgroup_path(s->cg));
	for (int round = 0; round < 100; round++) {
		if ((s->cg_leaf < 0 || rmdir(leaf) == 0 || errno == ENOENT) && rmdir(kiwi_cgroup_path(s->cg)) == 0)
			break;
		if (!empty_into(kiwi_cgroup_fd(s->cg), root_procs) || (s->cg_leaf >= 0 && !empty_into(s->cg_leaf, root_procs)))
			break;
		usleep(1000);
	}
	if (s->cg_leaf >= 0)
		close(TAKE_FD(s->cg_leaf));
	kiwi_cgroup_forget(TAKE_PTR(s->cg));
}

/* Pid 1 of the sandbox into the cgroup (a session's: its leaf), as root. */
static int move_in(struct helper_session *s, kiwi_err *err)
{
	char pid[16];
	snprintf(pid, sizeof(pid), "%d", (int)s->sb.pid);
	if (!helper_sandbox_alive(&s->sb))
		return kiwi_error(err, ESRCH, STEP, "the sandbox's process ended");
	int dir = s->cg_leaf >= 0 ? s->cg_leaf : kiwi_cgroup_fd(s->cg);
	_cleanup_close_ int fd = openat(dir, "cgroup.procs", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, pid, strlen(pid)) < 0)
		return kiwi_error(err, errno, STEP, "cannot move the sandbox into `%s`", kiwi_cgroup_name(s->cg));
	if (helper_sandbox_alive(&s->sb))
		return 0;
	evacuate(s);
	return kiwi_error(err, ESRCH, STEP, "the sandbox's process was reaped while it was moved (its pid may "
			  "have been reused): the cgroup was emptied into the root cgroup and removed");
}

/* The names the kernel lists as safe to delegate, plus cgroup.kill
 * (kiwi-run's timeout uses it; it acts on this cgroup's tasks only). */
static int delegate(struct helper_session *s, kiwi_err *err)
{
	char names[1024] = "cgroup.procs\ncgroup.threads\ncgroup.subtree_control\n";
	_cleanup_close_ int list = open("/sys/kernel/cgroup/delegate", O_RDONLY | O_CLOEXEC);
	ssize_t n = list < 0 ? -1 : read(list, names, sizeof(names) - 16);
	if (n > 0)
		names[n] = '\0';
	strcat(names, "\ncgroup.kill\n");
	int fd = kiwi_cgroup_fd(s->cg);
	for (char *name = strtok(names, "\n"); name; name = strtok(NULL, "\n")) {
		if (strchr(name, '/') || name[0] == '.')
			continue;
		if (fchownat(fd, name, s->uid, s->gid, AT_SYMLINK_NOFOLLOW) < 0 && errno != ENOENT)
			return kiwi_error(err, errno, STEP, "cannot hand `%s/%s` to you", kiwi_cgroup_name(s->cg), name);
	}
	if (fchown(fd, s->uid, s->gid) < 0)
		return kiwi_error(err, errno, STEP, "cannot hand `%s` to you", kiwi_cgroup_name(s->cg));
	return 0;
}

/* Until cgroup.events says the cgroup is empty (it polls POLLPRI on
 * each change); never on an error alone. */
static void wait_empty(int events)
{
	for (;;) {
		char buf[256];
		uint64_t populated = 1;
		ssize_t n = pread(events, buf, sizeof(buf) - 1, 0);
		if (n > 0) {
			buf[n] = '\0';
			if (kiwi_cgroup_keyed(buf, "populated", &populated) && populated == 0)
				return;
		}
		struct pollfd p = { .fd = events, .events = POLLPRI };
		if (n <= 0 || (poll(&p, 1, -1) < 0 && errno != EINTR))
			sleep(1);
	}
}

/* The cgroup's keeper: should we be killed, the sandbox runs on in the
 * cgroup; the keeper holds the cgroup's lock (the mark gc respects) and
 * the caller's sandbox slot until the cgroup is empty, so the quota
 * counts the sandbox until it is over, and gc (a later session's, or
 * kiwi-run gc) collects only what nothing runs in. */
static int keep(struct helper_session *s, kiwi_err *err)
{
	int cgfd = kiwi_cgroup_fd(s->cg);
	_cleanup_close_ int events = openat(cgfd, "cgroup.events", O_RDONLY | O_CLOEXEC);
	if (events < 0)
		return kiwi_error(err, errno, STEP, "cannot open `%s/cgroup.events`", kiwi_cgroup_name(s->cg));
	pid_t pid = fork();
	if (pid < 0)
		return kiwi_error(err, errno, STEP, "cannot fork the cgroup's keeper");
	if (pid == 0) {
		kiwi_fds_keep_only((int[]){ cgfd, events, s->sandbox_slot }, 3);
		wait_empty(events);
		_exit(0);
	}
	s->cg_keeper = pid;
	return 0;
}

int helper_cgroup_attach(struct helper_session *s, kiwi_err *err)
{
	if (!s->cg)
		return kiwi_error(err, EINVAL, STEP, "cgroup-attach before cgroup-prepare");
	/* CAP_SYS_NICE: see helper_caps_cgroup_held() */
	if (helper_override_begin(1ull << CAP_SYS_NICE, err) < 0)
		return -1;
	int r = move_in(s, err);
	helper_override_end();
	if (r < 0 || helper_root_begin(err) < 0)
		return -1;
	r = delegate(s, err);
	helper_root_end();
	return r < 0 ? -1 : keep(s, err);
}

void helper_cgroup_teardown(struct helper_session *s)
{
	if (!s->cg)
		return;
	/* The session's last step: root from here to the exit (the way back
	 * to the caller's uid may be gone with CAP_SETUID), with the override:
	 * cgroup.kill and what the sandbox nested are the caller's now. */
	if (s->cg_keeper > 0) {
		kill(s->cg_keeper, SIGKILL);
		waitpid(s->cg_keeper, NULL, 0);
	}
	if (s->cg_leaf >= 0)
		close(TAKE_FD(s->cg_leaf));
	if (helper_override_begin(helper_caps_cgroup_held(), NULL) < 0)
		return;
	kiwi_cgroup_destroy(TAKE_PTR(s->cg), NULL);
}
