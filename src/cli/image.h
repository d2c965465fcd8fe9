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

#endif
