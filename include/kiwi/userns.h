/* SPDX-License-Identifier: Apache-2.0 */
/* User namespace id maps: parsed from --uidmap/--gidmap, written by the
 * parent for its child (or by kiwi-helper(8) for a caller that is not
 * root), and the ids pid 1 takes on inside. */
#ifndef KIWI_USERNS_H
#define KIWI_USERNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "kiwi/err.h"

/* Extents per map: what kiwi-helper accepts, as newuidmap's users need. */
#define KIWI_USERNS_MAX_EXTENTS 5

struct kiwi_id_extent {
	uint32_t inside, outside, count;
};

/* A sandbox's uid and gid maps. */
struct kiwi_idmap {
	struct kiwi_id_extent uid[KIWI_USERNS_MAX_EXTENTS];
	size_t n_uid;
	struct kiwi_id_extent gid[KIWI_USERNS_MAX_EXTENTS];
	size_t n_gid;
};

/* Parses "INSIDE:OUTSIDE:COUNT" (decimal, count > 0, neither range past
 * 2^32-1) and appends it to map, refusing a map that would then hold more
 * than KIWI_USERNS_MAX_EXTENTS extents or two extents whose inside or
 * outside ranges overlap (the kernel refuses those too, but later and
 * without saying which). err names neither flag nor map: the caller
 * wraps it. Pure code: fuzzed. */
int kiwi_idmap_add(struct kiwi_id_extent *map, size_t *n, const char *text, kiwi_err *err);

/* Parses "UID[:GID]" (decimal; GID 0 when left out, as docker and podman
 * do). Pure code: fuzzed. */
int kiwi_userns_parse_user(const char *text, uint32_t *uid, uint32_t *gid, kiwi_err *err);

/* The owner whose /etc/subuid and /etc/subgid ranges a root caller's
 * sandboxes map to by default (kiwi-run(1), ID MAPPING): a name with no
 * login account behind it, written by `kiwi-run doctor --fix`. */
#define KIWI_SUBID_OWNER "kiwi"
/* Ids a default map holds: every id a tarball may name (65536). */
#define KIWI_SUBID_COUNT 65536u

/* One "owner:start:count" line of /etc/subuid or /etc/subgid (len bytes,
 * no newline): *owner points into s. False for a malformed line, a start
 * of 0 or a range past 2^32-1, which shadow's tools skip too. Pure code:
 * fuzzed. */
bool kiwi_subid_line(const char *s, size_t len, const char **owner, size_t *owner_len, uint32_t *start,
		     uint32_t *count);
/* One well-formed line of an /etc/subuid-style text. */
struct kiwi_subid {
	const char *owner;   /* into the text, owner_len bytes */
	size_t owner_len;
	uint32_t start, count;
};
/* The next well-formed line from *at (0 at first) on, *at moved past it;
 * false at the end. Pure code: fuzzed. */
bool kiwi_subid_next(const char *text, size_t len, size_t *at, struct kiwi_subid *e);
/* The first range of owner in an /etc/subuid-style text holding at least
 * want ids: true with *start set. Pure code: fuzzed. */
bool kiwi_subid_find(const char *text, size_t len, const char *owner, uint32_t want, uint32_t *start);

/* True when id (inside) is mapped by one of the extents. */
bool kiwi_idmap_maps(const struct kiwi_id_extent *map, size_t n, uint32_t id);

/* True when the map is the one an unprivileged caller may write itself:
 * one extent of its own uid (and one of its own gid), count 1. */
bool kiwi_idmap_is_own(const struct kiwi_idmap *m, uid_t uid, gid_t gid);

/* The kernel's text of a map into buf: one "inside outside count" line
 * per extent (cut short when buf is: the kernel then refuses it whole). */
void kiwi_idmap_format(const struct kiwi_id_extent *m, size_t n, char *buf, size_t len);

/* The map name ("uid_map", "gid_map") of process pid as the kernel shows
 * it: its first cap extents into out. Returns how many, or -1 (errno)
 * when it cannot be read. */
int kiwi_userns_read_map(pid_t pid, const char *name, struct kiwi_id_extent *out, size_t cap);

/* Parent side. Writes m (NULL: the caller's own uid and gid at 0; root
 * maps 0 to 0) into the child's user namespace. setgroups is denied first
 * when deny_setgroups is set, which an unprivileged writer of gid_map must
 * do; root leaves it allowed so that pid 1 can drop the host's
 * supplementary groups (kiwi_userns_become). */
int kiwi_userns_write_maps(pid_t child, const struct kiwi_idmap *m, bool deny_setgroups, kiwi_err *err);

/* Child side, pid 1 while it still holds every capability of its user
 * namespace. Takes on uid and gid (mapped ids), with no supplementary
 * group when drop_groups is set (setgroups must be allowed then), and
 * keeps its capabilities (SECBIT_NO_SETUID_FIXUP) so that
 * kiwi_caps_drop_all_but() can still drop the bounding set afterwards. */
int kiwi_userns_become(uid_t uid, gid_t gid, bool drop_groups, kiwi_err *err);

#endif
