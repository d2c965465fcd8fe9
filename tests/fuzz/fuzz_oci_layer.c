/* SPDX-License-Identifier: Apache-2.0 */
/* Layer extraction. The first byte picks tar, tar+gzip or tar+zstd,
 * whether whiteouts apply, and whether the layer goes into overlayfs upper
 * directories through a map (a session's restore: whiteouts become 0:0
 * character devices, opaque markers xattrs); the rest is the layer. Property: whatever the
 * layer holds, nothing appears beside the destination (a crash otherwise). */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kiwi/layer.h"

static char scratch[64];

static void cleanup(void)
{
	kiwi_err err;
	kiwi_remove_tree_at(AT_FDCWD, scratch, &err);
}

static int parent_fd = -1;

static size_t count_entries(int dfd)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d)
		abort();
	size_t n = 0;
	for (struct dirent *de; (de = readdir(d));)
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (parent_fd < 0) {
		char tmpl[] = "/tmp/fuzz-oci-layer-XXXXXX";
		if (!mkdtemp(tmpl) || (parent_fd = open(tmpl, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
			abort();
		snprintf(scratch, sizeof(scratch), "%s", tmpl);
		atexit(cleanup);
	}
	int blob = memfd_create("layer", MFD_CLOEXEC);
	if (blob < 0 || write(blob, data + 1, size - 1) != (ssize_t)(size - 1) ||
	    lseek(blob, 0, SEEK_SET) != 0 || mkdirat(parent_fd, "root", 0755) < 0)
		abort();
	int root = openat(parent_fd, "root", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	static const struct kiwi_extract_map map[] = { { "", "root/upper" }, { "workspace", "bind0/upper" } };
	struct kiwi_extract_opts o = {
		.max_size = 64 << 20,
		.max_entries = 20000,
		.plain = data[0] & 4,
		.overlay = data[0] & 8,
		.map = map,
		.n_map = data[0] & 8 ? 2 : 0,
	};
	kiwi_extract *x = kiwi_extract_new(root, &o);
	kiwi_err err;
	if (kiwi_extract_layer(x, blob, (enum kiwi_layer_compression)(data[0] % 3), NULL, -1, NULL,
			       "fuzz", &err) == 0)
		kiwi_extract_finish(x, &err);
	kiwi_extract_free(x);
	close(root);
	close(blob);
	if (count_entries(parent_fd) != 1)
		abort(); /* something was created outside the destination */
	if (kiwi_remove_tree_at(parent_fd, "root", &err) < 0)
		abort();
	return 0;
}
