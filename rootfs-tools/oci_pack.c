/* SPDX-License-Identifier: Apache-2.0 */
/* Packing a directory into a one-layer OCI image layout. The tree is walked
 * in bytewise name order and (with reproducible) stamped with one mtime and
 * no user/group names, so the same tree always gives the same digests. */
#include "kiwi/cleanup.h"
#include "kiwi/oci_image.h"
#include "oci_internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <locale.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>

#define CHUNK (256U << 10)

/* Where archive bytes go: a scratch file in blobs/sha256, hashed as written. */
struct sink {
	int fd;
	kiwi_hasher *h;
};

static la_ssize_t sink_write(struct archive *a, void *arg, const void *buf, size_t len)
{
	struct sink *s = arg;
	for (size_t done = 0; done < len;) {
		ssize_t n = write(s->fd, (const char *)buf + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			archive_set_error(a, errno, "cannot write the layer");
			return -1;
		}
		done += (size_t)n;
	}
	kiwi_hasher_update(s->h, buf, len);
	return (la_ssize_t)len;
}

struct packer {
	struct archive *a;
	struct archive_entry_linkresolver *links;
	bool reproducible;
	bool upper;               /* overlayfs upper directories (kiwi_image_snapshot) */
	const struct kiwi_image_idmap *ids;  /* host ids -> the image's; NULL: as they are */
	time_t epoch;
	char path[PATH_MAX];
	kiwi_err *err;
};

static int archive_fail(struct packer *p, const char *what)
{
	return kiwi_error(p->err, archive_errno(p->a) > 0 ? archive_errno(p->a) : EIO, "pack",
			  "%s `%s`: %s", what, p->path, archive_error_string(p->a));
}

/* overlayfs's own (opaque, redirect, origin...) describe the upper
 * directory, not the files: the layer says the same with .wh. names. */
static bool overlay_xattr(const char *name)
{
	return !strncmp(name, "user.overlay.", 13) || !strncmp(name, "trusted.overlay.", 16);
}

static void add_xattrs(struct packer *p, struct archive_entry *e, int fd)
{
	char names[4096];
	ssize_t n = flistxattr(fd, names, sizeof(names));
	for (ssize_t off = 0; n > 0 && off < n; off += (ssize_t)strlen(names + off) + 1) {
		char val[4096];
		if (p->upper && overlay_xattr(names + off))
			continue;
		ssize_t vl = fgetxattr(fd, names + off, val, sizeof(val));
		if (vl >= 0)
			archive_entry_xattr_add_entry(e, names + off, val, (size_t)vl);
	}
}

static int copy_data(struct packer *p, int fd)
{
	_cleanup_free_ char *buf = malloc(CHUNK);
	if (!buf)
		return kiwi_error(p->err, ENOMEM, "pack", "out of memory");
	for (;;) {
		ssize_t n = read(fd, buf, CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return kiwi_error(p->err, errno, "pack", "cannot read `%s`", p->path);
		if (n == 0)
			return 0;
		if (archive_write_data(p->a, buf, (size_t)n) != n)
			return archive_fail(p, "cannot write");
	}
}

/* Names are bytes on Linux. One that is valid UTF-8 goes into the pax
 * header as it is (path, linkpath: what GNU tar, umoci and skopeo read);
 * one that is not is stored as its bytes, with hdrcharset=BINARY in that
 * entry's pax header alone (libarchive's warning says so; how it tells
 * them apart: kiwi_oci_write_layer). Setting BINARY for the whole archive
 * would put a pax header with the keyword on every entry, which GNU tar
 * warns about once per entry. */
static int write_header(struct packer *p, struct archive_entry *e)
{
	int r = archive_write_header(p->a, e);
	return r == ARCHIVE_OK || r == ARCHIVE_WARN ? 0 : -1;
}

static int write_entry(struct packer *p, struct archive_entry *e, int fd)
{
	struct archive_entry *spare = NULL;
	/* The first name of a multiply-linked file carries the data; the
	 * resolver turns later names into hardlinks to it. */
	archive_entry_linkify(p->links, &e, &spare);
	int rc = 0;
	if (e) {
		if (write_header(p, e) < 0)
			rc = archive_fail(p, "cannot add");
		else if (fd >= 0 && archive_entry_size(e) > 0)
			rc = copy_data(p, fd);
	}
	archive_entry_free(e);
	archive_entry_free(spare);
	return rc;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int pack_dir(struct packer *p, int dfd, size_t len);

/* An id of the host's as the image has it: through the map, or as it is
 * when unmapped (the sandbox saw it as the overflow id). */
static int64_t map_id(const struct kiwi_id_range *r, size_t n, int64_t id)
{
	for (size_t i = 0; i < n; i++)
		if (id >= r[i].outside && id - r[i].outside < r[i].count)
			return r[i].inside + (id - r[i].outside);
	return id;
}

/* An empty marker entry: OCI's form of an overlay whiteout (.wh.NAME) or
 * opaque directory (.wh..wh..opq). */
static int add_marker(struct packer *p, size_t dir_len, const char *name, const struct stat *st)
{
	char saved[PATH_MAX];
	snprintf(saved, sizeof(saved), "%s", p->path);
	int w = snprintf(p->path + dir_len, sizeof(p->path) - dir_len, "%s.wh.%s", dir_len ? "/" : "", name);
	int rc = 0;
	if (w < 0 || (size_t)w >= sizeof(p->path) - dir_len)
		rc = kiwi_error(p->err, ENAMETOOLONG, "pack", "a path under `%s` is too long", saved);
	struct archive_entry *e = rc == 0 ? archive_entry_new() : NULL;
	if (rc == 0 && !e)
		rc = kiwi_error(p->err, ENOMEM, "pack", "out of memory");
	if (e) {
		archive_entry_copy_pathname(e, p->path);
		archive_entry_set_filetype(e, AE_IFREG);
		archive_entry_set_perm(e, 0);
		archive_entry_set_size(e, 0);
		archive_entry_set_mtime(e, p->reproducible ? p->epoch : st->st_mtim.tv_sec, 0);
		if (write_header(p, e) < 0)
			rc = archive_fail(p, "cannot add");
		archive_entry_free(e);
	}
	snprintf(p->path, sizeof(p->path), "%s", saved);
	return rc;
}

static bool is_opaque(int fd)
{
	char v[2];
	return (fgetxattr(fd, "user.overlay.opaque", v, sizeof(v)) == 1 && v[0] == 'y') ||
	       (fgetxattr(fd, "trusted.overlay.opaque", v, sizeof(v)) == 1 && v[0] == 'y');
}

/* Opens what fstatat saw, never following a link, never blocking on a
 * fifo put there since, and only if it is still the same inode. */
static int open_same(int dfd, const char *name, const struct stat *st)
{
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	struct stat now;
	if (fd >= 0 && (fstat(fd, &now) < 0 || now.st_ino != st->st_ino || now.st_dev != st->st_dev ||
			(now.st_mode & S_IFMT) != (st->st_mode & S_IFMT))) {
		close(fd);
		errno = ESTALE;
		return -1;
	}
	return fd;
}

static struct archive_entry *entry_of(struct packer *p, const struct stat *st)
{
	struct archive_entry *e = archive_entry_new();
	if (!e)
		return NULL;
	archive_entry_copy_stat(e, st);
	archive_entry_copy_pathname(e, p->path);
	archive_entry_unset_atime(e);
	archive_entry_unset_ctime(e);
	archive_entry_unset_birthtime(e);
	if (p->reproducible)
		archive_entry_set_mtime(e, p->epoch, 0);
	if (p->ids) {
		archive_entry_set_uid(e, map_id(p->ids->uids, p->ids->n_uids, st->st_uid));
		archive_entry_set_gid(e, map_id(p->ids->gids, p->ids->n_gids, st->st_gid));
	}
	return e;
}

static int pack_one(struct packer *p, int dfd, const char *name, size_t len)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return kiwi_error(p->err, errno, "pack", "cannot stat `%s`", p->path);
	if (S_ISSOCK(st.st_mode))
		return 0; /* tar has no sockets; they belong to a running system */
	size_t dir_len = len - strlen(name) - (len > strlen(name) ? 1 : 0);
	if (p->upper && S_ISCHR(st.st_mode) && st.st_rdev == 0)
		return add_marker(p, dir_len, name, &st);
	struct archive_entry *e = entry_of(p, &st);
	if (!e)
		return kiwi_error(p->err, ENOMEM, "pack", "out of memory");
	_cleanup_close_ int fd = -1;
	if (S_ISLNK(st.st_mode)) {
		char target[PATH_MAX];
		ssize_t n = readlinkat(dfd, name, target, sizeof(target) - 1);
		if (n < 0) {
			archive_entry_free(e);
			return kiwi_error(p->err, errno, "pack", "cannot read link `%s`", p->path);
		}
		target[n] = '\0';
		archive_entry_copy_symlink(e, target);
	} else if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) {
		fd = open_same(dfd, name, &st);
		if (fd < 0) {
			archive_entry_free(e);
			return kiwi_error(p->err, errno, "pack", "cannot open `%s`", p->path);
		}
		add_xattrs(p, e, fd);
	}
	if (write_entry(p, e, S_ISREG(st.st_mode) ? fd : -1) < 0)
		return -1;
	if (!S_ISDIR(st.st_mode))
		return 0;
	if (p->upper && is_opaque(fd) && add_marker(p, len, ".wh..opq", &st) < 0)
		return -1;
	return pack_dir(p, fd, len);
}

/* Packs the children of dfd, whose path is p->path[0..len), sorted. */
static int pack_dir(struct packer *p, int dfd, size_t len)
{
	int fd = dup(dfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return kiwi_error(p->err, errno, "pack", "cannot read `%s`", len ? p->path : ".");
	}
	/* A dup shares its file's offset: a directory fd read before (a
	 * --tree fd passed twice) would list nothing from where it stopped. */
	rewinddir(d);
	char **names = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;
	for (struct dirent *de; rc == 0 && (de = readdir(d));) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 32;
			char **nn = realloc(names, cap * sizeof(*names));
			if (!nn) {
				rc = kiwi_error(p->err, ENOMEM, "pack", "out of memory");
				break;
			}
			names = nn;
		}
		if (!(names[n] = strdup(de->d_name)))
			rc = kiwi_error(p->err, ENOMEM, "pack", "out of memory");
		else
			n++;
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), cmp_names);
	for (size_t i = 0; i < n; i++) {
		if (rc == 0) {
			int w = snprintf(p->path + len, sizeof(p->path) - len, "%s%s", len ? "/" : "", names[i]);
			if (w < 0 || (size_t)w >= sizeof(p->path) - len)
				rc = kiwi_error(p->err, ENAMETOOLONG, "pack", "a path under `%s` is too long", p->path);
			else
				rc = pack_one(p, dfd, names[i], len + (size_t)w);
			p->path[len] = '\0';
		}
		free(names[i]);
	}
	free(names);
	return rc;
}

/* A scratch file in blobs/sha256 that becomes blobs/sha256/<hex> by rename. */
struct blob_out {
	int blobs_fd;
	const char *scratch;      /* the writer's tag (kiwi_oci_commit_name), or NULL */
	char tmp[96];
	int fd;
	kiwi_hasher *h;
};

void kiwi_oci_scratch_name(char *out, size_t len, const char *scratch, const char *what, const char *fallback)
{
	if (scratch)
		snprintf(out, len, ".tmp-%s-%s", scratch, what);
	else
		snprintf(out, len, "%s", fallback);
}

int kiwi_oci_commit_name(int dir_fd, const char *tmp, const char *name, const char *scratch)
{
	char marker[160];
	if (scratch) {
		snprintf(marker, sizeof(marker), ".tmp-%s-blob-%s", scratch, name);
		/* The same blob made twice by this writer: the newer inode is
		 * the one it names. Without a marker (no hard links here), the
		 * blob is merely never gc's: not a failure of the write. */
		unlinkat(dir_fd, marker, 0);
		(void)linkat(dir_fd, tmp, dir_fd, marker, 0);
	}
	if (renameat(dir_fd, tmp, dir_fd, name) == 0)
		return 0;
	int e = errno;
	if (scratch)
		unlinkat(dir_fd, marker, 0);
	errno = e;
	return -1;
}

void kiwi_oci_drop_marker(int layout_fd, const char *scratch, const char *digest)
{
	const char *colon = digest ? strchr(digest, ':') : NULL;
	if (!scratch || !colon)
		return;
	char path[256];
	snprintf(path, sizeof(path), "blobs/%.*s/.tmp-%s-blob-%s", (int)(colon - digest), digest, scratch, colon + 1);
	unlinkat(layout_fd, path, 0);
}

int kiwi_oci_lock_writer(int layout_fd, kiwi_err *err)
{
	int fd = kiwi_oci_lock_dir(layout_fd, "blobs", LOCK_SH, err);
	struct stat st;
	/* gc removes a layout a killed snapshot made and left bare, holding
	 * this lock: one taken on what it removed is no place to write. */
	if (fd >= 0 && (fstat(fd, &st) < 0 || st.st_nlink == 0)) {
		close(fd);
		return kiwi_error(err, ENOENT, "pack", "the layout was removed as it was opened (kiwi-run gc): "
				  "try again");
	}
	return fd;
}

static int blob_begin(struct blob_out *b, int blobs_fd, const char *scratch, kiwi_err *err)
{
	*b = (struct blob_out){ .blobs_fd = blobs_fd, .fd = -1, .scratch = scratch };
	char what[48];
	kiwi_oci_unique(what, sizeof(what));
	char fallback[64];
	snprintf(fallback, sizeof(fallback), ".tmp-%s", what);
	kiwi_oci_scratch_name(b->tmp, sizeof(b->tmp), scratch, what, fallback);
	b->fd = openat(blobs_fd, b->tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	b->h = kiwi_hasher_new(KIWI_DIGEST_SHA256);
	if (b->fd < 0 || !b->h)
		return kiwi_error(err, errno ? errno : ENOMEM, "pack", "cannot create a blob");
	return 0;
}

static void blob_abort(struct blob_out *b)
{
	if (b->fd >= 0) {
		close(b->fd);
		unlinkat(b->blobs_fd, b->tmp, 0);
	}
	kiwi_hasher_free(b->h);
	*b = (struct blob_out){ .fd = -1 };
}

/* Finishes the blob: its descriptor's digest and size. */
static int blob_commit(struct blob_out *b, struct kiwi_descriptor *d, bool sync, kiwi_err *err)
{
	d->size = (int64_t)kiwi_hasher_count(b->h);
	kiwi_hasher_final(b->h, d->digest);
	if ((sync && fsync(b->fd) < 0) || kiwi_oci_commit_name(b->blobs_fd, b->tmp, strchr(d->digest, ':') + 1,
							      b->scratch) < 0) {
		int e = errno;
		blob_abort(b);
		return kiwi_error(err, e, "pack", "cannot store blob %s", d->digest);
	}
	close(b->fd);
	kiwi_hasher_free(b->h);
	*b = (struct blob_out){ .fd = -1 };
	return 0;
}

static int write_blob(int blobs_fd, const char *data, size_t len, const char *scratch, struct kiwi_descriptor *d,
		      kiwi_err *err)
{
	struct blob_out b;
	if (blob_begin(&b, blobs_fd, scratch, err) < 0) {
		blob_abort(&b);
		return -1;
	}
	if (write(b.fd, data, len) != (ssize_t)len) {
		blob_abort(&b);
		return kiwi_error(err, errno ? errno : EIO, "pack", "cannot write a blob");
	}
	kiwi_hasher_update(b.h, data, len);
	return blob_commit(&b, d, true, err);
}

/* The tar goes through here: hashed for the diff_id, then compressed
 * into the blob as it comes, so the layer is read and written once. */
struct layer_out {
	kiwi_hasher *tar_h;
	struct archive *z;        /* the compressor (raw format); NULL: the tar is the blob */
	struct sink blob;
};

static la_ssize_t layer_write(struct archive *a, void *arg, const void *buf, size_t len)
{
	struct layer_out *o = arg;
	kiwi_hasher_update(o->tar_h, buf, len);
	if (!o->z)
		return sink_write(a, &o->blob, buf, len);
	if (archive_write_data(o->z, buf, len) != (la_ssize_t)len) {
		archive_set_error(a, EIO, "cannot compress the layer: %s", archive_error_string(o->z));
		return -1;
	}
	return (la_ssize_t)len;
}

/* libarchive's raw format: one stream, no headers. */
static struct archive *compressor(enum kiwi_layer_compression comp, struct sink *s, kiwi_err *err)
{
	struct archive *a = archive_write_new();
	struct archive_entry *e = archive_entry_new();
	int rc = 0;
	/* No padding after the compressed stream: readers take trailing
	 * zeros for the header of another gzip member. */
	if (a)
		archive_write_set_bytes_in_last_block(a, 1);
	if (!a || !e || archive_write_set_format_raw(a) != ARCHIVE_OK ||
	    (comp == KIWI_LAYER_GZIP ? archive_write_add_filter_gzip(a)
				     : archive_write_add_filter_zstd(a)) != ARCHIVE_OK ||
	    /* No name or time in the gzip header: the same tar, the same blob. */
	    (comp == KIWI_LAYER_GZIP && archive_write_set_filter_option(a, "gzip", "timestamp", NULL) < ARCHIVE_WARN) ||
	    archive_write_open(a, s, NULL, sink_write, NULL) != ARCHIVE_OK)
		rc = kiwi_error(err, EIO, "pack", "cannot start compression: %s",
				a ? archive_error_string(a) : "out of memory");
	if (rc == 0) {
		archive_entry_set_filetype(e, AE_IFREG);
		if (archive_write_header(a, e) != ARCHIVE_OK)
			rc = kiwi_error(err, EIO, "pack", "cannot compress: %s", archive_error_string(a));
	}
	archive_entry_free(e);
	if (rc < 0) {
		archive_write_free(a);
		return NULL;
	}
	return a;
}

static int pack_trees(struct packer *p, const struct kiwi_layer_tree *t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		size_t len = (size_t)snprintf(p->path, sizeof(p->path), "%s", t[i].prefix);
		if (len >= sizeof(p->path))
			return kiwi_error(p->err, ENAMETOOLONG, "pack", "`%s` is too long", t[i].prefix);
		/* A tree placed below the root brings its own directory's
		 * owner, mode and xattrs. */
		struct stat st;
		if (len && fstat(t[i].dir_fd, &st) < 0)
			return kiwi_error(p->err, errno, "pack", "cannot stat `%s`", p->path);
		struct archive_entry *e = len ? entry_of(p, &st) : NULL;
		if (len && !e)
			return kiwi_error(p->err, ENOMEM, "pack", "out of memory");
		if (e)
			add_xattrs(p, e, t[i].dir_fd);
		if ((e && write_entry(p, e, -1) < 0) ||
		    (len && p->upper && is_opaque(t[i].dir_fd) && add_marker(p, len, ".wh..opq", &st) < 0) ||
		    pack_dir(p, t[i].dir_fd, len) < 0)
			return -1;
	}
	return 0;
}

static int write_layer(int blobs_fd, const struct kiwi_layer_tree *trees, size_t n,
		       const struct kiwi_layer_write_opts *o, struct kiwi_descriptor *layer, char *diff_id,
		       kiwi_err *err)
{
	struct blob_out b;
	if (blob_begin(&b, blobs_fd, o->scratch, err) < 0) {
		blob_abort(&b);
		return -1;
	}
	struct layer_out out = { .tar_h = kiwi_hasher_new(KIWI_DIGEST_SHA256), .blob = { .fd = b.fd, .h = b.h } };
	struct packer p = { .a = archive_write_new(), .links = archive_entry_linkresolver_new(),
			    .reproducible = o->reproducible, .upper = o->upper, .ids = o->ids, .err = err };
	const char *sde = getenv("SOURCE_DATE_EPOCH");
	p.epoch = sde ? (time_t)strtoll(sde, NULL, 10) : 0;
	int rc = 0;
	if (o->compression != KIWI_LAYER_TAR && !(out.z = compressor(o->compression, &out.blob, err)))
		rc = -1;
	else if (!out.tar_h || !p.a || !p.links || archive_write_set_format_pax(p.a) != ARCHIVE_OK ||
		 archive_write_open(p.a, &out, NULL, layer_write, NULL) != ARCHIVE_OK)
		rc = kiwi_error(err, ENOMEM, "pack", "cannot start the layer archive");
	if (rc == 0) {
		archive_entry_linkresolver_set_strategy(p.links, archive_format(p.a));
		rc = pack_trees(&p, trees, n);
	}
	if (rc == 0 && archive_write_close(p.a) != ARCHIVE_OK)
		rc = archive_fail(&p, "cannot finish");
	if (rc == 0 && out.z && archive_write_close(out.z) != ARCHIVE_OK)
		rc = kiwi_error(err, EIO, "pack", "cannot compress: %s", archive_error_string(out.z));
	archive_write_free(p.a);
	archive_write_free(out.z);
	archive_entry_linkresolver_free(p.links);
	if (rc == 0)
		kiwi_hasher_final(out.tar_h, diff_id);
	kiwi_hasher_free(out.tar_h);
	if (rc < 0) {
		blob_abort(&b);
		return -1;
	}
	return blob_commit(&b, layer, !o->no_sync, err);
}

/* libarchive's pax writer turns a name into UTF-8 from the charset of the
 * thread's LC_CTYPE. kiwi-rootfs runs in the C locale, ASCII, so every
 * other name failed that conversion and went in as bytes under
 * hdrcharset=BINARY, "café" too. Under a UTF-8 LC_CTYPE the conversion is
 * a check: a name that is valid UTF-8 goes in as it is, and one with a
 * stray byte, an overlong form, a surrogate or a code point above
 * U+10FFFF fails it and falls back to BINARY (test_roundtrip.py holds
 * libarchive to that). Setting a name's UTF-8 form instead
 * (archive_entry_set_pathname_utf8) does not get around the locale: with
 * no locale form of the name, libarchive 3.6's pax writer reads a NULL
 * one. glibc 2.35 and later have C.UTF-8 built in; where it cannot be
 * loaded, names go in as before. Only LC_CTYPE, only this thread, only
 * while the layer is written. */
int kiwi_oci_write_layer(int blobs_fd, const struct kiwi_layer_tree *trees, size_t n,
			 const struct kiwi_layer_write_opts *o, struct kiwi_descriptor *layer,
			 char *diff_id, kiwi_err *err)
{
	locale_t utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
	locale_t before = utf8 ? uselocale(utf8) : (locale_t)0;
	int rc = write_layer(blobs_fd, trees, n, o, layer, diff_id, err);
	if (utf8) {
		uselocale(before);
		freelocale(utf8);
	}
	return rc;
}

void kiwi_oci_emit_descriptor(kiwi_json_writer *w, const char *media_type, const struct kiwi_descriptor *d)
{
	kiwi_jw_key(w, "mediaType");
	kiwi_jw_string(w, media_type);
	kiwi_jw_key(w, "digest");
	kiwi_jw_string(w, d->digest);
	kiwi_jw_key(w, "size");
	kiwi_jw_int(w, d->size);
}

void kiwi_oci_emit_manifest(kiwi_json_writer *w, const struct kiwi_descriptor *config, const struct kiwi_image *base,
			    const char *layer_media_type, const struct kiwi_descriptor *layer, const char *annotation,
			    const char *value)
{
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "schemaVersion");
	kiwi_jw_int(w, 2);
	kiwi_jw_key(w, "mediaType");
	kiwi_jw_string(w, "application/vnd.oci.image.manifest.v1+json");
	kiwi_jw_key(w, "config");
	kiwi_jw_open_object(w);
	kiwi_oci_emit_descriptor(w, "application/vnd.oci.image.config.v1+json", config);
	kiwi_jw_close_object(w);
	kiwi_jw_key(w, "layers");
	kiwi_jw_open_array(w);
	for (size_t i = 0; base && i < base->n_layers; i++) {
		kiwi_jw_open_object(w);
		kiwi_oci_emit_descriptor(w, base->layers[i].media_type, &base->layers[i]);
		kiwi_jw_close_object(w);
	}
	kiwi_jw_open_object(w);
	kiwi_oci_emit_descriptor(w, layer_media_type, layer);
	kiwi_jw_close_object(w);
	kiwi_jw_close_array(w);
	if (annotation) {
		kiwi_jw_key(w, "annotations");
		kiwi_jw_open_object(w);
		kiwi_jw_key(w, annotation);
		kiwi_jw_string(w, value);
		kiwi_jw_close_object(w);
	}
	kiwi_jw_close_object(w);
}

void kiwi_oci_emit_layers(kiwi_json_writer *w, const struct kiwi_image *base, const kiwi_json *base_history,
			  const char *diff_id, const char *created, const char *created_by)
{
	kiwi_jw_key(w, "rootfs");
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "type");
	kiwi_jw_string(w, "layers");
	kiwi_jw_key(w, "diff_ids");
	kiwi_jw_open_array(w);
	for (size_t i = 0; base && i < base->n_layers; i++)
		kiwi_jw_string(w, base->diff_ids[i]);
	kiwi_jw_string(w, diff_id);
	kiwi_jw_close_array(w);
	kiwi_jw_close_object(w);
	kiwi_jw_key(w, "history");
	kiwi_jw_open_array(w);
	for (size_t i = 0; kiwi_json_type_of(base_history) == KIWI_JSON_ARRAY && i < kiwi_json_len(base_history); i++)
		kiwi_jw_value(w, kiwi_json_at(base_history, i));
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "created");
	kiwi_jw_string(w, created);
	kiwi_jw_key(w, "created_by");
	kiwi_jw_string(w, created_by);
	kiwi_jw_close_object(w);
	kiwi_jw_close_array(w);
}

static bool env_sets_path(char **env)
{
	for (size_t i = 0; env && env[i]; i++)
		if (!strncmp(env[i], "PATH=", 5))
			return true;
	return false;
}

static void emit_config(kiwi_json_writer *w, const struct kiwi_pack_opts *o, const char *os,
			const char *arch, const char *created, const char *diff_id)
{
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "created");
	kiwi_jw_string(w, created);
	kiwi_jw_key(w, "architecture");
	kiwi_jw_string(w, arch);
	kiwi_jw_key(w, "os");
	kiwi_jw_string(w, os);
	kiwi_jw_key(w, "config");
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "Env");
	kiwi_jw_open_array(w);
	if (!env_sets_path(o->env))
		kiwi_jw_string(w, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
	for (size_t i = 0; o->env && o->env[i]; i++)
		kiwi_jw_string(w, o->env[i]);
	kiwi_jw_close_array(w);
	kiwi_oci_write_strv(w, "Entrypoint", o->entrypoint, false);
	kiwi_oci_write_strv(w, "Cmd", o->cmd, false);
	if (o->working_dir) {
		kiwi_jw_key(w, "WorkingDir");
		kiwi_jw_string(w, o->working_dir);
	}
	if (o->user) {
		kiwi_jw_key(w, "User");
		kiwi_jw_string(w, o->user);
	}
	kiwi_jw_close_object(w);
	kiwi_oci_emit_layers(w, NULL, NULL, diff_id, created, "kiwi-rootfs pack");
	kiwi_jw_close_object(w);
}

const char *kiwi_oci_layer_media_type(enum kiwi_layer_compression c)
{
	return c == KIWI_LAYER_GZIP ? "application/vnd.oci.image.layer.v1.tar+gzip"
	       : c == KIWI_LAYER_ZSTD ? "application/vnd.oci.image.layer.v1.tar+zstd"
				      : "application/vnd.oci.image.layer.v1.tar";
}

int kiwi_oci_store_json(int blobs_fd, kiwi_json_writer *w, const char *scratch, struct kiwi_descriptor *d,
			kiwi_err *err)
{
	size_t len;
	const char *text = kiwi_jw_text(w, &len);
	return write_blob(blobs_fd, text, len, scratch, d, err);
}

/* index.json's text: every entry of old but the one tagged tag, then m's. */
static void index_text(const kiwi_json *old, const char *tag, const struct kiwi_descriptor *m, const char *os,
		       const char *arch, kiwi_json_writer *w)
{
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "schemaVersion");
	kiwi_jw_int(w, 2);
	kiwi_jw_key(w, "mediaType");
	kiwi_jw_string(w, "application/vnd.oci.image.index.v1+json");
	kiwi_jw_key(w, "manifests");
	kiwi_jw_open_array(w);
	const kiwi_json *list = kiwi_json_get(old, "manifests");
	for (size_t i = 0; i < kiwi_json_len(list); i++) {
		const kiwi_json *e = kiwi_json_at(list, i);
		const char *ref = kiwi_json_string(kiwi_json_get(kiwi_json_get(e, "annotations"),
								 KIWI_OCI_REF_ANNOTATION));
		if (!ref || strcmp(ref, tag))
			kiwi_jw_value(w, e);
	}
	kiwi_jw_open_object(w);
	kiwi_oci_emit_descriptor(w, "application/vnd.oci.image.manifest.v1+json", m);
	kiwi_jw_key(w, "platform");
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "architecture");
	kiwi_jw_string(w, arch);
	kiwi_jw_key(w, "os");
	kiwi_jw_string(w, os);
	kiwi_jw_close_object(w);
	kiwi_jw_key(w, "annotations");
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, KIWI_OCI_REF_ANNOTATION);
	kiwi_jw_string(w, tag);
	kiwi_jw_close_object(w);
	kiwi_jw_close_object(w);
	kiwi_jw_close_array(w);
	kiwi_jw_close_object(w);
}

void kiwi_oci_unique(char *out, size_t len)
{
	uint64_t r;
	struct timespec ts;
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		r = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30);
	}
	snprintf(out, len, "%d-%016llx", (int)getpid(), (unsigned long long)r);
}

int kiwi_oci_lock_dir(int dir_fd, const char *name, int op, kiwi_err *err)
{
	int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return kiwi_error(err, errno, "pack", "cannot open `%s` of the layout to lock it", name);
	while (flock(fd, op) < 0) {
		if (errno == EINTR)
			continue;
		int e = errno;
		close(fd);
		return kiwi_error(err, e, "pack", "cannot lock `%s` of the layout", name);
	}
	return fd;
}

/* Rewrites index.json with every entry but the one tagged tag, then ours:
 * read, changed and renamed into place under the layout's lock, so that
 * two writers never lose each other's tag, through a temp name of this
 * writer's own. */
int kiwi_oci_update_index(int layout_fd, const char *tag, const struct kiwi_descriptor *m,
			const char *os, const char *arch, const char *scratch, kiwi_err *err)
{
	char tmp[96], what[48], fallback[64];
	kiwi_oci_unique(what, sizeof(what));
	snprintf(fallback, sizeof(fallback), ".tmp-%s-index.json", what);
	kiwi_oci_scratch_name(tmp, sizeof(tmp), scratch, "index.json", fallback);
	_cleanup_close_ int lock = kiwi_oci_lock_dir(layout_fd, ".", LOCK_EX, err);
	if (lock < 0)
		return -1;
	_cleanup_json_ kiwi_json *old = NULL;
	_cleanup_close_ int ifd = openat(layout_fd, "index.json", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (ifd >= 0) {
		_cleanup_free_ char *text = NULL;
		size_t len;
		if (kiwi_read_bounded(ifd, 4U << 20, "index.json", &text, &len, err) < 0 ||
		    !(old = kiwi_json_parse(text, len, err)))
			return kiwi_error_wrap(err, "the layout's index.json");
	}
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
	if (!w)
		return kiwi_error(err, ENOMEM, "pack", "out of memory");
	index_text(old, tag, m, os, arch, w);
	size_t len;
	const char *text = kiwi_jw_text(w, &len);
	_cleanup_close_ int fd = openat(layout_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, text, len) != (ssize_t)len || fsync(fd) < 0 ||
	    renameat(layout_fd, tmp, layout_fd, "index.json") < 0) {
		int e = errno ? errno : EIO;
		unlinkat(layout_fd, tmp, 0);
		return kiwi_error(err, e, "pack", "cannot write index.json");
	}
	return 0;
}

void kiwi_oci_remove_created(const char *path)
{
	_cleanup_close_ int layout = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (layout < 0)
		return;
	kiwi_err ignored = { 0 };
	/* Held while the layout goes: a writer that opened it meanwhile
	 * finds it removed (kiwi_oci_lock_writer), not half gone. */
	_cleanup_close_ int lock = kiwi_oci_lock_dir(layout, "blobs", LOCK_EX | LOCK_NB, &ignored);
	struct stat st;
	if ((lock < 0 && ignored.errnum != ENOENT) || fstatat(layout, "index.json", &st, AT_SYMLINK_NOFOLLOW) == 0)
		return;
	kiwi_remove_tree_at(AT_FDCWD, path, &ignored);
}

int kiwi_oci_prepare_layout(const char *path, bool *created, kiwi_err *err)
{
	*created = mkdir(path, 0755) == 0;
	if (!*created && errno != EEXIST)
		return kiwi_error(err, errno, "pack", "cannot create the layout `%s`", path);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return kiwi_error(err, errno, "pack", "cannot open the layout `%s`", path);
	if ((mkdirat(fd, "blobs", 0755) < 0 && errno != EEXIST) ||
	    (mkdirat(fd, "blobs/sha256", 0755) < 0 && errno != EEXIST))
		return kiwi_error(err, errno, "pack", "cannot create `%s/blobs/sha256`", path);
	static const char layout[] = "{\"imageLayoutVersion\":\"1.0.0\"}";
	_cleanup_close_ int lfd = openat(fd, "oci-layout", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (lfd < 0 && errno != EEXIST)
		return kiwi_error(err, errno, "pack", "cannot create `%s/oci-layout`", path);
	if (lfd >= 0 && write(lfd, layout, sizeof(layout) - 1) != (ssize_t)sizeof(layout) - 1)
		return kiwi_error(err, errno ? errno : EIO, "pack", "cannot write `%s/oci-layout`", path);
	return TAKE_FD(fd);
}

static void format_created(const struct kiwi_pack_opts *o, char *out, size_t len)
{
	const char *sde = getenv("SOURCE_DATE_EPOCH");
	time_t t = o->reproducible ? (sde ? (time_t)strtoll(sde, NULL, 10) : 0) : time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int pack_into(int dir_fd, int layout_fd, const char *tag, const struct kiwi_pack_opts *o,
		     char *digest_out, kiwi_err *err)
{
	_cleanup_close_ int writing = kiwi_oci_lock_writer(layout_fd, err);
	if (writing < 0)
		return -1;
	_cleanup_close_ int blobs_fd = openat(layout_fd, "blobs/sha256", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (blobs_fd < 0)
		return kiwi_error(err, errno, "pack", "cannot open blobs/sha256");
	char plat[128];
	snprintf(plat, sizeof(plat), "%s", o->platform ? o->platform : KIWI_OCI_DEFAULT_PLATFORM);
	char *slash = strchr(plat, '/');
	if (!slash || !slash[1] || slash == plat)
		return kiwi_error(err, EINVAL, "pack", "platform `%s` is not os/arch", plat);
	*slash = '\0';
	struct kiwi_descriptor layer = { 0 }, config = { 0 }, manifest = { 0 };
	char diff_id[KIWI_DIGEST_MAX];
	const struct kiwi_layer_tree tree = { .dir_fd = dir_fd, .prefix = "" };
	const struct kiwi_layer_write_opts wo = { .compression = o->compression, .reproducible = o->reproducible };
	if (kiwi_oci_write_layer(blobs_fd, &tree, 1, &wo, &layer, diff_id, err) < 0)
		return -1;
	char created[40];
	format_created(o, created, sizeof(created));
	_cleanup_jw_ kiwi_json_writer *cw = kiwi_jw_new(false);
	_cleanup_jw_ kiwi_json_writer *mw = kiwi_jw_new(false);
	if (!cw || !mw)
		return kiwi_error(err, ENOMEM, "pack", "out of memory");
	emit_config(cw, o, plat, slash + 1, created, diff_id);
	if (kiwi_oci_store_json(blobs_fd, cw, NULL, &config, err) < 0)
		return -1;
	kiwi_oci_emit_manifest(mw, &config, NULL, kiwi_oci_layer_media_type(o->compression), &layer, NULL, NULL);
	if (kiwi_oci_store_json(blobs_fd, mw, NULL, &manifest, err) < 0 ||
	    kiwi_oci_update_index(layout_fd, tag, &manifest, plat, slash + 1, NULL, err) < 0)
		return -1;
	if (digest_out)
		memcpy(digest_out, manifest.digest, KIWI_DIGEST_MAX);
	return 0;
}

int kiwi_image_pack(const char *dir, const char *ref, const struct kiwi_pack_opts *o,
		    char *digest_out, kiwi_err *err)
{
	_cleanup_close_ int dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir_fd < 0)
		return kiwi_error(err, errno, "pack", "cannot open the directory `%s`", dir);
	struct kiwi_image_ref r;
	if (kiwi_image_ref_parse(ref, &r, err) < 0)
		return -1;
	if (r.digest) {
		kiwi_image_ref_clear(&r);
		return kiwi_error(err, EINVAL, "pack", "`%s`: pack takes a tag, not a digest", ref);
	}
	bool created;
	int layout_fd = kiwi_oci_prepare_layout(r.path, &created, err);
	int rc = layout_fd < 0 ? -1 : pack_into(dir_fd, layout_fd, r.tag ? r.tag : "latest", o, digest_out, err);
	if (layout_fd >= 0)
		close(layout_fd);
	if (rc < 0 && created)
		kiwi_oci_remove_created(r.path);
	kiwi_image_ref_clear(&r);
	return rc;
}
