/* SPDX-License-Identifier: Apache-2.0 */
/* The idmap operation: uid_map and gid_map of the caller's sandbox, from
 * the ranges allotted to the caller (its own id, /etc/subuid and
 * /etc/subgid when the rule says so, the rule's own ranges), never host
 * id 0. setgroups is always denied first: with it allowed, a sandbox
 * could drop a supplementary group the caller holds and so pass a
 * "group may not read" permission (CVE-2014-8989). */
#include "helper_int.h"
#include "kiwi/userns.h"
#include "kiwi/cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define STEP "idmap"

static int check_map(const char *what, const struct kiwi_id_extent *m, size_t n, uint32_t own,
		     const struct kiwi_id_range *ranges, size_t n_ranges, kiwi_err *err)
{
	for (size_t i = 0; i < n; i++)
		if (!kiwi_id_extent_allowed(&m[i], own, ranges, n_ranges))
			return kiwi_error(err, EPERM, STEP,
					  "%s extent %zu (%u..%u outside) is not allotted to you%s", what, i,
					  m[i].outside, m[i].outside + m[i].count - 1,
					  m[i].outside == 0 ? " (host root is never mapped)" : "");
	return 0;
}

static int write_at(int procfd, const char *name, const char *text, kiwi_err *err)
{
	_cleanup_close_ int fd = openat(procfd, name, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return kiwi_error(err, errno, STEP, "cannot open the sandbox's %s", name);
	size_t len = strlen(text);
	ssize_t n = write(fd, text, len);
	if (n < 0 || (size_t)n != len)
		return kiwi_error(err, n < 0 ? errno : EIO, STEP, "the kernel refused the %s `%s`", name, text);
	return 0;
}

int helper_idmap(const struct helper_sandbox *sb, const struct kiwi_helper_request *req,
		 const struct helper_idmap_allowed *a, kiwi_err *err)
{
	char map[KIWI_HELPER_MAX_EXTENTS * 40];
	if (check_map("uid_map", req->uid_map, req->n_uid_map, a->uid, a->uids, a->n_uids, err) < 0 ||
	    check_map("gid_map", req->gid_map, req->n_gid_map, a->gid, a->gids, a->n_gids, err) < 0)
		return -1;
	/* The kernel checks the rest: overlapping extents, a map already
	 * written. */
	if (write_at(sb->procfd, "setgroups", "deny", err) < 0)
		return -1;
	kiwi_idmap_format(req->uid_map, req->n_uid_map, map, sizeof(map));
	if (write_at(sb->procfd, "uid_map", map, err) < 0)
		return -1;
	kiwi_idmap_format(req->gid_map, req->n_gid_map, map, sizeof(map));
	return write_at(sb->procfd, "gid_map", map, err);
}
