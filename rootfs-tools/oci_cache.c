/* SPDX-License-Identifier: Apache-2.0 */
/* The cache of unpacked roots, keyed by manifest digest:
 *   DIR/sha256-<hex>/rootfs       the tree (the entry directory is 0555)
 *   DIR/sha256-<hex>/image.json   Env, Entrypoint, Cmd, WorkingDir, User
 *   DIR/sha256-<hex>.lock         exclusive while unpacking, shared while used
 * An entry appears by one rename of a finished scratch directory, so readers
 * never see half of one; the lock makes concurrent unpacks do the work once. */
#include "kiwi/cleanup.h"
#include "kiwi/oci_image.h"
#include "oci_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>

#define SCRATCH_PREFIX ".tmp-"
/* Entries unpacked with security.capability restored are kept apart: the
 * same image without them is a different tree. */
#define CAPS_SUFFIX "-caps"

char *kiwi_image_cache_default(void)
{
	char *out = NULL;
	if (geteuid() == 0)
		return strdup("/var/lib/kiwi/images");
	const char *xdg = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");
	if (xdg && xdg[0] == '/')
		return asprintf(&out, "%s/kiwi/images", xdg) < 0 ? NULL : out;
	if (home && home[0] == '/')
		return asprintf(&out, "%s/.cache/kiwi/images", home) < 0 ? NULL : out;
	return NULL;
}

static int lock_entry(int dir_fd, const char *key, int how, kiwi_err *err)
{
	char name[KIWI_DIGEST_MAX + 16];
	snprintf(name, sizeof(name), "%s.lock", key);
	_cleanup_close_ int fd = openat(dir_fd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return kiwi_error(err, errno, "cache", "cannot open lock `%s`", name);
	if (flock(fd, how) < 0)
		return kiwi_error(err, errno, "cache", "cannot lock `%s`", name);
	return TAKE_FD(fd);
}

static bool entry_ready(int dir_fd, const char *key)
{
	char rel[KIWI_DIGEST_MAX + 24];
	snprintf(rel, sizeof(rel), "%s/image.json", key);
	return faccessat(dir_fd, rel, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

/* Unpacks into DIR/.tmp-KEY-XXXXXX and renames it to DIR/KEY. */
static int fill_entry(int dir_fd, const char *key, int layout_fd, const struct kiwi_image *img,
		      const struct kiwi_unpack_opts *o, kiwi_err *err)
{
	char tmpl[PATH_MAX];
	snprintf(tmpl, sizeof(tmpl), "/proc/self/fd/%d/" SCRATCH_PREFIX "%s-XXXXXX", dir_fd, key);
	if (!mkdtemp(tmpl))
		return kiwi_error(err, errno, "cache", "cannot create a scratch directory for %s", key);
	const char *scratch = strrchr(tmpl, '/') + 1;
	_cleanup_close_ int sfd = openat(dir_fd, scratch, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int rc = sfd < 0 ? kiwi_error(err, errno, "cache", "cannot open `%s`", scratch) : 0;
	_cleanup_close_ int root_fd = -1;
	if (rc == 0 && mkdirat(sfd, "rootfs", 0700) < 0)
		rc = kiwi_error(err, errno, "cache", "cannot create `%s/rootfs`", scratch);
	if (rc == 0 && (root_fd = openat(sfd, "rootfs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		rc = kiwi_error(err, errno, "cache", "cannot open `%s/rootfs`", scratch);
	if (rc == 0)
		rc = kiwi_oci_extract_image(layout_fd, img, root_fd, o, err);
	if (rc == 0)
		rc = kiwi_image_config_save(sfd, "image.json", img->manifest.digest, &img->config, err);
	/* Read-only: nothing may add to or rename inside an entry once shared. */
	if (rc == 0 && fchmod(sfd, 0555) < 0)
		rc = kiwi_error(err, errno, "cache", "cannot seal `%s`", scratch);
	if (rc == 0 && renameat2(dir_fd, scratch, dir_fd, key, RENAME_NOREPLACE) < 0 && errno != EEXIST)
		rc = kiwi_error(err, errno, "cache", "cannot publish `%s`", key);
	if (rc < 0 || faccessat(dir_fd, scratch, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
		kiwi_err ignored;
		kiwi_remove_tree_at(dir_fd, scratch, &ignored);
	}
	return rc;
}

static int open_cache_dir(const char *cache_dir, char **owned, kiwi_err *err)
{
	if (!cache_dir) {
		cache_dir = *owned = kiwi_image_cache_default();
		if (!cache_dir)
			return kiwi_error(err, ENOENT, "cache", "no cache directory: set --cache-dir, XDG_CACHE_HOME or HOME");
	}
	if (kiwi_oci_mkdir_p(cache_dir, 0700, err) < 0)
		return -1;
	int fd = open(cache_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd >= 0 ? fd : kiwi_error(err, errno, "cache", "cannot open `%s`", cache_dir);
}

int kiwi_image_ensure_unpacked(const char *ref, const char *cache_dir,
			       const struct kiwi_unpack_opts *o, char **rootfs_out,
			       struct kiwi_image_config *cfg, int *pin_fd, kiwi_err *err)
{
	static const struct kiwi_unpack_opts defaults = { 0 };
	if (!o)
		o = &defaults;
	_cleanup_free_ char *owned = NULL;
	_cleanup_close_ int dir_fd = open_cache_dir(cache_dir, &owned, err);
	if (dir_fd < 0)
		return -1;
	cache_dir = owned ? owned : cache_dir;
	struct kiwi_layout l;
	struct kiwi_image img;
	if (kiwi_oci_open_ref(ref, o, &l, &img, err) < 0)
		return -1;
	char key[KIWI_DIGEST_MAX + sizeof(CAPS_SUFFIX)];
	snprintf(key, sizeof(key), "%s%s", img.manifest.digest,
		 o->extract.keep_capabilities ? CAPS_SUFFIX : "");
	*strchr(key, ':') = '-';
	_cleanup_close_ int lock = lock_entry(dir_fd, key, LOCK_SH, err);
	int rc = lock < 0 ? -1 : 0;
	if (rc == 0 && !entry_ready(dir_fd, key)) {
		/* Whoever holds the exclusive lock first does the work; the
		 * others wait here and then find the entry ready. */
		rc = flock(lock, LOCK_EX) < 0 ? kiwi_error(err, errno, "cache", "cannot lock %s", key) : 0;
		if (rc == 0 && !entry_ready(dir_fd, key))
			rc = fill_entry(dir_fd, key, l.fd, &img, o, err);
		if (rc == 0 && flock(lock, LOCK_SH) < 0)
			rc = kiwi_error(err, errno, "cache", "cannot lock %s", key);
	}
	kiwi_layout_close(&l);
	if (rc == 0) {
		utimensat(dir_fd, key, NULL, AT_SYMLINK_NOFOLLOW); /* last used, for gc */
		if (asprintf(rootfs_out, "%s/%s/rootfs", cache_dir, key) < 0)
			rc = kiwi_error(err, ENOMEM, "cache", "out of memory");
	}
	if (rc == 0) {
		*cfg = img.config;
		img.config = (struct kiwi_image_config){ 0 };
		if (pin_fd)
			*pin_fd = TAKE_FD(lock);
	}
	kiwi_image_clear(&img);
	return rc;
}

/* Entry names are "<alg>-<hex>[-caps]"; scratch ones ".tmp-<entry>-XXXXXX"
 * (mkdtemp's suffix has no dash, so "-caps" cannot be mistaken). */
static bool entry_key(const char *name, char *key, size_t len)
{
	static const char caps[] = CAPS_SUFFIX;
	bool scratch = !strncmp(name, SCRATCH_PREFIX, strlen(SCRATCH_PREFIX));
	const char *k = scratch ? name + strlen(SCRATCH_PREFIX) : name;
	const char *dash = strchr(k, '-');
	if (!dash || strchr(k, '.'))
		return false;
	size_t n = (size_t)(dash - k) + 1 + strspn(dash + 1, "0123456789abcdef");
	if (n - (size_t)(dash - k) - 1 < 64)
		return false;
	if (!strncmp(k + n, caps, strlen(caps)) && (k[n + strlen(caps)] == '\0' || k[n + strlen(caps)] == '-'))
		n += strlen(caps);
	if ((!scratch && k[n]) || (scratch && k[n] != '-') || n >= len)
		return false;
	snprintf(key, len, "%.*s", (int)n, k);
	return true;
}

int kiwi_image_cache_gc(const char *cache_dir, int64_t older_than, struct kiwi_gc_stats *st,
			kiwi_err *err)
{
	*st = (struct kiwi_gc_stats){ 0 };
	_cleanup_free_ char *owned = NULL;
	_cleanup_close_ int dir_fd = open_cache_dir(cache_dir, &owned, err);
	if (dir_fd < 0)
		return -1;
	int fd = dup(dir_fd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return kiwi_error(err, errno, "gc", "cannot read the cache directory");
	}
	time_t now = time(NULL);
	int rc = 0;
	for (struct dirent *de; rc == 0 && (de = readdir(d));) {
		char key[KIWI_DIGEST_MAX + sizeof(CAPS_SUFFIX)];
		struct stat s;
		if (!entry_key(de->d_name, key, sizeof(key)) ||
		    fstatat(dir_fd, de->d_name, &s, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(s.st_mode))
			continue;
		bool scratch = de->d_name[0] == '.';
		if (!scratch && now - s.st_mtime < older_than) {
			st->kept++;
			continue;
		}
		kiwi_err lerr;
		_cleanup_close_ int lock = lock_entry(dir_fd, key, LOCK_EX | LOCK_NB, &lerr);
		if (lock < 0) { /* in use, or being unpacked right now */
			st->busy++;
			continue;
		}
		rc = kiwi_remove_tree_at(dir_fd, de->d_name, err);
		if (rc == 0)
			st->removed++;
	}
	closedir(d);
	return rc;
}
