/* nscost: what each kernel step of a sandbox start costs on this machine.
 * Not part of kiwi-run; see bench/README.md. Run as root:
 *
 *   nscost ROOTFS [RUNS]
 *
 * Part 1 times clone3 + _exit + wait for each namespace flag alone and for
 * all of kiwi-run's together (interleaved), so the cost of a namespace is
 * its row minus the "none" row (creation and teardown, except the netns
 * teardown, which the kernel defers to a worker).
 *
 * Part 2 runs a minimal launch sequence with every namespace in a child and
 * takes CLOCK_MONOTONIC stamps between steps (written to shared memory):
 * id maps (by the parent), private propagation, rootfs self-bind, /proc,
 * /dev tmpfs with six device binds, devpts, /dev/shm, /tmp, pivot_root and
 * detach, read-only remount, hostname, capability drop, close_range, and
 * the exec of ROOTFS/bin/true to its exit. It is a measuring aid with no
 * error reporting to speak of, not a launcher.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ALL_NS (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWCGROUP)

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static pid_t clone3_fork(uint64_t flags)
{
	struct clone_args a;
	memset(&a, 0, sizeof a);
	a.flags = flags;
	a.exit_signal = SIGCHLD;
	return (pid_t)syscall(SYS_clone3, &a, sizeof a);
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return (a > b) - (a < b);
}

static double median_sorted(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void wait_ok(pid_t pid, const char *what)
{
	int st;
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "nscost: %s failed (status %#x)\n", what, st);
		exit(1);
	}
}

static const struct {
	const char *name;
	uint64_t flags;
} variants[] = {
	{"none (fork)", 0},
	{"NEWUSER", CLONE_NEWUSER},
	{"NEWNS", CLONE_NEWNS},
	{"NEWPID", CLONE_NEWPID},
	{"NEWNET", CLONE_NEWNET},
	{"NEWUTS", CLONE_NEWUTS},
	{"NEWIPC", CLONE_NEWIPC},
	{"NEWCGROUP", CLONE_NEWCGROUP},
	{"all seven", ALL_NS},
	{"none + exec busybox true", 0},
	{"all seven + exec busybox true", ALL_NS},
};
#define FIRST_EXEC_VARIANT 9
#define NVAR (int)(sizeof variants / sizeof variants[0])

static const char *exec_path; /* ROOTFS/bin/busybox, for the exec rows */

static void part1(int runs)
{
	double *ms[NVAR];
	for (int v = 0; v < NVAR; v++)
		ms[v] = calloc((size_t)runs, sizeof(double));
	for (int r = 0; r < runs; r++)
		for (int v = 0; v < NVAR; v++) {
			double t0 = now_ms();
			pid_t pid = clone3_fork(variants[v].flags);
			if (pid < 0) {
				perror("clone3");
				exit(1);
			}
			if (pid == 0) {
				if (v >= FIRST_EXEC_VARIANT) {
					char *args[] = {"true", NULL}, *envp[] = {NULL};
					execve(exec_path, args, envp);
				}
				_exit(0);
			}
			wait_ok(pid, variants[v].name);
			ms[v][r] = now_ms() - t0;
		}
	printf("## clone3 + _exit + wait, per namespace flag (%d runs each, interleaved)\n\n", runs);
	printf("| flags | median ms | min ms | median minus fork |\n|---|---:|---:|---:|\n");
	double base = median_sorted(ms[0], runs);
	for (int v = 0; v < NVAR; v++) {
		double med = median_sorted(ms[v], runs);
		printf("| %s | %.3f | %.3f | %+.3f |\n", variants[v].name, med, ms[v][0], med - base);
	}
	printf("\n");
}

enum { S_CLONE, S_MAPS, S_PRIVATE, S_BIND, S_PROC, S_DEV, S_DEVPTS, S_SHM_TMP, S_PIVOT, S_RO, S_HOST, S_CAPS,
       S_CLOSE, S_EXEC_EXIT, NSTEPS };
static const char *step_names[NSTEPS] = {
	"clone3 (all seven namespaces), parent side",
	"uid/gid maps + setgroups (parent), child resumes",
	"mount / MS_REC|MS_PRIVATE",
	"rootfs bind onto itself",
	"mount proc",
	"/dev tmpfs + 6 device nodes bind-mounted",
	"devpts newinstance + ptmx symlink",
	"/dev/shm + /tmp tmpfs",
	"pivot_root(.,.) + detach old root",
	"remount root read-only",
	"sethostname",
	"drop capabilities (bounding loop, capset) + no_new_privs",
	"close_range(3, ~0)",
	"execve /bin/true (static busybox) or _exit .. exit seen by parent",
};

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -1;
}

#define CHECK(x)                                                                                     \
	do {                                                                                         \
		if ((x) < 0) {                                                                       \
			fprintf(stderr, "nscost child: %s: %s\n", #x, strerror(errno));             \
			_exit(3);                                                                    \
		}                                                                                    \
	} while (0)

static void child_sequence(const char *rootfs, int sync_fd, double *stamp, bool do_exec)
{
	char c;
	if (read(sync_fd, &c, 1) != 1)
		_exit(2);
	stamp[S_MAPS] = now_ms();
	CHECK(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL));
	stamp[S_PRIVATE] = now_ms();
	CHECK(mount(rootfs, rootfs, NULL, MS_BIND | MS_REC, NULL));
	CHECK(chdir(rootfs));
	stamp[S_BIND] = now_ms();
	CHECK(mount("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL));
	stamp[S_PROC] = now_ms();
	CHECK(mount("tmpfs", "dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=64k"));
	static const char *const devs[] = {"null", "zero", "full", "random", "urandom", "tty"};
	for (size_t i = 0; i < sizeof devs / sizeof devs[0]; i++) {
		char src[64], dst[64];
		snprintf(src, sizeof src, "/dev/%s", devs[i]);
		snprintf(dst, sizeof dst, "dev/%s", devs[i]);
		int fd = open(dst, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
		CHECK(fd);
		close(fd);
		CHECK(mount(src, dst, NULL, MS_BIND, NULL));
	}
	stamp[S_DEV] = now_ms();
	CHECK(mkdir("dev/pts", 0755));
	CHECK(mount("devpts", "dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620"));
	CHECK(symlink("pts/ptmx", "dev/ptmx"));
	stamp[S_DEVPTS] = now_ms();
	CHECK(mkdir("dev/shm", 01777));
	CHECK(mount("shm", "dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=1777"));
	CHECK(mount("tmpfs", "tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777"));
	stamp[S_SHM_TMP] = now_ms();
	CHECK(syscall(SYS_pivot_root, ".", "."));
	CHECK(umount2(".", MNT_DETACH));
	CHECK(chdir("/"));
	stamp[S_PIVOT] = now_ms();
	CHECK(mount(NULL, "/", NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL));
	stamp[S_RO] = now_ms();
	CHECK(sethostname("kiwi", 4));
	stamp[S_HOST] = now_ms();
	for (int cap = 0; prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; cap++)
		CHECK(prctl(PR_CAPBSET_DROP, cap, 0, 0, 0));
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2];
	memset(data, 0, sizeof data);
	CHECK(syscall(SYS_capset, &hdr, data));
	CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));
	stamp[S_CAPS] = now_ms();
	CHECK(syscall(SYS_close_range, 3, ~0U, 0));
	stamp[S_CLOSE] = now_ms();
	if (!do_exec)
		_exit(0);
	char *argv[] = {"/bin/true", NULL}, *envp[] = {"PATH=/bin", NULL};
	execve(argv[0], argv, envp);
	_exit(127);
}

/* One launch; returns its total ms and the per-step ms in d[s][r]. */
static double launch_once(const char *rootfs, double *stamp, bool do_exec, double **d, int r)
{
	int sp[2];
	if (pipe2(sp, O_CLOEXEC) < 0) {
		perror("pipe2");
		exit(1);
	}
	double t0 = now_ms();
	pid_t pid = clone3_fork(ALL_NS);
	if (pid < 0) {
		perror("clone3");
		exit(1);
	}
	if (pid == 0) {
		close(sp[1]);
		child_sequence(rootfs, sp[0], stamp, do_exec);
	}
	close(sp[0]);
	stamp[S_CLONE] = now_ms();
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/uid_map", (int)pid);
	int ok = write_file(path, "0 0 1");
	snprintf(path, sizeof path, "/proc/%d/setgroups", (int)pid);
	ok |= write_file(path, "deny");
	snprintf(path, sizeof path, "/proc/%d/gid_map", (int)pid);
	ok |= write_file(path, "0 0 1");
	if (ok < 0 || write(sp[1], "x", 1) != 1) {
		perror("id maps");
		exit(1);
	}
	close(sp[1]);
	wait_ok(pid, "launch sequence");
	stamp[S_EXEC_EXIT] = now_ms();
	double prev = t0;
	for (int s = 0; s < NSTEPS; s++) {
		d[s][r] = stamp[s] - prev;
		prev = stamp[s];
	}
	return stamp[S_EXEC_EXIT] - t0;
}

static void part2(const char *rootfs, int runs)
{
	double *stamp = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (stamp == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	double *d[2][NSTEPS], *total[2];
	for (int m = 0; m < 2; m++) {
		total[m] = calloc((size_t)runs, sizeof(double));
		for (int s = 0; s < NSTEPS; s++)
			d[m][s] = calloc((size_t)runs, sizeof(double));
	}
	for (int r = 0; r < runs; r++)
		for (int m = 0; m < 2; m++)
			total[m][r] = launch_once(rootfs, stamp, m == 0, d[m], r);
	printf("## A minimal launch, step by step (%d runs, interleaved with the same launch ending in _exit "
	       "instead of exec; ms between stamps, median / min)\n\n", runs);
	printf("| step | ending in exec | ending in _exit |\n|---|---:|---:|\n");
	double sum[2] = {0, 0};
	for (int s = 0; s < NSTEPS; s++) {
		printf("| %s |", step_names[s]);
		for (int m = 0; m < 2; m++) {
			double med = median_sorted(d[m][s], runs);
			sum[m] += med;
			printf(" %.3f / %.3f |", med, d[m][s][0]);
		}
		printf("\n");
	}
	printf("| **total** |");
	for (int m = 0; m < 2; m++) {
		double med = median_sorted(total[m], runs);
		printf(" %.3f / %.3f (sum of medians %.3f) |", med, total[m][0], sum[m]);
	}
	printf("\n\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: nscost ROOTFS [RUNS]\n");
		return 2;
	}
	int runs = argc > 2 ? atoi(argv[2]) : 300;
	if (runs < 1)
		runs = 1;
	static char bb[4096];
	snprintf(bb, sizeof bb, "%s/bin/busybox", argv[1]);
	exec_path = bb;
	part1(runs);
	part2(argv[1], runs);
	return 0;
}
