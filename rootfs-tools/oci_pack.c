/* SPDX-License-Identifier: Apache-2.0 */
#include "kiwi/oci_image.h"
#include <errno.h>
int kiwi_image_pack(const char *dir, const char *ref, const struct kiwi_pack_opts *o,
		    char *digest_out, kiwi_err *err)
{
	(void)dir; (void)ref; (void)o; (void)digest_out;
	return kiwi_error(err, ENOSYS, "pack", "todo");
}
