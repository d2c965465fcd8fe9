/* SPDX-License-Identifier: Apache-2.0 */
#ifndef KIWI_CLI_IMAGE_H
#define KIWI_CLI_IMAGE_H

#include "kiwi/err.h"

/* An image unpacked in the cache, pinned against gc while pin_fd is open. */
struct kiwi_cli_image {
	char *rootfs;
	char **env;          /* NULL-terminated, or NULL */
	char **entrypoint;
	char **cmd;
	char *working_dir;
	int pin_fd;
};

/* Makes sure ref is unpacked in the cache (kiwi-rootfs does the work) and
 * reads the image's defaults. */
int kiwi_cli_image_resolve(const char *ref, const char *cache_dir, struct kiwi_cli_image *img,
			   kiwi_err *err);
/* Frees what resolve filled and unpins the entry. */
void kiwi_cli_image_clear(struct kiwi_cli_image *img);

/* Runs kiwi-rootfs with args (NULL-terminated, without argv[0]), the fds
 * of keep inherited, and returns the last line of its output in line; on
 * failure, err says "cannot <what>: <kiwi-rootfs's reason>". */
int kiwi_cli_rootfs_run(const char *what, const char *const *args, const int *keep, size_t n_keep, char *line,
			size_t len, kiwi_err *err);

#endif
