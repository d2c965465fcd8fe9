/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-helper: the setuid-root helper (kiwi-helper(8)). This file is the
 * start, in the order that matters: not dumpable, --version, no
 * environment, sane fds, the caller, what it left us set to our own
 * values and a cgroup of our own (inherit.c), the socket, the admin
 * config and the quota (as root), then the one drop to the caller's uid
 * with only the capabilities its allowed operations need. serve.c takes
 * it from there. */
#include "serve.h"
#include "kiwi/cleanup.h"
#include "kiwi/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef KIWI_HELPER_CONFIG
#error "KIWI_HELPER_CONFIG (the admin config's path) is set by meson"
#endif
#ifndef KIWI_HELPER_SUBUID
#define KIWI_HELPER_SUBUID "/etc/subuid"
#define KIWI_HELPER_SUBGID "/etc/subgid"
#endif

static void ensure_stdio(void)
{
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd)
			_exit(1);
}

static int check_socket(uid_t uid, kiwi_err *err)
{
	int type = 0;
	struct ucred cred;
	socklen_t len = sizeof(type), clen = sizeof(cred);
	if (getsockopt(KIWI_HELPER_FD, SOL_SOCKET, SO_TYPE, &type, &len) < 0 || type != SOCK_SEQPACKET)
		return kiwi_error(err, EBADF, "socket", "fd %d is not a SOCK_SEQPACKET socket (kiwi-helper is started "
							 "by kiwi-run, not by hand)", KIWI_HELPER_FD);
	if (getsockopt(KIWI_HELPER_FD, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0 || cred.uid != uid)
		return kiwi_error(err, EPERM, "socket", "the socket's peer is not uid %u", (unsigned)uid);
	return 0;
}

/* Owned by root and writable by nobody else, nor any directory above. */
static int check_owner(int fd, const char *path, bool dir, kiwi_err *err)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return kiwi_error(err, errno, "config", "cannot stat `%s`", path);
	if ((dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) || st.st_uid != 0 || (st.st_mode & 022))
		return kiwi_error(err, EPERM, "config", "`%s` must be a %s owned by root and writable by no one else",
				  path, dir ? "directory" : "file");
	return 0;
}

static int read_config(char **text, size_t *len, kiwi_err *err)
{
	char path[] = KIWI_HELPER_CONFIG;
	for (char *slash = strchr(path + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		_cleanup_close_ int d = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		int r = d < 0 ? kiwi_error(err, errno, "config", "cannot open `%s`", path) : check_owner(d, path, true, err);
		*slash = '/';
		if (r < 0)
			return -1;
	}
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return kiwi_error(err, errno, "config", "cannot open `%s` (see kiwi-helper.json(5))", path);
	if (check_owner(fd, path, false, err) < 0)
		return -1;
	return kiwi_read_bounded(fd, KIWI_HELPER_CONFIG_MAX, path, text, len, err);
}

static int lookup_group(const char *name, gid_t *gid)
{
	struct group *g = name ? getgrnam(name) : NULL;
	if (!g)
		return -1;
	*gid = g->gr_gid;
	return 0;
}

static void read_subids(const char *path, const struct kiwi_helper_caller *who, struct kiwi_id_range *r,
			size_t max, size_t *n)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	_cleanup_free_ char *text = NULL;
	size_t len;
	if (fd >= 0 && kiwi_read_bounded(fd, 1 << 20, path, &text, &len, NULL) == 0)
		kiwi_subid_parse(text, len, who, r, max, n);
}

/* The caller's rule, and the ids it may map. */
static int load_policy(struct helper_session *s, kiwi_err *err)
{
	gid_t groups[256];
	int n_groups = getgroups(256, groups);
	struct passwd *pw = getpwuid(s->uid);
	char name[256] = "";
	if (pw)
		snprintf(name, sizeof(name), "%s", pw->pw_name);
	struct kiwi_helper_caller who = { .uid = s->uid, .gid = s->gid, .name = pw ? name : NULL,
					  .groups = groups, .n_groups = n_groups > 0 ? (size_t)n_groups : 0 };
	_cleanup_free_ char *text = NULL;
	size_t len;
	if (read_config(&text, &len, err) < 0)
		return -1;
	int r = kiwi_helper_config_parse(text, len, &who, lookup_group, &s->rule, err);
	if (r < 0)
		return kiwi_error_wrap(err, "%s", KIWI_HELPER_CONFIG);
	if (r == 0)
		return kiwi_error(err, EPERM, "config", "user %s (uid %u) is not allowed: no rule in %s",
				  pw ? name : "?", (unsigned)s->uid, KIWI_HELPER_CONFIG);
	struct helper_idmap_allowed *a = &s->ids;
	a->uid = s->uid;
	a->gid = s->gid;
	memcpy(a->uids, s->rule.uids, s->rule.n_uids * sizeof(a->uids[0]));
	a->n_uids = s->rule.n_uids;
	memcpy(a->gids, s->rule.gids, s->rule.n_gids * sizeof(a->gids[0]));
	a->n_gids = s->rule.n_gids;
	if (s->rule.subids) {
		read_subids(KIWI_HELPER_SUBUID, &who, a->uids, KIWI_ARRAY_SIZE(a->uids), &a->n_uids);
		read_subids(KIWI_HELPER_SUBGID, &who, a->gids, KIWI_ARRAY_SIZE(a->gids), &a->n_gids);
	}
	return 0;
}

static int start(struct helper_session *s, kiwi_err *err)
{
	s->uid = getuid();
	s->gid = getgid();
	if (geteuid() != 0)
		return kiwi_error(err, EPERM, "setup", "not running as root: install it setuid root "
						       "(chown root kiwi-helper; chmod 4755 kiwi-helper)");
	if (s->uid == 0)
		return kiwi_error(err, EPERM, "setup", "root needs no helper: kiwi-run does it all itself");
	if (helper_reset_inherited(err) < 0)
		return -1;
	/* Root's group too, until the drop: what we create (the quota's
	 * files) is root:root, never the caller's group. */
	if (setresgid(-1, 0, -1) < 0)
		return kiwi_error(err, errno, "setresgid", "cannot take gid 0");
	if (helper_leave_callers_cgroup(err) < 0)
		return -1;
	if (check_socket(s->uid, err) < 0)
		return -1;
	/* Nothing else the caller left open reaches the privileged part. */
	close_range(KIWI_HELPER_FD + 1, ~0u, 0);
	if (load_policy(s, err) < 0)
		return -1;
	s->sandbox_slot = helper_quota_take("sandboxes", s->uid, s->rule.max_sandboxes, err);
	if (s->sandbox_slot < 0)
		return -1;
	s->ops_left = s->rule.ops;
	return helper_drop_to_caller(s->uid, s->gid, helper_caps_for(s->rule.ops), err);
}

int main(int argc, char **argv)
{
	/* First: a core dump or /proc/<pid>/mem of a setuid process is off
	 * limits to its caller. */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if (argc == 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "--help"))) {
		if (!strcmp(argv[1], "--version"))
			printf("kiwi-helper %s\n", KIWI_VERSION);
		else
			printf("usage: kiwi-helper [--version|--help]\n"
			       "The setuid-root helper of kiwi-run; kiwi-run starts it with its socket on fd %d.\n"
			       "Admin config: %s. See kiwi-helper(8).\n", KIWI_HELPER_FD, KIWI_HELPER_CONFIG);
		return 0;
	}
	if (argc > 1) {
		fprintf(stderr, "kiwi-helper: unknown argument `%s` (see kiwi-helper --help)\n", argv[1]);
		return 2;
	}
	clearenv();
	ensure_stdio();
	struct helper_session s = HELPER_SESSION_INIT;
	kiwi_err err = { 0 };
	if (start(&s, &err) < 0) {
		char text[1024];
		kiwi_error_format(&err, text, sizeof(text));
		fprintf(stderr, "kiwi-helper: %s\n", text);
		/* Tell the client too, so it can say why in one line: as the
		 * answer to its first request (closing with that request
		 * unread would reset the connection, losing the answer). */
		if (helper_wait_request())
			helper_answer_error(KIWI_HELPER_FD, &err);
		return 1;
	}
	return helper_serve(&s);
}
