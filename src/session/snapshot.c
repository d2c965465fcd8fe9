/* SPDX-License-Identifier: Apache-2.0 */
/* `session snapshot`'s two ends of the session's socket (kiwi/session.h):
 * the supervisor lends the writable layer to its owner's client, which
 * reads it (kiwi_image_snapshot) while the session is frozen. */
#include "kiwi/session.h"
#include "kiwi/cgroup.h"
#include "kiwi/cleanup.h"
#include "kiwi/keeper.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* A frozen session waits for its snapshot at most this long. */
#define SNAPSHOT_FROZEN_MAX_S 600
#define SNAPSHOT_TEXT_MAX 8192

static void refuse(int conn, const kiwi_err *why)
{
	struct kiwi_exec_msg m = { .type = KIWI_EXEC_FAILED, .err = *why };
	kiwi_exec_send(conn, &m, -1);
}

/* image NUL, then name NUL dest NUL for each tree. */
static size_t pack_source(const struct kiwi_snapshot_source *src, char *out, size_t cap)
{
	size_t len = (size_t)snprintf(out, cap, "%s", src->image ? src->image : "") + 1;
	for (size_t i = 0; i < src->n && len < cap; i++) {
		len += (size_t)snprintf(out + len, cap - len, "%s", src->names[i]) + 1;
		if (len < cap)
			len += (size_t)snprintf(out + len, cap - len, "%s", src->dests[i]) + 1;
	}
	return len < cap ? len : 0;
}

void kiwi_session_serve_snapshot(int conn, int layer, struct kiwi_cgroup *cg, const struct kiwi_snapshot_source *src)
{
	char text[SNAPSHOT_TEXT_MAX], path[64];
	size_t len = pack_source(src, text, sizeof(text));
	kiwi_err why = { 0 }, ignored = { 0 };
	if (layer < 0 || !len) {
		kiwi_error(&why, EOPNOTSUPP, "snapshot", "the session has no writable layer to snapshot");
		return refuse(conn, &why);
	}
	for (size_t i = 0; i < src->n; i++) {
		struct stat st;
		snprintf(path, sizeof(path), "%s/upper", src->names[i]);
		if (fstatat(layer, path, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			kiwi_error(&why, EOPNOTSUPP, "snapshot", "`/%s` was bound in place (this kernel's tmpfs holds "
				   "no user xattrs, Linux 6.6): its changes are not in the layer", src->dests[i]);
			return refuse(conn, &why);
		}
	}
	bool frozen = cg && kiwi_cgroup_freeze(cg, true, &ignored) == 0;
	struct kiwi_exec_msg m = { .type = KIWI_EXEC_SNAPSHOT, .value = frozen };
	if (kiwi_exec_send(conn, &m, layer) == 0 && send(conn, text, len, MSG_NOSIGNAL) == (ssize_t)len && frozen) {
		/* Thawed when the client says it is done, dies, or takes too long. */
		struct timeval tv = { .tv_sec = SNAPSHOT_FROZEN_MAX_S };
		setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		char done;
		while (recv(conn, &done, 1, 0) < 0 && errno == EINTR)
			;
	}
	if (frozen)
		kiwi_cgroup_freeze(cg, false, &ignored);
}

static int unpack_source(struct kiwi_session_snapshot *s, size_t len, kiwi_err *err)
{
	char *p = s->text, *end = s->text + len;
	if (!len || end[-1] != '\0')
		return kiwi_error(err, EPROTO, "snapshot", "the session's supervisor sent a malformed answer");
	s->src.image = *p ? p : NULL;
	p += strlen(p) + 1;
	while (p < end && s->src.n < KIWI_SNAPSHOT_MAX_TREES) {
		s->src.names[s->src.n] = p;
		p += strlen(p) + 1;
		if (p >= end)
			return kiwi_error(err, EPROTO, "snapshot", "the session's supervisor sent a malformed answer");
		s->src.dests[s->src.n++] = p;
		p += strlen(p) + 1;
	}
	return 0;
}

int kiwi_session_snapshot_begin(const struct kiwi_registry_entry *e, struct kiwi_session_snapshot *s, kiwi_err *err)
{
	*s = (struct kiwi_session_snapshot){ .conn = -1, .layer = -1 };
	s->conn = kiwi_session_connect(e, 's', err);
	if (s->conn < 0)
		return -1;
	struct kiwi_exec_msg m;
	int r = kiwi_exec_recv(s->conn, &m, 0, &s->layer);
	if (r > 0 && m.type == KIWI_EXEC_FAILED) {
		*err = m.err;
		return -1;
	}
	if (r <= 0 || m.type != KIWI_EXEC_SNAPSHOT || s->layer < 0)
		return kiwi_error(err, r < 0 ? errno : EPROTO, "snapshot", "session `%s` did not lend its layer "
				  "(it is ending)", e->id);
	s->frozen = m.value;
	if (!(s->text = malloc(SNAPSHOT_TEXT_MAX)))
		return kiwi_error(err, ENOMEM, "snapshot", "out of memory");
	ssize_t n;
	do
		n = recv(s->conn, s->text, SNAPSHOT_TEXT_MAX, 0);
	while (n < 0 && errno == EINTR);
	return unpack_source(s, n > 0 ? (size_t)n : 0, err);
}

void kiwi_session_snapshot_end(struct kiwi_session_snapshot *s)
{
	if (s->conn >= 0)
		(void)!send(s->conn, "k", 1, MSG_NOSIGNAL);
	int fds[] = { s->conn, s->layer };
	for (size_t i = 0; i < 2; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(s->text);
	*s = (struct kiwi_session_snapshot){ .conn = -1, .layer = -1 };
}
