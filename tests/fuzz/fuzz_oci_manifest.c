/* SPDX-License-Identifier: Apache-2.0 */
/* The OCI layout parsers: index.json (with nested indexes), manifests and
 * image configs, plus reference parsing. The input is used as index.json,
 * then as a manifest blob (stored under its real digest, so verification
 * passes and the parser behind it is reached), then as a config (run-time
 * defaults and rootfs.diff_ids). */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kiwi/layer.h"
#include "kiwi/oci_image.h"

static char scratch[64];

static void cleanup(void)
{
	kiwi_err err;
	kiwi_remove_tree_at(AT_FDCWD, scratch, &err);
}

static int layout_fd = -1;

static void put(const char *name, const uint8_t *data, size_t len)
{
	int fd = openat(layout_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, data, len) != (ssize_t)len)
		abort();
	close(fd);
}

static void setup(void)
{
	char tmpl[] = "/tmp/fuzz-oci-manifest-XXXXXX";
	if (!mkdtemp(tmpl))
		abort();
	snprintf(scratch, sizeof(scratch), "%s", tmpl);
	atexit(cleanup);
	layout_fd = open(tmpl, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (layout_fd < 0 || mkdirat(layout_fd, "blobs", 0755) < 0 ||
	    mkdirat(layout_fd, "blobs/sha256", 0755) < 0)
		abort();
	static const char v[] = "{\"imageLayoutVersion\":\"1.0.0\"}";
	put("oci-layout", (const uint8_t *)v, sizeof(v) - 1);
}

static void load(void)
{
	struct kiwi_image img;
	kiwi_err err;
	if (kiwi_image_load(layout_fd, NULL, NULL, NULL, &img, &err) == 0) {
		kiwi_json_writer *w = kiwi_jw_new(false);
		kiwi_image_describe(&img, w, &err);
		kiwi_jw_free(w);
		kiwi_image_clear(&img);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (layout_fd < 0)
		setup();
	kiwi_err err;
	/* 1: as index.json. */
	put("index.json", data, size);
	load();
	/* 2: as the manifest an index names. */
	char digest[KIWI_DIGEST_MAX];
	kiwi_digest_buf(KIWI_DIGEST_SHA256, data, size, digest);
	char blob[KIWI_DIGEST_MAX + 16];
	snprintf(blob, sizeof(blob), "blobs/sha256/%s", digest + 7);
	put(blob, data, size);
	char index[512];
	int n = snprintf(index, sizeof(index),
			 "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":"
			 "\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"%s\",\"size\":%zu}]}",
			 digest, size);
	put("index.json", (const uint8_t *)index, (size_t)n);
	load();
	unlinkat(layout_fd, blob, 0);
	/* 3: as an image config, and as a reference string. */
	kiwi_json *j = kiwi_json_parse((const char *)data, size, &err);
	if (j) {
		struct kiwi_image_config cfg;
		if (kiwi_image_config_parse(j, &cfg, &err) == 0)
			kiwi_image_config_clear(&cfg);
		/* rootfs.diff_ids against a few layer counts, 0 included. */
		for (size_t layers = 0; layers < 3; layers++) {
			char (*ids)[KIWI_DIGEST_MAX] = NULL;
			if (kiwi_image_diff_ids_parse(j, layers, &ids, &err) == 0 &&
			    (!ids || (layers && !ids[layers - 1][0])))
				abort();
			free(ids);
		}
		kiwi_json_free(j);
	}
	char *s = strndup((const char *)data, size);
	struct kiwi_image_ref ref;
	if (s && kiwi_image_ref_parse(s, &ref, &err) == 0)
		kiwi_image_ref_clear(&ref);
	free(s);
	return 0;
}
