/* SPDX-License-Identifier: Apache-2.0 */
/* Loads the default filter in the kernel, in forked children, and checks
 * that blocked syscalls really fail with the documented errno, that the
 * x32 and i386 entry points are killed, and that ordinary programs still
 * run under it. Exits 77 when the host lacks seccomp or busybox. */
#include "kiwi/cleanup.h"
#include "kiwi/seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static struct kiwi_seccomp *filter;
static int failures;

static void confine(void)
{
	kiwi_err err = { 0 };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || kiwi_seccomp_load(filter, &err) < 0) {
		fprintf(stderr, "cannot load the filter: %s: %s\n", err.msg, strerror(err.errnum));
		_exit(99);
	}
}

/* Runs fn in a confined child; returns its wait status. */
static int in_child(int (*fn)(void))
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		exit(1);
	}
	if (pid == 0) {
		confine();
		_exit(fn());
	}
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return status;
}

static void report(const char *what, int ok, const char *detail)
{
	printf("%s - %s%s%s\n", ok ? "ok" : "not ok", what, detail ? ": " : "", detail ? detail : "");
	failures += !ok;
}

static void expect_exit0(const char *what, int status)
{
	char detail[64];
	snprintf(detail, sizeof(detail), WIFEXITED(status) ? "exit %d" : "signal %d",
		 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	report(what, WIFEXITED(status) && WEXITSTATUS(status) == 0, detail);
}

/* ---- blocked syscalls, from inside the filter ---- */

static int n_bad;

static void check_errno(const char *what, long rc, int want)
{
	if (rc == -1 && errno == want)
		return;
	fprintf(stderr, "  %s: returned %ld errno %s, want %s\n", what, rc, strerrorname_np(errno),
		strerrorname_np(want));
	n_bad++;
}

static void *thread_main(void *arg)
{
	return arg;
}

static int blocked_syscalls(void)
{
	char c = 'x';
	check_errno("keyctl", syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3, 0), EPERM);
	check_errno("add_key", syscall(SYS_add_key, "user", "k", "v", 1, -3), EPERM);
	check_errno("bpf", syscall(SYS_bpf, 0, NULL, 0), EPERM);
	check_errno("userfaultfd", syscall(SYS_userfaultfd, 0), EPERM);
	check_errno("perf_event_open", syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0), EPERM);
	check_errno("ptrace", syscall(SYS_ptrace, PTRACE_TRACEME, 0, 0, 0), EPERM);
	check_errno("mount", mount("none", "/", NULL, MS_REMOUNT | MS_BIND, NULL), EPERM);
	check_errno("umount2", umount2("/proc", MNT_DETACH), EPERM);
	check_errno("unshare(CLONE_NEWUSER)", unshare(CLONE_NEWUSER), EPERM);
	check_errno("unshare(CLONE_NEWNS)", unshare(CLONE_NEWNS), EPERM);
	check_errno("setns", setns(0, 0), EPERM);
	check_errno("clone(CLONE_NEWUSER)", syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0), EPERM);
	check_errno("clone3", syscall(SYS_clone3, NULL, 0), ENOSYS);
	check_errno("io_uring_setup", syscall(SYS_io_uring_setup, 1, NULL), EPERM);
	check_errno("open_by_handle_at", syscall(SYS_open_by_handle_at, -1, NULL, 0), EPERM);
	check_errno("ioctl(TIOCSTI)", ioctl(-1, TIOCSTI, &c), EPERM);
	check_errno("ioctl(TIOCSTI | 1<<32)", syscall(SYS_ioctl, -1, 0x100000000ul | TIOCSTI, &c), EPERM);
	check_errno("ioctl(TCGETS) reaches the kernel", ioctl(-1, TCGETS, NULL), EBADF);
	check_errno("socket(AF_PACKET)", socket(AF_PACKET, SOCK_RAW, 0), EPERM);
	check_errno("personality(ADDR_NO_RANDOMIZE)", personality(ADDR_NO_RANDOMIZE), EPERM);
	check_errno("settimeofday", syscall(SYS_settimeofday, NULL, NULL), EPERM);
	check_errno("reboot", syscall(SYS_reboot, 0, 0, 0, NULL), EPERM);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		check_errno("socket(AF_UNIX) allowed", fd, 0);
	/* glibc's pthread_create tries clone3 first and falls back on ENOSYS. */
	pthread_t t;
	if (pthread_create(&t, NULL, thread_main, NULL) != 0 || pthread_join(t, NULL) != 0) {
		fprintf(stderr, "  pthread_create failed under the filter\n");
		n_bad++;
	}
	return n_bad ? 1 : 0;
}

/* mseal (462) is newer than any syscall the default profile names for
 * libseccomp 2.5: the filter must answer ENOSYS although the kernel has it. */
static int newer_syscall(void)
{
	check_errno("mseal (newer than the profile)", syscall(462, 0, 0, 0), ENOSYS);
	return n_bad ? 1 : 0;
}

static int x32_getpid(void)
{
	syscall(0x40000000 | SYS_getpid);
	return 0;
}

static long i386_getpid(void)
{
	long ret = 20; /* __NR_getpid on i386 */
	__asm__ volatile("int $0x80" : "+a"(ret) : : "memory");
	return ret;
}

static int i386_call(void)
{
	i386_getpid();
	return 0;
}

/* ---- ordinary programs under the filter ---- */

static char *const *run_argv;

static int exec_program(void)
{
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null >= 0)
		dup2(null, STDOUT_FILENO);
	execvp(run_argv[0], run_argv);
	fprintf(stderr, "  exec %s: %s\n", run_argv[0], strerror(errno));
	return 127;
}

static int on_path(const char *prog)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", prog);
	return system(cmd) == 0;
}

/* needs: the program the test is about (argv[0] may be just the shell). */
static void run_needing(const char *what, const char *needs, char *const argv[])
{
	if (!on_path(needs)) {
		printf("ok - %s # SKIP %s is not installed\n", what, needs);
		return;
	}
	run_argv = argv;
	expect_exit0(what, in_child(exec_program));
}

static void run_program(const char *what, char *const argv[])
{
	run_needing(what, argv[0], argv);
}

static void programs(const char *busybox, const char *dir)
{
	char script[1024];
	snprintf(script, sizeof(script),
		 "set -e; cd %s; test \"$(echo ok | cat)\" = ok; ls / >/dev/null; "
		 "echo data > f; cp f g; grep -q data g; sort f | uniq >/dev/null; "
		 "(sleep 0 &) ; wait; tar cf t.tar f g; rm f g t.tar", dir);
	run_program("busybox sh, coreutils, pipes, fork/exec",
		    (char *const[]){ (char *)busybox, "sh", "-c", script, NULL });
	run_program("python3: threads, subprocess, sockets, getaddrinfo",
		    (char *const[]){ "python3", "-c",
			"import threading, subprocess, socket, os, tempfile\n"
			"t = threading.Thread(target=lambda: None); t.start(); t.join()\n"
			"assert subprocess.run(['true']).returncode == 0\n"
			"a, b = socket.socketpair(); a.send(b'x'); assert b.recv(1) == b'x'\n"
			"s = socket.socket(socket.AF_INET6); s.bind(('::1', 0)); s.listen(); s.close()\n"
			"socket.getaddrinfo('localhost', 80)\n"
			"with tempfile.TemporaryDirectory() as d: os.mkdir(d + '/x')\n", NULL });
	snprintf(script, sizeof(script),
		 "set -e; cd %s; printf '#include <stdio.h>\\nint main(void){puts(\"hi\");return 0;}\\n' > h.c; "
		 "gcc -O1 -o h h.c; ./h; rm h h.c", dir);
	run_needing("gcc compiles and the result runs", "gcc", (char *const[]){ "sh", "-c", script, NULL });
	snprintf(script, sizeof(script),
		 "set -e; cd %s; git init -q r; cd r; echo a > a; git add a; "
		 "git -c user.name=t -c user.email=t@t commit -qm a; git log --oneline | grep -q a; "
		 "cd ..; rm -rf r", dir);
	run_needing("git init, add, commit, log", "git", (char *const[]){ "sh", "-c", script, NULL });
	run_program("node: fs, child_process, worker thread",
		    (char *const[]){ "node", "-e",
			"const fs = require('fs'); fs.readdirSync('/');"
			"require('child_process').execSync('true');"
			"const { Worker } = require('worker_threads');"
			"new Worker('1', { eval: true }).on('exit', c => process.exit(c));", NULL });
	run_program("npm --version", (char *const[]){ "npm", "--version", NULL });
}

/* ---- main ---- */

static int unconfined_int80_works(void)
{
	pid_t pid = fork();
	if (pid == 0)
		_exit(i386_getpid() == getpid() ? 0 : 1);
	int status;
	waitpid(pid, &status, 0);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void expect_sigsys(const char *what, int status)
{
	char detail[64];
	snprintf(detail, sizeof(detail), WIFEXITED(status) ? "exit %d" : "signal %d",
		 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	report(what, WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS, detail);
}

int main(void)
{
	const char *busybox = getenv("KIWI_BUSYBOX") ? getenv("KIWI_BUSYBOX") : "/usr/bin/busybox";
	if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0 && errno == EINVAL) {
		printf("1..0 # SKIP the kernel has no seccomp\n");
		return 77;
	}
	if (access(busybox, X_OK) < 0) {
		printf("1..0 # SKIP no busybox at %s (set KIWI_BUSYBOX)\n", busybox);
		return 77;
	}
	kiwi_err err = { 0 };
	if (kiwi_seccomp_compile_default(&filter, &err) < 0) {
		fprintf(stderr, "cannot compile the default profile: %s\n", err.msg);
		return 1;
	}
	expect_exit0("blocked syscalls fail with their errno; threads still start", in_child(blocked_syscalls));
	if (syscall(462, 0, 0, 0) < 0 && errno == ENOSYS)
		printf("ok - newer syscall answers ENOSYS # SKIP the kernel lacks mseal\n");
	else
		expect_exit0("a syscall newer than the profile answers ENOSYS", in_child(newer_syscall));
	expect_sigsys("x32 entry point kills the process", in_child(x32_getpid));
	if (unconfined_int80_works())
		expect_sigsys("i386 entry point (int 0x80) kills the process", in_child(i386_call));
	else
		printf("ok - i386 entry point # SKIP the kernel has no ia32 emulation\n");

	char dir[] = "/tmp/kiwi-seccomp-XXXXXX";
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	programs(busybox, dir);
	rmdir(dir);
	kiwi_seccomp_free(filter);
	printf("%s\n", failures ? "FAILED" : "all passed");
	return failures ? 1 : 0;
}
