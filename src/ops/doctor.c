/* SPDX-License-Identifier: Apache-2.0 */
/* The host checks of `kiwi-run doctor` (see include/kiwi/doctor.h). Each
 * check fills one result: what it found, and when something does not work,
 * the fix a person can apply. Trials that change kernel state run in a
 * forked child inside fresh namespaces, which vanish with it. */
#include "kiwi/doctor.h"
#include "kiwi/helper.h"
#include "kiwi/cgroup.h"
#include "kiwi/cleanup.h"
#include "kiwi/fileio.h"
#include "kiwi/fslayer.h"
#include "kiwi/idmount.h"
#include "kiwi/landlock.h"
#include "kiwi/loopfs.h"
#include "kiwi/nft.h"
#include "kiwi/seccomp.h"
#include "kiwi/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/netfilter.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <shadow.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/xattr.h>
#include <sys/prctl.h>
#include <sys/quota.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

#define NEEDED_CONTROLLERS "cpu io memory pids"

/* ---- small helpers -------------------------------------------------------- */

__attribute__((format(printf, 3, 4)))
static void set(struct kiwi_check_result *r, enum kiwi_check_status s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->detail, sizeof(r->detail), fmt, ap);
	va_end(ap);
	/* A required check that does not work fails the host; any other warns. */
	r->status = s == KIWI_CHECK_OK ? s : r->required ? KIWI_CHECK_FAIL : KIWI_CHECK_WARN;
}

__attribute__((format(printf, 2, 3)))
static void set_fix(struct kiwi_check_result *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->fix, sizeof(r->fix), fmt, ap);
	va_end(ap);
}

/* The first line of a small file, trailing whitespace cut; false when it
 * cannot be read. */
static bool read_line(const char *path, char *buf, size_t len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : -1;
	if (n < 0)
		return false;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	while (n > 0 && (buf[n - 1] == ' ' || buf[n - 1] == '\n'))
		buf[--n] = '\0';
	return true;
}

static long read_long(const char *path, long fallback)
{
	char buf[64];
	return read_line(path, buf, sizeof(buf)) ? strtol(buf, NULL, 10) : fallback;
}

/* Runs fn in a forked child; its return value (0 ok, else an errno) comes
 * back as the exit status. The child shares nothing it could leave behind:
 * what it makes lives in namespaces that die with it. */
static int in_child(int (*fn)(void *), void *arg)
{
	pid_t pid = fork();
	if (pid < 0)
		return errno;
	if (pid == 0)
		_exit(fn(arg) & 0xff);
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return errno;
	if (WIFSIGNALED(status))
		return EINTR;
	return WEXITSTATUS(status);
}

/* Writes "0 <id> 1" maps for ourselves in a fresh user namespace. */
static int map_self(uid_t uid, gid_t gid)
{
	char line[64];
	int fd = open("/proc/self/setgroups", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		(void)!write(fd, "deny", 4);
		close(fd);
	}
	static const char *const files[] = { "/proc/self/uid_map", "/proc/self/gid_map" };
	for (int i = 0; i < 2; i++) {
		snprintf(line, sizeof(line), "0 %u 1", i ? (unsigned)gid : (unsigned)uid);
		fd = open(files[i], O_WRONLY | O_CLOEXEC);
		if (fd < 0 || write(fd, line, strlen(line)) < 0) {
			int saved = errno;
			if (fd >= 0)
				close(fd);
			return saved;
		}
		close(fd);
	}
	return 0;
}

/* ---- user namespaces ------------------------------------------------------ */

static void check_userns_sysctl(struct kiwi_check_result *r)
{
	long clone = read_long("/proc/sys/kernel/unprivileged_userns_clone", -1);
	long max = read_long("/proc/sys/user/max_user_namespaces", -1);
	long aa = read_long("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", -1);
	char found[256];
	snprintf(found, sizeof(found),
		 "kernel.unprivileged_userns_clone=%s, user.max_user_namespaces=%ld, "
		 "kernel.apparmor_restrict_unprivileged_userns=%s",
		 clone < 0 ? "(absent)" : clone ? "1" : "0", max,
		 aa < 0 ? "(absent)" : aa ? "1" : "0");
	if (max == 0) {
		set(r, KIWI_CHECK_FAIL, "%s: user namespaces are disabled for everyone", found);
		set_fix(r, "sysctl -w user.max_user_namespaces=10000 (and in /etc/sysctl.d/)");
	} else if (clone == 0 && geteuid() != 0) {
		set(r, KIWI_CHECK_FAIL, "%s: unprivileged users may not create user namespaces", found);
		set_fix(r, "sysctl -w kernel.unprivileged_userns_clone=1 (and in /etc/sysctl.d/), or run as root");
	} else if (aa > 0 && geteuid() != 0) {
		set(r, KIWI_CHECK_FAIL, "%s: AppArmor lets unconfined unprivileged programs create user "
			"namespaces only without capabilities in them", found);
		set_fix(r, "give kiwi-run an AppArmor profile with `userns,` (see /etc/apparmor.d/), or "
			"sysctl -w kernel.apparmor_restrict_unprivileged_userns=0");
	} else {
		set(r, KIWI_CHECK_OK, "%s%s", found,
		    clone == 0 || aa > 0 ? " (these restrict unprivileged users only; this is root)" : "");
	}
}

static int try_sandbox_clone(void *arg)
{
	(void)arg;
	int pidfd = -1;
	kiwi_err err;
	pid_t pid = kiwi_spawn(KIWI_SANDBOX_NAMESPACES, -1, &pidfd, &err);
	if (pid == 0)
		_exit(0);
	if (pid < 0)
		return err.errnum ? err.errnum : EPERM;
	int status;
	waitpid(pid, &status, 0);
	return 0;
}

static int try_userns_as_nobody(void *arg)
{
	(void)arg;
	if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0)
		return errno;
	return unshare(CLONE_NEWUSER) < 0 ? errno : 0;
}

static void check_userns_clone(struct kiwi_check_result *r)
{
	int e = in_child(try_sandbox_clone, NULL);
	if (e) {
		set(r, KIWI_CHECK_FAIL, "clone3 with new user, mount, pid, net, uts, ipc and cgroup "
			"namespaces fails for uid %u: %s", (unsigned)geteuid(), strerror(e));
		set_fix(r, e == EPERM || e == EACCES
			   ? "see userns.sysctl; inside a container, allow user namespaces (docker: "
			     "--security-opt seccomp=unconfined or a profile with clone3, unshare)"
			   : e == ENOSPC ? "raise user.max_user_namespaces (sysctl)" : "a kernel with user namespaces");
		return;
	}
	if (geteuid() != 0) {
		set(r, KIWI_CHECK_OK, "clone3 with every sandbox namespace works for uid %u", (unsigned)geteuid());
		return;
	}
	int u = in_child(try_userns_as_nobody, NULL);
	set(r, KIWI_CHECK_OK, "clone3 with every sandbox namespace works for root; unprivileged users "
	    "(tried as nobody): %s", u ? strerror(u) : "work too");
}

/* ---- cgroups -------------------------------------------------------------- */

/* Where the unified hierarchy is mounted, "" when nowhere. */
static void cgroup2_mount(char *out, size_t len, bool *v1)
{
	if (kiwi_cgroup_hierarchies(out, len, v1, NULL) < 0)
		out[0] = '\0';
}

/* The needed controllers missing from a cgroup.controllers line. */
static void missing_controllers(const char *have, char *out, size_t len)
{
	char need[] = NEEDED_CONTROLLERS, *save = NULL;
	size_t o = 0;
	out[0] = '\0';
	for (char *c = strtok_r(need, " ", &save); c; c = strtok_r(NULL, " ", &save)) {
		char padded[600], word[16];
		snprintf(padded, sizeof(padded), " %s ", have);
		snprintf(word, sizeof(word), " %s ", c);
		if (!strstr(padded, word) && o < len)
			o += (size_t)snprintf(out + o, len - o, "%s%s", o ? " " : "", c);
	}
}

static void check_cgroup_mode(struct kiwi_check_result *r)
{
	char mnt[PATH_MAX];
	bool v1;
	cgroup2_mount(mnt, sizeof(mnt), &v1);
	struct statfs sf;
	bool unified = statfs("/sys/fs/cgroup", &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC;
	static const char fix[] = "boot with systemd.unified_cgroup_hierarchy=1 (or cgroup_no_v1=all) on "
				  "the kernel command line (/etc/default/grub, then update-grub and reboot)";
	if (unified) {
		set(r, KIWI_CHECK_OK, "unified: cgroup v2 only, at /sys/fs/cgroup");
	} else if (mnt[0]) {
		set(r, KIWI_CHECK_WARN, "hybrid: cgroup v2 at %s, but the controllers are bound to cgroup v1 "
			"under /sys/fs/cgroup; --memory, --pids, --cpus and the other limits will fail "
			"(a run without limits works)", mnt);
		set_fix(r, "%s", fix);
	} else {
		set(r, KIWI_CHECK_WARN, "legacy: %s; resource limits will fail (a run without limits works)",
		    v1 ? "cgroup v1 only" : "no cgroup filesystem mounted");
		set_fix(r, "%s", fix);
	}
}

/* Root's cgroups go under <mount>/kiwi.slice: the controllers must be
 * offered at the hierarchy's root. */
static void check_cgroup_root(struct kiwi_check_result *r)
{
	char mnt[PATH_MAX], path[PATH_MAX + 32], have[512] = "", miss[64];
	bool v1;
	cgroup2_mount(mnt, sizeof(mnt), &v1);
	if (!mnt[0]) {
		set(r, KIWI_CHECK_WARN, "no cgroup v2 hierarchy: root's sandboxes cannot have limits");
		set_fix(r, "see cgroup.mode");
		return;
	}
	snprintf(path, sizeof(path), "%s/cgroup.controllers", mnt);
	read_line(path, have, sizeof(have));
	missing_controllers(have, miss, sizeof(miss));
	if (miss[0]) {
		set(r, KIWI_CHECK_WARN, "root's sandboxes would go under %s/kiwi.slice, where the hierarchy "
			"offers `%s` and lacks %s", mnt, have, miss);
		set_fix(r, "%s", strcmp(mnt, "/sys/fs/cgroup")
			? "see cgroup.mode: the controllers are held by cgroup v1"
			: "free the controllers from cgroup v1 (cgroup_no_v1=all)");
		return;
	}
	set(r, KIWI_CHECK_OK, "root's sandboxes go under %s/kiwi.slice, with %s", mnt, NEEDED_CONTROLLERS);
}

/* A caller's cgroups go beside its own (in its parent), which must be
 * delegated to it: writable, with the controllers handed down. */
static void check_cgroup_user(struct kiwi_check_result *r)
{
	char mnt[PATH_MAX], own[PATH_MAX] = "", dir[PATH_MAX * 2], f[PATH_MAX * 2 + 32], have[512] = "",
	     miss[64];
	bool v1;
	if (geteuid() == 0) {
		set(r, KIWI_CHECK_OK, "the caller is root (see cgroup.root); run `kiwi-run doctor` as a user "
		    "to check that user's delegation");
		return;
	}
	cgroup2_mount(mnt, sizeof(mnt), &v1);
	if (!mnt[0] || kiwi_cgroup_of(0, own, sizeof(own), NULL) < 0) {
		set(r, KIWI_CHECK_WARN, "uid %u is in no cgroup v2 cgroup: its sandboxes cannot have limits",
		    (unsigned)geteuid());
		set_fix(r, "see cgroup.mode");
		return;
	}
	char *slash = strrchr(own, '/');
	if (slash)
		*slash = '\0';
	snprintf(dir, sizeof(dir), "%s%s", mnt, own);
	snprintf(f, sizeof(f), "%s/cgroup.controllers", dir);
	read_line(f, have, sizeof(have));
	missing_controllers(have, miss, sizeof(miss));
	snprintf(f, sizeof(f), "%s/cgroup.procs", dir);
	bool writable = access(dir, W_OK) == 0 && access(f, W_OK) == 0;
	if (!writable || miss[0]) {
		set(r, KIWI_CHECK_WARN, "uid %u's sandboxes would go under %s/kiwi, which %s%s%s",
		    (unsigned)geteuid(), dir, writable ? "" : "is not delegated to it (not writable)",
		    !writable && miss[0] ? " and " : "", miss[0] ? "lacks the controllers " : "");
		size_t l = strlen(r->detail);
		snprintf(r->detail + l, sizeof(r->detail) - l, "%s", miss);
		set_fix(r, "run under a delegated scope: systemd-run --user --scope -p Delegate=yes "
			"kiwi-run ..., pass --cgroup-parent a cgroup you own, or have the admin allow "
			"you kiwi-helper's cgroup operation (kiwi-helper(8))%s",
			miss[0] && strcmp(mnt, "/sys/fs/cgroup") ? "; and see cgroup.mode" : "");
		return;
	}
	set(r, KIWI_CHECK_OK, "uid %u's sandboxes go under %s/kiwi, delegated, with %s", (unsigned)geteuid(),
	    dir, NEEDED_CONTROLLERS);
}

/* ---- nftables, overlayfs, seccomp, landlock ------------------------------- */

static int try_nft(void *arg)
{
	(void)arg;
	if (unshare(geteuid() ? CLONE_NEWUSER | CLONE_NEWNET : CLONE_NEWNET) < 0)
		return errno;
	kiwi_err err = { 0 };
	_cleanup_nft_ struct kiwi_nft *n = kiwi_nft_begin(NFPROTO_INET, "kiwi_doctor", &err);
	if (!n)
		return err.errnum ? err.errnum : ENOMEM;
	kiwi_nft_add_table(n, 0);
	return kiwi_nft_commit(n, NULL, &err) < 0 ? (err.errnum ? err.errnum : EPROTO) : 0;
}

static void check_nftables(struct kiwi_check_result *r)
{
	int e = in_child(try_nft, NULL);
	if (e) {
		set(r, KIWI_CHECK_WARN, "cannot create an nftables table in a fresh network namespace: %s; "
			"--network egress will fail", strerror(e));
		set_fix(r, "load the nf_tables module (modprobe nf_tables) or use a kernel with "
			"CONFIG_NF_TABLES and CONFIG_NF_TABLES_INET");
		return;
	}
	set(r, KIWI_CHECK_OK, "an inet table can be created in a fresh network namespace%s",
	    geteuid() ? " (egress for an unprivileged user also needs kiwi-helper: see helper)" : "");
}

/* In a child: a fresh user and mount namespace with a tmpfs on /tmp, as
 * a sandbox's writable layer is. */
static int tmpfs_in_userns(void)
{
	uid_t uid = geteuid();
	gid_t gid = getegid();
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
		return errno;
	int e = map_self(uid, gid);
	if (e)
		return e;
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("kiwi-doctor", "/tmp", "tmpfs", 0, "size=1m") < 0)
		return errno;
	return 0;
}

static int try_layer_xattrs(void *arg)
{
	(void)arg;
	int e = tmpfs_in_userns();
	if (e)
		return e;
	return setxattr("/tmp", "user.kiwi.probe", "y", 1, 0) < 0 ? errno : 0;
}

static int try_overlay(void *arg)
{
	(void)arg;
	int e = tmpfs_in_userns();
	if (e)
		return e;
	static const char *const dirs[] = { "/tmp/l", "/tmp/u", "/tmp/w", "/tmp/m" };
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(dirs); i++)
		if (mkdir(dirs[i], 0755) < 0)
			return errno;
	/* As a sandbox's root is mounted: userxattr, the upper on a tmpfs. */
	if (mount("overlay", "/tmp/m", "overlay", 0, "lowerdir=/tmp/l,upperdir=/tmp/u,workdir=/tmp/w,userxattr") < 0)
		return errno;
	return 0;
}

static void check_overlayfs(struct kiwi_check_result *r)
{
	int e = in_child(try_overlay, NULL);
	if (e) {
		set(r, KIWI_CHECK_FAIL, "cannot mount overlayfs in a user namespace (every sandbox's root is "
		    "one): %s", strerror(e));
		set_fix(r, "modprobe overlay; mounting it in a user namespace needs Linux 5.11 or later");
		return;
	}
	set(r, KIWI_CHECK_OK, "overlayfs mounts in a user namespace");
}

/* The writable layer's backends (kiwi/fslayer.h), one line each: which
 * this host offers to this caller. */
static void check_layer_tmpfs(struct kiwi_check_result *r)
{
	bool charged = !kiwi_cgroup_unavailable(KIWI_CG_MEMORY);
	int e = in_child(try_layer_xattrs, NULL);
	if (e) {
		set(r, KIWI_CHECK_WARN, "offered (memory-backed, the default, %llu MiB unless --disk), but it holds "
		    "no user xattrs here (%s): layered binds (the phase's workspace) are bound in place, "
		    "unbounded by --disk, and --rw-root cannot remove a directory of the rootfs",
		    KIWI_FSLAYER_DEFAULT_SIZE >> 20, strerror(e));
		set_fix(r, "Linux 6.6 or later gives tmpfs user xattrs; or --disk-backend loop (layer.loop)");
		return;
	}
	if (charged) {
		set(r, KIWI_CHECK_OK, "offered (memory-backed, the default, %llu MiB unless --disk, charged to the "
		    "sandbox's memory cgroup: --memory bounds it)", KIWI_FSLAYER_DEFAULT_SIZE >> 20);
		return;
	}
	set(r, KIWI_CHECK_WARN, "offered (memory-backed, the default, %llu MiB unless --disk, bounded by --disk "
	    "only: no cgroup v2 memory controller to charge it to)", KIWI_FSLAYER_DEFAULT_SIZE >> 20);
	set_fix(r, "see cgroup.mode: with cgroup v2's memory controller, --memory bounds the layer too; or "
		"--disk-backend loop (layer.loop), on disk");
}

static const char *unsafe(const char *path, bool want_setuid);

/* Not root: the layer comes from kiwi-helper's disk operation, which only
 * a sandbox can ask for; what can be told here is whether the helper is
 * there and safe, and what decides the rest. */
static void check_layer_loop_helper(struct kiwi_check_result *r)
{
	const char *path = kiwi_helper_path();
	const char *bad = access(path, F_OK) < 0 ? "is not installed" : unsafe(path, true);
	if (bad) {
		set(r, KIWI_CHECK_WARN, "not offered to this caller: not root, and kiwi-helper %s %s", path, bad);
		set_fix(r, "install kiwi-helper setuid root (see helper) with a rule giving you \"disk\" and "
			"\"max_disk\" in %s (kiwi-helper.json(5)), or run as root", KIWI_HELPER_CONFIG);
		return;
	}
	set(r, KIWI_CHECK_OK, "offered through kiwi-helper (%s) if your rule in %s gives you \"disk\": an ext4 "
	    "image of --disk's size, at most the rule's max_disk, unnamed in " KIWI_LOOPFS_DEFAULT_DIR ", idmapped "
	    "to the sandbox (not tried here: only a sandbox can ask for one)", path, KIWI_HELPER_CONFIG);
}

/* A real trial, as a sandbox would: a 1 MiB image made, attached,
 * mounted and let go (the loop device clears itself). */
static void check_layer_loop(struct kiwi_check_result *r)
{
	if (geteuid() != 0) {
		check_layer_loop_helper(r);
		return;
	}
	kiwi_err err = { 0 };
	int fd = kiwi_loopfs_offered(&err) < 0 ? -1 : kiwi_loopfs_create(NULL, KIWI_LOOPFS_MIN_SIZE, 0, 0, NULL, &err);
	if (fd < 0) {
		set(r, KIWI_CHECK_WARN, "not offered to this caller: %s%s%s", err.msg,
		    err.errnum && err.errnum != EPERM ? ": " : "", err.errnum && err.errnum != EPERM ?
		    strerror(err.errnum) : "");
		set_fix(r, "modprobe loop and ext4; " KIWI_LOOPFS_DEFAULT_DIR " on a filesystem with O_TMPFILE");
		return;
	}
	close(fd);
	set(r, KIWI_CHECK_OK, "offered (--disk-backend loop: an ext4 image of --disk's size on a loop device, "
	    "unnamed in " KIWI_LOOPFS_DEFAULT_DIR " unless --disk-dir; a 1 MiB one made and released)");
}

/* Project quotas would bound a layer in place on the host's filesystem;
 * kiwi-run does not use them yet, but says whether this host could. */
static void check_layer_quota(struct kiwi_check_result *r)
{
	const char *dir = "/var/lib";
	_cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct if_dqinfo info;
	/* QCMD shifts Q_GETINFO (0x800005) left in an int: undefined. */
	int cmd = (int)(((unsigned)Q_GETINFO << SUBCMDSHIFT) | (PRJQUOTA & SUBCMDMASK));
	int e = fd < 0 ? errno : syscall(SYS_quotactl_fd, fd, cmd, 0, &info) < 0 ? errno : 0;
	/* ESRCH: the filesystem has no project quotas on. */
	if (e && e != ESRCH)
		set(r, KIWI_CHECK_WARN, "not offered by this kiwi-run; whether the filesystem of %s has project "
		    "quotas is unknown (%s)", dir, strerror(e));
	else
		set(r, KIWI_CHECK_WARN, "not offered by this kiwi-run; the filesystem of %s has %sproject quotas on",
		    dir, e ? "no " : "");
	set_fix(r, "--disk-backend loop bounds a disk-backed layer (layer.loop)");
}

static int try_seccomp(void *arg)
{
	(void)arg;
	kiwi_err err = { 0 };
	struct kiwi_seccomp *f = NULL;
	if (kiwi_seccomp_compile_default(&f, &err) < 0)
		return err.errnum ? err.errnum : EINVAL;
	int r = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || kiwi_seccomp_load(f, &err) < 0;
	kiwi_seccomp_free(f);
	return r ? (err.errnum ? err.errnum : errno) : 0;
}

static void check_seccomp(struct kiwi_check_result *r)
{
	int e = in_child(try_seccomp, NULL);
	if (e) {
		set(r, KIWI_CHECK_FAIL, "cannot load the default seccomp filter: %s", strerror(e));
		set_fix(r, "a kernel with CONFIG_SECCOMP_FILTER; inside a container, a seccomp profile that "
			"allows seccomp(2)");
		return;
	}
	set(r, KIWI_CHECK_OK, "the default filter loads");
}

static void check_landlock(struct kiwi_check_result *r)
{
	int abi = kiwi_landlock_abi();
	if (abi <= 0) {
		set(r, KIWI_CHECK_WARN, "the kernel offers no Landlock: --landlock adds nothing");
		set_fix(r, "Linux 5.13 or later with CONFIG_SECURITY_LANDLOCK and `landlock` in the lsm= "
			"boot parameter");
		return;
	}
	set(r, KIWI_CHECK_OK, "Landlock ABI %d", abi);
}

/* ---- the setuid helper ---------------------------------------------------- */

/* Root-owned and writable by no one else, the directories above it too:
 * otherwise whoever can write there can rewrite the admin's policy. */
static const char *unsafe(const char *path, bool want_setuid)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return "cannot be read";
	if (st.st_uid != 0)
		return "is not owned by root";
	if (st.st_mode & 022)
		return "is writable by group or others";
	if (want_setuid && !(st.st_mode & S_ISUID))
		return "is not setuid (mode 4755)";
	if (!want_setuid && !S_ISREG(st.st_mode))
		return "is not a regular file";
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	for (char *s = strrchr(dir, '/'); s && s != dir; s = strrchr(dir, '/')) {
		*s = '\0';
		if (stat(dir, &st) < 0 || st.st_uid != 0 || (st.st_mode & 022))
			return "lies in a directory that is not root's alone";
	}
	return NULL;
}

/* The helper kiwi-run itself would run (kiwi_helper_path: $KIWI_HELPER,
 * else where meson installs it), so that doctor never vouches for another. */
static void check_helper(struct kiwi_check_result *r)
{
	const char *path = kiwi_helper_path();
	const char *cfg = KIWI_HELPER_CONFIG;
	const char *who = geteuid() == 0 ? "root does not need it" : "needed for --network egress and --disk-backend loop without root";
	if (access(path, F_OK) < 0) {
		set(r, geteuid() == 0 ? KIWI_CHECK_OK : KIWI_CHECK_WARN, "kiwi-helper is not installed at %s (%s)",
		    path, who);
		if (geteuid())
			set_fix(r, "as root: meson install, then chown root:root %s && chmod 4755 %s (meson "
				"cannot set the setuid bit), and write %s (kiwi-helper.json(5))", path, path, cfg);
		return;
	}
	const char *bad = unsafe(path, true);
	const char *cfg_bad = unsafe(cfg, false);
	if (bad || cfg_bad) {
		set(r, KIWI_CHECK_WARN, "%s %s%s%s%s (%s)", path, bad ? bad : "is fine", cfg_bad ? "; " : "",
		    cfg_bad ? cfg : "", cfg_bad ? cfg_bad : "", who);
		set_fix(r, "chown root:root %s && chmod 4755 %s; %s and its directories root-owned, not "
			"group- or world-writable", path, path, cfg);
		return;
	}
	set(r, KIWI_CHECK_OK, "%s is setuid root and %s is root's alone (%s)", path, cfg, who);
}

/* ---- root's id range ------------------------------------------------------ */

static void check_kiwi_range(struct kiwi_check_result *r)
{
	if (geteuid() != 0) {
		set(r, KIWI_CHECK_OK, "not root: a sandbox maps your own ids (or kiwi-helper's ranges)");
		return;
	}
	struct kiwi_idmap m;
	kiwi_err e = { 0 };
	if (kiwi_idmount_default_map(&m, &e) < 0) {
		set(r, KIWI_CHECK_FAIL, "%s", e.msg);
		set_fix(r, "kiwi-run doctor --fix (adds `" KIWI_SUBID_OWNER ":START:%u` to /etc/subuid and "
			"/etc/subgid), or run with --host-root-map", KIWI_SUBID_COUNT);
		return;
	}
	set(r, KIWI_CHECK_OK, "root's sandboxes map ids 0-%u to host uids %u-%u and gids %u-%u (`"
	    KIWI_SUBID_OWNER "` in /etc/subuid, /etc/subgid), with idmapped mounts", KIWI_SUBID_COUNT - 1,
	    m.uid[0].outside, m.uid[0].outside + KIWI_SUBID_COUNT - 1, m.gid[0].outside,
	    m.gid[0].outside + KIWI_SUBID_COUNT - 1);
}

/* Far above the ranges useradd hands out (SUB_UID_MIN 100000 onwards) and
 * below 2^31, which some tools read as a negative id. */
#define KIWI_SUBID_BASE 1073741824u

/* The first 65536-aligned start at or above KIWI_SUBID_BASE past every
 * range of the file. */
static uint32_t free_start(const char *text, size_t len)
{
	uint64_t start = KIWI_SUBID_BASE;
	struct kiwi_subid e;
	for (size_t at = 0; kiwi_subid_next(text, len, &at, &e);)
		if ((uint64_t)e.start + e.count > start)
			start = ((uint64_t)e.start + e.count + 65535) & ~(uint64_t)65535;
	return start + KIWI_SUBID_COUNT <= 0x7fffffffu ? (uint32_t)start : 0;
}

static int fix_one(const char *path, FILE *out, kiwi_err *err)
{
	_cleanup_close_ int fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	uint32_t have;
	if (fd < 0)
		return kiwi_error(err, errno, "doctor", "cannot open `%s`", path);
	if (kiwi_read_bounded(fd, 1 << 20, path, &text, &len, err) < 0)
		return -1;
	if (kiwi_subid_find(text, len, KIWI_SUBID_OWNER, KIWI_SUBID_COUNT, &have)) {
		fprintf(out, "%s: `" KIWI_SUBID_OWNER ":%u:%u` is there already\n", path, have, KIWI_SUBID_COUNT);
		return 0;
	}
	uint32_t start = free_start(text, len);
	if (!start)
		return kiwi_error(err, ERANGE, "doctor", "`%s` leaves no free range below 2^31", path);
	char line[64];
	int n = snprintf(line, sizeof(line), "%s" KIWI_SUBID_OWNER ":%u:%u\n",
			 len && text[len - 1] != '\n' ? "\n" : "", start, KIWI_SUBID_COUNT);
	if (write(fd, line, (size_t)n) != n)
		return kiwi_error(err, errno, "doctor", "cannot append to `%s`", path);
	fprintf(out, "%s: added `" KIWI_SUBID_OWNER ":%u:%u`\n", path, start, KIWI_SUBID_COUNT);
	return 0;
}

int kiwi_doctor_fix(FILE *out, kiwi_err *err)
{
	if (geteuid() != 0)
		return kiwi_error(err, EPERM, "doctor", "--fix writes /etc/subuid and /etc/subgid: run it as root");
	/* The lock useradd and usermod take before they rewrite these files:
	 * without it, one of them could drop our line or give our range away. */
	if (lckpwdf() < 0)
		return kiwi_error(err, errno, "doctor", "cannot take the lock of the password files (/etc/.pwd.lock)");
	int r = fix_one("/etc/subuid", out, err) < 0 || fix_one("/etc/subgid", out, err) < 0 ? -1 : 0;
	ulckpwdf();
	return r;
}

/* ---- the table ------------------------------------------------------------ */

static const struct {
	const char *name;
	bool required;
	void (*run)(struct kiwi_check_result *r);
} checks[] = {
	{ "userns.sysctl", true, check_userns_sysctl },
	{ "userns.clone", true, check_userns_clone },
	{ "userns.range", true, check_kiwi_range },
	{ "seccomp", true, check_seccomp },
	{ "cgroup.mode", false, check_cgroup_mode },
	{ "cgroup.root", false, check_cgroup_root },
	{ "cgroup.user", false, check_cgroup_user },
	{ "nftables", false, check_nftables },
	{ "overlayfs", true, check_overlayfs },
	{ "layer.tmpfs", false, check_layer_tmpfs },
	{ "layer.loop", false, check_layer_loop },
	{ "layer.quota", false, check_layer_quota },
	{ "landlock", false, check_landlock },
	{ "helper", false, check_helper },
};

size_t kiwi_doctor_count(void)
{
	return KIWI_ARRAY_SIZE(checks);
}

bool kiwi_doctor_run(struct kiwi_check_result *out)
{
	bool ok = true;
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(checks); i++) {
		struct kiwi_check_result *r = &out[i];
		*r = (struct kiwi_check_result){ .name = checks[i].name, .required = checks[i].required };
		checks[i].run(r);
		if (r->status == KIWI_CHECK_FAIL)
			ok = false;
	}
	return ok;
}

const char *kiwi_check_status_name(enum kiwi_check_status s)
{
	switch (s) {
	case KIWI_CHECK_OK:
		return "ok";
	case KIWI_CHECK_WARN:
		return "warn";
	case KIWI_CHECK_FAIL:
		return "fail";
	default:
		return "?";
	}
}
