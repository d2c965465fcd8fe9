/* startbench: start-up latency, concurrency and peak-RSS driver for sandbox
 * launchers.  Not part of kiwi-run; see bench/README.md.
 *
 * Every tool is given as one argument "NAME=CMD ARG..." (split on spaces;
 * "{n}" in an argument becomes a number unique to that start, for runtimes
 * such as crun that need a fresh container id).  The driver starts each
 * command itself (vfork + execvp), times it with CLOCK_MONOTONIC from just
 * before the vfork to the return of wait4, and takes CPU time and ru_maxrss
 * from that wait4.  Phases:
 *
 *   1. sequential: --runs starts per tool, round-robin A,B,C,...,A,B,C,...
 *   2. batches: for each --batches size N, N starts at once, wait for all;
 *      wall time of the batch; repeated --batch-reps times, interleaved.
 *   3. rss: --rss-runs starts per tool under ptrace (exit-stop of the tool's
 *      own process only, never its children) to read its own VmHWM, next to
 *      the wait4 ru_maxrss, which is the maximum over the tool's whole
 *      reaped process tree.
 *
 * The driver is a child subreaper, so that it can also time (and count the
 * CPU of) processes a tool leaves behind when it exits before them.
 *
 * A start that exits non-zero (or is killed) is a failure: all of them are
 * reported and the exit status is 1.  Timing never changes the exit status.
 *
 * --hide-cgroup2 NAME runs that tool in a private mount namespace in which
 * /sys/fs/cgroup/unified is detached (made once, at start; entered with
 * setns in the child, before exec).  crun refuses every container on a
 * hybrid cgroup host otherwise, even with --cgroup-manager=disabled.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <grp.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_TOOLS 16
#define MAX_ARGS 64
#define MAX_BATCHES 8

struct tool {
	const char *name;
	char *argv[MAX_ARGS];  /* template, may hold "{n}" */
	int argc;
	bool hide_cgroup2;
	bool seq_only;         /* no batch phase */
	bool quiet;            /* stderr to /dev/null too */
	bool as_user;          /* drop to uid:gid (no groups) before exec */
	uid_t uid;
	gid_t gid;
	char **envp;           /* environ, or environ with HOME replaced */
	double *ms;            /* sequential wall times */
	double *cpu_ms;        /* sequential user+sys of all its processes */
	double *gone_ms;       /* sequential: until its last process is gone */
	int n;
	int failures;
	double *batch_ms[MAX_BATCHES];
	int batch_fail;
	long *own_hwm_kib;     /* rss phase: VmHWM of the tool's own process */
	long *tree_rss_kib;    /* rss phase: ru_maxrss */
	int rss_n;
	int execs;             /* execve() calls seen of the tool's own process */
};

static struct tool tools[MAX_TOOLS];
static int ntools;
static int devnull = -1;
static int hidden_mntns = -1;
static unsigned long serial;
static const char *first_failure;

static void die(const char *what)
{
	fprintf(stderr, "startbench: %s: %s\n", what, strerror(errno));
	exit(2);
}

static void *xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n ? n : 1, sz);
	if (!p)
		die("calloc");
	return p;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static double tv_ms(struct timeval tv)
{
	return (double)tv.tv_sec * 1e3 + (double)tv.tv_usec / 1e3;
}

static struct tool *find_tool(const char *name)
{
	for (int i = 0; i < ntools; i++)
		if (strcmp(tools[i].name, name) == 0)
			return &tools[i];
	return NULL;
}

static void parse_tool(char *spec)
{
	char *eq = strchr(spec, '=');
	if (!eq || eq == spec || ntools == MAX_TOOLS) {
		fprintf(stderr, "startbench: bad tool spec '%s' (want NAME=CMD ARG...)\n", spec);
		exit(2);
	}
	struct tool *t = &tools[ntools++];
	*eq = '\0';
	t->name = spec;
	char *save = NULL;
	for (char *w = strtok_r(eq + 1, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
		if (t->argc == MAX_ARGS - 1) {
			fprintf(stderr, "startbench: too many arguments for %s\n", t->name);
			exit(2);
		}
		t->argv[t->argc++] = w;
	}
	if (t->argc == 0) {
		fprintf(stderr, "startbench: empty command for %s\n", t->name);
		exit(2);
	}
}

/* Expands "{n}" in the template into buf; argv points into buf. */
static void build_argv(const struct tool *t, char **argv, char *buf, size_t bufsz)
{
	unsigned long id = ++serial;
	size_t off = 0;
	for (int i = 0; i < t->argc; i++) {
		const char *a = t->argv[i];
		const char *hole = strstr(a, "{n}");
		int len = hole
			? snprintf(buf + off, bufsz - off, "%.*s%lu-%ld%s", (int)(hole - a), a, id,
				   (long)getpid(), hole + 3)
			: snprintf(buf + off, bufsz - off, "%s", a);
		if (len < 0 || (size_t)len >= bufsz - off) {
			fprintf(stderr, "startbench: command too long\n");
			exit(2);
		}
		argv[i] = buf + off;
		off += (size_t)len + 1;
	}
	argv[t->argc] = NULL;
}

/* Runs in the (v)forked child: only system calls, then exec or _exit. */
static void child_exec(const struct tool *t, char **argv, bool traceme)
{
	if (t->hide_cgroup2 && setns(hidden_mntns, CLONE_NEWNS) < 0)
		_exit(121);
	if (dup2(devnull, STDOUT_FILENO) < 0 || (t->quiet && dup2(devnull, STDERR_FILENO) < 0))
		_exit(122);
	if (t->as_user && (setgroups(0, NULL) < 0 || setgid(t->gid) < 0 || setuid(t->uid) < 0))
		_exit(124);
	if (traceme && ptrace(PTRACE_TRACEME, 0, NULL, NULL) < 0)
		_exit(123);
	execvpe(argv[0], argv, t->envp ? t->envp : environ);
	_exit(127);
}

/* Timed starts use vfork (no copy of the driver); traced ones need fork. */
static pid_t start(const struct tool *t, bool traced)
{
	char *argv[MAX_ARGS];
	char buf[4096];
	build_argv(t, argv, buf, sizeof buf);
	pid_t pid;
	if (traced)
		pid = fork();
	else
		pid = vfork();
	if (pid < 0)
		die("fork");
	if (pid == 0)
		child_exec(t, argv, traced);
	return pid;
}

static bool note_status(struct tool *t, int status)
{
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return true;
	t->failures++;
	if (!first_failure)
		first_failure = t->name;
	if (t->failures <= 3) {
		if (WIFEXITED(status))
			fprintf(stderr, "startbench: %s exited %d\n", t->name, WEXITSTATUS(status));
		else
			fprintf(stderr, "startbench: %s killed by signal %d\n", t->name, WTERMSIG(status));
	}
	return false;
}

/* The driver is a child subreaper: a tool that exits before its own
 * children (bubblewrap's outer process does not wait for its pid 1) leaves
 * them to us. Waits for every such orphan; adds their CPU time to ru. */
static void reap_orphans(struct rusage *ru)
{
	struct rusage more;
	int st;
	while (wait4(-1, &st, __WALL, &more) > 0) {
		if (!ru)
			continue;
		ru->ru_utime.tv_sec += more.ru_utime.tv_sec;
		ru->ru_utime.tv_usec += more.ru_utime.tv_usec;
		ru->ru_stime.tv_sec += more.ru_stime.tv_sec;
		ru->ru_stime.tv_usec += more.ru_stime.tv_usec;
	}
	if (errno != ECHILD)
		die("wait4 (orphans)");
}

/* One sequential start: returns wall ms to the tool's exit, *gone to the
 * exit of the last process it left; fills rusage. */
static double run_once(struct tool *t, struct rusage *ru, int *status, double *gone)
{
	double t0 = now_ms();
	pid_t pid = start(t, false);
	if (wait4(pid, status, 0, ru) < 0)
		die("wait4");
	double t1 = now_ms();
	reap_orphans(ru);
	*gone = now_ms() - t0;
	return t1 - t0;
}

static void phase_sequential(int runs, int warmup)
{
	struct rusage ru;
	int status;
	for (int w = 0; w < warmup; w++)
		for (int i = 0; i < ntools; i++) {
			double gone;
			run_once(&tools[i], &ru, &status, &gone);
			note_status(&tools[i], status);
		}
	for (int r = 0; r < runs; r++)
		for (int i = 0; i < ntools; i++) {
			struct tool *t = &tools[i];
			double gone;
			double ms = run_once(t, &ru, &status, &gone);
			t->gone_ms[t->n] = gone;
			note_status(t, status);
			t->ms[t->n] = ms;
			t->cpu_ms[t->n] = tv_ms(ru.ru_utime) + tv_ms(ru.ru_stime);
			t->n++;
		}
}

static double run_batch(struct tool *t, int size, pid_t *pids)
{
	double t0 = now_ms();
	for (int k = 0; k < size; k++)
		pids[k] = start(t, false);
	for (int k = 0; k < size; k++) {
		int status;
		if (waitpid(pids[k], &status, 0) < 0)
			die("waitpid");
		if (!note_status(t, status))
			t->batch_fail++;
	}
	reap_orphans(NULL);
	return now_ms() - t0;
}

static void phase_batches(const int *sizes, int nsizes, int reps)
{
	int maxsize = 0;
	for (int b = 0; b < nsizes; b++)
		if (sizes[b] > maxsize)
			maxsize = sizes[b];
	pid_t *pids = xcalloc((size_t)maxsize, sizeof *pids);
	for (int r = 0; r < reps; r++)
		for (int b = 0; b < nsizes; b++)
			for (int i = 0; i < ntools; i++) {
				if (tools[i].seq_only)
					continue;
				tools[i].batch_ms[b][r] = run_batch(&tools[i], sizes[b], pids);
			}
	free(pids);
}

static long read_vmhwm_kib(pid_t pid)
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	long kib = -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* With STARTBENCH_SMAPS=DIR, the first rss-phase run of each tool leaves
 * DIR/NAME.smaps: where its own peak RSS lives, mapping by mapping. */
static void save_smaps(const struct tool *t, pid_t pid)
{
	const char *dir = getenv("STARTBENCH_SMAPS");
	if (!dir || t->rss_n > 0)
		return;
	char src[64], dst[4096], buf[8192];
	snprintf(src, sizeof src, "/proc/%d/smaps", (int)pid);
	snprintf(dst, sizeof dst, "%s/%s.smaps", dir, t->name);
	int in = open(src, O_RDONLY | O_CLOEXEC);
	int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ssize_t n;
	while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof buf)) > 0)
		if (write(out, buf, (size_t)n) != n)
			break;
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
}

/* One start under ptrace: only the tool's own process is traced (no fork
 * following), stopped once at its exit to read VmHWM while its mm lives. */
static void rss_once(struct tool *t)
{
	pid_t pid = start(t, true);
	int status;
	struct rusage ru;
	long hwm = -1;
	bool first = true;
	for (;;) {
		if (wait4(pid, &status, __WALL, &ru) < 0)
			die("wait4 (rss)");
		if (!WIFSTOPPED(status))
			break;
		int sig = WSTOPSIG(status), event = status >> 16;
		if (first) {
			/* the stop after the traced execve */
			first = false;
			t->execs++;
			if (ptrace(PTRACE_SETOPTIONS, pid, NULL,
				   (void *)(long)(PTRACE_O_TRACEEXIT | PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL)) < 0)
				die("PTRACE_SETOPTIONS");
			sig = 0;
		} else if (event == PTRACE_EVENT_EXIT) {
			hwm = read_vmhwm_kib(pid);
			save_smaps(t, pid);
			sig = 0;
		} else if (event == PTRACE_EVENT_EXEC) {
			t->execs++;
			sig = 0;
		}
		if (ptrace(PTRACE_CONT, pid, NULL, (void *)(long)sig) < 0)
			die("PTRACE_CONT");
	}
	note_status(t, status);
	reap_orphans(NULL);
	t->own_hwm_kib[t->rss_n] = hwm;
	t->tree_rss_kib[t->rss_n] = ru.ru_maxrss;
	t->rss_n++;
}

static void phase_rss(int runs)
{
	for (int r = 0; r < runs; r++)
		for (int i = 0; i < ntools; i++)
			rss_once(&tools[i]);
}

static void make_hidden_mntns(void)
{
	int orig = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
	if (orig < 0)
		die("open /proc/self/ns/mnt");
	if (unshare(CLONE_NEWNS) < 0)
		die("unshare(CLONE_NEWNS)");
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		die("make / private");
	if (umount2("/sys/fs/cgroup/unified", MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
		die("umount /sys/fs/cgroup/unified");
	hidden_mntns = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
	if (hidden_mntns < 0)
		die("open hidden mntns");
	if (setns(orig, CLONE_NEWNS) < 0)
		die("setns back");
	close(orig);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Sorts v; nearest-rank percentile (p in 0..100), median averages the middle two. */
static double pct(double *v, int n, double p)
{
	if (n == 0)
		return 0;
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	if (p == 50 && n % 2 == 0)
		return (v[n / 2 - 1] + v[n / 2]) / 2;
	int rank = (int)(p / 100.0 * n + 0.999999);
	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return v[rank - 1];
}

static double lpct(const long *v, int n, double p)
{
	double *d = xcalloc((size_t)n, sizeof *d);
	for (int i = 0; i < n; i++)
		d[i] = (double)v[i];
	double r = pct(d, n, p);
	free(d);
	return r;
}

static void report_sequential(int runs, int warmup)
{
	printf("## Sequential starts (%d runs per tool, round-robin, %d warm-up rounds dropped)\n\n",
	       runs, warmup);
	printf("| tool | median ms | min ms | p90 ms | max ms | all its processes gone: median / min ms "
	       "| cpu ms (median, user+sys of all its processes) | failures |\n");
	printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
	for (int i = 0; i < ntools; i++) {
		struct tool *t = &tools[i];
		double med = pct(t->ms, t->n, 50);
		double gone = pct(t->gone_ms, t->n, 50); /* sorts */
		printf("| %s | %.3f | %.3f | %.3f | %.3f | %.3f / %.3f | %.3f | %d |\n", t->name, med, t->ms[0],
		       pct(t->ms, t->n, 90), t->ms[t->n - 1], gone, t->gone_ms[0], pct(t->cpu_ms, t->n, 50),
		       t->failures);
	}
	printf("\n");
}

static void report_ratios(const char *ref)
{
	struct tool *r = find_tool(ref);
	if (!r || r->n == 0)
		return;
	printf("## Ratios %s / other (sorted arrays: median and minimum)\n\n", ref);
	printf("| ratio | by median | by min | by median, until all processes are gone |\n|---|---:|---:|---:|\n");
	for (int i = 0; i < ntools; i++) {
		struct tool *t = &tools[i];
		if (t == r)
			continue;
		printf("| %s/%s | %.2f | %.2f | %.2f |\n", ref, t->name, pct(r->ms, r->n, 50) / pct(t->ms, t->n, 50),
		       r->ms[0] / t->ms[0], pct(r->gone_ms, r->n, 50) / pct(t->gone_ms, t->n, 50));
	}
	printf("\n");
}

static void report_batches(const int *sizes, int nsizes, int reps)
{
	printf("## Concurrent batches: wall ms from the first start until every process of the batch is gone (%d rep(s) each, interleaved; median / min)\n\n",
	       reps);
	printf("| tool |");
	for (int b = 0; b < nsizes; b++)
		printf(" N=%d |", sizes[b]);
	printf(" failures |\n|---|");
	for (int b = 0; b < nsizes; b++)
		printf("---:|");
	printf("---:|\n");
	for (int i = 0; i < ntools; i++) {
		struct tool *t = &tools[i];
		if (t->seq_only)
			continue;
		printf("| %s |", t->name);
		for (int b = 0; b < nsizes; b++) {
			double med = pct(t->batch_ms[b], reps, 50); /* sorts */
			printf(" %.1f / %.1f |", med, t->batch_ms[b][0]);
		}
		printf(" %d |\n", t->batch_fail);
	}
	printf("\n");
}

static void report_rss(int runs)
{
	printf("## Peak RSS, KiB (%d run(s) per tool, ptrace exit-stop; median / max)\n\n", runs);
	printf("| tool | own process VmHWM | ru_maxrss of tree (wait4) | execve of own process per run |\n");
	printf("|---|---:|---:|---:|\n");
	for (int i = 0; i < ntools; i++) {
		struct tool *t = &tools[i];
		printf("| %s | %.0f / %.0f | %.0f / %.0f | %.1f |\n", t->name, lpct(t->own_hwm_kib, t->rss_n, 50),
		       lpct(t->own_hwm_kib, t->rss_n, 100), lpct(t->tree_rss_kib, t->rss_n, 50),
		       lpct(t->tree_rss_kib, t->rss_n, 100), t->rss_n ? (double)t->execs / t->rss_n : 0.0);
	}
	printf("\n");
}

static void report_goals(const char *ref)
{
	struct tool *k = find_tool(ref);
	if (!k || k->n == 0)
		return;
	struct {
		const char *peer;
		double factor;
		bool strict;
	} g[] = {{"crun", 0.5, false}, {"bwrap", 1.0, true}, {"floor", 1.5, false}};
	printf("## Goals (informational; never affects the exit status)\n\n| goal | measured | met |\n|---|---|---|\n");
	for (int gone = 0; gone < 2; gone++) {
		double km = pct(gone ? k->gone_ms : k->ms, k->n, 50);
		for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
			struct tool *p = find_tool(g[i].peer);
			if (!p || p->n == 0)
				continue;
			double lim = pct(gone ? p->gone_ms : p->ms, p->n, 50) * g[i].factor;
			bool met = g[i].strict ? km < lim : km <= lim;
			printf("| %s median %s %.1fx %s median%s | %.3f vs %.3f ms | %s |\n", ref,
			       g[i].strict ? "<" : "<=", g[i].factor, g[i].peer,
			       gone ? ", until all processes are gone" : "", km, lim, met ? "met" : "NOT met");
		}
	}
	if (k->rss_n) {
		double own = lpct(k->own_hwm_kib, k->rss_n, 100);
		printf("| %s own peak RSS < 1536 KiB | %.0f KiB (max over runs) | %s |\n", ref, own,
		       own < 1536 ? "met" : "NOT met");
	}
	printf("\n");
}

static void usage(void) __attribute__((noreturn));

/* "NAME=UID:GID[:HOME]": run NAME as that user, with HOME set when given. */
static void set_user(const char *spec)
{
	char name[64], home[512] = "";
	unsigned uid, gid;
	if (sscanf(spec, "%63[^=]=%u:%u:%511s", name, &uid, &gid, home) < 3)
		usage();
	struct tool *t = find_tool(name);
	if (!t)
		usage();
	t->as_user = true;
	t->uid = uid;
	t->gid = gid;
	if (!home[0])
		return;
	size_t n = 0;
	while (environ[n])
		n++;
	t->envp = xcalloc(n + 2, sizeof *t->envp);
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "HOME=", 5) != 0)
			t->envp[k++] = environ[i];
	size_t len = strlen(home) + 6;
	t->envp[k] = xcalloc(len, 1);
	snprintf(t->envp[k], len, "HOME=%s", home);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: startbench [--runs N] [--warmup N] [--batches 1,10,50,200] [--batch-reps N]\n"
		"                  [--rss-runs N] [--ref NAME] [--goals NAME] [--hide-cgroup2 NAME]...\n"
		"                  [--seq-only NAME]... [--quiet NAME]... [--user NAME=UID:GID[:HOME]]...\n"
		"                  NAME=CMD ARG... [NAME=CMD ARG...]...\n"
		"--batches none skips the batch phase; --goals NAME checks issue 2's goals for NAME\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int runs = 200, warmup = 5, reps = 5, rss_runs = 20;
	int sizes[MAX_BATCHES] = {1, 10, 50, 200}, nsizes = 4;
	const char *ref = NULL, *goals = NULL;
	const char *hide[MAX_TOOLS], *seq_only[MAX_TOOLS], *quiet[MAX_TOOLS], *users[MAX_TOOLS];
	int nhide = 0, nseq = 0, nquiet = 0, nusers = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (a[0] != '-') {
			parse_tool(argv[i]);
			continue;
		}
		if (!v || nhide == MAX_TOOLS || nseq == MAX_TOOLS || nquiet == MAX_TOOLS || nusers == MAX_TOOLS)
			usage();
		i++;
		if (strcmp(a, "--runs") == 0)
			runs = atoi(v);
		else if (strcmp(a, "--warmup") == 0)
			warmup = atoi(v);
		else if (strcmp(a, "--batch-reps") == 0)
			reps = atoi(v);
		else if (strcmp(a, "--rss-runs") == 0)
			rss_runs = atoi(v);
		else if (strcmp(a, "--ref") == 0)
			ref = v;
		else if (strcmp(a, "--hide-cgroup2") == 0)
			hide[nhide++] = v;
		else if (strcmp(a, "--seq-only") == 0)
			seq_only[nseq++] = v;
		else if (strcmp(a, "--quiet") == 0)
			quiet[nquiet++] = v;
		else if (strcmp(a, "--user") == 0)
			users[nusers++] = v;
		else if (strcmp(a, "--goals") == 0)
			goals = v;
		else if (strcmp(a, "--batches") == 0) {
			nsizes = 0;
			if (strcmp(v, "none") == 0)
				continue;
			char *copy = strdup(v), *save = NULL;
			for (char *w = strtok_r(copy, ",", &save); w && nsizes < MAX_BATCHES;
			     w = strtok_r(NULL, ",", &save))
				sizes[nsizes++] = atoi(w);
		} else
			usage();
	}
	if (ntools == 0 || runs < 1 || reps < 1 || rss_runs < 0)
		usage();
	for (int i = 0; i < nhide; i++) {
		struct tool *t = find_tool(hide[i]);
		if (!t)
			usage();
		t->hide_cgroup2 = true;
	}
	for (int i = 0; i < nseq; i++) {
		struct tool *t = find_tool(seq_only[i]);
		if (!t)
			usage();
		t->seq_only = true;
	}
	for (int i = 0; i < nquiet; i++) {
		struct tool *t = find_tool(quiet[i]);
		if (!t)
			usage();
		t->quiet = true;
	}
	for (int i = 0; i < nusers; i++)
		set_user(users[i]);
	if (nhide)
		make_hidden_mntns();
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
		die("PR_SET_CHILD_SUBREAPER");
	devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (devnull < 0)
		die("open /dev/null");
	for (int i = 0; i < ntools; i++) {
		struct tool *t = &tools[i];
		t->ms = xcalloc((size_t)runs, sizeof *t->ms);
		t->cpu_ms = xcalloc((size_t)runs, sizeof *t->cpu_ms);
		t->gone_ms = xcalloc((size_t)runs, sizeof *t->gone_ms);
		for (int b = 0; b < nsizes; b++)
			t->batch_ms[b] = xcalloc((size_t)reps, sizeof(double));
		t->own_hwm_kib = xcalloc((size_t)rss_runs, sizeof(long));
		t->tree_rss_kib = xcalloc((size_t)rss_runs, sizeof(long));
	}

	double t0 = now_ms();
	phase_sequential(runs, warmup);
	double t1 = now_ms();
	if (nsizes)
		phase_batches(sizes, nsizes, reps);
	double t2 = now_ms();
	phase_rss(rss_runs);
	double t3 = now_ms();

	report_sequential(runs, warmup);
	if (ref)
		report_ratios(ref);
	if (nsizes)
		report_batches(sizes, nsizes, reps);
	report_rss(rss_runs);
	if (goals)
		report_goals(goals);
	printf("Phase wall times: sequential %.1f s, batches %.1f s, rss %.1f s.\n\n", (t1 - t0) / 1e3,
	       (t2 - t1) / 1e3, (t3 - t2) / 1e3);

	int failed = 0;
	for (int i = 0; i < ntools; i++)
		failed += tools[i].failures;
	if (failed) {
		fprintf(stderr, "startbench: %d start(s) failed (first: %s)\n", failed, first_failure);
		return 1;
	}
	return 0;
}
