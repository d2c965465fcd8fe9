/* SPDX-License-Identifier: Apache-2.0 */
/* The scratch a `session snapshot` writes into a layout (kiwi/session.h):
 * a record in the caller's registry, locked by the writer for as long as
 * it lives, names the layout and the tag of its scratch files
 * (.tmp-<tag>-...); `kiwi-run gc` removes the scratch of a writer that
 * died (kill -9), the blobs it committed that no index names (its marker
 * .tmp-<tag>-blob-<encoded> is a second link to each), and the record. */
#include "kiwi/session.h"
#include "kiwi/cleanup.h"
#include "kiwi/fileio.h"
#include "kiwi/json.h"
#include "kiwi/layout_refs.h"
#include "kiwi/openat2.h"
#include "kiwi/registry.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define SCRATCH_SUFFIX ".scratch"

int kiwi_session_scratch_begin(const char *layout, struct kiwi_snapshot_scratch *s, kiwi_err *err)
{
	*s = (struct kiwi_snapshot_scratch){ .fd = -1 };
	if (layout[0] != '/')
		return kiwi_error(err, EINVAL, "snapshot", "`%s`: the layout's path must be absolute", layout);
	if (snprintf(s->layout, sizeof(s->layout), "%s", layout) >= (int)sizeof(s->layout))
		return kiwi_error(err, ENAMETOOLONG, "snapshot", "`%s` is too long", layout);
	struct stat st;
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
	if (!w || kiwi_registry_new_id(s->tag, err) < 0)
		return w ? -1 : kiwi_error(err, ENOMEM, "snapshot", "out of memory");
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "version");
	kiwi_jw_int(w, 1);
	kiwi_jw_key(w, "layout");
	kiwi_jw_string(w, layout);
	/* A layout the writer makes is its own to remove again, if it holds
	 * nothing but what making it put there. */
	kiwi_jw_key(w, "created");
	kiwi_jw_bool(w, lstat(layout, &st) < 0 && errno == ENOENT);
	kiwi_jw_close_object(w);
	const char *text = kiwi_jw_text(w, NULL);
	if (!text)
		return kiwi_error(err, ENOMEM, "snapshot", "out of memory");
	s->fd = kiwi_registry_record_add(s->tag, SCRATCH_SUFFIX, text, err);
	return s->fd < 0 ? -1 : 0;
}

/* A fresh listing of the directory fd is open on (never by a path). */
static DIR *listing(int fd)
{
	int own = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dir = own >= 0 ? fdopendir(own) : NULL;
	if (!dir && own >= 0)
		close(own);
	return dir;
}

/* The regular files of the directory fd named prefix...: how many, each
 * unlinked when remove says so. */
static unsigned prefixed(int fd, const char *prefix, bool remove)
{
	DIR *dir = listing(fd);
	struct stat st;
	unsigned n = 0;
	for (struct dirent *de; dir && (de = readdir(dir));)
		if (!strncmp(de->d_name, prefix, strlen(prefix)) &&
		    fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
		    (!remove || unlinkat(fd, de->d_name, 0) == 0))
			n++;
	if (dir)
		closedir(dir);
	return n;
}

/* fn on each blobs/<alg>/ directory of blobs (an fd, or -1: none),
 * until it returns < 0, which is returned. */
static int each_alg(int blobs, int (*fn)(int alg, const char *name, void *ctx), void *ctx)
{
	int rc = 0;
	DIR *algs = blobs < 0 ? NULL : listing(blobs);
	for (struct dirent *de; rc >= 0 && algs && (de = readdir(algs));) {
		_cleanup_close_ int alg = de->d_name[0] == '.' ? -1 :
			openat(blobs, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (alg >= 0)
			rc = fn(alg, de->d_name, ctx);
	}
	if (algs)
		closedir(algs);
	return rc;
}

struct prefixed_in {
	const char *prefix;
	bool remove;
	unsigned n;
};

static int prefixed_in_alg(int alg, const char *name, void *ctx)
{
	(void)name;
	struct prefixed_in *c = ctx;
	c->n += prefixed(alg, c->prefix, c->remove);
	return 0;
}

/* The scratch of tag id in the layout: its top directory and each
 * blobs/<alg>/ (prefixed). */
static unsigned layout_scratch(int layout, const char *id, bool remove)
{
	char prefix[KIWI_REGISTRY_ID_LEN + 8];
	snprintf(prefix, sizeof(prefix), ".tmp-%s-", id);
	struct prefixed_in c = { prefix, remove, prefixed(layout, prefix, remove) };
	_cleanup_close_ int blobs = openat(layout, "blobs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	each_alg(blobs, prefixed_in_alg, &c);
	return c.n;
}

void kiwi_session_scratch_end(struct kiwi_snapshot_scratch *s, bool failed)
{
	/* A failed writer keeps its claims on the blobs it made that nothing
	 * names (kiwi-rootfs(1), snapshot): its record, unlocked, is then
	 * gc's to act on, as a killed writer's is. Otherwise (a success, or a
	 * failure that left nothing) the record goes. */
	_cleanup_close_ int layout = !failed || s->fd < 0 ? -1 :
		open(s->layout, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (layout >= 0 && layout_scratch(layout, s->tag, false) > 0)
		close(s->fd);
	else if (s->fd >= 0)
		kiwi_registry_record_remove(s->tag, SCRATCH_SUFFIX, s->fd);
	s->fd = -1;
}

/* How many entries dir holds besides . and ..; -1: cannot tell. */
static int count_entries(int fd)
{
	DIR *dir = listing(fd);
	if (!dir)
		return -1;
	int n = 0;
	for (struct dirent *de; (de = readdir(dir));)
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(dir);
	return n;
}

/* A layout the dead writer made, still as making it left it (oci-layout,
 * blobs/sha256 and nothing else: no index.json, no blob), is removed. */
static void remove_if_bare(int layout, int blobs, const char *path)
{
	_cleanup_close_ int sha = blobs < 0 ? -1 : openat(blobs, "sha256", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (sha < 0 || count_entries(sha) != 0 || count_entries(blobs) != 1 || count_entries(layout) != 2 ||
	    fstatat(layout, "oci-layout", &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
		return;
	if (unlinkat(blobs, "sha256", AT_REMOVEDIR) == 0 && unlinkat(layout, "blobs", AT_REMOVEDIR) == 0 &&
	    unlinkat(layout, "oci-layout", 0) == 0)
		rmdir(path);
}

/* ---- blobs a dead writer committed that nothing names ---- */

/* The layout's files for kiwi_layout_refs_read: beneath it only, no
 * symlink, regular files, bounded in size. */
static int read_beneath(void *ctx, const char *path, char **text, size_t *len)
{
	const int *layout = ctx;
	struct open_how how = { .flags = O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	_cleanup_close_ int fd = kiwi_openat2(*layout, path, &how);
	struct stat st;
	if (fd < 0)
		return errno == ENOENT ? 1 : -1;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || kiwi_read_bounded(fd, 4U << 20, path, text, len, NULL) < 0)
		return -1;
	return 0;
}

struct unnamed {
	int layout;
	const char *id;
	struct kiwi_layout_refs refs;   /* what the layout names, read once, when first needed */
	bool walked;
	unsigned n;
};

/* In blobs/<alg> (fd alg): each blob the dead writer's marker
 * (.tmp-<id>-blob-<encoded>) still is, which nothing names, is removed.
 * -1: what the layout names could not be read (nothing is removed). */
static int remove_unnamed(int alg, const char *alg_name, void *ctx)
{
	struct unnamed *u = ctx;
	char prefix[KIWI_REGISTRY_ID_LEN + 16];
	snprintf(prefix, sizeof(prefix), ".tmp-%s-blob-", u->id);
	DIR *dir = listing(alg);
	int rc = 0;
	for (struct dirent *de; rc == 0 && dir && (de = readdir(dir));) {
		if (strncmp(de->d_name, prefix, strlen(prefix)))
			continue;
		const char *enc = de->d_name + strlen(prefix);
		struct stat marker, blob;
		char digest[320];
		snprintf(digest, sizeof(digest), "%s:%s", alg_name, enc);
		if (!kiwi_layout_digest_form(digest) ||
		    fstatat(alg, de->d_name, &marker, AT_SYMLINK_NOFOLLOW) < 0 ||
		    fstatat(alg, enc, &blob, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(blob.st_mode) ||
		    blob.st_ino != marker.st_ino || blob.st_dev != marker.st_dev)
			continue;   /* not the writer's blob (any more): another writer's rename replaced it */
		if (!u->walked && (rc = kiwi_layout_refs_read(read_beneath, &u->layout, &u->refs)) == 0)
			u->walked = true;
		if (rc == 0 && !kiwi_layout_refs_has(&u->refs, digest) && unlinkat(alg, enc, 0) == 0)
			u->n++;
	}
	if (dir)
		closedir(dir);
	return rc;
}

struct sweep {
	unsigned files, blobs;
};

/* The scratch of tag id under blobs/ (fd blobs, locked), each
 * blobs/<alg>/: first the blobs it committed that nothing names. */
static int collect_blobs(int layout, int blobs, const char *id, struct sweep *sw)
{
	struct unnamed u = { .layout = layout, .id = id };
	int rc = each_alg(blobs, remove_unnamed, &u);
	kiwi_layout_refs_clear(&u.refs);
	sw->blobs += u.n;
	return rc;
}

/* A stale record: the blobs its writer committed that nothing names,
 * then the scratch of its tag in the layout's top directory and in each
 * blobs/<alg>/. 0: done (the record goes), also when the layout is gone;
 * -1: the layout cannot be read now, or another writer is writing it
 * (the record stays for a later gc). */
static int collect(void *ctx, const char *id, const char *text, size_t len)
{
	struct sweep *sw = ctx;
	_cleanup_json_ kiwi_json *r = kiwi_json_parse(text, len, NULL);
	const char *path = kiwi_json_string(kiwi_json_get(r, "layout"));
	bool created = false;
	if (!path || path[0] != '/')
		return 0;  /* not ours to read: the record goes, nothing else */
	kiwi_json_bool(kiwi_json_get(r, "created"), &created);
	_cleanup_close_ int layout = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (layout < 0)
		return errno == ENOENT ? 0 : -1;
	_cleanup_close_ int blobs = openat(layout, "blobs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	/* The writers' lock (kiwi-rootfs(1)): a live writer holds it shared
	 * from its first blob until index.json names it, and may be about to
	 * name a blob of the same digest. */
	if (blobs >= 0 && flock(blobs, LOCK_EX | LOCK_NB) < 0)
		return -1;
	if (blobs >= 0 && collect_blobs(layout, blobs, id, sw) < 0)
		return -1;
	sw->files += layout_scratch(layout, id, true);
	if (created)
		remove_if_bare(layout, blobs, path);
	return 0;
}

int kiwi_session_scratch_gc(unsigned *records, unsigned *files, unsigned *blobs, kiwi_err *err)
{
	struct sweep sw = { 0 };
	int rc = kiwi_registry_record_gc(SCRATCH_SUFFIX, collect, &sw, records, err);
	*files = sw.files;
	*blobs = sw.blobs;
	return rc;
}
