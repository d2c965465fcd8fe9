/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-probe: a small static program the integration tests run *inside* a
 * sandbox (the role crun's tests/init.c plays). Each subcommand looks at one
 * property of the sandbox from the inside and prints it, mostly as one JSON
 * value on stdout, so the tests can assert on what the kernel really shows
 * rather than on what kiwi-run says it did.
 *
 * Linked statically: the busybox rootfs has no libc. Exit status 0 means the
 * probe ran (the JSON says what it found); 2 is a usage error; 3 a failure of
 * the probe itself (a message on stderr). */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <net/if.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>
/* after netinet/in.h, which tells linux/in.h what it already defined */
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>

extern char **environ;

#define PROBE_FAIL 3
#define PROBE_USAGE 2

static int fail(const char *what)
{
	fprintf(stderr, "kiwi-probe: %s: %s\n", what, strerror(errno));
	return PROBE_FAIL;
}

/* ---- JSON output: strings are escaped byte by byte, nothing else needed. */

static void json_str(const char *s)
{
	putchar('"');
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p < 0x20 || *p >= 0x7f)
			printf("\\u%04x", *p);
		else
			putchar(*p);
	}
	putchar('"');
}

/* Prints `"key": ` with a leading comma for every key but the first. */
static void json_key(const char *key, bool *first)
{
	if (!*first)
		fputs(", ", stdout);
	*first = false;
	json_str(key);
	fputs(": ", stdout);
}

static void json_errno_result(bool ok, int errnum)
{
	printf("{\"ok\": %s, \"errno\": %d, \"error\": ", ok ? "true" : "false", ok ? 0 : errnum);
	json_str(ok ? "" : strerror(errnum));
	puts("}");
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* ---- directory listings ------------------------------------------------ */

typedef bool (*name_filter)(const char *name);

static bool is_numeric(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!isdigit((unsigned char)*s))
			return false;
	return true;
}

static bool not_dot(const char *name)
{
	return strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

/* Prints the names in DIR as a JSON array, numbers unquoted when `numeric`.
 * `skip_fd` is left out (the fd of the listing itself, for /proc/self/fd). */
static int list_dir(const char *path, name_filter keep, bool numeric, int skip_fd)
{
	DIR *d = opendir(path);
	if (!d)
		return fail(path);
	int own = dirfd(d);
	bool first = true;
	putchar('[');
	for (struct dirent *e; (e = readdir(d));) {
		if (!keep(e->d_name))
			continue;
		if (skip_fd >= 0 && atoi(e->d_name) == own)
			continue;
		fputs(first ? "" : ", ", stdout);
		first = false;
		if (numeric)
			fputs(e->d_name, stdout);
		else
			json_str(e->d_name);
	}
	puts("]");
	closedir(d);
	return 0;
}

static int cmd_fds(int argc, char **argv)
{
	(void)argc, (void)argv;
	return list_dir("/proc/self/fd", is_numeric, true, 1);
}

static int cmd_pids(int argc, char **argv)
{
	(void)argc, (void)argv;
	return list_dir("/proc", is_numeric, true, -1);
}

static int cmd_ls(int argc, char **argv)
{
	if (argc < 1)
		return PROBE_USAGE;
	return list_dir(argv[0], not_dot, false, -1);
}

/* ---- process state ----------------------------------------------------- */

/* The /proc/self/status fields the tests assert on, plus who we are; with
 * PID, the fields of /proc/PID/status alone. */
static int cmd_status(int argc, char **argv)
{
	static const char *const wanted[] = {
		"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb",
		"NoNewPrivs", "Seccomp", "Uid", "Gid", "Groups", "NSpid", "SigBlk", "SigIgn",
	};
	char path[64] = "/proc/self/status";
	if (argc > 0)
		snprintf(path, sizeof path, "/proc/%d/status", atoi(argv[0]));
	FILE *f = fopen(path, "re");
	if (!f)
		return fail(path);
	bool first = true;
	putchar('{');
	char line[512];
	while (fgets(line, sizeof line, f)) {
		char *colon = strchr(line, ':');
		if (!colon)
			continue;
		*colon = '\0';
		for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++) {
			if (strcmp(line, wanted[i]) != 0)
				continue;
			char *v = colon + 1;
			v += strspn(v, " \t");
			v[strcspn(v, "\n")] = '\0';
			json_key(line, &first);
			json_str(v);
		}
	}
	fclose(f);
	if (argc > 0) {
		puts("}");
		return 0;
	}
	json_key("pid", &first);
	printf("%d", (int)getpid());
	json_key("ppid", &first);
	printf("%d", (int)getppid());
	json_key("sid", &first);
	printf("%d", (int)getsid(0));
	json_key("euid", &first);
	printf("%d", (int)geteuid());
	json_key("egid", &first);
	printf("%d", (int)getegid());
	json_key("dumpable", &first);
	printf("%d", prctl(PR_GET_DUMPABLE, 0, 0, 0, 0));
	puts("}");
	return 0;
}

static int cmd_env(int argc, char **argv)
{
	(void)argc, (void)argv;
	putchar('[');
	for (char **e = environ; *e; e++) {
		fputs(e == environ ? "" : ", ", stdout);
		json_str(*e);
	}
	puts("]");
	return 0;
}

static int cmd_cat_file(const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return fail(path);
	char buf[4096];
	size_t n;
	while ((n = fread(buf, 1, sizeof buf, f)) > 0)
		fwrite(buf, 1, n, stdout);
	fclose(f);
	return 0;
}

static int cmd_mounts(int argc, char **argv)
{
	(void)argc, (void)argv;
	return cmd_cat_file("/proc/self/mountinfo");
}

static int cmd_hostname(int argc, char **argv)
{
	struct utsname u;
	(void)argc, (void)argv;
	if (uname(&u) < 0)
		return fail("uname");
	puts(u.nodename);
	return 0;
}

static int cmd_cwd(int argc, char **argv)
{
	char buf[4096];
	(void)argc, (void)argv;
	if (!getcwd(buf, sizeof buf))
		return fail("getcwd");
	puts(buf);
	return 0;
}

/* Interfaces from /proc/net/dev, each with its IFF_UP / IFF_RUNNING flags
 * read through SIOCGIFFLAGS: {"lo": {"up": true, "running": true}}. */
static int cmd_netdevs(int argc, char **argv)
{
	(void)argc, (void)argv;
	FILE *f = fopen("/proc/net/dev", "re");
	if (!f)
		return fail("/proc/net/dev");
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0) {
		fclose(f);
		return fail("socket");
	}
	char line[512];
	bool first = true;
	putchar('{');
	while (fgets(line, sizeof line, f)) {
		char *colon = strchr(line, ':');
		if (!colon)
			continue; /* the two header lines */
		*colon = '\0';
		char *name = line + strspn(line, " ");
		struct ifreq ifr = {0};
		snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", name);
		int flags = ioctl(s, SIOCGIFFLAGS, &ifr) < 0 ? 0 : ifr.ifr_flags;
		json_key(name, &first);
		printf("{\"up\": %s, \"running\": %s}", (flags & IFF_UP) ? "true" : "false",
		       (flags & IFF_RUNNING) ? "true" : "false");
	}
	puts("}");
	close(s);
	fclose(f);
	return 0;
}

/* A TCP round trip over 127.0.0.1: lo is not only present but up. */
static int cmd_loopback(int argc, char **argv)
{
	(void)argc, (void)argv;
	struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof addr;
	int srv = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int cli = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char buf[8] = "";
	int acc = -1;
	bool ok = srv >= 0 && cli >= 0 && bind(srv, (struct sockaddr *)&addr, len) == 0 &&
		  listen(srv, 1) == 0 && getsockname(srv, (struct sockaddr *)&addr, &len) == 0 &&
		  connect(cli, (struct sockaddr *)&addr, len) == 0 &&
		  (acc = accept4(srv, NULL, NULL, SOCK_CLOEXEC)) >= 0 && write(cli, "ping", 4) == 4 &&
		  read(acc, buf, sizeof buf - 1) == 4 && strcmp(buf, "ping") == 0;
	json_errno_result(ok, errno);
	return 0;
}

/* ---- files ------------------------------------------------------------- */

/* Tries to create and write PATH; reports the errno instead of failing. */
static int cmd_write(int argc, char **argv)
{
	if (argc < 1)
		return PROBE_USAGE;
	const char *data = argc > 1 ? argv[1] : "kiwi-probe\n";
	int fd = open(argv[0], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		json_errno_result(false, errno);
		return 0;
	}
	ssize_t n = write(fd, data, strlen(data));
	int err = errno;
	if (close(fd) < 0 && n >= 0) {
		n = -1;
		err = errno;
	}
	json_errno_result(n == (ssize_t)strlen(data), err);
	return 0;
}

/* Opens PATH for writing and closes it again without writing a byte: safe
 * to aim at files whose writes act on the host (/proc/sysrq-trigger). */
static int cmd_open_w(int argc, char **argv)
{
	if (argc < 1)
		return PROBE_USAGE;
	int fd = open(argv[0], O_WRONLY | O_CLOEXEC | O_NOCTTY);
	json_errno_result(fd >= 0, errno);
	if (fd >= 0)
		close(fd);
	return 0;
}

/* Reads up to N bytes from PATH (default 16); reports how many came. */
static int cmd_read(int argc, char **argv)
{
	if (argc < 1)
		return PROBE_USAGE;
	long want = argc > 1 ? atol(argv[1]) : 16;
	char buf[4096];
	if (want < 0 || want > (long)sizeof buf)
		return PROBE_USAGE;
	int fd = open(argv[0], O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		json_errno_result(false, errno);
		return 0;
	}
	ssize_t n = read(fd, buf, (size_t)want);
	int err = errno;
	close(fd);
	printf("{\"ok\": %s, \"errno\": %d, \"bytes\": %zd}\n", n >= 0 ? "true" : "false",
	       n >= 0 ? 0 : err, n);
	return 0;
}

static const char *file_type(mode_t m)
{
	switch (m & S_IFMT) {
	case S_IFREG: return "file";
	case S_IFDIR: return "dir";
	case S_IFLNK: return "symlink";
	case S_IFCHR: return "char";
	case S_IFBLK: return "block";
	case S_IFIFO: return "fifo";
	case S_IFSOCK: return "socket";
	default: return "unknown";
	}
}

/* lstat(PATH): {"exists", "type", "mode", "major", "minor", "uid", "gid",
 * "target" (symlinks)}. */
static int cmd_stat(int argc, char **argv)
{
	struct stat st;
	if (argc < 1)
		return PROBE_USAGE;
	if (lstat(argv[0], &st) < 0) {
		printf("{\"exists\": false, \"errno\": %d}\n", errno);
		return 0;
	}
	printf("{\"exists\": true, \"type\": \"%s\", \"mode\": %u, \"major\": %u, "
	       "\"minor\": %u, \"uid\": %u, \"gid\": %u",
	       file_type(st.st_mode), (unsigned)(st.st_mode & 07777), major(st.st_rdev),
	       minor(st.st_rdev), (unsigned)st.st_uid, (unsigned)st.st_gid);
	if (S_ISLNK(st.st_mode)) {
		char target[4096];
		ssize_t n = readlink(argv[0], target, sizeof target - 1);
		target[n < 0 ? 0 : n] = '\0';
		fputs(", \"target\": ", stdout);
		json_str(target);
	}
	puts("}");
	return 0;
}

/* Writes TEXT to an inherited fd N: proves a preserved fd is the caller's. */
static int cmd_write_fd(int argc, char **argv)
{
	if (argc < 2)
		return PROBE_USAGE;
	ssize_t n = write(atoi(argv[0]), argv[1], strlen(argv[1]));
	json_errno_result(n == (ssize_t)strlen(argv[1]), errno);
	return 0;
}

/* A new devpts instance numbers its first pty 0: a bind of the host's
 * /dev/pts would usually hand out another number and shows the host's ptys. */
static int cmd_pty(int argc, char **argv)
{
	(void)argc, (void)argv;
	int fd = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		json_errno_result(false, errno);
		return 0;
	}
	if (grantpt(fd) < 0 || unlockpt(fd) < 0)
		return fail("grantpt");
	const char *name = ptsname(fd);
	fputs("{\"ok\": true, \"ptsname\": ", stdout);
	json_str(name ? name : "");
	puts("}");
	close(fd);
	return 0;
}

/* ---- processes and signals --------------------------------------------- */

static int cmd_exit(int argc, char **argv)
{
	if (argc < 1)
		return PROBE_USAGE;
	fflush(stdout);
	_exit(atoi(argv[0]));
}

static int parse_signal(const char *s)
{
	static const struct { const char *name; int sig; } names[] = {
		{"HUP", SIGHUP}, {"INT", SIGINT}, {"QUIT", SIGQUIT}, {"KILL", SIGKILL},
		{"SEGV", SIGSEGV}, {"TERM", SIGTERM}, {"USR1", SIGUSR1},
		{"USR2", SIGUSR2}, {"ABRT", SIGABRT},
	};
	if (isdigit((unsigned char)*s))
		return atoi(s);
	if (strncmp(s, "SIG", 3) == 0)
		s += 3;
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (strcmp(s, names[i].name) == 0)
			return names[i].sig;
	return -1;
}

/* Kills itself with SIG at default disposition. As pid 2 (not the pid
 * namespace's init) even SIGTERM and SIGKILL must take effect. */
static int cmd_kill_self(int argc, char **argv)
{
	if (argc < 1)
		return PROBE_USAGE;
	int sig = parse_signal(argv[0]);
	if (sig <= 0)
		return PROBE_USAGE;
	signal(sig, SIG_DFL);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	fflush(stdout);
	kill(getpid(), sig);
	sleep_ms(2000);
	fprintf(stderr, "kiwi-probe: still alive after signal %d\n", sig);
	return PROBE_FAIL;
}

static int cmd_sleep(int argc, char **argv)
{
	if (argc < 1)
		return PROBE_USAGE;
	sleep_ms((long)(atof(argv[0]) * 1000));
	return 0;
}

/* Says "ready", then sleeps SECONDS with the signal mask and dispositions
 * it was given: a forwarded signal meets exactly what exec left. */
static int cmd_pause(int argc, char **argv)
{
	if (argc < 1)
		return PROBE_USAGE;
	puts("ready");
	fflush(stdout);
	return cmd_sleep(argc, argv);
}

/* Burns user CPU for MS milliseconds (of CPU time, not wall time). */
static int cmd_spin(int argc, char **argv)
{
	if (argc < 1)
		return PROBE_USAGE;
	long ms = atol(argv[0]);
	volatile unsigned long sink = 0;
	for (;;) {
		struct timespec ts;
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
		if (ts.tv_sec * 1000 + ts.tv_nsec / 1000000 >= ms)
			break;
		for (int i = 0; i < 100000; i++)
			sink += (unsigned long)i;
	}
	(void)sink;
	return 0;
}

/* Blocks the signals kiwi-run forwards, says "ready", then waits for one and
 * prints {"signal": N}. Exit 4 when none came within TIMEOUT seconds. */
static int cmd_wait_signal(int argc, char **argv)
{
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
	long timeout = argc > 0 ? atol(argv[0]) : 20;
	sigset_t set;
	sigemptyset(&set);
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
		sigaddset(&set, sigs[i]);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		return fail("sigprocmask");
	puts("ready");
	fflush(stdout);
	struct timespec ts = {timeout, 0};
	siginfo_t si;
	int sig;
	while ((sig = sigtimedwait(&set, &si, &ts)) < 0 && errno == EINTR)
		;
	if (sig < 0)
		return 4;
	printf("{\"signal\": %d, \"from_pid\": %d}\n", sig, (int)si.si_pid);
	return 0;
}

/* Rewrites FILE with a growing counter every 20 ms, forever; after the
 * first beat, sends its pid through ready_fd. */
static void heartbeat_forever(const char *file, int ready_fd)
{
	for (unsigned long beat = 1;; beat++) {
		int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd >= 0) {
			char buf[64];
			int n = snprintf(buf, sizeof buf, "%d %lu\n", (int)getpid(), beat);
			if (write(fd, buf, (size_t)n) < 0) {
				/* keep beating: a failed beat is visible as a stall */
			}
			close(fd);
		}
		if (ready_fd >= 0) {
			pid_t self = getpid();
			if (write(ready_fd, &self, sizeof self) < 0) {
				/* the parent gone early shows up as no heartbeat */
			}
			close(ready_fd);
			ready_fd = -1;
		}
		sleep_ms(20);
	}
}

/* Double fork + setsid: the grandchild is a daemon in its own session that
 * ignores the polite signals and keeps beating. The probe exits 0 only once
 * the first beat is written, so a test never passes on a daemon that never
 * ran. Prints {"daemon_pid": N, "pidns": "pid:[INODE]"}. */
static int cmd_daemonize(int argc, char **argv)
{
	if (argc < 1)
		return PROBE_USAGE;
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return fail("pipe2");
	pid_t child = fork();
	if (child < 0)
		return fail("fork");
	if (child == 0) {
		close(p[0]);
		setsid();
		pid_t grandchild = fork();
		if (grandchild != 0)
			_exit(grandchild < 0 ? 1 : 0);
		signal(SIGHUP, SIG_IGN);
		signal(SIGTERM, SIG_IGN);
		signal(SIGINT, SIG_IGN);
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
			dup2(null, 2);
		}
		heartbeat_forever(argv[0], p[1]);
	}
	close(p[1]);
	waitpid(child, NULL, 0);
	/* the first beat is written when the daemon's pid comes through */
	pid_t pid;
	if (read(p[0], &pid, sizeof pid) != (ssize_t)sizeof pid) {
		fprintf(stderr, "kiwi-probe: the daemon never beat\n");
		return PROBE_FAIL;
	}
	/* the pid namespace, by inode, so the host can look for survivors */
	char ns[64] = "";
	ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
	ns[n < 0 ? 0 : n] = '\0';
	printf("{\"daemon_pid\": %d, \"pidns\": ", pid);
	json_str(ns);
	puts("}");
	return 0;
}

/* Tries to attach to PID with ptrace (and detaches at once). The sandbox's
 * init holds the socket to kiwi-run: a command that could trace it could
 * forge its own verdict. */
static int cmd_ptrace(int argc, char **argv)
{
	if (argc < 1)
		return PROBE_USAGE;
	pid_t pid = atoi(argv[0]);
	long r = ptrace(PTRACE_SEIZE, pid, NULL, NULL);
	json_errno_result(r == 0, errno);
	if (r == 0)
		ptrace(PTRACE_DETACH, pid, NULL, NULL);
	return 0;
}

/* Counts zombies in /proc that are not our own children. */
static int count_foreign_zombies(void)
{
	DIR *d = opendir("/proc");
	if (!d)
		return -1;
	int zombies = 0;
	for (struct dirent *e; (e = readdir(d));) {
		if (!is_numeric(e->d_name))
			continue;
		char path[300], buf[512];
		snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		size_t n = fread(buf, 1, sizeof buf - 1, f);
		fclose(f);
		buf[n] = '\0';
		char *rp = strrchr(buf, ')');
		char state;
		int ppid;
		if (rp && sscanf(rp + 1, " %c %d", &state, &ppid) == 2 && state == 'Z' &&
		    ppid != getpid())
			zombies++;
	}
	closedir(d);
	return zombies;
}

/* Makes N orphans that die after being reparented to the sandbox's init;
 * then reports how many zombies remain unreaped. */
static int cmd_orphans(int argc, char **argv)
{
	int n = argc > 0 ? atoi(argv[0]) : 5;
	for (int i = 0; i < n; i++) {
		pid_t c = fork();
		if (c < 0)
			return fail("fork");
		if (c == 0) {
			if (fork() == 0) {
				sleep_ms(100);
				_exit(0);
			}
			_exit(0);
		}
		waitpid(c, NULL, 0);
	}
	int zombies = 0;
	for (int tries = 0; tries < 20; tries++) { /* up to 1.2 s for init to reap */
		sleep_ms(tries == 0 ? 300 : 50);
		zombies = count_foreign_zombies();
		if (zombies == 0)
			break;
	}
	printf("{\"orphans\": %d, \"zombies\": %d}\n", n, zombies);
	return 0;
}

/* ---- escapes ----------------------------------------------------------- */

static void report_open(const char *name, const char *path, bool *first)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int err = errno;
	json_key(name, first);
	printf("{\"reached\": %s, \"errno\": %d}", fd >= 0 ? "true" : "false", fd >= 0 ? 0 : err);
	if (fd >= 0)
		close(fd);
}

/* The classic chroot break-out: chroot into a subdirectory while keeping the
 * cwd outside it, walk up, chroot("."). Exits 0 when HOSTPATH was reached.
 * Inside a pivot_root'ed sandbox with the old root detached, the top is the
 * sandbox root; after a plain chroot it would be the host's. */
static int chroot_breakout(const char *hostpath, bool new_userns)
{
	if (new_userns && unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
		return 10;
	mkdir("/tmp/.kiwi-probe-jail", 0700);
	if (chroot("/tmp/.kiwi-probe-jail") < 0)
		return 11;
	for (int i = 0; i < 64; i++)
		if (chdir("..") < 0)
			return 12;
	if (chroot(".") < 0)
		return 13;
	return open(hostpath, O_RDONLY | O_CLOEXEC) >= 0 ? 0 : 14;
}

static void report_breakout(const char *name, const char *hostpath, bool new_userns,
			    bool *first)
{
	fflush(stdout);
	pid_t c = fork();
	if (c == 0)
		_exit(chroot_breakout(hostpath, new_userns));
	int st = 0;
	waitpid(c, &st, 0);
	int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	json_key(name, first);
	printf("{\"reached\": %s, \"stage\": %d}", code == 0 ? "true" : "false", code);
}

/* Every way we know to reach the host file HOSTPATH from inside. Prints
 * {"attempt": {"reached": bool, ...}}; the tests want all false. */
static int cmd_escape(int argc, char **argv)
{
	char path[4096];
	bool first = true;
	if (argc < 1)
		return PROBE_USAGE;
	const char *host = argv[0];
	putchar('{');
	report_open("direct", host, &first);
	snprintf(path, sizeof path, "/proc/1/root%s", host);
	report_open("proc_1_root", path, &first);
	snprintf(path, sizeof path, "/proc/self/root/../../../..%s", host);
	report_open("proc_self_root_dotdot", path, &first);
	snprintf(path, sizeof path, "/../../../../..%s", host);
	report_open("dotdot", path, &first);
	unlink("/tmp/.kiwi-probe-link");
	snprintf(path, sizeof path, "/../../../..%s", host);
	if (symlink(path, "/tmp/.kiwi-probe-link") == 0)
		report_open("symlink", "/tmp/.kiwi-probe-link", &first);
	report_breakout("chroot", host, false, &first);
	report_breakout("userns_chroot", host, true, &first);
	puts("}");
	return 0;
}

/* ---- network -------------------------------------------------------- */

/* ADDR PORT as a v4 or v6 socket address; returns its length or 0. */
static socklen_t inet_sockaddr(const char *addr, const char *port, struct sockaddr_storage *ss)
{
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, addr, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)atoi(port));
		return sizeof(*a4);
	}
	if (inet_pton(AF_INET6, addr, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)atoi(port));
		return sizeof(*a6);
	}
	return 0;
}

/* A TCP connect, or a UDP datagram sent, to ADDR PORT. TCP waits up to
 * TIMEOUT_MS (default 20000) for an answer, so a refusal (ECONNREFUSED) is
 * told from a silent drop (ETIMEDOUT) without timing anything. */
static int cmd_connect(int argc, char **argv)
{
	if (argc < 3 || (strcmp(argv[0], "tcp") && strcmp(argv[0], "udp")))
		return PROBE_USAGE;
	bool tcp = !strcmp(argv[0], "tcp");
	int timeout = argc > 3 ? atoi(argv[3]) : 20000;
	struct sockaddr_storage ss;
	socklen_t len = inet_sockaddr(argv[1], argv[2], &ss);
	if (!len)
		return PROBE_USAGE;
	int s = socket(ss.ss_family, (tcp ? SOCK_STREAM : SOCK_DGRAM) | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0)
		return fail("socket");
	int err = 0;
	if (connect(s, (struct sockaddr *)&ss, len) < 0 && errno != EINPROGRESS)
		err = errno;
	else if (tcp) {
		struct pollfd p = {.fd = s, .events = POLLOUT};
		socklen_t elen = sizeof(err);
		if (poll(&p, 1, timeout) == 0)
			err = ETIMEDOUT;
		else
			getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &elen);
	} else if (send(s, "kiwi", 4, 0) < 0) {
		err = errno;
	}
	close(s);
	json_errno_result(err == 0, err);
	return 0;
}

/* N UDP datagrams to ADDR PORT on one socket, as fast as it goes.
 * Prints {"sent": S, "refused": R, "errno": E}: R sends failed with EPERM,
 * E is the first other errno (0: none). */
static int cmd_udp_flood(int argc, char **argv)
{
	if (argc < 3)
		return PROBE_USAGE;
	struct sockaddr_storage ss;
	socklen_t len = inet_sockaddr(argv[0], argv[1], &ss);
	long n = atol(argv[2]);
	if (!len || n < 1)
		return PROBE_USAGE;
	int s = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&ss, len) < 0)
		return fail("udp socket");
	long sent = 0, refused = 0;
	int other = 0;
	for (long i = 0; i < n; i++) {
		if (send(s, "kiwi", 4, 0) == 4)
			sent++;
		else if (errno == EPERM)
			refused++;
		else if (!other)
			other = errno;
	}
	close(s);
	printf("{\"sent\": %ld, \"refused\": %ld, \"errno\": %d}\n", sent, refused, other);
	return 0;
}

/* Appends attribute TYPE with LEN bytes of DATA to the message in BUF. */
static void nl_attr(struct nlmsghdr *h, uint16_t type, const void *data, size_t len)
{
	struct nlattr *a = (struct nlattr *)((char *)h + NLMSG_ALIGN(h->nlmsg_len));
	a->nla_type = type;
	a->nla_len = (uint16_t)(NLA_HDRLEN + len);
	memcpy((char *)a + NLA_HDRLEN, data, len);
	h->nlmsg_len = NLMSG_ALIGN(h->nlmsg_len) + NLA_ALIGN(a->nla_len);
}

/* A message of TYPE with a fixed header of HDRLEN bytes, at BUF+*off. */
static struct nlmsghdr *nl_put(char *buf, size_t *off, uint16_t type, uint16_t flags, size_t hdrlen)
{
	struct nlmsghdr *h = (struct nlmsghdr *)(buf + *off);
	memset(h, 0, NLMSG_SPACE(hdrlen));
	h->nlmsg_len = (uint32_t)NLMSG_LENGTH(hdrlen);
	h->nlmsg_type = type;
	h->nlmsg_flags = (uint16_t)(NLM_F_REQUEST | flags);
	h->nlmsg_seq = (uint32_t)*off + 1;
	return h;
}

static void nl_end(size_t *off, struct nlmsghdr *h)
{
	*off += NLMSG_ALIGN(h->nlmsg_len);
}

/* Sends LEN bytes on a PROTO netlink socket; returns 0 or the first errno
 * the kernel answered with. */
static int nl_talk(int proto, const char *buf, size_t len)
{
	int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, proto);
	if (s < 0)
		return errno;
	struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
	int err = 0;
	if (sendto(s, buf, len, 0, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		err = errno;
	char rbuf[8192];
	struct timeval tv = {.tv_sec = 2};
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ssize_t n;
	while (!err && (n = recv(s, rbuf, sizeof(rbuf), 0)) > 0) {
		bool acked = false;
		for (struct nlmsghdr *h = (struct nlmsghdr *)rbuf; NLMSG_OK(h, n); h = NLMSG_NEXT(h, n))
			if (h->nlmsg_type == NLMSG_ERROR) {
				err = -((struct nlmsgerr *)NLMSG_DATA(h))->error;
				acked = true;
			}
		if (acked)
			break;
	}
	close(s);
	return err;
}

static struct nlmsghdr *nfnl_put(char *buf, size_t *off, uint16_t type, uint16_t flags, uint8_t family,
				 uint16_t res_id)
{
	struct nlmsghdr *h = nl_put(buf, off, type, flags, sizeof(struct nfgenmsg));
	struct nfgenmsg *g = NLMSG_DATA(h);
	g->nfgen_family = family;
	g->version = NFNETLINK_V0;
	g->res_id = htons(res_id);
	return h;
}

/* nft delete table inet NAME, as one batch. */
static int attack_nft_delete(const char *table)
{
	char buf[1024];
	size_t off = 0;
	nl_end(&off, nfnl_put(buf, &off, NFNL_MSG_BATCH_BEGIN, 0, AF_UNSPEC, NFNL_SUBSYS_NFTABLES));
	struct nlmsghdr *h = nfnl_put(buf, &off, (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_DELTABLE, NLM_F_ACK,
				      NFPROTO_INET, 0);
	nl_attr(h, NFTA_TABLE_NAME, table, strlen(table) + 1);
	nl_end(&off, h);
	nl_end(&off, nfnl_put(buf, &off, NFNL_MSG_BATCH_END, 0, AF_UNSPEC, NFNL_SUBSYS_NFTABLES));
	return nl_talk(NETLINK_NETFILTER, buf, off);
}

/* Binds NFLOG group GROUP, to read (or steal) the audit's log. */
static int attack_nflog_bind(uint16_t group)
{
	char buf[256];
	size_t off = 0;
	struct nlmsghdr *h = nfnl_put(buf, &off, (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG, NLM_F_ACK,
				      AF_UNSPEC, group);
	struct nfulnl_msg_config_cmd cmd = {.command = NFULNL_CFG_CMD_BIND};
	nl_attr(h, NFULA_CFG_CMD, &cmd, sizeof(cmd));
	nl_end(&off, h);
	return nl_talk(NETLINK_NETFILTER, buf, off);
}

/* ip [-6] route del default. */
static int attack_route_delete(uint8_t family)
{
	char buf[256];
	size_t off = 0;
	struct nlmsghdr *h = nl_put(buf, &off, RTM_DELROUTE, NLM_F_ACK, sizeof(struct rtmsg));
	struct rtmsg *rt = NLMSG_DATA(h);
	rt->rtm_family = family;
	rt->rtm_table = RT_TABLE_MAIN;
	rt->rtm_scope = RT_SCOPE_NOWHERE;
	nl_end(&off, h);
	return nl_talk(NETLINK_ROUTE, buf, off);
}

/* ip addr del 192.0.0.8/32 dev lo. */
static int attack_addr_delete(void)
{
	char buf[256];
	size_t off = 0;
	struct nlmsghdr *h = nl_put(buf, &off, RTM_DELADDR, NLM_F_ACK, sizeof(struct ifaddrmsg));
	struct ifaddrmsg *ifa = NLMSG_DATA(h);
	ifa->ifa_family = AF_INET;
	ifa->ifa_prefixlen = 32;
	ifa->ifa_index = 1;
	uint32_t a = htonl(0xc0000008);
	nl_attr(h, IFA_LOCAL, &a, 4);
	nl_end(&off, h);
	return nl_talk(NETLINK_ROUTE, buf, off);
}

static void report_attack(const char *name, int err, bool *first)
{
	json_key(name, first);
	printf("{\"ok\": %s, \"errno\": %d}", err ? "false" : "true", err);
}

/* The same attacks from a fresh user namespace, where the probe holds
 * every capability, but over namespaces it does not own. */
static int attack_from_userns(void)
{
	fflush(stdout);
	pid_t c = fork();
	if (c == 0)
		_exit(unshare(CLONE_NEWUSER) < 0 ? 100 : attack_nft_delete("kiwi_audit"));
	int st = 0;
	waitpid(c, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Every netlink way we know to undo the network audit from inside. Prints
 * {"attack": {"ok": bool, "errno": N}}; the tests want every ok false. */
static int cmd_netlink_attack(int argc, char **argv)
{
	(void)argc, (void)argv;
	bool first = true;
	putchar('{');
	report_attack("nft_delete_table", attack_nft_delete("kiwi_audit"), &first);
	report_attack("nflog_bind", attack_nflog_bind(1), &first);
	report_attack("route4_delete", attack_route_delete(AF_INET), &first);
	report_attack("route6_delete", attack_route_delete(AF_INET6), &first);
	report_attack("addr_delete", attack_addr_delete(), &first);
	report_attack("userns_nft_delete_table", attack_from_userns(), &first);
	puts("}");
	return 0;
}

/* lsetxattr(PATH, NAME, VALUE): exits 0 or errno. */
static int cmd_setxattr(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	return lsetxattr(argv[0], argv[1], argv[2], strlen(argv[2]), 0) < 0 ? errno : 0;
}

/* Each PATH's xattrs, one line per path: "PATH NAME=VALUE...", sorted as
 * the kernel lists them (the same inode type lists the same way). */
static int cmd_xattrs(int argc, char **argv)
{
	for (int i = 0; i < argc; i++) {
		char names[4096], val[1024];
		ssize_t n = llistxattr(argv[i], names, sizeof(names));
		printf("%s", argv[i]);
		for (ssize_t off = 0; n > 0 && off < n; off += (ssize_t)strlen(names + off) + 1) {
			ssize_t vl = lgetxattr(argv[i], names + off, val, sizeof(val) - 1);
			val[vl > 0 ? vl : 0] = '\0';
			printf(" %s=%s", names + off, val);
		}
		putchar('\n');
	}
	return 0;
}

/* ---- dispatch ---------------------------------------------------------- */

static const struct subcommand {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *usage;
} subcommands[] = {
	{"status", cmd_status, "[PID]: caps, no_new_privs, seccomp, ids as JSON"},
	{"fds", cmd_fds, "open fds as a JSON array"},
	{"env", cmd_env, "environ, exactly, as a JSON array"},
	{"mounts", cmd_mounts, "/proc/self/mountinfo"},
	{"netdevs", cmd_netdevs, "interfaces and their up flag"},
	{"loopback", cmd_loopback, "TCP round trip on 127.0.0.1"},
	{"connect", cmd_connect, "tcp|udp ADDR PORT [TIMEOUT_MS]: connect (tcp), send (udp)"},
	{"netlink-attack", cmd_netlink_attack, "try to undo the network audit"},
	{"udp-flood", cmd_udp_flood, "ADDR PORT N: send N UDP datagrams, count refusals"},
	{"hostname", cmd_hostname, "the UTS nodename"},
	{"cwd", cmd_cwd, "the working directory"},
	{"pids", cmd_pids, "pids visible in /proc"},
	{"ls", cmd_ls, "DIR: names in DIR"},
	{"stat", cmd_stat, "PATH: lstat as JSON"},
	{"setxattr", cmd_setxattr, "PATH NAME VALUE: lsetxattr, exit status errno"},
	{"xattrs", cmd_xattrs, "PATH...: each path's xattrs on a line"},
	{"write", cmd_write, "PATH [DATA]: try to write, report errno"},
	{"open-w", cmd_open_w, "PATH: open for writing, write nothing"},
	{"read", cmd_read, "PATH [N]: try to read N bytes, report errno"},
	{"write-fd", cmd_write_fd, "N TEXT: write TEXT to fd N"},
	{"pty", cmd_pty, "open a pty, print its name"},
	{"exit", cmd_exit, "N: exit with status N"},
	{"kill-self", cmd_kill_self, "SIG: die by signal SIG"},
	{"sleep", cmd_sleep, "SECONDS"},
	{"pause", cmd_pause, "SECONDS: print ready, then sleep"},
	{"spin", cmd_spin, "MS: burn MS ms of user CPU"},
	{"wait-signal", cmd_wait_signal, "[TIMEOUT]: print ready, wait, print the signal"},
	{"daemonize", cmd_daemonize, "FILE: leave a setsid daemon beating into FILE"},
	{"ptrace", cmd_ptrace, "PID: try to attach to PID"},
	{"orphans", cmd_orphans, "[N]: make N orphans, count unreaped zombies"},
	{"escape", cmd_escape, "HOSTPATH: try to reach a host file"},
};

static int usage(FILE *out)
{
	fputs("usage: kiwi-probe SUBCOMMAND [ARG...]\n", out);
	for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
		fprintf(out, "  %-12s %s\n", subcommands[i].name, subcommands[i].usage);
	return PROBE_USAGE;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage(stderr);
	for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++) {
		if (strcmp(argv[1], subcommands[i].name) != 0)
			continue;
		int rc = subcommands[i].run(argc - 2, argv + 2);
		if (rc == PROBE_USAGE)
			usage(stderr);
		fflush(stdout);
		return rc;
	}
	return usage(stderr);
}
