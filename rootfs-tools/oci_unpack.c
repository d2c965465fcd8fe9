/* SPDX-License-Identifier: Apache-2.0 */
/* Unpacking an image into a directory: a scratch directory beside the
 * destination, renamed into place only when every layer was verified. */
#include "kiwi/cleanup.h"
#include "kiwi/oci_image.h"
#include "oci_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int kiwi_oci_open_parent(const char *path, char **base, kiwi_err *err)
{
	_cleanup_free_ char *a = strdup(path), *b = strdup(path);
	if (!a || !b)
		return kiwi_error(err, ENOMEM, "path", "out of memory");
	/* Trailing slashes would make basename() return the parent's name. */
	for (size_t n = strlen(b); n > 1 && b[n - 1] == '/'; n--)
		b[n - 1] = '\0';
	const char *name = basename(b);
	if (!strcmp(name, ".") || !strcmp(name, "..") || !strcmp(name, "/"))
		return kiwi_error(err, EINVAL, "path", "`%s` does not name a new entry", path);
	int fd = open(dirname(a), O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return kiwi_error(err, errno, "path", "cannot open the directory of `%s`", path);
	*base = strdup(name);
	if (!*base) {
		close(fd);
		return kiwi_error(err, ENOMEM, "path", "out of memory");
	}
	return fd;
}

int kiwi_oci_mkdir_p(const char *path, mode_t mode, kiwi_err *err)
{
	char buf[PATH_MAX];
	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return kiwi_error(err, ENAMETOOLONG, "mkdir", "`%s` is too long", path);
	for (char *p = buf + 1;; p++) {
		if (*p && *p != '/')
			continue;
		char saved = *p;
		*p = '\0';
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return kiwi_error(err, errno, "mkdir", "cannot create `%s`", buf);
		*p = saved;
		if (!saved)
			return 0;
	}
}

void kiwi_layout_close(struct kiwi_layout *l)
{
	if (l->fd >= 0)
		close(l->fd);
	if (l->scratch) {
		kiwi_err ignored;
		kiwi_remove_tree_at(AT_FDCWD, l->scratch, &ignored);
		free(l->scratch);
	}
	*l = (struct kiwi_layout){ .fd = -1 };
}

/* An oci-archive is a tar of a layout: it goes through the same contained
 * extractor as layers (bounded, no whiteouts), into a scratch directory. */
static int open_archive(int afd, const char *path, const struct kiwi_extract_opts *xo,
			struct kiwi_layout *l, kiwi_err *err)
{
	const char *tmp = getenv("TMPDIR");
	char tmpl[PATH_MAX];
	snprintf(tmpl, sizeof(tmpl), "%s/kiwi-oci-archive-XXXXXX", tmp && *tmp ? tmp : "/var/tmp");
	if (!mkdtemp(tmpl))
		return kiwi_error(err, errno, "archive", "cannot create a scratch directory `%s`", tmpl);
	l->scratch = strdup(tmpl);
	if (!l->scratch) {
		rmdir(tmpl);
		return kiwi_error(err, ENOMEM, "archive", "out of memory");
	}
	l->fd = open(tmpl, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (l->fd < 0)
		return kiwi_error(err, errno, "archive", "cannot open `%s`", tmpl);
	struct kiwi_extract_opts o = *xo;
	o.plain = true;
	o.keep_capabilities = false;
	_cleanup_extract_ kiwi_extract *x = kiwi_extract_new(l->fd, &o);
	if (!x)
		return kiwi_error(err, ENOMEM, "archive", "out of memory");
	char label[PATH_MAX + 16];
	snprintf(label, sizeof(label), "archive `%s`", path);
	if (kiwi_extract_layer(x, afd, KIWI_LAYER_TAR, NULL, -1, NULL, label, err) < 0)
		return -1;
	return kiwi_extract_finish(x, err);
}

int kiwi_layout_open(const char *path, const struct kiwi_extract_opts *xo, struct kiwi_layout *l,
		     kiwi_err *err)
{
	*l = (struct kiwi_layout){ .fd = -1 };
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return kiwi_error(err, errno, "layout", "cannot open `%s`", path);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return kiwi_error(err, errno, "layout", "cannot stat `%s`", path);
	if (S_ISDIR(st.st_mode)) {
		l->fd = TAKE_FD(fd);
		return 0;
	}
	if (!S_ISREG(st.st_mode))
		return kiwi_error(err, EINVAL, "layout", "`%s` is neither a layout directory nor an oci-archive", path);
	if (open_archive(fd, path, xo, l, err) < 0) {
		kiwi_layout_close(l);
		return -1;
	}
	return 0;
}

int kiwi_oci_open_ref(const char *ref, const struct kiwi_unpack_opts *o, struct kiwi_layout *l,
		      struct kiwi_image *img, kiwi_err *err)
{
	struct kiwi_image_ref r;
	if (kiwi_image_ref_parse(ref, &r, err) < 0)
		return -1;
	int rc = kiwi_layout_open(r.path, &o->extract, l, err);
	if (rc == 0) {
		rc = kiwi_image_load(l->fd, r.tag, r.digest, o->platform, img, err);
		if (rc < 0) {
			kiwi_error_wrap(err, "`%s`", ref);
			kiwi_layout_close(l);
		}
	}
	kiwi_image_ref_clear(&r);
	return rc;
}

int kiwi_oci_extract_image(int layout_fd, const struct kiwi_image *img, int root_fd,
			   const struct kiwi_unpack_opts *o, kiwi_err *err)
{
	_cleanup_extract_ kiwi_extract *x = kiwi_extract_new(root_fd, &o->extract);
	if (!x)
		return kiwi_error(err, ENOMEM, "unpack", "out of memory");
	/* mkdtemp made it 0700; images without a "./" entry get the usual 0755. */
	if (fchmod(root_fd, 0755) < 0)
		return kiwi_error(err, errno, "unpack", "cannot chmod the destination");
	for (size_t i = 0; i < img->n_layers; i++) {
		const struct kiwi_descriptor *d = &img->layers[i];
		char label[96];
		snprintf(label, sizeof(label), "layer %zu/%zu %.19s", i + 1, img->n_layers, d->digest);
		_cleanup_close_ int fd = kiwi_blob_open(layout_fd, d->digest, err);
		if (fd < 0)
			return kiwi_error_wrap(err, "%s", label);
		int comp = kiwi_layer_compression_of(d->media_type);
		if (kiwi_extract_layer(x, fd, (enum kiwi_layer_compression)comp, d->digest, d->size,
				       img->diff_ids[i], label, err) < 0)
			return -1;
	}
	int rc = kiwi_extract_finish(x, err);
	if (o->stats)
		*o->stats = *kiwi_extract_get_stats(x);
	return rc;
}

/* Is dest free to take: absent, or an empty directory (then *empty_dir)? */
static int check_dest(int pfd, const char *base, const char *dest, bool *empty_dir, kiwi_err *err)
{
	*empty_dir = false;
	struct stat st;
	if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : kiwi_error(err, errno, "unpack", "cannot inspect `%s`", dest);
	if (S_ISDIR(st.st_mode)) {
		_cleanup_close_ int fd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
		if (d)
			(void)TAKE_FD(fd);   /* closedir closes it; when fdopendir fails, we do */
		size_t n = 0;
		for (struct dirent *de; d && (de = readdir(d));)
			n++;
		if (d)
			closedir(d);
		if (n == 2) {
			*empty_dir = true;
			return 0;
		}
	}
	return kiwi_error(err, EEXIST, "unpack", "destination `%s` exists and is not an empty directory", dest);
}

int kiwi_image_unpack(const char *ref, const char *dest, const struct kiwi_unpack_opts *o,
		      struct kiwi_image *img_out, kiwi_err *err)
{
	static const struct kiwi_unpack_opts defaults = { 0 };
	if (!o)
		o = &defaults;
	_cleanup_free_ char *base = NULL;
	_cleanup_close_ int pfd = kiwi_oci_open_parent(dest, &base, err);
	if (pfd < 0)
		return -1;
	bool empty_dir;
	if (check_dest(pfd, base, dest, &empty_dir, err) < 0)
		return -1;
	struct kiwi_layout l;
	struct kiwi_image img;
	if (kiwi_oci_open_ref(ref, o, &l, &img, err) < 0)
		return -1;
	char tmpname[NAME_MAX + 1];
	snprintf(tmpname, sizeof(tmpname), ".%.200s.kiwi-XXXXXX", base);
	_cleanup_free_ char *tmpl = NULL;
	_cleanup_close_ int root_fd = -1;
	int rc = -1;
	if (asprintf(&tmpl, "/proc/self/fd/%d/%s", pfd, tmpname) < 0 || !mkdtemp(tmpl)) {
		rc = kiwi_error(err, errno, "unpack", "cannot create a scratch directory beside `%s`", dest);
		goto out;
	}
	const char *scratch = strrchr(tmpl, '/') + 1;
	root_fd = openat(pfd, scratch, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (root_fd < 0)
		rc = kiwi_error(err, errno, "unpack", "cannot open the scratch directory");
	else
		rc = kiwi_oci_extract_image(l.fd, &img, root_fd, o, err);
	if (rc == 0 && empty_dir && unlinkat(pfd, base, AT_REMOVEDIR) < 0)
		rc = kiwi_error(err, errno, "unpack", "cannot replace the empty directory `%s`", dest);
	if (rc == 0 && renameat2(pfd, scratch, pfd, base, RENAME_NOREPLACE) < 0)
		rc = kiwi_error(err, errno, "unpack", "cannot move the result to `%s`", dest);
	if (rc < 0) {
		kiwi_err ignored;
		kiwi_remove_tree_at(pfd, scratch, &ignored);
	}
out:
	kiwi_layout_close(&l);
	if (rc == 0 && img_out)
		*img_out = img;
	else
		kiwi_image_clear(&img);
	return rc;
}
