/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-rootfs inspect: an image's manifest, config and layers as JSON. */
#include "cli.h"
#include "kiwi/cleanup.h"
#include "kiwi/oci_image.h"

#include <getopt.h>
#include <stdio.h>

int cmd_inspect(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "platform", required_argument, NULL, 'p' },
		{ "json", no_argument, NULL, 'j' },
		{ 0 },
	};
	const char *platform = NULL;
	int c;
	while ((c = getopt_long(argc, argv, "p:", opts, NULL)) != -1) {
		switch (c) {
		case 'p': platform = optarg; break;
		case 'j': cli_json = true; break; /* the output is JSON either way */
		default: return cli_usage("inspect: bad option");
		}
	}
	if (argc - optind != 1)
		return cli_usage("inspect takes one image reference");
	kiwi_err err = { 0 };
	struct kiwi_image_ref ref;
	if (kiwi_image_ref_parse(argv[optind], &ref, &err) < 0)
		return cli_fail(&err);
	struct kiwi_extract_opts xo = { 0 };
	struct kiwi_layout l;
	int rc = kiwi_layout_open(ref.path, &xo, &l, &err);
	struct kiwi_image img = { 0 };
	if (rc == 0) {
		rc = kiwi_image_load(l.fd, ref.tag, ref.digest, platform, &img, &err);
		kiwi_layout_close(&l);
	}
	kiwi_image_ref_clear(&ref);
	if (rc < 0)
		return cli_fail(&err);
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(true);
	if (!w || kiwi_image_describe(&img, w, &err) < 0) {
		kiwi_image_clear(&img);
		return cli_fail(&err);
	}
	kiwi_image_clear(&img);
	cli_print_json(w);
	return 0;
}
