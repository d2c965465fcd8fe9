/* SPDX-License-Identifier: Apache-2.0 */
#include "kiwi/userns.h"
#include "kiwi/cleanup.h"
#include "kiwi/passwd.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/magic.h>
#include <linux/securebits.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/vfs.h>
#include <unistd.h>

#define STEP "userns"

/* One decimal u32 ending at a ':' or at the end; no sign, no blank. */
static const char *parse_u32(const char *s, uint32_t *out)
{
	size_t len = strcspn(s, ":");
	return kiwi_parse_id(s, len, out) ? s + len : NULL;
}

static bool overlap(uint32_t a, uint32_t b, uint32_t count_a, uint32_t count_b)
{
	return (uint64_t)a < (uint64_t)b + count_b && (uint64_t)b < (uint64_t)a + count_a;
}

int kiwi_idmap_add(struct kiwi_id_extent *map, size_t *n, const char *text, kiwi_err *err)
{
	struct kiwi_id_extent e;
	const char *p = parse_u32(text, &e.inside);
	if (p && *p == ':')
		p = parse_u32(p + 1, &e.outside);
	else
		p = NULL;
	if (p && *p == ':')
		p = parse_u32(p + 1, &e.count);
	else
		p = NULL;
	if (!p || *p)
		return kiwi_error(err, EINVAL, STEP, "wants INSIDE:OUTSIDE:COUNT (decimal ids), got `%s`", text);
	if (e.count == 0)
		return kiwi_error(err, EINVAL, STEP, "`%s`: the count must be at least 1", text);
	/* The kernel's own limit: the last id of a range is below 2^32-1. */
	if ((uint64_t)e.inside + e.count > UINT32_MAX || (uint64_t)e.outside + e.count > UINT32_MAX)
		return kiwi_error(err, ERANGE, STEP, "`%s` runs past the last id (4294967294)", text);
	if (*n >= KIWI_USERNS_MAX_EXTENTS)
		return kiwi_error(err, E2BIG, STEP, "`%s`: at most %d extents per map", text,
				  KIWI_USERNS_MAX_EXTENTS);
	for (size_t i = 0; i < *n; i++) {
		if (overlap(e.inside, map[i].inside, e.count, map[i].count))
			return kiwi_error(err, EINVAL, STEP, "`%s` overlaps inside ids %u..%u mapped already", text,
					  map[i].inside, map[i].inside + map[i].count - 1);
		if (overlap(e.outside, map[i].outside, e.count, map[i].count))
			return kiwi_error(err, EINVAL, STEP, "`%s` overlaps outside ids %u..%u mapped already", text,
					  map[i].outside, map[i].outside + map[i].count - 1);
	}
	map[(*n)++] = e;
	return 0;
}

int kiwi_userns_parse_user(const char *text, uint32_t *uid, uint32_t *gid, kiwi_err *err)
{
	uint32_t u, g = 0;
	const char *p = parse_u32(text, &u);
	if (p && *p == ':')
		p = parse_u32(p + 1, &g);
	if (!p || *p)
		return kiwi_error(err, EINVAL, STEP, "wants UID[:GID] (decimal ids), got `%s`", text);
	/* (uid_t)-1 means "unchanged" to setresuid: never an id. */
	if (u == UINT32_MAX || g == UINT32_MAX)
		return kiwi_error(err, ERANGE, STEP, "`%s`: 4294967295 is not an id", text);
	*uid = u;
	*gid = g;
	return 0;
}

bool kiwi_subid_line(const char *s, size_t len, const char **owner, size_t *owner_len, uint32_t *start,
		     uint32_t *count)
{
	const char *c1 = memchr(s, ':', len);
	if (!c1)
		return false;
	const char *c2 = memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - s));
	if (!c2)
		return false;
	*owner = s;
	*owner_len = (size_t)(c1 - s);
	if (!kiwi_parse_id(c1 + 1, (size_t)(c2 - c1 - 1), start) ||
	    !kiwi_parse_id(c2 + 1, len - (size_t)(c2 + 1 - s), count))
		return false;
	return *start > 0 && *count > 0 && (uint64_t)*start + *count <= UINT32_MAX;
}

bool kiwi_subid_next(const char *text, size_t len, size_t *at, struct kiwi_subid *e)
{
	while (*at < len) {
		const char *line = text + *at, *nl = memchr(line, '\n', len - *at);
		size_t n = nl ? (size_t)(nl - line) : len - *at;
		*at += n + 1;
		if (kiwi_subid_line(line, n, &e->owner, &e->owner_len, &e->start, &e->count))
			return true;
	}
	return false;
}

bool kiwi_subid_find(const char *text, size_t len, const char *owner, uint32_t want, uint32_t *start)
{
	struct kiwi_subid e;
	for (size_t at = 0; kiwi_subid_next(text, len, &at, &e);)
		if (e.owner_len == strlen(owner) && !memcmp(e.owner, owner, e.owner_len) && e.count >= want) {
			*start = e.start;
			return true;
		}
	return false;
}

bool kiwi_idmap_maps(const struct kiwi_id_extent *map, size_t n, uint32_t id)
{
	for (size_t i = 0; i < n; i++)
		if (id >= map[i].inside && (uint64_t)id < (uint64_t)map[i].inside + map[i].count)
			return true;
	return false;
}

bool kiwi_idmap_is_own(const struct kiwi_idmap *m, uid_t uid, gid_t gid)
{
	return m->n_uid == 1 && m->uid[0].outside == uid && m->uid[0].count == 1 && m->n_gid == 1 &&
	       m->gid[0].outside == gid && m->gid[0].count == 1;
}

static int write_proc_file(pid_t pid, const char *name, const char *text, kiwi_err *err)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return kiwi_error(err, errno, STEP, "cannot open `%s`", path);
	/* The host's procfs, checked: never a file something else mounted
	 * there. */
	struct statfs sf;
	if (fstatfs(fd, &sf) < 0 || sf.f_type != PROC_SUPER_MAGIC)
		return kiwi_error(err, EXDEV, STEP, "`%s` is not on a procfs", path);
	size_t len = strlen(text);
	/* The kernel takes a map in a single write, or not at all. */
	ssize_t n = write(fd, text, len);
	if (n < 0 || (size_t)n != len)
		return kiwi_error(err, n < 0 ? errno : EIO, STEP, "cannot write `%s` to `%s`", text, path);
	return 0;
}

int kiwi_userns_read_map(pid_t pid, const char *name, struct kiwi_id_extent *out, size_t cap)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	int n = 0;
	unsigned in, outside, count;
	while ((size_t)n < cap && fscanf(f, "%u %u %u", &in, &outside, &count) == 3)
		out[n++] = (struct kiwi_id_extent){ .inside = in, .outside = outside, .count = count };
	fclose(f);
	return n;
}

void kiwi_idmap_format(const struct kiwi_id_extent *m, size_t n, char *buf, size_t len)
{
	size_t at = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < n && at < len; i++) {
		int w = snprintf(buf + at, len - at, "%u %u %u\n", m[i].inside, m[i].outside, m[i].count);
		at += w > 0 ? (size_t)w : 0;
	}
}

int kiwi_userns_write_maps(pid_t child, const struct kiwi_idmap *m, bool deny_setgroups, kiwi_err *err)
{
	char map[KIWI_USERNS_MAX_EXTENTS * 40];
	struct kiwi_idmap self = {
		.uid = { { 0, (uint32_t)getuid(), 1 } }, .n_uid = 1,
		.gid = { { 0, (uint32_t)getgid(), 1 } }, .n_gid = 1,
	};
	if (!m)
		m = &self;
	if (deny_setgroups && write_proc_file(child, "setgroups", "deny", err) < 0)
		return -1;
	kiwi_idmap_format(m->uid, m->n_uid, map, sizeof(map));
	if (write_proc_file(child, "uid_map", map, err) < 0)
		return -1;
	kiwi_idmap_format(m->gid, m->n_gid, map, sizeof(map));
	return write_proc_file(child, "gid_map", map, err);
}

int kiwi_userns_become(uid_t uid, gid_t gid, bool drop_groups, kiwi_err *err)
{
	/* Changing the uid away from 0 would clear the capabilities; pid 1
	 * still needs CAP_SETPCAP to drop the bounding set, so it keeps them
	 * until kiwi_caps_drop_all_but() clears them all itself. */
	int bits = prctl(PR_GET_SECUREBITS, 0, 0, 0, 0);
	if (bits < 0 || prctl(PR_SET_SECUREBITS, (unsigned long)bits | SECBIT_NO_SETUID_FIXUP, 0, 0, 0) < 0)
		return kiwi_error(err, errno, "user", "cannot keep the capabilities across the id change");
	/* The host's supplementary groups (root's gid 0 among them) would
	 * otherwise go on granting their file access inside, unseen. */
	if (drop_groups && setgroups(0, NULL) < 0)
		return kiwi_error(err, errno, "user", "cannot drop the supplementary groups");
	if (setresgid(gid, gid, gid) < 0)
		return kiwi_error(err, errno, "user", "cannot become gid %u inside the sandbox (is it mapped?)",
				  (unsigned)gid);
	if (setresuid(uid, uid, uid) < 0)
		return kiwi_error(err, errno, "user", "cannot become uid %u inside the sandbox (is it mapped?)",
				  (unsigned)uid);
	return 0;
}
