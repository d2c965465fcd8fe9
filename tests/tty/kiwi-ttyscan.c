/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-ttyscan: looks for every terminal within reach and tries to push a
 * line of input into each (TIOCSTI), then to make it its own (TIOCSCTTY).
 * Run inside a sandbox whose caller sits at a terminal; what it found is
 * written as JSON lines to the file named by argv[1] (stdout may be a pipe
 * to kiwi-run, and the caller's screen is what the test reads).
 *
 *   {"where": "fd 0" | "/dev/tty" | "/dev/pts/0" | "/proc/1/fd/2",
 *    "tty": true, "dev": "0:55", "rdev": "136:0", "sti": 0 | errno}
 *
 * Every open that fails is listed too, with "open": errno. Static, so that
 * it runs in a busybox rootfs.
 * `kiwi-ttyscan OUTFILE --own-fds` looks at its own fds only: the control
 * run outside any sandbox, which must never touch the host's other
 * terminals or other processes' fds. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <stdbool.h>
#include <termios.h>
#include <unistd.h>

#define MARKER "echo kiwi-injected\n"

static FILE *out;

/* TIOCSTI of the whole marker; 0 or the errno of the first refusal. */
static int push_input(int fd)
{
	for (const char *c = MARKER; *c; c++)
		if (ioctl(fd, TIOCSTI, c) < 0)
			return errno;
	return 0;
}

static void report_fd(const char *where, int fd)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return;
	bool tty = isatty(fd);
	fprintf(out, "{\"where\": \"%s\", \"tty\": %s, \"dev\": \"%u:%u\", \"rdev\": \"%u:%u\"", where,
		tty ? "true" : "false", major(st.st_dev), minor(st.st_dev), major(st.st_rdev),
		minor(st.st_rdev));
	if (tty)
		fprintf(out, ", \"sti\": %d", push_input(fd));
	fputs("}\n", out);
}

static void report_open_failure(const char *where, int errnum)
{
	fprintf(out, "{\"where\": \"%s\", \"open\": %d}\n", where, errnum);
}

/* Opens path as a terminal would be opened and reports it. */
static void try_path(const char *path)
{
	int fd = open(path, O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		fd = open(path, O_RDONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		report_open_failure(path, errno);
		return;
	}
	report_fd(path, fd);
	close(fd);
}

/* Every fd of every process this one can see. */
static void scan_proc(void)
{
	DIR *proc = opendir("/proc");
	struct dirent *p;
	while (proc && (p = readdir(proc))) {
		if (p->d_name[0] < '0' || p->d_name[0] > '9')
			continue;
		char dir[300];
		snprintf(dir, sizeof(dir), "/proc/%s/fd", p->d_name);
		DIR *fds = opendir(dir);
		if (!fds) {
			report_open_failure(dir, errno);
			continue;
		}
		struct dirent *f;
		while ((f = readdir(fds)))
			if (f->d_name[0] != '.') {
				char path[600];
				snprintf(path, sizeof(path), "%s/%s", dir, f->d_name);
				try_path(path);
			}
		closedir(fds);
	}
	if (proc)
		closedir(proc);
}

static void scan_pts(void)
{
	DIR *pts = opendir("/dev/pts");
	struct dirent *e;
	if (!pts) {
		report_open_failure("/dev/pts", errno);
		return;
	}
	/* ptmx would make a new pty of the sandbox's own: not a way out. */
	while ((e = readdir(pts)))
		if (e->d_name[0] != '.' && strcmp(e->d_name, "ptmx")) {
			char path[300];
			snprintf(path, sizeof(path), "/dev/pts/%s", e->d_name);
			try_path(path);
		}
	closedir(pts);
}

int main(int argc, char **argv)
{
	bool own_only = argc == 3 && !strcmp(argv[2], "--own-fds");
	if (argc != 2 && !own_only) {
		fprintf(stderr, "usage: kiwi-ttyscan OUTFILE [--own-fds]\n");
		return 2;
	}
	out = fopen(argv[1], "we");
	if (!out) {
		perror(argv[1]);
		return 2;
	}
	for (int fd = 0; fd < 1024; fd++) {
		char where[16];
		if (fd == fileno(out) || fcntl(fd, F_GETFD) < 0)
			continue;
		snprintf(where, sizeof(where), "fd %d", fd);
		report_fd(where, fd);
	}
	if (own_only)
		return fclose(out) == 0 ? 0 : 1;
	try_path("/dev/tty");
	scan_pts();
	scan_proc();
	errno = 0;
	int r = ioctl(0, TIOCSCTTY, 1);
	fprintf(out, "{\"where\": \"tiocsctty\", \"ok\": %s, \"errno\": %d}\n", r == 0 ? "true" : "false",
		r == 0 ? 0 : errno);
	if (r == 0)
		fprintf(out, "{\"where\": \"sti after sctty\", \"sti\": %d}\n", push_input(0));
	return fclose(out) == 0 ? 0 : 1;
}
