/* SPDX-License-Identifier: Apache-2.0 */
/* PID 1 of the VM lane's guest, linked statically by prepare.sh.
 *
 * One program, not a busybox script, because under TCG every process the
 * guest starts costs tens of milliseconds: the script needed about fifty
 * for what this does with system calls.
 *
 * Stage 1, inside the initramfs: load the modules that reach 9p, build the
 * real root on a tmpfs (pivot_root(2) refuses to move an initramfs, and a
 * runtime under test needs pivot_root), mount the host's /usr and /etc
 * read-only under tmpfs overlays and the control dir, and move onto it.
 * Stage 2: what a runtime expects of a host (a pure cgroup v2 hierarchy
 * with every controller enabled for children, /dev/pts, /dev/shm, /tmp,
 * /run, the kernel's modules for on-demand loading, lo up), the shares at
 * their host paths, the test user kiwitest; then the command, with stdout
 * and stderr on pipes copied byte for byte to the raw virtio consoles hvc0
 * and hvc1 (the kernel's console is the serial port, so its messages never
 * mix in). The exit status goes to /kiwi/ctl/status and, as a fallback, as
 * a marker line to the serial console; then the VM reboots, which with
 * qemu's -no-reboot ends it.
 *
 * Any failure prints one line and exits: the kernel panics (PID 1 died),
 * panic=-1 reboots, qemu exits, and run.sh, finding no status, shows the
 * console. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define NEWROOT "/newroot"
#define CTL "/kiwi/ctl"
#define CGROOT "/sys/fs/cgroup"
#define USER_CG CGROOT "/kiwitest"
/* 512000 is the most this kernel's virtio 9p transport takes (125 pages
 * of its 128-entry ring): fewer, larger requests. */
#define P9_OPTS "trans=virtio,version=9p2000.L,msize=512000"
/* A daemon the command leaves behind may hold its output pipes open: how
 * long to keep copying after the command itself has exited. */
#define DRAIN_GRACE_MS 5000

extern char **environ;

static bool tracing;

static void die(const char *step, const char *what)
{
	dprintf(2, "kiwi-vm-init: %s `%s`: %s\n", step, what, strerror(errno));
	exit(1);
}

/* With kiwi.trace on the kernel command line (run.sh under
 * KIWI_VM_DEBUG=1) each step is logged with the guest's uptime. */
static void trace(const char *step)
{
	struct timespec ts;
	if (!tracing)
		return;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	dprintf(2, "kiwi: %ld.%03ld %s\n", (long)ts.tv_sec, ts.tv_nsec / 1000000, step);
}

/* ---- small file and mount helpers --------------------------------------- */

static void do_mount(const char *src, const char *dst, const char *type, unsigned long flags,
		     const char *opts)
{
	if (mount(src, dst, type, flags, opts) < 0)
		die("mount", dst);
}

static void make_dir(const char *path, mode_t mode)
{
	if (mkdir(path, mode) < 0 && errno != EEXIST)
		die("mkdir", path);
}

/* mkdir -p */
static void make_dirs(const char *path, mode_t mode)
{
	char buf[4096];
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		make_dir(buf, 0755);
		*p = '/';
	}
	make_dir(buf, mode);
}

static void write_file(const char *path, int flags, const char *data)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC | flags, 0644);
	size_t len = strlen(data);
	if (fd < 0 || write(fd, data, len) != (ssize_t)len)
		die("write", path);
	close(fd);
}

/* The whole file, NUL-terminated (it may hold NULs of its own); *len gets
 * its size. NULL when it does not exist. */
static char *read_file(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return NULL;
		die("open", path);
	}
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	for (;;) {
		if (!buf)
			die("read", path);
		ssize_t r = read(fd, buf + n, cap - n - 1);
		if (r < 0)
			die("read", path);
		if (r == 0)
			break;
		n += (size_t)r;
		if (cap - n == 1)
			buf = realloc(buf, cap *= 2);
	}
	close(fd);
	buf[n] = '\0';
	if (len)
		*len = n;
	return buf;
}

static void copy_file(const char *from, const char *to, mode_t mode)
{
	size_t len;
	char *data = read_file(from, &len);
	int fd = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (!data || fd < 0 || write(fd, data, len) != (ssize_t)len)
		die("copy", to);
	close(fd);
	free(data);
}

/* ---- stage 1: the initramfs --------------------------------------------- */

/* The modules in /modules/load, one file name a line, dependencies first
 * (prepare.sh orders them; there is no modprobe here). */
static void load_modules(void)
{
	char *list = read_file("/modules/load", NULL), *save = NULL;
	if (!list)
		die("open", "/modules/load");
	for (char *name = strtok_r(list, "\n", &save); name; name = strtok_r(NULL, "\n", &save)) {
		char path[512];
		snprintf(path, sizeof(path), "/modules/%s", name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || (syscall(SYS_finit_module, fd, "", 0) < 0 && errno != EEXIST))
			die("load module", path);
		close(fd);
		trace(name);
	}
	free(list);
}

/* The host directory exported as TAG, read-only, under a tmpfs overlay at
 * DIR (inside the new root): the guest may write, the host never sees it.
 * cache=loose: the host's /usr and /etc do not change during a run. */
static void overlay_9p(const char *tag, const char *dir)
{
	char lower[256], upper[256], work[256], opts[1024];
	snprintf(lower, sizeof(lower), NEWROOT "/kiwi/lower/%s", tag);
	snprintf(upper, sizeof(upper), NEWROOT "/kiwi/upper/%s", tag);
	snprintf(work, sizeof(work), NEWROOT "/kiwi/work/%s", tag);
	make_dirs(lower, 0755);
	make_dirs(upper, 0755);
	make_dirs(work, 0755);
	do_mount(tag, lower, "9p", MS_RDONLY, P9_OPTS ",cache=loose");
	snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s,workdir=%s", lower, upper, work);
	do_mount("overlay", dir, "overlay", 0, opts);
}

static void build_root(void)
{
	static const char *const dirs[] = { "kiwi", "kiwi/bin", "kiwi/ctl", "usr", "etc", "proc",
					    "sys", "dev", "tmp", "run", "root", "home" };
	/* A merged-/usr host (Debian 12): these are links into /usr. */
	static const char *const usr_links[] = { "bin", "sbin", "lib", "lib32", "lib64", "libx32" };

	do_mount("kiwiroot", NEWROOT, "tmpfs", 0, "mode=0755");
	if (chdir(NEWROOT) < 0)
		die("chdir", NEWROOT);
	for (size_t i = 0; i < sizeof(dirs) / sizeof(*dirs); i++)
		make_dir(dirs[i], 0755);
	copy_file("/bin/busybox", "kiwi/bin/busybox", 0755);
	copy_file("/kiwi/as-user", "kiwi/as-user", 0755);
	do_mount("kiwictl", "kiwi/ctl", "9p", 0, P9_OPTS ",cache=none");
	overlay_9p("kiwiusr", NEWROOT "/usr");
	overlay_9p("kiwietc", NEWROOT "/etc");
	for (size_t i = 0; i < sizeof(usr_links) / sizeof(*usr_links); i++) {
		char target[64], probe[80];
		struct stat st;
		snprintf(target, sizeof(target), "usr/%s", usr_links[i]);
		snprintf(probe, sizeof(probe), NEWROOT "/%s", target);
		if (stat(probe, &st) == 0 && S_ISDIR(st.st_mode) && symlink(target, usr_links[i]) < 0)
			die("symlink", usr_links[i]);
	}
}

/* switch_root without deleting the initramfs (3 MB stay unreachable):
 * move the API filesystems over, then the new root onto /. */
static void enter_root(void)
{
	static const char *const api[] = { "/proc", "/sys", "/dev" };
	for (size_t i = 0; i < sizeof(api) / sizeof(*api); i++) {
		char to[64];
		snprintf(to, sizeof(to), NEWROOT "%s", api[i]);
		do_mount(api[i], to, NULL, MS_MOVE, NULL);
	}
	do_mount(".", "/", NULL, MS_MOVE, NULL);
	if (chroot(".") < 0 || chdir("/") < 0)
		die("chroot", NEWROOT);
}

/* ---- stage 2: the tmpfs root -------------------------------------------- */

static void mount_api(void)
{
	do_mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
	do_mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755");
	make_dir("/dev/pts", 0755);
	make_dir("/dev/shm", 0755);
	make_dir("/dev/mqueue", 0755);
	make_dir("/dev/net", 0755);
	do_mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
		 "newinstance,ptmxmode=0666,mode=0620,gid=5");
	do_mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
	do_mount("mqueue", "/dev/mqueue", "mqueue", 0, NULL);
	if (symlink("/proc/self/fd", "/dev/fd") < 0 || symlink("/proc/self/fd/0", "/dev/stdin") < 0 ||
	    symlink("/proc/self/fd/1", "/dev/stdout") < 0 || symlink("/proc/self/fd/2", "/dev/stderr") < 0)
		die("symlink", "/dev/fd");
}

/* Writes "+c" for every controller of cgroup DIR into its subtree_control. */
static void enable_controllers(const char *dir)
{
	char path[256], *save = NULL;
	snprintf(path, sizeof(path), "%s/cgroup.controllers", dir);
	char *list = read_file(path, NULL);
	if (!list)
		die("open", path);
	snprintf(path, sizeof(path), "%s/cgroup.subtree_control", dir);
	for (char *c = strtok_r(list, " \n", &save); c; c = strtok_r(NULL, " \n", &save)) {
		char plus[64];
		snprintf(plus, sizeof(plus), "+%s", c);
		write_file(path, 0, plus);
	}
	free(list);
}

/* The unified hierarchy alone (the kernel runs with cgroup_no_v1=all), every
 * controller enabled for the root's children, as on a systemd host; and
 * like systemd, nsdelegate makes cgroup namespaces delegation boundaries. */
static void mount_cgroup2(void)
{
	do_mount("cgroup2", CGROOT, "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		 "nsdelegate,memory_recursiveprot");
	enable_controllers(CGROOT);
}

/* Shares: one "TAG PATH" line each, mounted at the host's own path so host
 * paths mean the same inside; after /tmp and /run, which would hide a share
 * below them. cache=mmap: coherent with the host, and mmap works. */
static void mount_shares(void)
{
	char *list = read_file(CTL "/shares", NULL), *save = NULL;
	if (!list)
		die("open", CTL "/shares");
	for (char *line = strtok_r(list, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *path = strchr(line, ' ');
		if (!path)
			die("parse", line);
		*path++ = '\0';
		make_dirs(path, 0755);
		do_mount(line, path, "9p", 0, P9_OPTS ",cache=mmap");
	}
	free(list);
}

static void make_node(const char *path, mode_t mode, unsigned major, unsigned minor)
{
	if (mknod(path, mode, makedev(major, minor)) < 0 && errno != EEXIST)
		die("mknod", path);
}

/* The host's modprobe (through /usr) finds this kernel's modules at the
 * usual place; the kernel runs it for nf_tables, veth and the like. Devices
 * whose nodes appear only once their module is loaded get them up front,
 * as udev arranges from modules.devname on a normal host: opening one
 * loads the module. Their numbers are fixed in the kernel's devices.txt. */
static void setup_modules(void)
{
	char *release = read_file("/proc/sys/kernel/osrelease", NULL), dir[256];
	if (!release)
		die("open", "/proc/sys/kernel/osrelease");
	release[strcspn(release, "\n")] = '\0';
	snprintf(dir, sizeof(dir), "/usr/lib/modules/%s", release);
	free(release);
	make_dirs(dir, 0755);
	do_mount("kiwimods", dir, "9p", MS_RDONLY, P9_OPTS ",cache=loose");
	make_node("/dev/loop-control", S_IFCHR | 0660, 10, 237);
	make_node("/dev/loop0", S_IFBLK | 0660, 7, 0);
	make_node("/dev/net/tun", S_IFCHR | 0666, 10, 200);
	make_node("/dev/fuse", S_IFCHR | 0666, 10, 229);
}

static void bring_up_lo(void)
{
	struct ifreq ifr = { 0 };
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		die("SIOCGIFFLAGS", "lo");
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		die("SIOCSIFFLAGS", "lo");
	close(s);
}

static void setup_system(void)
{
	/* Debian's kernel gates unprivileged user namespaces behind this. */
	if (access("/proc/sys/kernel/unprivileged_userns_clone", F_OK) == 0)
		write_file("/proc/sys/kernel/unprivileged_userns_clone", 0, "1");
	write_file("/proc/sys/kernel/hostname", 0, "kiwi-vm");
	bring_up_lo();
}

/* ---- the test user ------------------------------------------------------- */

/* The first uid from 1000 that /etc/passwd does not use. */
static unsigned free_uid(void)
{
	char *passwd = read_file("/etc/passwd", NULL);
	unsigned uid = 1000;
	bool taken = true;
	while (passwd && taken) {
		char needle[32];
		int n = snprintf(needle, sizeof(needle), ":%u:", uid);
		taken = false;
		/* name:x:UID:... : the uid is the third field. */
		for (char *line = passwd; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
			char *f = strchr(line, ':');
			f = f ? strchr(f + 1, ':') : NULL;
			if (f && !strncmp(f, needle, (size_t)n)) {
				taken = true;
				uid++;
				break;
			}
		}
	}
	free(passwd);
	return uid;
}

/* The first subordinate id past every range FILE (subuid/subgid format,
 * name:start:count) hands out, at least 100000. */
static unsigned long past_subids(const char *file, unsigned long at_least)
{
	char *text = read_file(file, NULL);
	unsigned long end = at_least;
	for (char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		unsigned long start, count;
		char *f = strchr(line, ':');
		if (f && sscanf(f, ":%lu:%lu", &start, &count) == 2 && start + count > end)
			end = start + count;
	}
	free(text);
	return end;
}

static void chown_path(const char *dir, const char *name, unsigned uid)
{
	char path[256];
	snprintf(path, sizeof(path), "%s%s%s", dir, *name ? "/" : "", name);
	if (chown(path, uid, uid) < 0)
		die("chown", path);
}

/* kiwitest exists only in the guest (/etc is an overlay): subordinate ids
 * for newuidmap, and the cgroup subtree /sys/fs/cgroup/kiwitest delegated
 * to it (it owns the files cgroup-v2.rst names), as systemd delegates
 * user@.service; /kiwi/as-user starts commands in its leaf "init". */
static void add_test_user(void)
{
	static const char *const delegated[] = { "", "cgroup.procs", "cgroup.threads",
						 "cgroup.subtree_control" };
	unsigned uid = free_uid();
	unsigned long sub = past_subids("/etc/subgid", past_subids("/etc/subuid", 100000));
	char line[256];

	snprintf(line, sizeof(line), "kiwitest:x:%u:%u:kiwi test user:/home/kiwitest:/bin/sh\n", uid, uid);
	write_file("/etc/passwd", O_APPEND, line);
	snprintf(line, sizeof(line), "kiwitest:x:%u:\n", uid);
	write_file("/etc/group", O_APPEND, line);
	snprintf(line, sizeof(line), "kiwitest:%lu:65536\n", sub);
	write_file("/etc/subuid", O_APPEND | O_CREAT, line);
	write_file("/etc/subgid", O_APPEND | O_CREAT, line);
	make_dir("/home/kiwitest", 0755);
	chown_path("/home/kiwitest", "", uid);
	make_dir(USER_CG, 0755);
	make_dir(USER_CG "/init", 0755);
	enable_controllers(USER_CG);
	for (size_t i = 0; i < sizeof(delegated) / sizeof(*delegated); i++) {
		chown_path(USER_CG, delegated[i], uid);
		chown_path(USER_CG "/init", delegated[i], uid);
	}
}

/* ---- the command ---------------------------------------------------------- */

/* A NUL-separated file as a NULL-terminated vector. */
static char **read_vector(const char *path)
{
	size_t len, n = 0;
	char *data = read_file(path, &len);
	if (!data)
		die("open", path);
	for (size_t i = 0; i < len; i++)
		n += data[i] == '\0';
	char **v = calloc(n + 1, sizeof(*v));
	if (!v)
		die("calloc", path);
	for (size_t i = 0, k = 0; k < n; i += strlen(data + i) + 1)
		v[k++] = data + i;
	return v;
}

/* In the child: the command as run.sh received it on the host (argv, the
 * environment, the working directory, which is the host's own path),
 * stdin from /dev/null, stdout and stderr on the pipes. Exits 127 when it
 * cannot be found, 126 when it cannot be run, 125 when the directory is
 * missing. */
static void exec_command(int out, int err)
{
	char **argv = read_vector(CTL "/argv");
	char *cwd = read_file(CTL "/cwd", NULL);
	int null = open("/dev/null", O_RDONLY);
	if (null < 0 || dup2(null, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
		die("dup2", "stdio");
	if (!cwd || chdir(cwd) < 0) {
		dprintf(2, "kiwi-vm: %s is not shared into the guest (run.sh --share)\n", cwd ? cwd : "?");
		_exit(125);
	}
	setsid();
	environ = read_vector(CTL "/env");
	execvp(argv[0], argv);
	int e = errno;
	dprintf(2, "kiwi-vm: %s: %s\n", argv[0], strerror(e));
	_exit(e == ENOENT ? 127 : 126);
}

/* A raw virtio console: no \n to \r\n, no echo. The hvc driver resets
 * the settings when the last user closes it, so the fd stays open. */
static int open_console(const char *path)
{
	struct termios t;
	int fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 || tcgetattr(fd, &t) < 0)
		die("open", path);
	cfmakeraw(&t);
	if (tcsetattr(fd, TCSANOW, &t) < 0)
		die("tcsetattr", path);
	return fd;
}

/* Copies what the pipe holds to the console; false at end of file. */
static bool pump(int from, int to)
{
	char buf[65536];
	ssize_t n = read(from, buf, sizeof(buf));
	if (n <= 0)
		return n < 0 && errno == EINTR;
	for (ssize_t off = 0; off < n;) {
		ssize_t w = write(to, buf + off, (size_t)(n - off));
		if (w < 0 && errno != EINTR)
			return true; /* the console is gone: drop, keep draining */
		off += w > 0 ? w : 0;
	}
	return true;
}

/* Reaps every child (PID 1 inherits orphans); returns the command's status
 * once it has exited, -1 before. */
static int reap(pid_t command, int status)
{
	int ws;
	pid_t pid;
	while ((pid = waitpid(-1, &ws, WNOHANG)) > 0) {
		if (pid == command)
			status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
	}
	return status;
}

static int run_command(void)
{
	int out[2], err[2];
	int cons[2] = { open_console("/dev/hvc0"), open_console("/dev/hvc1") };
	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0)
		die("pipe", "stdio");
	trace("running the command");
	pid_t pid = fork();
	if (pid < 0)
		die("fork", "command");
	if (pid == 0)
		exec_command(out[1], err[1]);
	close(out[1]);
	close(err[1]);

	struct pollfd fds[2] = { { .fd = out[0], .events = POLLIN }, { .fd = err[0], .events = POLLIN } };
	int status = -1, open_pipes = 2;
	struct timespec deadline = { 0 }, now;
	while (open_pipes > 0) {
		if (status >= 0) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (!deadline.tv_sec)
				deadline = (struct timespec){ now.tv_sec + DRAIN_GRACE_MS / 1000, now.tv_nsec };
			if (now.tv_sec > deadline.tv_sec ||
			    (now.tv_sec == deadline.tv_sec && now.tv_nsec >= deadline.tv_nsec))
				break;
		}
		/* Wakes up now and then to notice the command's exit while a
		 * daemon it left behind still holds the pipes. */
		if (poll(fds, 2, 100) < 0 && errno != EINTR)
			die("poll", "stdio");
		for (int i = 0; i < 2; i++) {
			if (fds[i].fd >= 0 && fds[i].revents && !pump(fds[i].fd, cons[i])) {
				close(fds[i].fd);
				fds[i].fd = -1;
				open_pipes--;
			}
		}
		status = reap(pid, status);
	}
	while (status < 0) {
		int ws;
		if (waitpid(pid, &ws, 0) == pid)
			status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
	}
	trace("command exited");
	return status;
}

static void report(int status)
{
	char text[32];
	snprintf(text, sizeof(text), "%d\n", status);
	write_file(CTL "/status", O_CREAT | O_TRUNC, text);
	dprintf(1, "KIWI_VM_EXIT=%d\n", status);
}

int main(void)
{
	do_mount("proc", "/proc", "proc", 0, NULL);
	char *cmdline = read_file("/proc/cmdline", NULL);
	tracing = cmdline && strstr(cmdline, " kiwi.trace");
	trace("init");
	do_mount("sysfs", "/sys", "sysfs", 0, NULL);
	do_mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
	load_modules();
	trace("modules loaded");
	build_root();
	enter_root();
	trace("root ready");
	mount_api();
	mount_cgroup2();
	mount_shares();
	setup_modules();
	setup_system();
	add_test_user();
	trace("system ready");
	report(run_command());
	sync();
	reboot(RB_AUTOBOOT);
	return 1;
}
