/* SPDX-License-Identifier: Apache-2.0 */
/* create, parent side: check the bundle, make the state directory and
 * exec.fifo, clone3 the init into its namespaces, write its id maps, run
 * the createRuntime hooks when it asks, and record the state once it is
 * ready. On any failure the init is killed and the state directory goes:
 * a failed create leaves nothing behind. Steps #1..#3 are mirrored in
 * init.c. */
#include "oci_int.h"
#include "kiwi/fds.h"
#include "kiwi/sync.h"
#include "kiwi/fileio.h"
#include "kiwi/cgroup.h"
#include "kiwi/cleanup.h"
#include "kiwi/helper.h"
#include "kiwi/oci_runtime.h"
#include "kiwi/seccomp.h"
#include "kiwi/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct creation {
	const struct kiwi_oci_create_opts *o;
	struct kiwi_oci_config *cfg;
	char bundle[PATH_MAX], rootfs[PATH_MAX], dir[4352];
	char rootfs_shown[4096];   /* root.path made absolute, as state shows it */
	struct kiwi_oci_state st;
	struct kiwi_seccomp *seccomp;
	struct kiwi_cgroup *cg;    /* NULL: none */
	bool cg_made;
	int *bind_trees;           /* per mount, or NULL (bindsrc.c) */
	int sock, console, pidfd;
	int console_local;         /* our end when the pty comes back to `run` */
	pid_t pid;
	bool dir_made;
};

static int check_config(struct creation *c, kiwi_err *err)
{
	const struct kiwi_oci_config *cfg = c->cfg;
	if (!cfg->has_process)
		return kiwi_error(err, EINVAL, "config", "config.json has no `process` to run");
	if (!(cfg->new_ns & CLONE_NEWNS))
		return kiwi_error(err, EINVAL, "config", "config.json: linux.namespaces needs a new `mount` namespace");
	if (cfg->process.terminal && !c->o->console_socket && !c->o->console_master)
		return kiwi_error(err, EINVAL, "console",
				  "process.terminal is true: --console-socket is required to hand over the pty");
	if (!cfg->process.terminal && c->o->console_socket)
		return kiwi_error(err, EINVAL, "console", "--console-socket given but process.terminal is false");
	if (cfg->has_limits && !cfg->cgroups_path && geteuid() != 0)
		return kiwi_error(err, EINVAL, "cgroup",
				  "config.json: rootless resource limits need linux.cgroupsPath, a cgroup in the "
				  "subtree delegated to uid %u", (unsigned)geteuid());
	if (cfg->process.caps[KIWI_OCI_CAP_BOUNDING] & (1ULL << 27) && c->o->note)
		c->o->note("CAP_MKNOD is never granted: the container's device nodes are the configured ones");
	for (size_t i = 0; i < cfg->n_unknown_caps && c->o->warn; i++) {
		char msg[160];
		snprintf(msg, sizeof(msg), "config.json: capability `%.64s` is unknown to kiwi-run and this kernel: skipped",
			 cfg->unknown_caps[i]);
		c->o->warn(msg);
	}
	for (size_t i = 0; i < cfg->n_ignored && c->o->note; i++) {
		char msg[128];
		snprintf(msg, sizeof(msg), "config.json: `%s` is ignored (kiwi-run drives no LSM)", cfg->ignored[i]);
		c->o->note(msg);
	}
	return 0;
}

static int resolve_paths(struct creation *c, kiwi_err *err)
{
	if (!realpath(c->o->bundle, c->bundle))
		return kiwi_error(err, errno, "bundle", "cannot use bundle `%s`", c->o->bundle);
	char *joined = c->rootfs_shown;
	const char *root = c->cfg->root_path;
	if (snprintf(joined, sizeof(c->rootfs_shown), "%s%s%s", root[0] == '/' ? "" : c->bundle,
		     root[0] == '/' ? "" : "/", root) >= (int)sizeof(c->rootfs_shown))
		return kiwi_error(err, ENAMETOOLONG, "rootfs", "root.path `%s` is too long", root);
	struct stat st;
	if (!realpath(joined, c->rootfs) || stat(c->rootfs, &st) < 0)
		return kiwi_error(err, errno, "rootfs", "cannot use root.path `%s`", joined);
	if (!S_ISDIR(st.st_mode))
		return kiwi_error(err, ENOTDIR, "rootfs", "root.path `%s` is not a directory", joined);
	return 0;
}

/* mkdir -p, as runc does for --root (the shim's /run/containerd/runc/NS). */
static int make_root(const char *root, kiwi_err *err)
{
	char buf[4096];
	if (snprintf(buf, sizeof(buf), "%s", root) >= (int)sizeof(buf))
		return kiwi_error(err, ENAMETOOLONG, "state", "state root `%s` is too long", root);
	for (char *p = buf + 1;; p++) {
		bool end = !*p;
		if (*p != '/' && !end)
			continue;
		*p = '\0';
		if (mkdir(buf, 0700) < 0 && errno != EEXIST)
			return kiwi_error(err, errno, "state", "cannot create the state root `%s`", buf);
		if (end)
			return 0;
		*p = '/';
	}
}

static int make_state_dir(struct creation *c, kiwi_err *err)
{
	if (make_root(c->o->root, err) < 0)
		return -1;
	if (kiwi_oci_state_dir(c->o->root, c->o->id, c->dir, sizeof(c->dir), err) < 0)
		return -1;
	if (mkdir(c->dir, 0700) < 0)
		return kiwi_error(err, errno, "state", errno == EEXIST ? "container `%s` already exists"
									: "cannot create the state of `%s`", c->o->id);
	c->dir_made = true;
	char fifo[4400];
	snprintf(fifo, sizeof(fifo), "%s/" KIWI_OCI_FIFO, c->dir);
	/* Writable by everyone: the init may run as any uid when it opens it
	 * for writing; the 0700 directory keeps everyone else out. */
	if (mkfifo(fifo, 0622) < 0 || chmod(fifo, 0622) < 0)
		return kiwi_error(err, errno, "state", "cannot create `%s`", fifo);
	return 0;
}

static int connect_console(struct creation *c, kiwi_err *err)
{
	if (!c->o->console_socket && c->o->console_master && c->cfg->process.terminal) {
		int sp[2];
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
			return kiwi_error(err, errno, "console", "cannot create the console socket pair");
		c->console_local = sp[0];
		c->console = sp[1];
		return 0;
	}
	if (!c->o->console_socket)
		return 0;
	c->console = kiwi_connect_unix_nofollow(c->o->console_socket, "console", err);
	return c->console < 0 ? -1 : 0;
}

/* newuidmap/newgidmap: a rootless caller's way to map more than itself,
 * with the ranges /etc/subuid grants it. */
static int run_idmap_helper(const char *tool, pid_t pid, const struct kiwi_oci_idmap *m, size_t n, kiwi_err *err)
{
	char *argv[3 + 3 * 340 + 1];
	char nums[3 * 340 + 1][16];
	size_t k = 0;
	argv[k++] = (char *)tool;
	snprintf(nums[0], sizeof(nums[0]), "%d", (int)pid);
	argv[k++] = nums[0];
	for (size_t i = 0; i < n; i++) {
		uint32_t v[3] = { m[i].container_id, m[i].host_id, m[i].size };
		for (int j = 0; j < 3; j++) {
			snprintf(nums[1 + 3 * i + j], sizeof(nums[0]), "%u", v[j]);
			argv[k++] = nums[1 + 3 * i + j];
		}
	}
	argv[k] = NULL;
	pid_t h = fork();
	if (h == 0) {
		execvp(tool, argv);
		_exit(127);
	}
	int status;
	if (h < 0 || waitpid(h, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
		return kiwi_error(err, EPERM, "userns", "%s failed to write the map (is it installed, and "
				  "does /etc/sub%cid grant the ranges?)", tool, tool[3]);
	return 0;
}

int kiwi_oci_write_map(pid_t pid, const char *file, const struct kiwi_oci_idmap *m, size_t n, kiwi_err *err)
{
	char text[340 * 36] = "", path[64];
	size_t used = 0;
	for (size_t i = 0; i < n; i++)
		used += (size_t)snprintf(text + used, sizeof(text) - used, "%u %u %u\n", m[i].container_id,
					 m[i].host_id, m[i].size);
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, text, used) != (ssize_t)used)
		return kiwi_error(err, errno, "userns", "cannot write %s `%.*s`", file, (int)strcspn(text, "\n"), text);
	return 0;
}

/* The caller's own single id is all an unprivileged writer may map. */
static bool only_self(const struct kiwi_oci_idmap *m, size_t n, unsigned self)
{
	return n == 1 && m[0].host_id == self && m[0].size == 1;
}

/* kiwi-helper(8), preferred when installed: both maps in one request,
 * from the ranges its admin config allots. 1: not installed, or maps
 * beyond its 5 extents (newuidmap's turn); 0: written; -1: err. */
static int maps_by_kiwi_helper(struct creation *c, kiwi_err *err)
{
	const struct kiwi_oci_config *cfg = c->cfg;
	if (cfg->n_uid_maps > KIWI_HELPER_MAX_EXTENTS || cfg->n_gid_maps > KIWI_HELPER_MAX_EXTENTS ||
	    access(kiwi_helper_path(), X_OK) < 0)
		return 1;
	struct kiwi_idmap m = { .n_uid = cfg->n_uid_maps, .n_gid = cfg->n_gid_maps };
	for (size_t i = 0; i < m.n_uid; i++)
		m.uid[i] = (struct kiwi_id_extent){ cfg->uid_maps[i].container_id, cfg->uid_maps[i].host_id,
						    cfg->uid_maps[i].size };
	for (size_t i = 0; i < m.n_gid; i++)
		m.gid[i] = (struct kiwi_id_extent){ cfg->gid_maps[i].container_id, cfg->gid_maps[i].host_id,
						    cfg->gid_maps[i].size };
	struct kiwi_helper *h = NULL;
	if (kiwi_helper_start(&h, err) < 0)
		return -1;
	/* Nothing for the helper to hold once the maps are written: the
	 * session ends here, and the container outlives it. */
	int r = kiwi_helper_idmap(h, c->pidfd, &m, err);
	kiwi_helper_stop(h, NULL);
	return r;
}

/* A caller that is not root writes its own single ids itself; any more
 * come from newuidmap and newgidmap. */
static int write_maps_unprivileged(struct creation *c, bool *may_setgroups, kiwi_err *err)
{
	const struct kiwi_oci_config *cfg = c->cfg;
	if (only_self(cfg->uid_maps, cfg->n_uid_maps, getuid())) {
		if (kiwi_oci_write_map(c->pid, "uid_map", cfg->uid_maps, cfg->n_uid_maps, err) < 0)
			return -1;
	} else if (run_idmap_helper("newuidmap", c->pid, cfg->uid_maps, cfg->n_uid_maps, err) < 0) {
		return -1;
	}
	if (only_self(cfg->gid_maps, cfg->n_gid_maps, getgid())) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/setgroups", (int)c->pid);
		_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd < 0 || write(fd, "deny", 4) != 4)
			return kiwi_error(err, errno, "userns", "cannot deny setgroups");
		*may_setgroups = false;
		return kiwi_oci_write_map(c->pid, "gid_map", cfg->gid_maps, cfg->n_gid_maps, err);
	}
	return run_idmap_helper("newgidmap", c->pid, cfg->gid_maps, cfg->n_gid_maps, err);
}

/* Returns whether setgroups stays allowed in the namespace. Beyond the
 * caller's own ids, kiwi-helper is asked first when installed; when it is
 * not, or refuses (an admin may grant through /etc/subuid alone),
 * newuidmap and newgidmap. Both failing, the helper's reason leads. */
static int write_maps(struct creation *c, bool *may_setgroups, kiwi_err *err)
{
	const struct kiwi_oci_config *cfg = c->cfg;
	*may_setgroups = true;
	if (!(cfg->new_ns & CLONE_NEWUSER))
		return 0;
	if (geteuid() == 0)
		return kiwi_oci_write_map(c->pid, "uid_map", cfg->uid_maps, cfg->n_uid_maps, err) < 0 ||
		       kiwi_oci_write_map(c->pid, "gid_map", cfg->gid_maps, cfg->n_gid_maps, err) < 0 ? -1 : 0;
	kiwi_err helper_err = { 0 };
	int by_helper = 1;
	if (!only_self(cfg->uid_maps, cfg->n_uid_maps, getuid()) ||
	    !only_self(cfg->gid_maps, cfg->n_gid_maps, getgid()))
		by_helper = maps_by_kiwi_helper(c, &helper_err);
	if (by_helper == 0) {
		*may_setgroups = false;   /* the helper denies it */
		return 0;
	}
	if (write_maps_unprivileged(c, may_setgroups, err) == 0)
		return 0;
	if (by_helper < 0) {
		kiwi_error_wrap(err, "%s; then", helper_err.msg);
		snprintf(err->step, sizeof(err->step), "%s", helper_err.step);
	}
	return -1;
}

/* A limit whose controller the unified hierarchy lacks (a hybrid host
 * binds it to cgroup v1) is refused, never dropped. containerd and podman
 * write some limits nobody asked for: the one line names the field that
 * asked, and the caller's switch that turns it off. */
static int unenforceable(const struct kiwi_oci_config *cfg, unsigned miss, kiwi_err *err)
{
	const struct kiwi_cgroup_limits *l = &cfg->limits;
	char what[160] = "";
	if ((miss & KIWI_CG_PIDS) && l->pids_max >= 0)
		snprintf(what, sizeof(what), "linux.resources.pids.limit %lld (podman's default; turn it off with "
			 "--pids-limit 0)", l->pids_max == KIWI_CGROUP_MAX ? -1LL : (long long)l->pids_max);
	else if ((miss & KIWI_CG_CPU) && cfg->cpu_shares)
		snprintf(what, sizeof(what), "linux.resources.cpu.shares %lld (containerd's and podman's default; "
			 "turn it off with --cpu-shares 0)", (long long)cfg->cpu_shares);
	else if ((miss & KIWI_CG_CPU) && l->cpu_quota_us >= 0)
		snprintf(what, sizeof(what), "linux.resources.cpu.quota (--cpus)");
	else if (miss & KIWI_CG_MEMORY)
		snprintf(what, sizeof(what), "linux.resources.memory (--memory)");
	else if (miss & KIWI_CG_IO)
		snprintf(what, sizeof(what), "linux.resources.blockIO");
	else
		snprintf(what, sizeof(what), "linux.resources.unified");
	unsigned first = miss & -miss;
	return kiwi_error(err, 0, "cgroup",
			  "config.json asks for %s, which cannot be enforced here: the `%s` controller is not in "
			  "the unified cgroup hierarchy (cgroup v1 or hybrid host); drop the limit, or boot with "
			  "cgroup_no_v1=all", what, kiwi_cgroup_controller_name(first));
}

/* The container's cgroup: cgroupsPath, or /kiwi-oci/<id> for limits
 * without one. Without limits a cgroup is only where the container sits,
 * and one that cannot be made (no cgroup2, nothing delegated to a rootless
 * caller) is skipped, as runc's rootless cgroupfs manager does. */
static int make_cgroup(struct creation *c, kiwi_err *err)
{
	const struct kiwi_oci_config *cfg = c->cfg;
	char path[4352];
	if (!cfg->has_limits && !cfg->cgroups_path)
		return 0;
	if (cfg->cgroups_path)
		snprintf(path, sizeof(path), "%s", cfg->cgroups_path);
	else
		snprintf(path, sizeof(path), "/kiwi-oci/%s", c->o->id);
	if (strchr(path, ':'))
		return kiwi_error(err, EINVAL, "cgroup", "cgroupsPath `%s` is systemd's slice:prefix:name form; "
				  "kiwi-run takes a cgroupfs path", path);
	unsigned miss = cfg->has_limits ? kiwi_cgroup_unavailable(kiwi_cgroup_needed(&cfg->limits)) : 0;
	if (miss)
		return unenforceable(cfg, miss, err);
	kiwi_err e = { 0 };
	if (kiwi_cgroup_open_path(path, &cfg->limits, &c->cg_made, c->st.cgroup_top, &c->cg, &e) == 0) {
		snprintf(c->st.cgroup, sizeof(c->st.cgroup), "%s", kiwi_cgroup_path(c->cg));
		c->st.cgroup_owned = c->cg_made;
		return c->cg_made ? kiwi_oci_pending_cgroup_write(c->dir, c->st.cgroup, c->st.cgroup_top, err) : 0;
	}
	if (!cfg->has_limits && (e.errnum == EACCES || e.errnum == EPERM || e.errnum == ENOENT || e.errnum == EROFS)) {
		if (c->o->note) {
			char msg[600];
			snprintf(msg, sizeof(msg), "no cgroup for the container: %s", e.msg);
			c->o->note(msg);
		}
		return 0;
	}
	*err = e;
	return -1;
}

static int run_runtime_hooks(struct creation *c, kiwi_err *err)
{
	struct kiwi_oci_state st = c->st;
	st.pid = c->pid;
	_cleanup_free_ char *text = kiwi_oci_state_text(&st, KIWI_OCI_CREATING);
	if (!text)
		return kiwi_error(err, ENOMEM, "hook", "cannot format the state");
	if (kiwi_oci_run_hooks(c->cfg, KIWI_OCI_HOOK_PRESTART, text, err) < 0 ||
	    kiwi_oci_run_hooks(c->cfg, KIWI_OCI_HOOK_CREATE_RUNTIME, text, err) < 0)
		return -1;
	struct kiwi_sync_msg m = { .type = OCI_SYNC_HOOKS_DONE };
	return kiwi_sync_send(c->sock, &m) < 0 ? kiwi_error(err, errno, "sync", "cannot resume the init") : 0;
}

/* #1..#3 from the parent's side. */
static int follow_init(struct creation *c, kiwi_err *err)
{
	bool may_setgroups;
	if (write_maps(c, &may_setgroups, err) < 0)
		return -1;
	struct kiwi_sync_msg m = { .type = OCI_SYNC_GO, .value = c->pid, .flags = may_setgroups };
	if (kiwi_sync_send(c->sock, &m) < 0)
		return kiwi_error(err, errno, "sync", "cannot signal the init");
	for (;;) {
		int r = kiwi_sync_recv(c->sock, &m, 0);
		if (r <= 0)
			return kiwi_error(err, r < 0 ? errno : 0, "init", "the container's init ended during setup");
		if (m.type == OCI_SYNC_READY)
			return 0;
		if (m.type == OCI_SYNC_ERROR) {
			*err = m.err;
			return -1;
		}
		if (m.type == OCI_SYNC_HOOKS && run_runtime_hooks(c, err) < 0)
			return -1;
	}
}

static int join_pid_namespace(const struct kiwi_oci_config *cfg, kiwi_err *err)
{
	for (size_t i = 0; i < cfg->n_namespaces; i++) {
		if (cfg->namespaces[i].type != CLONE_NEWPID || !cfg->namespaces[i].path)
			continue;
		_cleanup_close_ int fd = open(cfg->namespaces[i].path, O_RDONLY | O_CLOEXEC);
		/* Our children (the init) start in it; we stay where we are. */
		if (fd < 0 || setns(fd, CLONE_NEWPID) < 0)
			return kiwi_error(err, errno, "namespaces", "cannot join pid namespace `%s`",
					  cfg->namespaces[i].path);
	}
	return 0;
}

static int spawn_init(struct creation *c, kiwi_err *err)
{
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		return kiwi_error(err, errno, "socketpair", "cannot create the sync socket");
	c->sock = sp[0];
	/* Opened here, by the host's uid: the init, in a user namespace, may
	 * have no right to walk the 0700 state directory; through the fd it
	 * needs only the fifo's own 0622. */
	char fifo[4400];
	snprintf(fifo, sizeof(fifo), "%s/" KIWI_OCI_FIFO, c->dir);
	_cleanup_close_ int fifo_path = open(fifo, O_PATH | O_CLOEXEC);
	if (fifo_path < 0) {
		close(sp[1]);
		return kiwi_error(err, errno, "start", "cannot open `%s`", fifo);
	}
	if (kiwi_oci_open_bind_sources(c->cfg, c->bundle, 3 + c->o->preserve_fds, &c->bind_trees, err) < 0) {
		close(sp[1]);
		return -1;
	}
	struct oci_init_args args = {
		.cfg = c->cfg, .bundle = c->bundle, .rootfs = c->rootfs, .state_dir = c->dir, .sock = sp[1],
		.fifo_path = fifo_path,
		.console_sock = c->console, .preserve_fds = c->o->preserve_fds, .seccomp = c->seccomp,
		.bind_trees = c->bind_trees,
		.state = &c->st,
	};
	/* Joining a pid namespace changes only where our children go; we go
	 * back once the init exists, so that nothing we fork later (a hook,
	 * a sanitizer's helper thread) lands in it. */
	bool joins = c->cfg->join_ns & CLONE_NEWPID;
	_cleanup_close_ int own_pidns = joins ? open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC) : -1;
	if ((joins && own_pidns < 0) || join_pid_namespace(c->cfg, err) < 0) {
		close(sp[1]);
		return err->step[0] ? -1 : kiwi_error(err, errno, "namespaces", "cannot open our pid namespace");
	}
	c->pid = kiwi_spawn(c->cfg->new_ns, c->cg ? kiwi_cgroup_fd(c->cg) : -1, &c->pidfd, err);
	if (c->pid == 0) {
		close(c->sock);
		kiwi_oci_init_main(&args);
	}
	close(sp[1]);
	kiwi_oci_close_bind_sources(c->cfg, &c->bind_trees);
	if (joins && setns(own_pidns, CLONE_NEWPID) < 0 && c->pid > 0)
		return kiwi_error(err, errno, "namespaces", "cannot return to our pid namespace");
	return c->pid < 0 ? -1 : 0;
}

static void now_rfc3339(char *buf, size_t len)
{
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, len - n, ".%09ldZ", ts.tv_nsec);
}

static int write_pid_file(const char *path, pid_t pid, kiwi_err *err)
{
	char tmp[PATH_MAX + 16], text[16];
	snprintf(tmp, sizeof(tmp), "%s.kiwi-tmp", path);
	int n = snprintf(text, sizeof(text), "%d", (int)pid);
	return kiwi_write_file_replace(path, tmp, text, (size_t)n, 0644, "pid-file", err);
}

static int record(struct creation *c, kiwi_err *err)
{
	c->st.pid = c->pid;
	if (kiwi_oci_proc_start_time(c->pid, &c->st.start_time, NULL) < 0)
		return kiwi_error(err, ESRCH, "init", "the container's init is gone");
	if (kiwi_oci_state_save(c->o->root, &c->st, err) < 0)
		return -1;
	kiwi_oci_pending_cgroup_done(c->dir);
	return c->o->pid_file ? write_pid_file(c->o->pid_file, c->pid, err) : 0;
}

static void undo(struct creation *c)
{
	if (c->pidfd >= 0) {
		syscall(SYS_pidfd_send_signal, c->pidfd, SIGKILL, NULL, 0);
		siginfo_t info;
		waitid(P_PIDFD, (id_t)c->pidfd, &info, WEXITED);
	}
	if (c->cg) {
		char cg[4096];
		snprintf(cg, sizeof(cg), "%s", kiwi_cgroup_path(c->cg));
		kiwi_cgroup_forget(TAKE_PTR(c->cg));
		if (c->cg_made)
			kiwi_cgroup_remove_path(cg, NULL);
		kiwi_cgroup_remove_parents(cg, c->st.cgroup_top);
	}
	if (c->dir_made)
		kiwi_oci_state_dir_remove(c->dir);
}

int kiwi_oci_compile_seccomp(const struct kiwi_oci_config *cfg, struct kiwi_seccomp **out, kiwi_err *err)
{
	if (!cfg->seccomp_json)
		return 0;
	for (size_t i = 0; i < cfg->n_mounts; i++)
		if (cfg->mounts[i].bind && cfg->mounts[i].source &&
		    kiwi_seccomp_cache_skip_if_reached(cfg->mounts[i].source))
			break;
	return kiwi_seccomp_compile_json(cfg->seccomp_json, strlen(cfg->seccomp_json), "config.json linux.seccomp",
					 out, err);
}

static int prepare(struct creation *c, kiwi_err *err)
{
	bool forced = false;
	if (kiwi_oci_check_id(c->o->id, err) < 0 || kiwi_oci_config_load(c->o->bundle, &c->cfg, err) < 0 ||
	    check_config(c, err) < 0 || kiwi_oci_apply_annotations(c->cfg, &forced, err) < 0 ||
	    resolve_paths(c, err) < 0)
		return -1;
	if (forced && c->o->note)
		c->o->note("io.kiwi annotations: the container gets a new network namespace with only lo");
	if (kiwi_oci_compile_seccomp(c->cfg, &c->seccomp, err) < 0)
		return -1;
	snprintf(c->st.id, sizeof(c->st.id), "%s", c->o->id);
	snprintf(c->st.bundle, sizeof(c->st.bundle), "%s", c->bundle);
	memcpy(c->st.rootfs, c->rootfs_shown, sizeof(c->st.rootfs));
	now_rfc3339(c->st.created, sizeof(c->st.created));
	c->st.owner = geteuid();
	if (c->cfg->annotations) {
		_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
		if (!w)
			return kiwi_error(err, ENOMEM, "state", "cannot allocate");
		kiwi_jw_value(w, c->cfg->annotations);
		/* Two statements: the order in which a call's arguments are
		 * evaluated is unspecified, and strndup(kiwi_jw_text(w, &len), len)
		 * read len before it was set (0 under ASan: no annotations). */
		size_t len;
		const char *text = kiwi_jw_text(w, &len);
		c->st.annotations = strndup(text, len);
		if (!c->st.annotations)
			return kiwi_error(err, ENOMEM, "state", "cannot copy the annotations");
	}
	return make_state_dir(c, err) < 0 || connect_console(c, err) < 0 || make_cgroup(c, err) < 0 ? -1 : 0;
}

/* The pty master the init sent over our end of the pair (before it said
 * it was ready). */
static int receive_master(struct creation *c, kiwi_err *err)
{
	char name[64];
	if (kiwi_recv_fd(c->console_local, name, sizeof(name), MSG_DONTWAIT, c->o->console_master) < 0)
		return kiwi_error(err, errno, "console", "the init sent no pty");
	if (*c->o->console_master < 0)
		return kiwi_error(err, EPROTO, "console", "the init sent no pty");
	return 0;
}

pid_t kiwi_oci_create(const struct kiwi_oci_create_opts *o, int *pidfd, kiwi_err *err)
{
	struct creation c = { .o = o, .sock = -1, .console = -1, .pidfd = -1, .console_local = -1 };
	if (o->console_master)
		*o->console_master = -1;
	int r = prepare(&c, err);
	if (r == 0)
		r = spawn_init(&c, err);
	if (r == 0)
		r = follow_init(&c, err);
	if (r == 0 && c.console_local >= 0)
		r = receive_master(&c, err);
	if (r == 0)
		r = record(&c, err);
	if (r < 0)
		undo(&c);
	if (c.sock >= 0)
		close(c.sock);
	if (c.console >= 0)
		close(c.console);
	if (c.console_local >= 0)
		close(c.console_local);
	if (r == 0 && pidfd)
		*pidfd = TAKE_FD(c.pidfd);
	if (c.pidfd >= 0)
		close(c.pidfd);
	kiwi_oci_close_bind_sources(c.cfg, &c.bind_trees);
	kiwi_seccomp_free(c.seccomp);
	kiwi_cgroup_forget(c.cg);
	kiwi_oci_config_free(c.cfg);
	kiwi_oci_state_clear(&c.st);
	return r < 0 ? -1 : c.pid;
}
