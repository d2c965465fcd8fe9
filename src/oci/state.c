/* SPDX-License-Identifier: Apache-2.0 */
/* A container's state directory: state.json and the status derived from
 * the live process. The pid alone is not an identity (pids are reused),
 * so state.json keeps the init's start time too, and every command that
 * acts on the pid first opens a pidfd and then checks the start time:
 * from then on the pidfd cannot reach anyone else. */
#include "oci_int.h"
#include "kiwi/cgroup.h"
#include "kiwi/cleanup.h"
#include "kiwi/fileio.h"
#include "kiwi/oci_runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

const char *kiwi_oci_status_name(enum kiwi_oci_status s)
{
	static const char *const names[] = { "creating", "created", "running", "stopped" };
	return (unsigned)s < 4 ? names[s] : "unknown";
}

int kiwi_oci_check_id(const char *id, kiwi_err *err)
{
	size_t n = strlen(id);
	if (!n || n > 255 || !strcmp(id, ".") || !strcmp(id, ".."))
		return kiwi_error(err, EINVAL, "id", "invalid container id `%s`", id);
	for (const char *c = id; *c; c++)
		if (!(*c >= 'a' && *c <= 'z') && !(*c >= 'A' && *c <= 'Z') && !(*c >= '0' && *c <= '9') &&
		    !strchr("_.+-", *c))
			return kiwi_error(err, EINVAL, "id", "invalid container id `%s`: use letters, digits, _ . + -", id);
	return 0;
}

int kiwi_oci_state_dir(const char *root, const char *id, char *out, size_t len, kiwi_err *err)
{
	if (kiwi_oci_check_id(id, err) < 0)
		return -1;
	if (snprintf(out, len, "%s/%s", root, id) >= (int)len)
		return kiwi_error(err, ENAMETOOLONG, "state", "state path for `%s` is too long", id);
	return 0;
}

#define PENDING_CGROUP "cgroup.pending"

void kiwi_oci_state_dir_remove(const char *dir)
{
	char path[4400];
	static const char *const files[] = { KIWI_OCI_FIFO, "state.json", "state.json.tmp", PENDING_CGROUP,
					     PENDING_CGROUP ".kiwi-tmp" };
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(files); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		unlink(path);
	}
	rmdir(dir);
}

int kiwi_oci_pending_cgroup_write(const char *dir, const char *cgroup, const char *top, kiwi_err *err)
{
	char path[4400], tmp[4416], text[8300];
	snprintf(path, sizeof(path), "%s/" PENDING_CGROUP, dir);
	snprintf(tmp, sizeof(tmp), "%s.kiwi-tmp", path);
	int n = snprintf(text, sizeof(text), "%s\n%s\n", cgroup, top);
	if (n < 0 || (size_t)n >= sizeof(text))
		return kiwi_error(err, ENAMETOOLONG, "state", "cgroup path `%s` is too long", cgroup);
	return kiwi_write_file_replace(path, tmp, text, (size_t)n, 0600, "state", err);
}

void kiwi_oci_pending_cgroup_done(const char *dir)
{
	char path[4400];
	snprintf(path, sizeof(path), "%s/" PENDING_CGROUP, dir);
	unlink(path);
}

void kiwi_oci_pending_cgroup_collect(const char *dir)
{
	char path[4400];
	snprintf(path, sizeof(path), "%s/" PENDING_CGROUP, dir);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	if (fd < 0 || kiwi_read_bounded(fd, 8300, "the pending cgroup", &text, &len, NULL) < 0)
		return;
	char *top = strchr(text, '\n');
	if (!top)
		return;
	*top++ = '\0';
	top[strcspn(top, "\n")] = '\0';
	/* What runs in it is killed first (a killed create's init may live on
	 * in a shared pid namespace); the parents go once empty. */
	if (text[0] == '/' && kiwi_cgroup_remove_path(text, NULL) == 0 && top[0] == '/')
		kiwi_cgroup_remove_parents(text, top);
	unlink(path);
}

int kiwi_oci_proc_start_time(pid_t pid, uint64_t *start, char *state)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* The command name (field 2) may hold spaces and parentheses: count
	 * from the last ')'. Field 3 is the state, 22 the start time. */
	char *p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return -1;
	char st = p[2];
	for (int field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	unsigned long long t;
	if (!p || sscanf(p, " %llu", &t) != 1)
		return -1;
	*start = t;
	if (state)
		*state = st;
	return 0;
}

enum kiwi_oci_status kiwi_oci_state_status(const char *root, const struct kiwi_oci_state *st, int *pidfd)
{
	if (pidfd)
		*pidfd = -1;
	if (st->pid <= 0)
		return KIWI_OCI_STOPPED;
	_cleanup_close_ int fd = (int)syscall(SYS_pidfd_open, st->pid, 0);
	uint64_t start;
	char pstate;
	if (fd < 0 || kiwi_oci_proc_start_time(st->pid, &start, &pstate) < 0 || start != st->start_time ||
	    pstate == 'Z' || pstate == 'X')
		return KIWI_OCI_STOPPED;
	char fifo[4352];
	snprintf(fifo, sizeof(fifo), "%s/%s/" KIWI_OCI_FIFO, root, st->id);
	enum kiwi_oci_status s = access(fifo, F_OK) == 0 ? KIWI_OCI_CREATED : KIWI_OCI_RUNNING;
	if (pidfd)
		*pidfd = TAKE_FD(fd);
	return s;
}

int kiwi_oci_lock(const char *root, const char *id, kiwi_err *err)
{
	char dir[4352];
	if (kiwi_oci_state_dir(root, id, dir, sizeof(dir), err) < 0)
		return -1;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return kiwi_error(err, errno, "state", errno == ENOENT ? "container `%s` does not exist"
								       : "cannot open the state of `%s`", id);
	if (flock(fd, LOCK_EX) < 0) {
		close(fd);
		return kiwi_error(err, errno, "state", "cannot lock the state of `%s`", id);
	}
	return fd;
}

void kiwi_oci_state_clear(struct kiwi_oci_state *st)
{
	free(st->annotations);
	st->annotations = NULL;
}

static void write_fields(kiwi_json_writer *w, const struct kiwi_oci_state *st, const char *status)
{
	kiwi_jw_key(w, "ociVersion");
	kiwi_jw_string(w, KIWI_OCI_VERSION);
	kiwi_jw_key(w, "id");
	kiwi_jw_string(w, st->id);
	kiwi_jw_key(w, "pid");
	kiwi_jw_int(w, st->pid);
	kiwi_jw_key(w, "status");
	kiwi_jw_string(w, status);
	kiwi_jw_key(w, "bundle");
	kiwi_jw_string(w, st->bundle);
	kiwi_jw_key(w, "rootfs");
	kiwi_jw_string(w, st->rootfs);
	kiwi_jw_key(w, "created");
	kiwi_jw_string(w, st->created);
	kiwi_jw_key(w, "owner");
	kiwi_jw_string(w, "");
	if (st->annotations) {
		_cleanup_json_ kiwi_json *a = kiwi_json_parse(st->annotations, strlen(st->annotations), NULL);
		if (a && kiwi_json_len(a)) {
			kiwi_jw_key(w, "annotations");
			kiwi_jw_value(w, a);
		}
	}
}

void kiwi_oci_write_state(kiwi_json_writer *w, const struct kiwi_oci_state *st, enum kiwi_oci_status s)
{
	struct kiwi_oci_state shown = *st;
	/* A stopped container has no process: runc prints pid 0. */
	if (s == KIWI_OCI_STOPPED)
		shown.pid = 0;
	kiwi_jw_open_object(w);
	write_fields(w, &shown, kiwi_oci_status_name(s));
	kiwi_jw_close_object(w);
}

char *kiwi_oci_state_text(const struct kiwi_oci_state *st, enum kiwi_oci_status s)
{
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
	if (!w)
		return NULL;
	kiwi_oci_write_state(w, st, s);
	size_t len;
	const char *text = kiwi_jw_text(w, &len);
	return strndup(text, len);
}

int kiwi_oci_state_save(const char *root, const struct kiwi_oci_state *st, kiwi_err *err)
{
	char dir[4352], tmp[4400], path[4400];
	if (kiwi_oci_state_dir(root, st->id, dir, sizeof(dir), err) < 0)
		return -1;
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
	if (!w)
		return kiwi_error(err, ENOMEM, "state", "cannot allocate");
	kiwi_jw_open_object(w);
	write_fields(w, st, "created");
	kiwi_jw_key(w, "kiwi");
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "startTime");
	kiwi_jw_int(w, (long long)st->start_time);
	kiwi_jw_key(w, "cgroup");
	kiwi_jw_string(w, st->cgroup);
	kiwi_jw_key(w, "cgroupOwned");
	kiwi_jw_bool(w, st->cgroup_owned);
	kiwi_jw_key(w, "cgroupTop");
	kiwi_jw_string(w, st->cgroup_top);
	kiwi_jw_key(w, "uid");
	kiwi_jw_int(w, st->owner);
	kiwi_jw_close_object(w);
	kiwi_jw_close_object(w);
	size_t len;
	const char *text = kiwi_jw_text(w, &len);
	/* Written whole, then renamed: a reader never sees half a file. */
	snprintf(tmp, sizeof(tmp), "%s/state.json.tmp", dir);
	snprintf(path, sizeof(path), "%s/state.json", dir);
	return kiwi_write_file_replace(path, tmp, text, len, 0600, "state", err);
}

static void copy_str(const kiwi_json *doc, const char *key, char *out, size_t len)
{
	const char *s = kiwi_json_string(kiwi_json_get(doc, key));
	snprintf(out, len, "%s", s ? s : "");
}

int kiwi_oci_state_load(const char *root, const char *id, struct kiwi_oci_state *st, kiwi_err *err)
{
	char dir[4352], path[4400];
	memset(st, 0, sizeof(*st));
	if (kiwi_oci_state_dir(root, id, dir, sizeof(dir), err) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/state.json", dir);
	if (access(path, F_OK) < 0)
		return kiwi_error(err, ENOENT, "state", "container `%s` does not exist", id);
	_cleanup_json_ kiwi_json *doc = kiwi_json_parse_file(path, 1u << 20, err);
	if (!doc)
		return -1;
	const kiwi_json *k = kiwi_json_get(doc, "kiwi");
	long long pid = 0, start = 0, uid = 0;
	bool owned = false;
	if (!kiwi_json_int(kiwi_json_get(doc, "pid"), &pid) || !kiwi_json_int(kiwi_json_get(k, "startTime"), &start))
		return kiwi_error(err, EINVAL, "state", "`%s` is damaged", path);
	kiwi_json_int(kiwi_json_get(k, "uid"), &uid);
	kiwi_json_bool(kiwi_json_get(k, "cgroupOwned"), &owned);
	snprintf(st->id, sizeof(st->id), "%s", id);
	copy_str(doc, "bundle", st->bundle, sizeof(st->bundle));
	copy_str(doc, "rootfs", st->rootfs, sizeof(st->rootfs));
	copy_str(doc, "created", st->created, sizeof(st->created));
	copy_str(k, "cgroup", st->cgroup, sizeof(st->cgroup));
	copy_str(k, "cgroupTop", st->cgroup_top, sizeof(st->cgroup_top));
	st->pid = (pid_t)pid;
	st->start_time = (uint64_t)start;
	st->owner = (uid_t)uid;
	st->cgroup_owned = owned;
	const kiwi_json *a = kiwi_json_get(doc, "annotations");
	if (a) {
		_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
		if (!w)
			return kiwi_error(err, ENOMEM, "state", "cannot allocate");
		kiwi_jw_value(w, a);
		size_t len;
		const char *text = kiwi_jw_text(w, &len);
		st->annotations = strndup(text, len);
	}
	return 0;
}

int kiwi_oci_signal_from_name(const char *s)
{
	static const struct {
		const char *name;
		int sig;
	} names[] = {
		{ "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT }, { "ILL", SIGILL },
		{ "TRAP", SIGTRAP }, { "ABRT", SIGABRT }, { "BUS", SIGBUS }, { "FPE", SIGFPE },
		{ "KILL", SIGKILL }, { "USR1", SIGUSR1 }, { "SEGV", SIGSEGV }, { "USR2", SIGUSR2 },
		{ "PIPE", SIGPIPE }, { "ALRM", SIGALRM }, { "TERM", SIGTERM }, { "STKFLT", SIGSTKFLT },
		{ "CHLD", SIGCHLD }, { "CONT", SIGCONT }, { "STOP", SIGSTOP }, { "TSTP", SIGTSTP },
		{ "TTIN", SIGTTIN }, { "TTOU", SIGTTOU }, { "URG", SIGURG }, { "XCPU", SIGXCPU },
		{ "XFSZ", SIGXFSZ }, { "VTALRM", SIGVTALRM }, { "PROF", SIGPROF }, { "WINCH", SIGWINCH },
		{ "IO", SIGIO }, { "PWR", SIGPWR }, { "SYS", SIGSYS },
	};
	char *end;
	long n = strtol(s, &end, 10);
	if (*s && !*end)
		return n > 0 && n < NSIG ? (int)n : -1;
	if (!strncasecmp(s, "SIG", 3))
		s += 3;
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(names); i++)
		if (!strcasecmp(s, names[i].name))
			return names[i].sig;
	return -1;
}
