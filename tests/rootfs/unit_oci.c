/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for libkiwi_image: digests, references, media types, the
 * string map, and name cleaning as the extractor applies it (in a real
 * directory: the kernel does the resolving, nothing is mocked). */
#include <archive.h>
#include <archive_entry.h>
#include <criterion/criterion.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../rootfs-tools/strmap.h"
#include "kiwi/digest.h"
#include "kiwi/layer.h"
#include "kiwi/oci_image.h"

#define HEX64 "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"

Test(digest, parse)
{
	enum kiwi_digest_alg alg;
	const char *hex;
	kiwi_err err;
	cr_assert_eq(kiwi_digest_parse("sha256:" HEX64, &alg, &hex, &err), 0);
	cr_assert_eq(alg, KIWI_DIGEST_SHA256);
	cr_assert_str_eq(hex, HEX64);
	cr_assert_eq(kiwi_digest_parse("sha512:" HEX64 HEX64, &alg, NULL, &err), 0);
	cr_assert_eq(alg, KIWI_DIGEST_SHA512);
	static const char *const bad[] = {
		"sha256:BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD",
		"sha256:" HEX64 "00", "sha256:abc", "md5:" HEX64, "sha256" HEX64, "sha256:../../etc/pass",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(kiwi_digest_parse(bad[i], &alg, NULL, &err), -1, "%s", bad[i]);
}

Test(digest, known_vector)
{
	char out[KIWI_DIGEST_MAX];
	kiwi_digest_buf(KIWI_DIGEST_SHA256, "abc", 3, out);
	cr_assert_str_eq(out, "sha256:" HEX64);
}

Test(ref, parse)
{
	struct kiwi_image_ref r;
	kiwi_err err;
	cr_assert_eq(kiwi_image_ref_parse("./lay:v1", &r, &err), 0);
	cr_assert_str_eq(r.path, "./lay");
	cr_assert_str_eq(r.tag, "v1");
	cr_assert_null(r.digest);
	kiwi_image_ref_clear(&r);
	cr_assert_eq(kiwi_image_ref_parse("/a:b/lay@sha256:" HEX64, &r, &err), 0);
	cr_assert_str_eq(r.path, "/a:b/lay");
	cr_assert_str_eq(r.digest, "sha256:" HEX64);
	kiwi_image_ref_clear(&r);
	cr_assert_eq(kiwi_image_ref_parse("/a:b/lay", &r, &err), 0);
	cr_assert_null(r.tag);
	kiwi_image_ref_clear(&r);
	cr_assert_eq(kiwi_image_ref_parse("lay:", &r, &err), -1);
	cr_assert_eq(kiwi_image_ref_parse(":tag", &r, &err), -1);
	cr_assert_eq(kiwi_image_ref_parse("lay@sha256:zz", &r, &err), -1);
	cr_assert_eq(kiwi_image_ref_parse("", &r, &err), -1);
}

Test(layer, media_types)
{
	cr_assert_eq(kiwi_layer_compression_of("application/vnd.oci.image.layer.v1.tar"), KIWI_LAYER_TAR);
	cr_assert_eq(kiwi_layer_compression_of("application/vnd.oci.image.layer.v1.tar+gzip"), KIWI_LAYER_GZIP);
	cr_assert_eq(kiwi_layer_compression_of("application/vnd.oci.image.layer.v1.tar+zstd"), KIWI_LAYER_ZSTD);
	cr_assert_eq(kiwi_layer_compression_of("application/vnd.oci.image.layer.nondistributable.v1.tar+gzip"),
		     KIWI_LAYER_GZIP);
	cr_assert_eq(kiwi_layer_compression_of("application/vnd.docker.image.rootfs.diff.tar.gzip"), KIWI_LAYER_GZIP);
	cr_assert_eq(kiwi_layer_compression_of("application/vnd.oci.image.layer.v1.tar+bzip2"), -1);
	cr_assert_eq(kiwi_layer_compression_of(NULL), -1);
}

Test(strmap, many_keys)
{
	struct strmap m = { 0 };
	char key[32];
	bool added;
	for (int i = 0; i < 10000; i++) {
		snprintf(key, sizeof(key), "k/%d", i);
		cr_assert_not_null(strmap_put(&m, key, &added));
		cr_assert(added);
	}
	cr_assert_not_null(strmap_put(&m, "k/7", &added));
	cr_assert_not(added);
	cr_assert_eq(m.n, 10000);
	for (int i = 0; i < 10000; i++) {
		snprintf(key, sizeof(key), "k/%d", i);
		cr_assert_not_null(strmap_find(&m, key), "%s", key);
	}
	cr_assert_null(strmap_find(&m, "k/10000"));
	strmap_clear(&m, false);
	cr_assert_null(strmap_find(&m, "k/1"));
}

/* A one-file tar named name, in a memfd. */
static int tar_with(const char *name)
{
	int fd = memfd_create("t", MFD_CLOEXEC);
	struct archive *a = archive_write_new();
	archive_write_set_format_pax_restricted(a);
	archive_write_open_fd(a, fd);
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, name);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_size(e, 1);
	archive_write_header(a, e);
	archive_write_data(a, "x", 1);
	archive_entry_free(e);
	archive_write_free(a);
	lseek(fd, 0, SEEK_SET);
	return fd;
}

static int extract_name(const char *name, char *tmpl, int *root_out, kiwi_err *err)
{
	cr_assert_not_null(mkdtemp(tmpl));
	int root = open(tmpl, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct kiwi_extract_opts o = { 0 };
	kiwi_extract *x = kiwi_extract_new(root, &o);
	int fd = tar_with(name);
	int rc = kiwi_extract_layer(x, fd, KIWI_LAYER_TAR, NULL, -1, NULL, "unit", err);
	close(fd);
	kiwi_extract_free(x);
	*root_out = root;
	return rc;
}

Test(layer, names_are_cleaned)
{
	static const struct {
		const char *name;
		const char *lands; /* NULL: refused */
	} cases[] = {
		{ "a/./b/../c", "a/c" }, { "./x", "x" }, { "d//e", "d/e" },
		{ "a/../..", NULL }, { "../x", NULL }, { "/abs", NULL }, { "a/../../b", NULL },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		kiwi_err err = { 0 };
		int root;
		char tmpl[] = "/tmp/kiwi-unit-XXXXXX";
		int rc = extract_name(cases[i].name, tmpl, &root, &err);
		if (cases[i].lands) {
			cr_assert_eq(rc, 0, "%s: %s", cases[i].name, err.msg);
			cr_assert_eq(faccessat(root, cases[i].lands, F_OK, AT_SYMLINK_NOFOLLOW), 0,
				     "%s did not land at %s", cases[i].name, cases[i].lands);
		} else {
			cr_assert_eq(rc, -1, "%s was accepted", cases[i].name);
			cr_assert(strstr(err.msg, cases[i].name), "%s", err.msg);
		}
		kiwi_err ignored;
		cr_assert_eq(kiwi_remove_tree_at(AT_FDCWD, tmpl, &ignored), 0);
		close(root);
	}
}

/* The API kiwi-run uses: pack a tree, make sure it is unpacked in a cache,
 * and keep gc away while pinned. */
Test(cache, ensure_unpacked_and_pin)
{
	char top[] = "/tmp/kiwi-unit-cache-XXXXXX";
	cr_assert_not_null(mkdtemp(top));
	char tree[256], layout[256], cache[256], file[PATH_MAX];
	snprintf(tree, sizeof(tree), "%s/tree", top);
	snprintf(layout, sizeof(layout), "%s/layout:v1", top);
	snprintf(cache, sizeof(cache), "%s/cache", top);
	snprintf(file, sizeof(file), "%s/hello", tree);
	cr_assert_eq(mkdir(tree, 0755), 0);
	FILE *f = fopen(file, "w");
	fputs("hi\n", f);
	fclose(f);
	char *entrypoint[] = { "/hello", NULL };
	struct kiwi_pack_opts po = { .entrypoint = entrypoint, .working_dir = "/w" };
	kiwi_err err = { 0 };
	char digest[KIWI_DIGEST_MAX];
	cr_assert_eq(kiwi_image_pack(tree, layout, &po, digest, &err), 0, "%s", err.msg);

	char *rootfs = NULL;
	struct kiwi_image_config cfg;
	int pin = -1;
	cr_assert_eq(kiwi_image_ensure_unpacked(layout, cache, NULL, &rootfs, &cfg, &pin, &err), 0,
		     "%s", err.msg);
	cr_assert_geq(pin, 0);
	cr_assert_str_eq(cfg.entrypoint[0], "/hello");
	cr_assert_str_eq(cfg.working_dir, "/w");
	char want[PATH_MAX];
	snprintf(want, sizeof(want), "%s/sha256-%s/rootfs", cache, strchr(digest, ':') + 1);
	cr_assert_str_eq(rootfs, want);
	snprintf(file, sizeof(file), "%s/hello", rootfs);
	cr_assert_eq(access(file, R_OK), 0);

	struct kiwi_gc_stats st;
	cr_assert_eq(kiwi_image_cache_gc(cache, 0, &st, &err), 0, "%s", err.msg);
	cr_assert_eq(st.busy, 1, "a pinned entry was not seen as in use");
	cr_assert_eq(st.removed, 0);
	close(pin);
	cr_assert_eq(kiwi_image_cache_gc(cache, 0, &st, &err), 0, "%s", err.msg);
	cr_assert_eq(st.removed, 1);
	cr_assert_neq(access(file, F_OK), 0);

	free(rootfs);
	kiwi_image_config_clear(&cfg);
	cr_assert_eq(kiwi_remove_tree_at(AT_FDCWD, top, &err), 0);
}
