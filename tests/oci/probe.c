/* SPDX-License-Identifier: Apache-2.0 */
/* oci-probe: the container process of the OCI conformance suite
 * (tests/oci/). It runs inside containers made by kiwi-run, crun and runc
 * alike, looks at what the kernel shows it and prints that as JSON, one
 * object per line, so one container start answers a whole test: a VM exec
 * costs tens of milliseconds under emulation.
 *
 * usage: oci-probe STEP...   steps run in order, each prints one line:
 *   report            ids, groups, caps, no_new_privs, seccomp, umask, rlimits,
 *                     env, cwd, hostname, fds, namespaces, cgroup, id maps,
 *                     ttys and window size, mounts, oom_score_adj
 *   read=PATH         try to read; ok, errno, bytes and the first bytes
 *   write=PATH        try to create/truncate PATH and write one byte
 *   mkdir=PATH        try mkdir(2) (the seccomp tests' syscall)
 *   stat=PATH         lstat: type, mode, uid, gid, rdev major/minor
 *   cat=PATH          the whole file (up to 64 KiB) as a string
 *   fd-write=N:TEXT   write TEXT to fd N; fd-read=N   read up to 4 KiB
 *   touch=PATH        create PATH (a marker the host can see)
 *   stdin-line        read one line from fd 0 and print it
 *   fork=N            fork N sleeping children, count successes, reap them
 *   alloc=MB          allocate and touch MB MiB
 *   open-many=N       open /dev/null up to N times: how many, then the errno
 *   uname             call uname(2)
 *   sleep=SECONDS     sleep
 *   wait-signal       print {"ready":true}, wait for a signal, print it
 *   exit=N            exit with status N
 * Static: the test rootfs carries no libc. Exit 2 on a usage error. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

extern char **environ;

/* ---- JSON output */

static void jstr_n(const char *s, size_t n)
{
	putchar('"');
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void jstr(const char *s)
{
	if (s)
		jstr_n(s, strlen(s));
	else
		fputs("null", stdout);
}

static void key(const char *k)
{
	jstr(k);
	putchar(':');
}

/* Reads up to cap-1 bytes of a file into buf; returns the length or -errno. */
static ssize_t slurp(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t len = 0;
	while (len + 1 < cap) {
		ssize_t n = read(fd, buf + len, cap - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			close(fd);
			return -e;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
	return (ssize_t)len;
}

static void file_field(const char *k, const char *path)
{
	static char buf[65536];
	key(k);
	ssize_t n = slurp(path, buf, sizeof buf);
	if (n < 0)
		fputs("null", stdout);
	else
		jstr_n(buf, (size_t)n);
}

/* ---- report */

static void status_fields(void)
{
	static const char *wanted[] = {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb",
				       "NoNewPrivs", "Seccomp", "Umask"};
	char buf[8192], *save = NULL;
	key("status");
	putchar('{');
	bool first = true;
	if (slurp("/proc/self/status", buf, sizeof buf) > 0) {
		for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
			char *colon = strchr(line, ':');
			if (!colon)
				continue;
			*colon = '\0';
			for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++) {
				if (strcmp(line, wanted[i]) != 0)
					continue;
				char *v = colon + 1;
				while (*v == ' ' || *v == '\t')
					v++;
				printf("%s", first ? "" : ",");
				first = false;
				key(line);
				jstr(v);
			}
		}
	}
	putchar('}');
}

static void rlimits(void)
{
	static const struct { const char *name; int res; } lim[] = {
		{"RLIMIT_AS", RLIMIT_AS}, {"RLIMIT_CORE", RLIMIT_CORE}, {"RLIMIT_CPU", RLIMIT_CPU},
		{"RLIMIT_DATA", RLIMIT_DATA}, {"RLIMIT_FSIZE", RLIMIT_FSIZE},
		{"RLIMIT_LOCKS", RLIMIT_LOCKS}, {"RLIMIT_MEMLOCK", RLIMIT_MEMLOCK},
		{"RLIMIT_MSGQUEUE", RLIMIT_MSGQUEUE}, {"RLIMIT_NICE", RLIMIT_NICE},
		{"RLIMIT_NOFILE", RLIMIT_NOFILE}, {"RLIMIT_NPROC", RLIMIT_NPROC},
		{"RLIMIT_RSS", RLIMIT_RSS}, {"RLIMIT_RTPRIO", RLIMIT_RTPRIO},
		{"RLIMIT_RTTIME", RLIMIT_RTTIME}, {"RLIMIT_SIGPENDING", RLIMIT_SIGPENDING},
		{"RLIMIT_STACK", RLIMIT_STACK},
	};
	key("rlimits");
	putchar('{');
	for (size_t i = 0; i < sizeof lim / sizeof lim[0]; i++) {
		struct rlimit r;
		if (getrlimit(lim[i].res, &r) != 0)
			continue;
		printf("%s", i ? "," : "");
		key(lim[i].name);
		printf("{\"soft\":%lld,\"hard\":%lld}",
		       r.rlim_cur == RLIM_INFINITY ? -1LL : (long long)r.rlim_cur,
		       r.rlim_max == RLIM_INFINITY ? -1LL : (long long)r.rlim_max);
	}
	putchar('}');
}

static void groups(void)
{
	gid_t g[256];
	int n = getgroups(256, g);
	key("groups");
	putchar('[');
	for (int i = 0; i < n; i++)
		printf("%s%u", i ? "," : "", (unsigned)g[i]);
	putchar(']');
}

static void env(void)
{
	key("env");
	putchar('[');
	for (char **e = environ; e && *e; e++) {
		printf("%s", e == environ ? "" : ",");
		jstr(*e);
	}
	putchar(']');
}

/* Each entry of DIR (numeric names only when numeric) as "name": "link". */
static void links(const char *k, const char *dir, bool numeric)
{
	DIR *d = opendir(dir);
	int skip = d ? dirfd(d) : -1;
	key(k);
	putchar('{');
	bool first = true;
	for (struct dirent *e; d && (e = readdir(d));) {
		if (e->d_name[0] == '.' || (numeric && atoi(e->d_name) == skip))
			continue;
		char path[512], target[512];
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		ssize_t n = readlink(path, target, sizeof target - 1);
		target[n < 0 ? 0 : n] = '\0';
		printf("%s", first ? "" : ",");
		first = false;
		key(e->d_name);
		jstr(target);
	}
	if (d)
		closedir(d);
	putchar('}');
}

static void ttys(void)
{
	key("isatty");
	printf("[%s,%s,%s],", isatty(0) ? "true" : "false", isatty(1) ? "true" : "false",
	       isatty(2) ? "true" : "false");
	key("ttyname");
	jstr(isatty(0) ? ttyname(0) : NULL);
	struct winsize ws;
	putchar(',');
	key("winsize");
	if (ioctl(0, TIOCGWINSZ, &ws) == 0)
		printf("{\"rows\":%u,\"cols\":%u}", ws.ws_row, ws.ws_col);
	else
		fputs("null", stdout);
}

/* mountinfo, one object per mount: target, fstype, source, per-mount and
 * superblock options. */
static void mounts(void)
{
	static char buf[262144];
	char *save = NULL;
	key("mounts");
	putchar('[');
	bool first = true;
	if (slurp("/proc/self/mountinfo", buf, sizeof buf) > 0) {
		for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
			char *f[24] = {0};
			int n = 0;
			char *s2 = NULL;
			for (char *t = strtok_r(line, " ", &s2); t && n < 24; t = strtok_r(NULL, " ", &s2))
				f[n++] = t;
			int dash = 6;
			while (dash < n && strcmp(f[dash], "-") != 0)
				dash++;
			if (dash + 2 >= n)
				continue;
			printf("%s{", first ? "" : ",");
			first = false;
			key("target");
			jstr(f[4]);
			putchar(',');
			key("opts");
			jstr(f[5]);
			putchar(',');
			key("fstype");
			jstr(f[dash + 1]);
			putchar(',');
			key("source");
			jstr(f[dash + 2]);
			putchar(',');
			key("super");
			jstr(dash + 3 < n ? f[dash + 3] : "");
			putchar('}');
		}
	}
	putchar(']');
}

static void report(void)
{
	char cwd[4096], dom[256] = "";
	struct utsname u;
	uname(&u);
	if (!getcwd(cwd, sizeof cwd))
		strcpy(cwd, "?");
	if (getdomainname(dom, sizeof dom) != 0)
		dom[0] = '\0';
	printf("{\"step\":\"report\",\"pid\":%d,\"ppid\":%d,\"uid\":%u,\"euid\":%u,\"gid\":%u,\"egid\":%u,",
	       getpid(), getppid(), getuid(), geteuid(), getgid(), getegid());
	groups();
	putchar(',');
	status_fields();
	putchar(',');
	rlimits();
	putchar(',');
	env();
	putchar(',');
	key("cwd");
	jstr(cwd);
	putchar(',');
	key("hostname");
	jstr(u.nodename);
	putchar(',');
	key("domainname");
	jstr(dom);
	putchar(',');
	links("fds", "/proc/self/fd", true);
	putchar(',');
	links("ns", "/proc/self/ns", false);
	putchar(',');
	file_field("cgroup", "/proc/self/cgroup");
	putchar(',');
	file_field("uid_map", "/proc/self/uid_map");
	putchar(',');
	file_field("gid_map", "/proc/self/gid_map");
	putchar(',');
	file_field("oom_score_adj", "/proc/self/oom_score_adj");
	putchar(',');
	ttys();
	putchar(',');
	mounts();
	puts("}");
}

/* ---- single steps */

static void result(const char *step, const char *arg, bool ok, int err)
{
	printf("{\"step\":");
	jstr(step);
	printf(",\"arg\":");
	jstr(arg);
	printf(",\"ok\":%s,\"errno\":%d}\n", ok ? "true" : "false", ok ? 0 : err);
}

static void step_read(const char *path)
{
	char buf[4096];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		result("read", path, false, errno);
		return;
	}
	ssize_t n = read(fd, buf, sizeof buf);
	int e = errno;
	close(fd);
	if (n < 0) {
		result("read", path, false, e);
		return;
	}
	printf("{\"step\":\"read\",\"arg\":");
	jstr(path);
	printf(",\"ok\":true,\"errno\":0,\"bytes\":%zd,\"data\":", n);
	jstr_n(buf, (size_t)(n > 64 ? 64 : n));
	puts("}");
}

static void step_write(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		result("write", path, false, errno);
		return;
	}
	ssize_t n = write(fd, "1", 1);
	int e = errno;
	close(fd);
	result("write", path, n == 1, e);
}

static void step_stat(const char *path)
{
	struct stat st;
	if (lstat(path, &st) != 0) {
		result("stat", path, false, errno);
		return;
	}
	const char *type = S_ISDIR(st.st_mode) ? "dir" : S_ISREG(st.st_mode) ? "file"
			 : S_ISCHR(st.st_mode) ? "char" : S_ISBLK(st.st_mode) ? "block"
			 : S_ISLNK(st.st_mode) ? "link" : S_ISFIFO(st.st_mode) ? "fifo" : "other";
	printf("{\"step\":\"stat\",\"arg\":");
	jstr(path);
	printf(",\"ok\":true,\"errno\":0,\"type\":\"%s\",\"mode\":%u,\"uid\":%u,\"gid\":%u,"
	       "\"major\":%u,\"minor\":%u}\n", type, (unsigned)(st.st_mode & 07777), st.st_uid,
	       st.st_gid, major(st.st_rdev), minor(st.st_rdev));
}

static void step_cat(const char *path)
{
	static char buf[65536];
	ssize_t n = slurp(path, buf, sizeof buf);
	if (n < 0) {
		result("cat", path, false, (int)-n);
		return;
	}
	printf("{\"step\":\"cat\",\"arg\":");
	jstr(path);
	printf(",\"ok\":true,\"errno\":0,\"data\":");
	jstr_n(buf, (size_t)n);
	puts("}");
}

static void step_fd_write(const char *arg)
{
	char *end;
	long fd = strtol(arg, &end, 10);
	const char *text = *end == ':' ? end + 1 : "";
	ssize_t n = write((int)fd, text, strlen(text));
	int e = errno;
	result("fd-write", arg, n == (ssize_t)strlen(text), e);
}

static void step_fd_read(const char *arg)
{
	char buf[4096];
	ssize_t n = read(atoi(arg), buf, sizeof buf);
	if (n < 0) {
		result("fd-read", arg, false, errno);
		return;
	}
	printf("{\"step\":\"fd-read\",\"arg\":");
	jstr(arg);
	printf(",\"ok\":true,\"errno\":0,\"data\":");
	jstr_n(buf, (size_t)n);
	puts("}");
}

static void step_stdin_line(void)
{
	char buf[1024];
	size_t len = 0;
	while (len + 1 < sizeof buf) {
		ssize_t n = read(0, buf + len, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || buf[len] == '\n' || buf[len] == '\r')
			break;
		len++;
	}
	printf("{\"step\":\"stdin-line\",\"data\":");
	jstr_n(buf, len);
	puts("}");
}

static void step_fork(const char *arg)
{
	int want = atoi(arg), made = 0, err = 0;
	pid_t kids[4096];
	for (int i = 0; i < want && i < 4096; i++) {
		pid_t p = fork();
		if (p == 0) {
			pause();
			_exit(0);
		}
		if (p < 0) {
			err = errno;
			break;
		}
		kids[made++] = p;
	}
	for (int i = 0; i < made; i++) {
		kill(kids[i], SIGKILL);
		waitpid(kids[i], NULL, 0);
	}
	printf("{\"step\":\"fork\",\"arg\":");
	jstr(arg);
	printf(",\"made\":%d,\"errno\":%d}\n", made, err);
}

static void step_alloc(const char *arg)
{
	size_t bytes = (size_t)atol(arg) << 20;
	char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		result("alloc", arg, false, errno);
		return;
	}
	for (size_t i = 0; i < bytes; i += 4096)
		p[i] = 1;
	result("alloc", arg, true, 0);
}

static void step_open_many(const char *arg)
{
	int want = atoi(arg), opened = 0, err = 0, fds[4096];
	for (int i = 0; i < want && i < 4096; i++) {
		fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fds[i] < 0) {
			err = errno;
			break;
		}
		opened++;
	}
	for (int i = 0; i < opened; i++)
		close(fds[i]);
	printf("{\"step\":\"open-many\",\"opened\":%d,\"errno\":%d}\n", opened, err);
}

static void step_wait_signal(void)
{
	sigset_t all;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	puts("{\"ready\":true}");
	fflush(stdout);
	int sig = 0;
	sigwait(&all, &sig);
	printf("{\"step\":\"wait-signal\",\"signal\":%d}\n", sig);
}

static bool run_step(const char *s)
{
	const char *eq = strchr(s, '=');
	size_t klen = eq ? (size_t)(eq - s) : strlen(s);
	const char *v = eq ? eq + 1 : "";
#define IS(name) (klen == strlen(name) && strncmp(s, name, klen) == 0)
	if (IS("report"))
		report();
	else if (IS("read"))
		step_read(v);
	else if (IS("write"))
		step_write(v);
	else if (IS("mkdir")) {
		bool ok = mkdir(v, 0755) == 0;
		result("mkdir", v, ok, errno);
	}
	else if (IS("stat"))
		step_stat(v);
	else if (IS("cat"))
		step_cat(v);
	else if (IS("fd-write"))
		step_fd_write(v);
	else if (IS("fd-read"))
		step_fd_read(v);
	else if (IS("touch")) {
		int fd = open(v, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		int e = errno;
		result("touch", v, fd >= 0, e);
		if (fd >= 0)
			close(fd);
	} else if (IS("stdin-line"))
		step_stdin_line();
	else if (IS("fork"))
		step_fork(v);
	else if (IS("alloc"))
		step_alloc(v);
	else if (IS("open-many"))
		step_open_many(v);
	else if (IS("uname")) {
		struct utsname u;
		bool ok = uname(&u) == 0;
		result("uname", "", ok, errno);
	} else if (IS("sleep"))
		sleep((unsigned)atoi(v));
	else if (IS("wait-signal"))
		step_wait_signal();
	else if (IS("exit")) {
		fflush(stdout);
		exit(atoi(v));
	} else
		return false;
#undef IS
	fflush(stdout);
	return true;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fputs("usage: oci-probe STEP... (see the head of tests/oci/probe.c)\n", stderr);
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		if (!run_step(argv[i])) {
			fprintf(stderr, "oci-probe: unknown step `%s`\n", argv[i]);
			return 2;
		}
	}
	return 0;
}
