/* SPDX-License-Identifier: Apache-2.0 */
/* The exec protocol's messages on the wire (kiwi/keeper.h): fixed-size
 * messages with at most three fds, and the request, whose strings are
 * checked here before the leader uses them. Fuzzed by
 * tests/fuzz/fuzz_exec_request.c. */
#include "kiwi/keeper.h"
#include "kiwi/fds.h"
#include "kiwi/cleanup.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int send_with_fds(int conn, const void *data, size_t len, const int *fds, size_t n_fds)
{
	return kiwi_send_fds(conn, data, len, fds, n_fds) == (ssize_t)len ? 0 : -1;
}

int kiwi_exec_send(int conn, const struct kiwi_exec_msg *m, int fd)
{
	return send_with_fds(conn, m, sizeof(*m), &fd, fd >= 0 ? 1 : 0);
}

int kiwi_exec_recv(int conn, struct kiwi_exec_msg *m, int flags, int *fd)
{
	int fds[3];
	size_t n_fds;
	*fd = -1;
	ssize_t n = kiwi_recv_fds(conn, m, sizeof(*m), flags, fds, &n_fds);
	if (n == 0 || (n < 0 && errno == ECONNRESET))
		return 0;
	if (n < 0)
		return -1;
	for (size_t i = 1; i < n_fds; i++)
		close(fds[i]);
	if (n != (ssize_t)sizeof(*m)) {
		if (n_fds)
			close(fds[0]);
		errno = EPROTO;
		return -1;
	}
	if (n_fds)
		*fd = fds[0];
	return 1;
}

static size_t strings_size(char *const *v, uint32_t *count)
{
	size_t len = 0;
	*count = 0;
	for (; v && *v; v++, (*count)++)
		len += strlen(*v) + 1;
	return len;
}

static char *put_strings(char *p, char *const *v)
{
	for (; v && *v; v++)
		p = stpcpy(p, *v) + 1;
	return p;
}

int kiwi_exec_send_request(int conn, const struct kiwi_exec_request *r, kiwi_err *err)
{
	struct kiwi_exec_msg h = { .type = KIWI_EXEC_REQUEST, .flags = r->flags, .rows = r->rows, .cols = r->cols,
				   .mode = r->mode & 07777 };
	size_t len = sizeof(h) + strings_size(r->argv, &h.argc) + strings_size(r->envp, &h.envc) +
		     strlen(r->cwd) + 1;
	if (len > KIWI_EXEC_REQUEST_MAX || h.argc > KIWI_EXEC_MAX_ARGS || h.envc > KIWI_EXEC_MAX_ARGS)
		return kiwi_error(err, E2BIG, "exec", "the command and its environment exceed %d KiB",
				  KIWI_EXEC_REQUEST_MAX / 1024);
	_cleanup_free_ char *buf = malloc(len);
	if (!buf)
		return kiwi_error(err, ENOMEM, "exec", "cannot allocate the request");
	memcpy(buf, &h, sizeof(h));
	char *p = put_strings(buf + sizeof(h), r->argv);
	p = put_strings(p, r->envp);
	strcpy(p, r->cwd);
	size_t n_fds = 0;
	int fds[3];
	for (int i = 0; i < 3; i++)
		if (r->fds[i] >= 0)
			fds[n_fds++] = r->fds[i];
	/* Which of 0-2 the fds stand for: -1 ones are not sent. */
	struct kiwi_exec_msg *hp = (struct kiwi_exec_msg *)buf;
	hp->value = (r->fds[0] >= 0) | (r->fds[1] >= 0) << 1 | (r->fds[2] >= 0) << 2;
	if (send_with_fds(conn, buf, len, fds, n_fds) < 0)
		return kiwi_error(err, errno, "exec", "cannot send the command to the session");
	return 0;
}

/* Splits count NUL-terminated strings from *p (up to end) into a vector. */
static char **take_strings(char **p, const char *end, uint32_t count)
{
	char **v = calloc((size_t)count + 1, sizeof(*v));
	for (uint32_t i = 0; v && i < count; i++) {
		char *nul = memchr(*p, '\0', (size_t)(end - *p));
		if (!nul) {
			free(v);
			return NULL;
		}
		v[i] = *p;
		*p = nul + 1;
	}
	return v;
}

int kiwi_exec_recv_request(int conn, struct kiwi_exec_request *r, char **bufp, kiwi_err *err)
{
	*r = (struct kiwi_exec_request){ .fds = { -1, -1, -1 } };
	*bufp = NULL;
	_cleanup_free_ char *buf = malloc(KIWI_EXEC_REQUEST_MAX);
	if (!buf)
		return kiwi_error(err, ENOMEM, "exec", "cannot allocate the request");
	int fds[3];
	size_t n_fds;
	ssize_t n = kiwi_recv_fds(conn, buf, KIWI_EXEC_REQUEST_MAX, 0, fds, &n_fds);
	if (n <= 0)
		return kiwi_error(err, n == 0 ? EPIPE : errno, "exec", "no request from the client");
	struct kiwi_exec_msg h = { 0 };
	size_t want = 0;
	if ((size_t)n >= sizeof(h))
		memcpy(&h, buf, sizeof(h));
	for (int i = 0; (size_t)n >= sizeof(h) && i < 3; i++)
		want += (h.value >> i) & 1;
	if ((size_t)n < sizeof(h) || h.type != KIWI_EXEC_REQUEST || want != n_fds || h.argc == 0 ||
	    h.argc > KIWI_EXEC_MAX_ARGS || h.envc > KIWI_EXEC_MAX_ARGS) {
		for (size_t i = 0; i < n_fds; i++)
			close(fds[i]);
		return kiwi_error(err, EPROTO, "exec", "a malformed request");
	}
	for (size_t i = 0, k = 0; i < 3; i++)
		r->fds[i] = (h.value >> i) & 1 ? fds[k++] : -1;
	char *p = buf + sizeof(h);
	const char *end = buf + n;
	r->argv = take_strings(&p, end, h.argc);
	r->envp = r->argv ? take_strings(&p, end, h.envc) : NULL;
	if (!r->argv || !r->envp || p >= end || !memchr(p, '\0', (size_t)(end - p)) || !r->argv[0][0]) {
		free(r->argv);
		free(r->envp);
		for (int i = 0; i < 3; i++)
			if (r->fds[i] >= 0)
				close(r->fds[i]);
		*r = (struct kiwi_exec_request){ .fds = { -1, -1, -1 } };
		return kiwi_error(err, EPROTO, "exec", "a malformed request");
	}
	r->cwd = p;
	r->flags = h.flags;
	r->rows = h.rows;
	r->cols = h.cols;
	r->mode = h.mode & 0777;
	*bufp = TAKE_PTR(buf);
	return 0;
}

