/* SPDX-License-Identifier: Apache-2.0 */
/* egresstool: drives the egress module the way the launcher does, without
 * the rest of the sandbox: the child gets a new network and mount
 * namespace (no user namespace, no rootfs), so the tests exercise the
 * host-side filter even against a child that is root in its netns.
 *   egresstool run [--report FILE] [--drop-queue-when FILE] [--queue-refused yes] [--KEY VALUE]... -- CMD [ARG...]
 *   egresstool bench N [--KEY VALUE]...
 *   egresstool gc
 * KEY is any egress setting (egress, allow-cidr, dns, egress-audit...).
 * --drop-queue-when FILE: once FILE exists, the name gate's queue socket
 * is closed under it, as when its verdict loop dies (tests of failing
 * closed): the socket bound in /proc/net/netfilter/nfnetlink_queue is
 * replaced by /dev/null, so the gate's thread never sees it again.
 * --queue-refused yes: the table's queue rule is refused as by a kernel
 * without any queue target (kiwi_egress_config's test_queue_refused).
 * Exit: the command's status, or 125 with one line on stderr. */
#include "kiwi/cleanup.h"
#include "kiwi/egress.h"
#include "kiwi/net.h"
#include "kiwi/spawn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <linux/netlink.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static _Noreturn void die(const kiwi_err *err)
{
	char buf[1024];
	kiwi_error_format(err, buf, sizeof(buf));
	fprintf(stderr, "egresstool: %s\n", buf);
	exit(125);
}

/* --KEY VALUE pairs up to "--" or the end; returns the index after them. */
static const char *drop_queue_when;

static int parse(int argc, char **argv, int i, struct kiwi_egress_config *c, const char **report)
{
	kiwi_err err = { 0 };
	for (; i < argc && strcmp(argv[i], "--"); i += 2) {
		if (strncmp(argv[i], "--", 2) || i + 1 >= argc) {
			fprintf(stderr, "egresstool: expected --KEY VALUE, got `%s`\n", argv[i]);
			exit(125);
		}
		if (!strcmp(argv[i], "--report"))
			*report = argv[i + 1];
		else if (!strcmp(argv[i], "--drop-queue-when"))
			drop_queue_when = argv[i + 1];
		else if (!strcmp(argv[i], "--queue-refused"))
			c->test_queue_refused = !strcmp(argv[i + 1], "yes");
		else if (kiwi_egress_config_add(c, argv[i] + 2, argv[i + 1], &err) < 0)
			die(&err);
	}
	return i < argc ? i + 1 : i;
}

static void bind_file(const char *src, const char *dst)
{
	if (mount(src, dst, NULL, MS_BIND, NULL) < 0 ||
	    mount(NULL, dst, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) < 0) {
		fprintf(stderr, "egresstool: cannot bind %s on %s: %m\n", src, dst);
		_exit(125);
	}
}

/* The child: wait for the parent's setup, then do what init does. */
static _Noreturn void child_main(int sock, const struct kiwi_egress_child *cc, char **cmd)
{
	kiwi_err err = { 0 };
	char go;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (read(sock, &go, 1) != 1 || go != 'g')
		_exit(125);
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		_exit(125);
	bind_file(cc->hosts_path, "/etc/hosts");
	bind_file(cc->resolv_path, "/etc/resolv.conf");
	if (kiwi_net_loopback_up(&err) < 0) {
		(void)!write(sock, "e", 1);
		die(&err);
	}
	(void)!write(sock, "a", 1);
	close(sock);
	if (!cmd || !cmd[0])
		_exit(0);
	execvp(cmd[0], cmd);
	fprintf(stderr, "egresstool: cannot execute %s: %m\n", cmd[0]);
	_exit(127);
}

static pid_t spawn(const struct kiwi_egress_child *cc, char **cmd, int *pidfd, int *sock)
{
	kiwi_err err = { 0 };
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		exit(125);
	pid_t pid = kiwi_spawn(CLONE_NEWNET | CLONE_NEWNS, -1, pidfd, &err);
	if (pid == 0) {
		close(sp[0]);
		child_main(sp[1], cc, cmd);
	}
	if (pid < 0)
		die(&err);
	close(sp[1]);
	*sock = sp[0];
	return pid;
}

/* Our netlink socket bound to a queue, replaced by /dev/null. */
static void drop_queue(void)
{
	FILE *f = fopen("/proc/self/net/netfilter/nfnetlink_queue", "r");
	unsigned num, portid;
	int dropped = 0;
	while (f && fscanf(f, "%u %u%*[^\n]", &num, &portid) == 2)
		for (int fd = 3; fd < 1024; fd++) {
			struct sockaddr_nl nl = { 0 };
			socklen_t l = sizeof(nl);
			if (getsockname(fd, (struct sockaddr *)&nl, &l) == 0 && nl.nl_family == AF_NETLINK &&
			    nl.nl_pid == portid) {
				int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
				dropped += null >= 0 && dup2(null, fd) == fd;
				close(null);
			}
		}
	if (f)
		fclose(f);
	if (!dropped)
		fprintf(stderr, "egresstool: no queue socket to drop\n");
}

static int wait_child(int pidfd, struct kiwi_egress *e)
{
	kiwi_err err = { 0 };
	struct pollfd p[2] = { { .fd = pidfd, .events = POLLIN }, { .fd = kiwi_egress_audit_fd(e), .events = POLLIN } };
	for (;;) {
		if (poll(p, 2, drop_queue_when ? 20 : -1) < 0 && errno != EINTR)
			exit(125);
		if (drop_queue_when && access(drop_queue_when, F_OK) == 0) {
			drop_queue();
			drop_queue_when = NULL;
		}
		if (p[1].revents && kiwi_egress_audit_read(e, &err) < 0)
			die(&err);
		if (p[0].revents) {
			siginfo_t si = { 0 };
			waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED);
			if (kiwi_egress_audit_read(e, &err) < 0)
				die(&err);
			return si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status;
		}
	}
}

static void write_report(const char *path, kiwi_json_writer *w)
{
	size_t len;
	const char *text = kiwi_jw_text(w, &len);
	FILE *f = path ? fopen(path, "w") : stderr;
	if (!f)
		exit(125);
	fwrite(text, 1, len, f);
	fputc('\n', f);
	if (path)
		fclose(f);
}

static void key_ms(kiwi_json_writer *w, const char *key, double ms)
{
	kiwi_jw_key(w, key);
	kiwi_jw_fixed(w, ms, 3);
}

static int cmd_run(int argc, char **argv)
{
	struct kiwi_egress_config c;
	struct kiwi_egress_child cc;
	struct kiwi_egress *e;
	const char *report = NULL;
	kiwi_err err = { 0 };
	kiwi_egress_config_init(&c);
	char **cmd = argv + parse(argc, argv, 2, &c, &report);
	double t0 = now_ms();
	if (kiwi_egress_prepare(&c, &e, &cc, &err) < 0)
		die(&err);
	if (kiwi_egress_gate_attach(e, &err) < 0) {
		kiwi_egress_teardown(e, NULL);
		die(&err);
	}
	double t1 = now_ms();
	int pidfd, sock;
	pid_t pid = spawn(&cc, cmd, &pidfd, &sock);
	double t2 = now_ms();
	if (kiwi_egress_setup(e, pid, pidfd, &err) < 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		kiwi_egress_teardown(e, NULL);
		die(&err);
	}
	double t3 = now_ms();
	char ack = 0;
	if (write(sock, "g", 1) != 1 || read(sock, &ack, 1) != 1 || ack != 'a') {
		waitpid(pid, NULL, 0);
		kiwi_egress_teardown(e, NULL);
		fprintf(stderr, "egresstool: the child failed to configure its end\n");
		return 125;
	}
	double t4 = now_ms();
	int status = wait_child(pidfd, e);

	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
	char a[INET_ADDRSTRLEN];
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "exit_code");
	kiwi_jw_int(w, status);
	kiwi_jw_key(w, "address");
	kiwi_jw_string(w, inet_ntop(AF_INET, &(struct in_addr){ htonl(cc.addr) }, a, sizeof(a)));
	kiwi_jw_key(w, "gateway");
	kiwi_jw_string(w, inet_ntop(AF_INET, &(struct in_addr){ htonl(cc.gateway) }, a, sizeof(a)));
	kiwi_egress_write_verdict(e, w);
	key_ms(w, "prepare_ms", t1 - t0);
	key_ms(w, "setup_ms", t3 - t2);
	key_ms(w, "child_ms", t4 - t3);
	double t5 = now_ms();
	int torn = kiwi_egress_teardown(e, &err);
	key_ms(w, "teardown_ms", now_ms() - t5);
	kiwi_jw_close_object(w);
	write_report(report, w);
	if (torn < 0)
		die(&err);
	return status;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void stats(kiwi_json_writer *w, const char *key, double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	kiwi_jw_key(w, key);
	kiwi_jw_open_object(w);
	key_ms(w, "min", v[0]);
	key_ms(w, "median", v[n / 2]);
	key_ms(w, "max", v[n - 1]);
	kiwi_jw_close_object(w);
}

/* N sandboxes' worth of egress, one after the other: prepare, a child in
 * a new netns, setup, the child's half, the child's end, teardown. */
static int cmd_bench(int argc, char **argv)
{
	int n = argc > 2 ? atoi(argv[2]) : 0;
	if (n <= 0 || n > 100000)
		return fprintf(stderr, "usage: egresstool bench N [--KEY VALUE]...\n"), 125;
	struct kiwi_egress_config c;
	const char *report = NULL;
	kiwi_egress_config_init(&c);
	parse(argc, argv, 3, &c, &report);
	double *ph[5];
	for (int k = 0; k < 5; k++)
		ph[k] = calloc((size_t)n, sizeof(double));
	for (int i = 0; i < n; i++) {
		struct kiwi_egress_child cc;
		struct kiwi_egress *e;
		kiwi_err err = { 0 };
		int pidfd, sock;
		char ack;
		double t0 = now_ms();
		if (kiwi_egress_prepare(&c, &e, &cc, &err) < 0)
			die(&err);
		pid_t pid = spawn(&cc, NULL, &pidfd, &sock);
		double t1 = now_ms();
		if (kiwi_egress_setup(e, pid, pidfd, &err) < 0)
			die(&err);
		double t2 = now_ms();
		if (write(sock, "g", 1) != 1 || read(sock, &ack, 1) != 1 || ack != 'a')
			return 125;
		double t3 = now_ms();
		wait_child(pidfd, e);
		close(pidfd);
		close(sock);
		double t4 = now_ms();
		if (kiwi_egress_teardown(e, &err) < 0)
			die(&err);
		double t5 = now_ms();
		ph[0][i] = t1 - t0;
		ph[1][i] = t2 - t1;
		ph[2][i] = t3 - t2;
		ph[3][i] = t5 - t4;
		ph[4][i] = (t5 - t0) - (t4 - t3);  /* everything but the child's own run */
	}
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "n");
	kiwi_jw_int(w, n);
	static const char *const names[] = { "prepare_spawn", "setup", "child", "teardown", "total" };
	for (int k = 0; k < 5; k++)
		stats(w, names[k], ph[k], n);
	kiwi_jw_close_object(w);
	size_t len;
	printf("%s\n", kiwi_jw_text(w, &len));
	return 0;
}

int main(int argc, char **argv)
{
	kiwi_err err = { 0 };
	signal(SIGPIPE, SIG_IGN);
	if (argc >= 2 && !strcmp(argv[1], "run"))
		return cmd_run(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "bench"))
		return cmd_bench(argc, argv);
	if (argc == 2 && !strcmp(argv[1], "gc")) {
		unsigned removed;
		if (kiwi_egress_gc(&removed, &err) < 0)
			die(&err);
		printf("{\"removed\":%u}\n", removed);
		return 0;
	}
	fprintf(stderr, "usage: egresstool run [--report FILE] [--KEY VALUE]... -- CMD... | bench N ... | gc\n");
	return 125;
}
