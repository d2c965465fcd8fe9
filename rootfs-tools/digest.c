/* SPDX-License-Identifier: Apache-2.0 */
#include "kiwi/digest.h"
#include "kiwi/cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

struct kiwi_hasher {
	EVP_MD_CTX *ctx;
	enum kiwi_digest_alg alg;
	uint64_t count;
};

static const struct {
	const char *name;
	size_t hexlen;
} algs[] = {
	[KIWI_DIGEST_SHA256] = { "sha256", 64 },
	[KIWI_DIGEST_SHA512] = { "sha512", 128 },
};

const char *kiwi_digest_alg_name(enum kiwi_digest_alg alg)
{
	return algs[alg].name;
}

int kiwi_digest_parse(const char *s, enum kiwi_digest_alg *alg, const char **hex, kiwi_err *err)
{
	const char *colon = strchr(s, ':');
	if (!colon)
		return kiwi_error(err, EINVAL, "digest", "`%.80s` is not of the form alg:hex", s);
	for (size_t a = 0; a < KIWI_ARRAY_SIZE(algs); a++) {
		size_t nl = strlen(algs[a].name);
		if ((size_t)(colon - s) != nl || strncmp(s, algs[a].name, nl))
			continue;
		const char *h = colon + 1;
		/* Upper-case hex would name a different file than the canonical
		 * digest, so only the spec's lower-case form is accepted. */
		if (strlen(h) != algs[a].hexlen || strspn(h, "0123456789abcdef") != algs[a].hexlen)
			return kiwi_error(err, EINVAL, "digest", "`%.80s` has a malformed %s value",
					  s, algs[a].name);
		*alg = (enum kiwi_digest_alg)a;
		if (hex)
			*hex = h;
		return 0;
	}
	return kiwi_error(err, ENOTSUP, "digest", "`%.80s` uses an unsupported algorithm", s);
}

kiwi_hasher *kiwi_hasher_new(enum kiwi_digest_alg alg)
{
	kiwi_hasher *h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->alg = alg;
	h->ctx = EVP_MD_CTX_new();
	const EVP_MD *md = alg == KIWI_DIGEST_SHA512 ? EVP_sha512() : EVP_sha256();
	if (!h->ctx || EVP_DigestInit_ex(h->ctx, md, NULL) != 1) {
		kiwi_hasher_free(h);
		return NULL;
	}
	return h;
}

void kiwi_hasher_free(kiwi_hasher *h)
{
	if (!h)
		return;
	EVP_MD_CTX_free(h->ctx);
	free(h);
}

void kiwi_hasher_update(kiwi_hasher *h, const void *buf, size_t len)
{
	EVP_DigestUpdate(h->ctx, buf, len);
	h->count += len;
}

uint64_t kiwi_hasher_count(const kiwi_hasher *h)
{
	return h->count;
}

void kiwi_hasher_final(kiwi_hasher *h, char *out)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	EVP_DigestFinal_ex(h->ctx, md, &n);
	int off = snprintf(out, KIWI_DIGEST_MAX, "%s:", algs[h->alg].name);
	for (unsigned int i = 0; i < n; i++)
		off += snprintf(out + off, KIWI_DIGEST_MAX - (size_t)off, "%02x", md[i]);
}

void kiwi_digest_buf(enum kiwi_digest_alg alg, const void *buf, size_t len, char *out)
{
	_cleanup_hasher_ kiwi_hasher *h = kiwi_hasher_new(alg);
	if (!h) {
		out[0] = '\0';
		return;
	}
	kiwi_hasher_update(h, buf, len);
	kiwi_hasher_final(h, out);
}

int kiwi_blob_open(int layout_fd, const char *digest, kiwi_err *err)
{
	enum kiwi_digest_alg alg;
	const char *hex;
	if (kiwi_digest_parse(digest, &alg, &hex, err) < 0)
		return -1;
	/* One component at a time, following no symlink: a layout's "blobs"
	 * must not lead digest-checked reads to files elsewhere on the host. */
	_cleanup_close_ int blobs = openat(layout_fd, "blobs", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_close_ int dir = blobs < 0 ? -1 :
		openat(blobs, algs[alg].name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int fd = dir < 0 ? -1 : openat(dir, hex, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return kiwi_error(err, errno, "blob", "cannot open blob %s", digest);
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return kiwi_error(err, EINVAL, "blob", "blob %s is not a regular file", digest);
	}
	return fd;
}

int kiwi_blob_check(kiwi_hasher *h, const char *digest, int64_t want_size, kiwi_err *err)
{
	uint64_t got = kiwi_hasher_count(h);
	if (want_size >= 0 && got != (uint64_t)want_size)
		return kiwi_error(err, EBADMSG, "verify",
				  "blob %s is %" PRIu64 " bytes, its descriptor says %" PRId64,
				  digest, got, want_size);
	char actual[KIWI_DIGEST_MAX];
	kiwi_hasher_final(h, actual);
	if (strcmp(actual, digest))
		return kiwi_error(err, EBADMSG, "verify", "blob %s has digest %s", digest, actual);
	return 0;
}

int kiwi_blob_read(int layout_fd, const char *digest, int64_t want_size, size_t max,
		   char **out, size_t *len, kiwi_err *err)
{
	enum kiwi_digest_alg alg;
	if (kiwi_digest_parse(digest, &alg, NULL, err) < 0)
		return -1;
	if (want_size > (int64_t)max)
		return kiwi_error(err, EFBIG, "blob", "blob %s claims %" PRId64 " bytes, the limit is %zu",
				  digest, want_size, max);
	_cleanup_close_ int fd = kiwi_blob_open(layout_fd, digest, err);
	if (fd < 0)
		return -1;
	_cleanup_hasher_ kiwi_hasher *h = kiwi_hasher_new(alg);
	if (!h)
		return kiwi_error(err, ENOMEM, "blob", "cannot hash blob %s", digest);
	char what[KIWI_DIGEST_MAX + 8];
	snprintf(what, sizeof(what), "blob %s", digest);
	_cleanup_free_ char *buf = NULL;
	size_t used;
	if (kiwi_read_bounded(fd, max, what, &buf, &used, err) < 0)
		return -1;
	kiwi_hasher_update(h, buf, used);
	if (kiwi_blob_check(h, digest, want_size, err) < 0)
		return -1;
	*len = used;
	*out = TAKE_PTR(buf);
	return 0;
}
