/* SPDX-License-Identifier: Apache-2.0 */
/* The scratch a `session snapshot` writes into a layout (kiwi/session.h):
 * a record in the caller's registry, locked by the writer for as long as
 * it lives, names the layout and the tag of its scratch files
 * (.tmp-<tag>-...); `kiwi-run gc` removes the scratch of a writer that
 * died (kill -9) and the record with it. */
#include "kiwi/session.h"
#include "kiwi/cleanup.h"
#include "kiwi/json.h"
#include "kiwi/registry.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SCRATCH_SUFFIX ".scratch"

int kiwi_session_scratch_begin(const char *layout, struct kiwi_snapshot_scratch *s, kiwi_err *err)
{
	*s = (struct kiwi_snapshot_scratch){ .fd = -1 };
	if (layout[0] != '/')
		return kiwi_error(err, EINVAL, "snapshot", "`%s`: the layout's path must be absolute", layout);
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

void kiwi_session_scratch_end(struct kiwi_snapshot_scratch *s)
{
	if (s->fd >= 0)
		kiwi_registry_record_remove(s->tag, SCRATCH_SUFFIX, s->fd);
	s->fd = -1;
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

/* Unlinks the regular files of the directory fd named prefix... */
static void remove_prefixed(int fd, const char *prefix, unsigned *n)
{
	DIR *dir = listing(fd);
	struct stat st;
	for (struct dirent *de; dir && (de = readdir(dir));)
		if (!strncmp(de->d_name, prefix, strlen(prefix)) &&
		    fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
		    unlinkat(fd, de->d_name, 0) == 0)
			(*n)++;
	if (dir)
		closedir(dir);
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

/* A stale record: the scratch of its tag in the layout's top directory
 * and in each blobs/<alg>/. 0: done (the record goes), also when the
 * layout is gone; -1: the layout cannot be read now (the record stays). */
static int collect(void *ctx, const char *id, const char *text, size_t len)
{
	unsigned *files = ctx;
	_cleanup_json_ kiwi_json *r = kiwi_json_parse(text, len, NULL);
	const char *path = kiwi_json_string(kiwi_json_get(r, "layout"));
	bool created = false;
	if (!path || path[0] != '/')
		return 0;  /* not ours to read: the record goes, nothing else */
	kiwi_json_bool(kiwi_json_get(r, "created"), &created);
	_cleanup_close_ int layout = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (layout < 0)
		return errno == ENOENT ? 0 : -1;
	char prefix[KIWI_REGISTRY_ID_LEN + 8];
	snprintf(prefix, sizeof(prefix), ".tmp-%s-", id);
	remove_prefixed(layout, prefix, files);
	_cleanup_close_ int blobs = openat(layout, "blobs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *algs = blobs < 0 ? NULL : listing(blobs);
	for (struct dirent *de; algs && (de = readdir(algs));) {
		_cleanup_close_ int alg = de->d_name[0] == '.' ? -1 :
			openat(blobs, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (alg >= 0)
			remove_prefixed(alg, prefix, files);
	}
	if (algs)
		closedir(algs);
	if (created)
		remove_if_bare(layout, blobs, path);
	return 0;
}

int kiwi_session_scratch_gc(unsigned *records, unsigned *files, kiwi_err *err)
{
	*files = 0;
	return kiwi_registry_record_gc(SCRATCH_SUFFIX, collect, files, records, err);
}
