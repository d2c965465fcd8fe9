/* SPDX-License-Identifier: Apache-2.0 */
/* Finding a session, reaching its supervisor, and the evidence of its end
 * (kiwi/session.h). */
#include "kiwi/session.h"
#include "kiwi/cleanup.h"
#include "kiwi/fds.h"
#include "kiwi/json.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <unistd.h>

int kiwi_session_find(const char *id, struct kiwi_registry_entry *e, kiwi_err *err)
{
	_cleanup_close_ int fd = -1;
	kiwi_err why = { 0 };
	if (kiwi_registry_find_held(id, e, &fd, &why) < 0) {
		/* A malformed id or an ambiguous prefix says so; anything else
		 * is "no such session of yours", whoever else's it may be. */
		if (why.errnum == EINVAL)
			return kiwi_error(err, EINVAL, "session", "%s", why.msg);
		return kiwi_error(err, ENOENT, "session",
				  "no session `%s` of uid %u (see `kiwi-run session list`): it never was, "
				  "it ended, or it is another user's", id, (unsigned)geteuid());
	}
	if (!e->session)
		return kiwi_error(err, EINVAL, "session", "`%s` is a run, not a session (see `kiwi-run list`)", e->id);
	return 0;
}

int kiwi_session_socket_path(const char *id, char *out, size_t len, bool create_dir, kiwi_err *err)
{
	char dir[4096];
	if (kiwi_registry_dir(dir, sizeof(dir), create_dir, err) < 0)
		return -1;
	struct sockaddr_un sun;
	if (snprintf(out, len, "%s/%s.sock", dir, id) >= (int)len || strlen(out) >= sizeof(sun.sun_path))
		return kiwi_error(err, ENAMETOOLONG, "session", "the socket path `%s/%s.sock` is too long for a unix "
				  "socket: set XDG_RUNTIME_DIR to a shorter directory", dir, id);
	return 0;
}

static int request(const char *id, const void *req, size_t len, kiwi_err *err)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	if (kiwi_session_socket_path(id, sun.sun_path, sizeof(sun.sun_path), false, err) < 0)
		return -1;
	_cleanup_close_ int conn = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (conn < 0)
		return kiwi_error(err, errno, "session", "cannot create a socket");
	if (connect(conn, (struct sockaddr *)&sun, sizeof(sun)) < 0)
		return kiwi_error(err, errno, "session", "cannot reach session `%s` (%s)", id,
				  errno == ENOENT || errno == ECONNREFUSED ? "it is ending" : "its socket");
	if (send(conn, req, len, MSG_NOSIGNAL) != (ssize_t)len)
		return kiwi_error(err, errno, "session", "cannot talk to session `%s`", id);
	return TAKE_FD(conn);
}

int kiwi_session_reach(const char *id, const void *req, size_t len)
{
	kiwi_err ignored = { 0 };
	if (!kiwi_registry_valid_id(id, KIWI_REGISTRY_ID_LEN))
		return -1;
	return request(id, req, len, &ignored);
}

int kiwi_session_request(const struct kiwi_registry_entry *e, const void *req, size_t len, kiwi_err *err)
{
	return request(e->id, req, len, err);
}

int kiwi_session_connect(const struct kiwi_registry_entry *e, char op, kiwi_err *err)
{
	return request(e->id, &op, 1, err);
}

/* One message, as recv returns it (EINTR retried). */
static ssize_t recv_one(int fd, void *buf, size_t len)
{
	ssize_t n;
	do
		n = recv(fd, buf, len, 0);
	while (n < 0 && errno == EINTR);
	return n;
}

int kiwi_session_tally(const struct kiwi_registry_entry *e, const struct kiwi_egress_mark *since,
		       struct kiwi_session_tally_reply *r, struct kiwi_egress_tally **tally, int *audit_fd,
		       kiwi_err *err)
{
	struct kiwi_session_tally_request req = { .op = KIWI_SESSION_OP_TALLY, .has_since = since != NULL };
	if (since)
		req.since = *since;
	_cleanup_close_ int conn = kiwi_session_request(e, &req, sizeof(req), err);
	if (conn < 0)
		return -1;
	int fd = -1;
	if (kiwi_recv_fd(conn, r, sizeof(*r), 0, &fd) != (ssize_t)sizeof(*r)) {
		kiwi_closep(&fd);
		return kiwi_error(err, EPROTO, "session", "session `%s` did not say where its audit stands", e->id);
	}
	if (audit_fd)
		*audit_fd = fd;
	else
		kiwi_closep(&fd);
	if (!since || !tally)
		return 0;
	size_t len = kiwi_egress_tally_size();
	_cleanup_free_ void *buf = r->has_tally ? malloc(len + 1) : NULL;
	ssize_t n = buf ? recv_one(conn, buf, len + 1) : -1;
	*tally = n > 0 ? kiwi_egress_tally_load(buf, (size_t)n) : NULL;
	if (!*tally)
		return kiwi_error(err, EPROTO, "session", "session `%s` sent no tally of the exec's attempts", e->id);
	return 0;
}

int kiwi_session_seal(const struct kiwi_registry_entry *e, int *reaped, kiwi_err *err)
{
	_cleanup_close_ int conn = kiwi_session_connect(e, KIWI_SESSION_OP_SEAL, err);
	if (conn < 0)
		return -1;
	struct kiwi_session_seal_reply r = { 0 };
	ssize_t n = recv_one(conn, &r, sizeof(r));
	if (n != (ssize_t)sizeof(r))
		return kiwi_error(err, n < 0 ? errno : EPROTO, "session",
				  "session `%s` did not confirm that its processes and network are gone", e->id);
	if (!r.ok) {
		*err = r.err;
		return kiwi_error_wrap(err, "sealing session `%s`", e->id);
	}
	*reaped = r.reaped;
	return 0;
}

/* Whether /proc/<pid>/ns/<kind> is the namespace of inode ino. */
static bool in_ns(const char *pid, const char *kind, uint64_t ino)
{
	char path[320], link[64], want[64];
	snprintf(path, sizeof(path), "/proc/%.32s/ns/%s", pid, kind);
	ssize_t len = readlink(path, link, sizeof(link) - 1);
	if (len <= 0)
		return false;
	link[len] = '\0';
	snprintf(want, sizeof(want), "%s:[%llu]", kind, (unsigned long long)ino);
	return !strcmp(link, want);
}

void kiwi_session_ns_users(uint64_t pidns, uint64_t mntns, int *pids, int *mnts)
{
	*pids = *mnts = 0;
	DIR *d = opendir("/proc");
	if (!d) {
		*pids = *mnts = -1;
		return;
	}
	for (struct dirent *de; (de = readdir(d));) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		*pids += pidns && in_ns(de->d_name, "pid", pidns);
		*mnts += mntns && in_ns(de->d_name, "mnt", mntns);
	}
	closedir(d);
}

int kiwi_session_pidns_tasks(int procfs)
{
	struct statfs sf;
	if (procfs < 0 || fstatfs(procfs, &sf) < 0 || sf.f_type != PROC_SUPER_MAGIC)
		return -1;
	/* A directory of its own each time: a fresh listing. */
	int fd = openat(procfs, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	int n = 0;
	for (struct dirent *de; (de = readdir(d));)
		n += de->d_name[0] >= '0' && de->d_name[0] <= '9';
	closedir(d);
	return n;
}

static void write_tristate(kiwi_json_writer *w, const char *key, int v)
{
	kiwi_jw_key(w, key);
	if (v < 0)
		kiwi_jw_null(w);
	else
		kiwi_jw_bool(w, v);
}

char *kiwi_session_evidence_json(const char *id, const struct kiwi_session_evidence *ev)
{
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
	if (!w)
		return NULL;
	bool clean = ev->processes_left == 0 && ev->mount_ns_users == 0 && ev->cgroup_removed != 0 &&
		     ev->network_removed != 0 && ev->socket_removed && !ev->cleanup_error.errnum &&
		     !(ev->workspace && !strcmp(ev->workspace, "failed")) &&
		     !ev->cleanup_error.step[0];
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "id");
	kiwi_jw_string(w, id);
	kiwi_jw_key(w, "ended_by");
	kiwi_jw_string(w, ev->reason);
	kiwi_jw_key(w, "clean");
	kiwi_jw_bool(w, clean);
	kiwi_jw_key(w, "processes_left");
	kiwi_jw_int(w, ev->processes_left);
	kiwi_jw_key(w, "mount_namespace_users");
	kiwi_jw_int(w, ev->mount_ns_users);
	write_tristate(w, "cgroup_removed", ev->cgroup_removed);
	write_tristate(w, "network_removed", ev->network_removed);
	kiwi_jw_key(w, "socket_removed");
	kiwi_jw_bool(w, ev->socket_removed);
	kiwi_jw_key(w, "workspace");
	kiwi_jw_string(w, ev->workspace);
	kiwi_jw_key(w, "cleanup_error");
	if (ev->cleanup_error.step[0]) {
		char text[1024];
		kiwi_error_format(&ev->cleanup_error, text, sizeof(text));
		kiwi_jw_string(w, text);
	} else {
		kiwi_jw_null(w);
	}
	kiwi_jw_close_object(w);
	size_t len;
	const char *text = kiwi_jw_text(w, &len);
	char *out = text ? malloc(len + 2) : NULL;
	if (out) {
		memcpy(out, text, len);
		memcpy(out + len, "\n", 2);
	}
	return out;
}
