/* SPDX-License-Identifier: Apache-2.0 */
/* Shared between the unpack, cache and pack modules of rootfs-tools. */
#ifndef KIWI_ROOTFS_OCI_INTERNAL_H
#define KIWI_ROOTFS_OCI_INTERNAL_H

#include "kiwi/oci_image.h"

/* Extracts every layer of img (blobs under layout_fd) into root_fd and
 * applies the deferred directory metadata. */
int kiwi_oci_extract_image(int layout_fd, const struct kiwi_image *img, int root_fd,
			   const struct kiwi_unpack_opts *o, kiwi_err *err);

/* Opens ref's layout and loads its image. */
int kiwi_oci_open_ref(const char *ref, const struct kiwi_unpack_opts *o, struct kiwi_layout *l,
		      struct kiwi_image *img, kiwi_err *err);

/* mkdir -p with mode for the directories it creates. */
int kiwi_oci_mkdir_p(const char *path, mode_t mode, kiwi_err *err);

/* Splits path into its directory (opened, O_PATH) and last component. */
int kiwi_oci_open_parent(const char *path, char **base, kiwi_err *err);

/* Writes key: [v...]; when v is NULL, key: null or nothing at all. */
void kiwi_oci_write_strv(kiwi_json_writer *w, const char *key, char **v, bool null_if_unset);

#endif
