/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-attack: what hostile code would try from inside a sandbox. Each
 * subcommand makes a handful of attempts and prints one JSON line per
 * attempt:
 *   {"step": "...", "ok": true|false, "errno": N, "note": "..."}
 * where ok means the system call did what the attacker wanted. The tests
 * (test_*.py here) decide which outcome is acceptable; this program only
 * reports. It never writes to a kernel interface it reaches (an open for
 * writing that succeeds is reported, not used); the only bytes it pushes
 * anywhere are TIOCSTI's marker line, into whatever terminal it can find.
 * `swap` is the one helper the tests run on the host, outside a sandbox.
 *
 * Static: the busybox rootfs carries no libc. Exit 0 when the attempts
 * ran, 2 on a usage error. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/capability.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <linux/userfaultfd.h>
#include <net/ethernet.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define X32_BIT 0x40000000L
#define MARKER "kiwi-injected\n"

/* ---- output ---------------------------------------------------------- */

static void put_escaped(const char *s)
{
	putchar('"');
	for (const unsigned char *p = (const unsigned char *)s; p && *p; p++)
		if (*p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\')
			putchar(*p);
		else
			printf("\\u%04x", *p);
	putchar('"');
}

/* One attempt: ok when rc >= 0; errnum is the errno it failed with. */
static void report(const char *step, long rc, int errnum, const char *note)
{
	printf("{\"step\": ");
	put_escaped(step);
	printf(", \"ok\": %s, \"errno\": %d, \"note\": ", rc >= 0 ? "true" : "false",
	       rc >= 0 ? 0 : errnum);
	put_escaped(note ? note : "");
	puts("}");
	fflush(stdout);
}

/* Reports a raw syscall's outcome: report(step, rc, errno, note). */
#define TRY(step, call, note) do { errno = 0; long rc_ = (long)(call); report(step, rc_, errno, note); } while (0)

static void report_fd(const char *step, int fd, const char *note)
{
	report(step, fd, errno, note);
	if (fd >= 0)
		close(fd);
}

/* ---- terminal ------------------------------------------------------- */

static long push_input(int fd)
{
	for (const char *c = MARKER; *c; c++)
		if (ioctl(fd, TIOCSTI, c) < 0)
			return -1;
	return 0;
}

/* Pushes a line into every terminal within reach: stdio (the caller's
 * terminal, if kiwi-run shares it), /dev/tty, and stdin again after trying
 * to make it the controlling terminal. */
static int cmd_tiocsti(void)
{
	char step[32];
	for (int fd = 0; fd <= 2; fd++) {
		snprintf(step, sizeof(step), "tiocsti-fd%d", fd);
		report(step, isatty(fd) ? push_input(fd) : -1, isatty(fd) ? errno : ENOTTY, NULL);
	}
	int tty = open("/dev/tty", O_RDWR | O_CLOEXEC);
	report("open-dev-tty", tty, errno, NULL);
	if (tty >= 0) {
		TRY("tiocsti-dev-tty", push_input(tty), NULL);
		close(tty);
	}
	int again = open("/proc/self/fd/0", O_RDWR | O_CLOEXEC);
	report("reopen-stdin", again, errno, NULL);
	if (again >= 0) {
		TRY("tiocsti-reopened-stdin", push_input(again), NULL);
		close(again);
	}
	TRY("tiocsctty-steal", ioctl(0, TIOCSCTTY, 1), NULL);
	TRY("tiocsti-after-sctty", push_input(0), NULL);
	return 0;
}

/* ---- processes ------------------------------------------------------ */

static void try_trace(const char *what, pid_t pid)
{
	char step[64];
	snprintf(step, sizeof(step), "attach-%s", what);
	errno = 0;
	long rc = ptrace(PTRACE_ATTACH, pid, 0, 0);
	report(step, rc, errno, NULL);
	if (rc == 0) {
		waitpid(pid, NULL, __WALL);
		ptrace(PTRACE_DETACH, pid, 0, 0);
	}
	snprintf(step, sizeof(step), "seize-%s", what);
	errno = 0;
	rc = ptrace(PTRACE_SEIZE, pid, 0, 0);
	report(step, rc, errno, NULL);
	if (rc == 0)
		ptrace(PTRACE_DETACH, pid, 0, 0);
	snprintf(step, sizeof(step), "pidfd-getfd-%s", what);
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0) {
		report(step, -1, errno, "pidfd_open");
	} else {
		report_fd(step, (int)syscall(SYS_pidfd_getfd, pidfd, 0, 0), NULL);
		close(pidfd);
	}
	char buf[8];
	struct iovec local = { buf, sizeof(buf) }, remote = { (void *)0x400000, sizeof(buf) };
	snprintf(step, sizeof(step), "vm-readv-%s", what);
	TRY(step, syscall(SYS_process_vm_readv, pid, &local, 1, &remote, 1, 0), NULL);
	snprintf(step, sizeof(step), "kill-%s", what);
	TRY(step, kill(pid, 0), "signal 0: may it be signalled");
}

/* ptrace PID...: pid 1, a host pid (passed by the test), and a child of
 * our own as the control that ptrace works at all. */
static int cmd_ptrace(int argc, char **argv)
{
	try_trace("init", 1);
	for (int i = 0; i < argc; i++) {
		char what[32];
		snprintf(what, sizeof(what), "pid-%s", argv[i]);
		try_trace(what, (pid_t)atoi(argv[i]));
	}
	pid_t child = fork();
	if (child == 0) {
		pause();
		_exit(0);
	}
	try_trace("own-child", child);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	return 0;
}

/* ---- mounts and namespaces ------------------------------------------ */

static void try_mounts(const char *prefix)
{
	char step[64];
	mkdir("/tmp/kiwi-m", 0755);
#define MSTEP(name) (snprintf(step, sizeof(step), "%s%s", prefix, name), step)
	TRY(MSTEP("mount-tmpfs"), mount("none", "/tmp/kiwi-m", "tmpfs", 0, NULL), NULL);
	TRY(MSTEP("remount-root-rw"), mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND, NULL), NULL);
	TRY(MSTEP("umount-kcore-mask"), umount2("/proc/kcore", MNT_DETACH), NULL);
	TRY(MSTEP("umount-proc-sys"), umount2("/proc/sys", MNT_DETACH), NULL);
	TRY(MSTEP("mount-proc"), mount("proc", "/tmp/kiwi-m", "proc", 0, NULL), NULL);
	int fs = (int)syscall(SYS_fsopen, "tmpfs", 0);
	report(MSTEP("fsopen"), fs, errno, NULL);
	if (fs >= 0)
		close(fs);
	report_fd(MSTEP("open-tree"), (int)syscall(SYS_open_tree, AT_FDCWD, "/", 1 /* CLONE */), NULL);
	/* CVE-2022-0492: a cgroup v1 hierarchy of one's own, to set its
	 * release_agent (run by the host's kernel as host root). */
	mkdir("/tmp/kiwi-cg", 0755);
	errno = 0;
	long cg = mount("cgroup", "/tmp/kiwi-cg", "cgroup", 0, "rdma");
	report(MSTEP("mount-cgroup-v1"), cg, errno, NULL);
	if (cg == 0)
		report_fd(MSTEP("release-agent"), open("/tmp/kiwi-cg/release_agent", O_WRONLY | O_CLOEXEC), NULL);
#undef MSTEP
}

static int cmd_mount(void)
{
	try_mounts("");
	return 0;
}

static long raw_clone_newuser(void)
{
	pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, NULL);
	if (pid == 0)
		_exit(0);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	return pid;
}

/* New namespaces would hand back every capability inside them. The
 * nested steps show what they would then buy: mounts the outer sandbox
 * made (the /proc masks, the read-only root) must stay locked. */
static int cmd_unshare(int argc, char **argv)
{
	struct { uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls; } ca = {
		.flags = CLONE_NEWUSER, .exit_signal = SIGCHLD,
	};
	long pid = syscall(SYS_clone3, &ca, sizeof(ca));
	if (pid == 0)
		_exit(0);
	if (pid > 0)
		waitpid((pid_t)pid, NULL, 0);
	report("clone3-newuser", pid, errno, NULL);
	TRY("clone-newuser", raw_clone_newuser(), NULL);
	TRY("setns-init-user", setns(open("/proc/1/ns/user", O_RDONLY | O_CLOEXEC), 0), NULL);
	errno = 0;
	long rc = unshare(CLONE_NEWUSER | CLONE_NEWNS);
	report("unshare-newuser", rc, errno, NULL);
	if (rc == 0) {
		try_mounts("nested-");
		/* unshare [RO_BIND]: a read-only bind must stay read-only. */
		if (argc > 0)
			TRY("nested-remount-bind-rw",
			    mount(NULL, argv[0], NULL, MS_REMOUNT | MS_BIND, NULL), argv[0]);
	}
	return 0;
}

/* ---- kernel facilities ---------------------------------------------- */

/* keyctl [DESCRIPTION]: the key's description, unique per test run. */
static int cmd_keyctl(int argc, char **argv)
{
	const char *desc = argc > 0 ? argv[0] : "kiwi-attack";
	/* A fresh session keyring first: a key must never land in the
	 * caller's own session keyring, even when the control succeeds. */
	errno = 0;
	long kr = syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, NULL);
	report("join-session-keyring", kr, errno, NULL);
	if (kr >= 0)
		TRY("add-key", syscall(SYS_add_key, "user", desc, "x", 1, KEY_SPEC_SESSION_KEYRING), NULL);
	TRY("request-key", syscall(SYS_request_key, "user", "kiwi-attack-none", NULL, 0), NULL);
	TRY("keyctl-read-user", syscall(SYS_keyctl, KEYCTL_DESCRIBE, KEY_SPEC_USER_KEYRING, NULL, 0), NULL);
	return 0;
}

static int cmd_bpf(void)
{
	union bpf_attr attr;
	memset(&attr, 0, sizeof(attr));
	attr.map_type = BPF_MAP_TYPE_ARRAY;
	attr.key_size = 4;
	attr.value_size = 4;
	attr.max_entries = 1;
	report_fd("bpf-map-create", (int)syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof(attr)), NULL);
	struct bpf_insn prog[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	memset(&attr, 0, sizeof(attr));
	attr.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
	attr.insns = (uintptr_t)prog;
	attr.insn_cnt = 2;
	attr.license = (uintptr_t)"GPL";
	report_fd("bpf-prog-load", (int)syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof(attr)), NULL);
	return 0;
}

static int cmd_userfaultfd(void)
{
	report_fd("userfaultfd", (int)syscall(SYS_userfaultfd, O_CLOEXEC), NULL);
	/* Allowed without privilege where vm.unprivileged_userfaultfd is 0. */
	report_fd("userfaultfd-user-mode", (int)syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY), NULL);
	report_fd("open-dev-userfaultfd", open("/dev/userfaultfd", O_RDWR | O_CLOEXEC), NULL);
	return 0;
}

static int cmd_io_uring(void)
{
	struct io_uring_params p;
	memset(&p, 0, sizeof(p));
	report_fd("io-uring-setup", (int)syscall(SYS_io_uring_setup, 4, &p), NULL);
	return 0;
}

static int cmd_perf(void)
{
	struct perf_event_attr a;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_TASK_CLOCK;
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	report_fd("perf-self", (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0), NULL);
	a.type = PERF_TYPE_HARDWARE;
	a.config = PERF_COUNT_HW_CPU_CYCLES;
	report_fd("perf-cpu-wide", (int)syscall(SYS_perf_event_open, &a, -1, 0, -1, 0), NULL);
	return 0;
}

/* Shocker (2014): file handles are looked up without a path, so a handle
 * for the host's root directory opens it from any mount of the same
 * filesystem. */
static int cmd_handle(void)
{
	struct { struct file_handle fh; unsigned char buf[128]; } h;
	h.fh.handle_bytes = sizeof(h.buf);
	int mnt = 0;
	errno = 0;
	long rc = syscall(SYS_name_to_handle_at, AT_FDCWD, "/", &h.fh, &mnt, 0);
	report("name-to-handle-root", rc, errno, NULL);
	/* The root is an overlay, which gives no handles at all; /tmp's
	 * tmpfs does, so the control without seccomp has a call to see. */
	h.fh.handle_bytes = sizeof(h.buf);
	errno = 0;
	long tmp_rc = syscall(SYS_name_to_handle_at, AT_FDCWD, "/tmp", &h.fh, &mnt, 0);
	report("name-to-handle-tmp", tmp_rc, errno, NULL);
	int rootfd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rc == 0)
		report_fd("open-by-handle-root", (int)syscall(SYS_open_by_handle_at, rootfd, &h.fh, O_RDONLY), NULL);
	/* ext4's root directory: inode 2, generation 0 (FILEID_INO32_GEN). */
	struct { struct file_handle fh; uint32_t ino_gen[2]; } guess = {
		.fh = { .handle_bytes = 8, .handle_type = 1 }, .ino_gen = { 2, 0 },
	};
	report_fd("open-by-handle-guess", (int)syscall(SYS_open_by_handle_at, rootfd, &guess.fh, O_RDONLY), NULL);
	close(rootfd);
	return 0;
}

static int cmd_module(void)
{
	static const char image[64];
	TRY("init-module", syscall(SYS_init_module, image, sizeof(image), ""), NULL);
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	TRY("finit-module", syscall(SYS_finit_module, fd, "", 0), NULL);
	close(fd);
	TRY("delete-module", syscall(SYS_delete_module, "kiwi_none", O_NONBLOCK), NULL);
	return 0;
}

static int cmd_sockets(void)
{
	report_fd("raw-icmp", socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP), NULL);
	report_fd("raw-ipv6", socket(AF_INET6, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMPV6), NULL);
	report_fd("packet-raw", socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL)), NULL);
	report_fd("packet-dgram", socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, htons(ETH_P_ALL)), NULL);
	return 0;
}

/* reach-host ABSTRACT_NAME PORT: a unix socket in the host's abstract
 * namespace (containerd CVE-2020-15257) and a TCP listener on the host's
 * loopback, both opened by the test. */
static int cmd_reach_host(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	size_t len = strlen(argv[0]);
	if (len + 1 > sizeof(un.sun_path))
		return 2;
	memcpy(un.sun_path + 1, argv[0], len);  /* sun_path[0] == 0: abstract */
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	TRY("abstract-unix", connect(fd, (struct sockaddr *)&un,
				     (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len)), argv[0]);
	close(fd);
	struct sockaddr_in in = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])),
				  .sin_addr = { htonl(INADDR_LOOPBACK) } };
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	TRY("tcp-loopback", connect(fd, (struct sockaddr *)&in, sizeof(in)), argv[1]);
	close(fd);
	return 0;
}

/* devices DIR: device nodes for the host's memory and first disk. */
static int cmd_devices(int argc, char **argv)
{
	if (argc < 1)
		return 2;
	static const struct { const char *name; mode_t type; unsigned maj, min; } nodes[] = {
		{ "mem", S_IFCHR, 1, 1 }, { "kmsg", S_IFCHR, 1, 11 }, { "sda", S_IFBLK, 8, 0 },
		{ "vda", S_IFBLK, 253, 0 },
	};
	char path[256], step[64];
	for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
		snprintf(path, sizeof(path), "%s/kiwi-%s", argv[0], nodes[i].name);
		snprintf(step, sizeof(step), "mknod-%s", nodes[i].name);
		TRY(step, mknod(path, nodes[i].type | 0600, makedev(nodes[i].maj, nodes[i].min)), path);
		snprintf(step, sizeof(step), "open-%s", nodes[i].name);
		report_fd(step, open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC), path);
	}
	return 0;
}

/* ---- procfs --------------------------------------------------------- */

/* Opens for writing only: a success is the hole, and nothing is written. */
static int cmd_proc_write(void)
{
	static const char *const paths[] = {
		"/proc/sysrq-trigger", "/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe",
		"/proc/sys/vm/drop_caches", "/sys/kernel/uevent_helper", "/proc/sys/kernel/hostname",
		"/sys/power/state", "/sys/kernel/mm/transparent_hugepage/enabled",
	};
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		report_fd(paths[i], open(paths[i], O_WRONLY | O_CLOEXEC), NULL);
	return 0;
}

/* ok: bytes came out (the mask failed); the note holds how many. */
static int cmd_proc_read(void)
{
	static const char *const paths[] = {
		"/proc/kcore", "/proc/kmsg", "/proc/keys", "/proc/timer_list", "/proc/sched_debug",
		"/proc/kpageflags", "/sys/firmware", "/sys/devices/virtual/powercap", "/proc/asound",
		/* root-only (0400): kernel heap and memory layout, the raw
		 * material of kernel exploits */
		"/proc/slabinfo", "/proc/vmallocinfo", "/proc/pagetypeinfo",
	};
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		int fd = open(paths[i], O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0) {
			report(paths[i], -1, errno, "open");
			continue;
		}
		char buf[4096], note[32];
		struct stat st;
		fstat(fd, &st);
		ssize_t n = S_ISDIR(st.st_mode) ? (ssize_t)syscall(SYS_getdents64, fd, buf, sizeof(buf)) - 48
						: read(fd, buf, sizeof(buf));
		int e = errno;
		close(fd);
		snprintf(note, sizeof(note), "%zd", n);
		/* an empty directory still has "." and ".." (48 bytes of dirents) */
		report(paths[i], n > 0 ? 0 : -1, n < 0 ? e : ENODATA, note);
	}
	return 0;
}

/* ---- kiwi-run's own binary and the fds of others -------------------- */

static void try_exe(const char *pid)
{
	char path[64], step[96], target[256] = "";
	snprintf(path, sizeof(path), "/proc/%s/exe", pid);
	ssize_t n = readlink(path, target, sizeof(target) - 1);
	target[n > 0 ? n : 0] = '\0';
	snprintf(step, sizeof(step), "exe-%s-path", pid);
	int opath = open(path, O_PATH | O_CLOEXEC);
	report(step, opath, errno, target);
	snprintf(step, sizeof(step), "exe-%s-write", pid);
	report_fd(step, open(path, O_WRONLY | O_CLOEXEC), target);
	if (opath >= 0) {
		/* CVE-2019-5736: keep the handle, reopen it for writing. */
		char again[64];
		snprintf(again, sizeof(again), "/proc/self/fd/%d", opath);
		snprintf(step, sizeof(step), "exe-%s-reopen-write", pid);
		report_fd(step, open(again, O_WRONLY | O_CLOEXEC), target);
		close(opath);
	}
	static const char *const others[] = { "root", "cwd" };
	for (size_t i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "/proc/%s/%s", pid, others[i]);
		n = readlink(path, target, sizeof(target) - 1);
		target[n > 0 ? n : 0] = '\0';
		snprintf(step, sizeof(step), "%s-%s", others[i], pid);
		report_fd(step, open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC), target);
	}
}

/* Every process this one can see, its exe, root and cwd. */
static int cmd_exe(void)
{
	pid_t child = fork();  /* a sibling process that is not us */
	if (child == 0) {
		execl("/bin/sleep", "sleep", "5", (char *)NULL);
		_exit(127);
	}
	usleep(50000);
	DIR *d = opendir("/proc");
	for (struct dirent *e; d && (e = readdir(d));)
		if (e->d_name[0] >= '1' && e->d_name[0] <= '9')
			try_exe(e->d_name);
	if (d)
		closedir(d);
	try_exe("self");
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	return 0;
}

/* Reads up to len-1 bytes through fd (a file, or "secret" below a
 * directory) into note. */
static void peek(int fd, char *note, size_t len)
{
	struct stat st;
	note[0] = '\0';
	if (fstat(fd, &st) < 0)
		return;
	int rfd = S_ISDIR(st.st_mode) ? openat(fd, "secret", O_RDONLY | O_CLOEXEC) : dup(fd);
	if (rfd < 0)
		return;
	ssize_t n = pread(rfd, note, len - 1, 0);
	if (n < 0 && errno == ESPIPE)
		n = read(rfd, note, len - 1);
	note[n > 0 ? n : 0] = '\0';
	close(rfd);
}

/* Every fd above 2 this process holds, and pid 1's. */
static int cmd_fds(void)
{
	char step[64], note[64], path[64];
	for (int fd = 3; fd < 4096; fd++) {
		if (fcntl(fd, F_GETFD) < 0)
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		ssize_t n = readlink(path, note, sizeof(note) - 1);
		note[n > 0 ? n : 0] = '\0';
		snprintf(step, sizeof(step), "own-fd-%d", fd);
		report(step, 0, 0, note);
		peek(fd, note, sizeof(note));
		snprintf(step, sizeof(step), "own-fd-%d-content", fd);
		report(step, 0, 0, note);
	}
	DIR *d = opendir("/proc/1/fd");
	report("list-init-fds", d ? 0 : -1, errno, NULL);
	if (d)
		closedir(d);
	for (int fd = 0; fd < 64; fd++) {
		snprintf(path, sizeof(path), "/proc/1/fd/%d", fd);
		int f = open(path, O_RDONLY | O_CLOEXEC);
		if (f < 0 && (errno == ENOENT || fd > 8))
			continue;  /* most numbers simply are not open */
		snprintf(step, sizeof(step), "init-fd-%d", fd);
		note[0] = '\0';
		if (f >= 0)
			peek(f, note, sizeof(note));
		report_fd(step, f, note);
	}
	return 0;
}

static int cmd_cwd(void)
{
	char buf[4096];
	report("getcwd", getcwd(buf, sizeof(buf)) ? 0 : -1, errno, buf);
	int fd = open("secret", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	buf[n > 0 ? n : 0] = '\0';
	report("read-secret-here", fd, errno, buf);
	if (fd >= 0)
		close(fd);
	fd = open("passwd", O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	buf[n > 0 ? n : 0] = '\0';
	report("read-passwd-here", fd, errno, buf);
	if (fd >= 0)
		close(fd);
	return 0;
}

/* ---- privileges ----------------------------------------------------- */

static void status_field(const char *name, char *out, size_t len)
{
	char line[256];
	out[0] = '\0';
	FILE *f = fopen("/proc/self/status", "re");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, name, strlen(name)) && line[strlen(name)] == ':') {
			snprintf(out, len, "%s", line + strlen(name) + 1 + strspn(line + strlen(name) + 1, " \t"));
			out[strcspn(out, "\n")] = '\0';
		}
	if (f)
		fclose(f);
}

/* What this process holds: uids and capability sets. */
static int cmd_whoami(void)
{
	static const char *const fields[] = { "Uid", "Gid", "CapInh", "CapPrm", "CapEff", "CapBnd",
					      "CapAmb", "NoNewPrivs", "Seccomp" };
	char v[128];
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		status_field(fields[i], v, sizeof(v));
		report(fields[i], 0, 0, v);
	}
	return 0;
}

static long copy_self(const char *dest)
{
	int in = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	int out = open(dest, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	long rc = in < 0 || out < 0 ? -1 : 0;
	char buf[65536];
	ssize_t n;
	while (rc == 0 && (n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			rc = -1;
	int e = errno;
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	errno = e;
	return rc;
}

/* suid DIR: a copy of this program in DIR, made setuid-root and given
 * every file capability, then run: its whoami lines follow, prefixed. */
static int cmd_suid(int argc, char **argv)
{
	if (argc < 1)
		return 2;
	char path[256];
	snprintf(path, sizeof(path), "%s/kiwi-attack-suid", argv[0]);
	TRY("copy", copy_self(path), path);
	TRY("chown-root", chown(path, 0, 0), NULL);
	TRY("chmod-4755", chmod(path, 04755), NULL);
	struct vfs_ns_cap_data cap = { .magic_etc = VFS_CAP_REVISION_3 | VFS_CAP_FLAGS_EFFECTIVE };
	for (int i = 0; i < VFS_CAP_U32; i++)
		cap.data[i].permitted = 0xffffffffu;
	TRY("setxattr-capability", setxattr(path, "security.capability", &cap, sizeof(cap), 0), NULL);
	struct stat st;
	if (stat(path, &st) == 0) {
		char mode[16];
		snprintf(mode, sizeof(mode), "%o", st.st_mode & 07777);
		report("mode", 0, 0, mode);
	}
	pid_t pid = fork();
	if (pid == 0) {
		execl(path, "kiwi-attack", "whoami", (char *)NULL);
		report("exec", -1, errno, path);
		_exit(127);
	}
	int status = 0;
	waitpid(pid, &status, 0);
	return 0;
}

/* ---- the read-only root ---------------------------------------------- */

static int cmd_ro_root(void)
{
	report_fd("create-file", open("/kiwi-attack-file", O_WRONLY | O_CREAT | O_CLOEXEC, 0644), NULL);
	report_fd("append-passwd", open("/etc/passwd", O_WRONLY | O_APPEND | O_CLOEXEC), NULL);
	report_fd("write-busybox", open("/bin/busybox", O_WRONLY | O_CLOEXEC), NULL);
	TRY("mkdir", mkdir("/kiwi-attack-dir", 0755), NULL);
	TRY("symlink", symlink("/etc", "/kiwi-attack-link"), NULL);
	TRY("unlink-hosts", unlink("/etc/hosts"), NULL);
	TRY("rename-group", rename("/etc/group", "/etc/group.kiwi"), NULL);
	TRY("chmod-passwd", chmod("/etc/passwd", 0666), NULL);
	TRY("truncate-passwd", truncate("/etc/passwd", 0), NULL);
	TRY("utimes-root", utimensat(AT_FDCWD, "/", NULL, 0), NULL);
	TRY("remount-rw", mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND, NULL), NULL);
	struct mount_attr a = { .attr_clr = MOUNT_ATTR_RDONLY };
	TRY("mount-setattr-rw", syscall(SYS_mount_setattr, AT_FDCWD, "/", 0, &a, sizeof(a)), NULL);
	return 0;
}

/* ---- other syscall entry points ------------------------------------- */

static long int80(long nr, long a, long b)
{
	long ret;
	__asm__ volatile("int $0x80" : "=a"(ret) : "a"(nr), "b"(a), "c"(b) : "memory", "r8", "r9", "r10", "r11");
	return ret;
}

/* Runs one raw call in a child, because a filter may kill the caller:
 * the note says "signal N" or "returned R". ok when it returned >= 0. */
static void entry_point(const char *step, bool i386, long nr, long a, long b)
{
	int p[2];
	if (pipe(p) < 0)
		return;
	pid_t pid = fork();
	if (pid == 0) {
		long r = i386 ? int80(nr, a, b) : syscall(nr, a, b);
		if (!i386 && r < 0)
			r = -errno;
		(void)!write(p[1], &r, sizeof(r));
		_exit(0);
	}
	close(p[1]);
	long r = 0;
	ssize_t n = read(p[0], &r, sizeof(r));
	close(p[0]);
	int status = 0;
	waitpid(pid, &status, 0);
	char note[64];
	if (WIFSIGNALED(status)) {
		snprintf(note, sizeof(note), "signal %d", WTERMSIG(status));
		report(step, -1, 0, note);
		return;
	}
	snprintf(note, sizeof(note), "returned %ld", n == sizeof(r) ? r : -9999);
	report(step, n == sizeof(r) && r >= 0 ? 0 : -1, n == sizeof(r) && r < 0 ? (int)-r : 0, note);
}

/* i386 numbers (arch/x86/entry/syscalls/syscall_32.tbl) and x32 ones
 * (the x86-64 table with bit 30 set; x32 has its own numbers from 512). */
static int cmd_compat(void)
{
	entry_point("i386-getpid", true, 20, 0, 0);
	entry_point("i386-unshare-newuser", true, 310, CLONE_NEWUSER, 0);
	entry_point("i386-keyctl-join", true, 288, KEYCTL_JOIN_SESSION_KEYRING, 0);
	entry_point("i386-ptrace-init", true, 26, PTRACE_ATTACH, 1);
	entry_point("x32-getpid", false, X32_BIT | SYS_getpid, 0, 0);
	entry_point("x32-unshare-newuser", false, X32_BIT | SYS_unshare, CLONE_NEWUSER, 0);
	entry_point("x32-keyctl-join", false, X32_BIT | SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, 0);
	entry_point("x86_64-getpid", false, SYS_getpid, 0, 0);
	return 0;
}

/* ---- host-side helpers (run by the tests outside any sandbox) ------- */

/* swap DIR A B SECONDS: exchanges DIR/A and DIR/B (a directory and a
 * symlink) as fast as it can, for SECONDS. */
static int cmd_swap(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	int dfd = open(argv[0], O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return 1;
	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	long swaps = 0;
	do {
		for (int i = 0; i < 1000; i++)
			if (syscall(SYS_renameat2, dfd, argv[1], dfd, argv[2], RENAME_EXCHANGE) == 0)
				swaps++;
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (now.tv_sec - start.tv_sec < atol(argv[3]));
	printf("%ld\n", swaps);
	return 0;
}

/* inode PATH...: each path's type and numbers ("c 1:3", "f 0:0"), then
 * its inode's metadata changed to what it already is (so that a success
 * harms nothing, but still moves ctime): chmod, chown and utime. For
 * device nodes and masks, which are the host's inodes, each must fail. */
static int cmd_inode(int argc, char **argv)
{
	for (int i = 0; i < argc; i++) {
		char step[300];
		struct stat st;
		if (stat(argv[i], &st) < 0) {
			snprintf(step, sizeof(step), "%s stat", argv[i]);
			report(step, -1, errno, NULL);
			continue;
		}
		char note[64];
		snprintf(note, sizeof(note), "%s %u:%u", S_ISCHR(st.st_mode) ? "c" : S_ISREG(st.st_mode) ? "f" : "other",
			 major(st.st_rdev), minor(st.st_rdev));
		snprintf(step, sizeof(step), "%s stat", argv[i]);
		report(step, 0, 0, note);
		snprintf(step, sizeof(step), "%s chmod", argv[i]);
		TRY(step, chmod(argv[i], st.st_mode & 07777), NULL);
		snprintf(step, sizeof(step), "%s chown", argv[i]);
		TRY(step, chown(argv[i], st.st_uid, st.st_gid), NULL);
		snprintf(step, sizeof(step), "%s utime", argv[i]);
		struct timespec times[2] = { st.st_atim, st.st_mtim };
		TRY(step, utimensat(AT_FDCWD, argv[i], times, 0), NULL);
	}
	return 0;
}

/* pid 1's command line, read before main(): what the command could see
 * at its first instruction. */
static char first_cmdline[4096];
static ssize_t first_cmdline_len = -1;

__attribute__((constructor)) static void read_first_cmdline(void)
{
	int fd = open("/proc/1/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		first_cmdline_len = read(fd, first_cmdline, sizeof(first_cmdline) - 1);
		close(fd);
	}
}

/* cmdline: pid 1's arguments as read before main(), NULs shown as spaces. */
static int cmd_cmdline(void)
{
	for (ssize_t i = 0; i < first_cmdline_len; i++)
		if (!first_cmdline[i])
			first_cmdline[i] = ' ';
	report("pid1-cmdline", first_cmdline_len, errno, first_cmdline);
	return 0;
}

/* create PATH...: creates each path; under --landlock the ones
 * outside the allowed set must fail with EACCES. */
static int cmd_create(int argc, char **argv)
{
	for (int i = 0; i < argc; i++)
		report_fd(argv[i], open(argv[i], O_WRONLY | O_CREAT | O_CLOEXEC, 0644), NULL);
	return 0;
}

/* forge-seccomp-cache DIR: rewrites every program in kiwi-run's filter
 * cache (bound here writable) to RET ALLOW, keeping everything else, as a
 * sandbox given the caller's $HOME could. The layout: a 16-byte magic,
 * then env_len, text_len, flags, n_insns (u32 each), the environment,
 * the profile text, the instructions. */
static int cmd_forge_seccomp_cache(int argc, char **argv)
{
	DIR *d = argc == 1 ? opendir(argv[0]) : NULL;
	for (struct dirent *e; d && (e = readdir(d));) {
		size_t n = strlen(e->d_name);
		if (n < 4 || strcmp(e->d_name + n - 4, ".bpf"))
			continue;
		int fd = openat(dirfd(d), e->d_name, O_RDWR | O_CLOEXEC);
		uint32_t h[4];
		long rc = fd >= 0 && pread(fd, h, sizeof(h), 16) == (ssize_t)sizeof(h) ? 0 : -1;
		off_t at = 16 + (off_t)sizeof(h) + h[0] + h[1];
		struct { uint16_t code; uint8_t jt, jf; uint32_t k; } allow = { 0x06, 0, 0, 0x7fff0000 };
		for (uint32_t i = 0; rc == 0 && i < h[3]; i++)
			if (pwrite(fd, &allow, sizeof(allow), at + (off_t)(i * sizeof(allow))) != (ssize_t)sizeof(allow))
				rc = -1;
		report(e->d_name, rc, errno, NULL);
		if (fd >= 0)
			close(fd);
	}
	if (d)
		closedir(d);
	return 0;
}

struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
	int (*fn0)(void);
};

static const struct command commands[] = {
	{ "tiocsti", NULL, cmd_tiocsti },   { "ptrace", cmd_ptrace, NULL },
	{ "mount", NULL, cmd_mount },       { "unshare", cmd_unshare, NULL },
	{ "keyctl", cmd_keyctl, NULL },     { "bpf", NULL, cmd_bpf },
	{ "userfaultfd", NULL, cmd_userfaultfd }, { "io_uring", NULL, cmd_io_uring },
	{ "perf", NULL, cmd_perf },         { "handle", NULL, cmd_handle },
	{ "module", NULL, cmd_module },     { "sockets", NULL, cmd_sockets },
	{ "proc-write", NULL, cmd_proc_write }, { "proc-read", NULL, cmd_proc_read },
	{ "exe", NULL, cmd_exe },           { "fds", NULL, cmd_fds },
	{ "cwd", NULL, cmd_cwd },           { "whoami", NULL, cmd_whoami },
	{ "suid", cmd_suid, NULL },         { "ro-root", NULL, cmd_ro_root },
	{ "compat", NULL, cmd_compat },     { "swap", cmd_swap, NULL },
	{ "create", cmd_create, NULL },     { "reach-host", cmd_reach_host, NULL },
	{ "devices", cmd_devices, NULL },   { "inode", cmd_inode, NULL },
	{ "cmdline", NULL, cmd_cmdline },
	{ "forge-seccomp-cache", cmd_forge_seccomp_cache, NULL },
};

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: kiwi-attack ATTACK [ARG...]\n");
		return 2;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].fn ? commands[i].fn(argc - 2, argv + 2) : commands[i].fn0();
	fprintf(stderr, "kiwi-attack: unknown attack `%s`\n", argv[1]);
	return 2;
}
