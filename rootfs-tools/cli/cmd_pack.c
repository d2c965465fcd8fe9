/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-rootfs pack: a directory becomes a one-layer image in a layout. */
#include "cli.h"
#include "kiwi/cleanup.h"
#include "kiwi/oci_image.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Appends s to a NULL-terminated vector that owns nothing but itself. */
static bool strv_push(char ***v, char *s)
{
	size_t n = 0;
	while (*v && (*v)[n])
		n++;
	char **nv = realloc(*v, (n + 2) * sizeof(**v));
	if (!nv)
		return false;
	nv[n] = s;
	nv[n + 1] = NULL;
	*v = nv;
	return true;
}

static int parse_compression(const char *s, enum kiwi_layer_compression *out)
{
	static const struct {
		const char *name;
		enum kiwi_layer_compression c;
	} names[] = { { "none", KIWI_LAYER_TAR }, { "gzip", KIWI_LAYER_GZIP }, { "zstd", KIWI_LAYER_ZSTD } };
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(names); i++)
		if (!strcmp(s, names[i].name)) {
			*out = names[i].c;
			return 0;
		}
	return -1;
}

int cmd_pack(int argc, char **argv)
{
	enum { OPT_ENTRYPOINT = 256, OPT_CMD, OPT_ENV, OPT_WORKDIR, OPT_USER, OPT_REPRO,
	       OPT_COMPRESSION, OPT_PLATFORM, OPT_JSON };
	static const struct option opts[] = {
		{ "entrypoint", required_argument, NULL, OPT_ENTRYPOINT },
		{ "cmd", required_argument, NULL, OPT_CMD },
		{ "env", required_argument, NULL, OPT_ENV },
		{ "workdir", required_argument, NULL, OPT_WORKDIR },
		{ "user", required_argument, NULL, OPT_USER },
		{ "reproducible", no_argument, NULL, OPT_REPRO },
		{ "compression", required_argument, NULL, OPT_COMPRESSION },
		{ "platform", required_argument, NULL, OPT_PLATFORM },
		{ "json", no_argument, NULL, OPT_JSON },
		{ 0 },
	};
	_cleanup_free_ char **entrypoint = NULL, **cmd = NULL, **env = NULL;
	struct kiwi_pack_opts o = { .compression = KIWI_LAYER_GZIP };
	bool ok = true;
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case OPT_ENTRYPOINT: ok = strv_push(&entrypoint, optarg); break;
		case OPT_CMD: ok = strv_push(&cmd, optarg); break;
		case OPT_ENV:
			if (!strchr(optarg, '=') || optarg[0] == '=')
				return cli_usage("--env `%s` is not NAME=VALUE", optarg);
			ok = strv_push(&env, optarg);
			break;
		case OPT_WORKDIR: o.working_dir = optarg; break;
		case OPT_USER: o.user = optarg; break;
		case OPT_REPRO: o.reproducible = true; break;
		case OPT_COMPRESSION:
			if (parse_compression(optarg, &o.compression) < 0)
				return cli_usage("--compression `%s` is not none, gzip or zstd", optarg);
			break;
		case OPT_PLATFORM: o.platform = optarg; break;
		case OPT_JSON: cli_json = true; break;
		default: return cli_usage("pack: bad option");
		}
		if (!ok)
			return cli_usage("out of memory");
	}
	if (argc - optind != 2)
		return cli_usage("pack takes a directory and a layout reference (LAYOUT[:TAG])");
	o.entrypoint = entrypoint;
	o.cmd = cmd;
	o.env = env;
	kiwi_err err = { 0 };
	char digest[KIWI_DIGEST_MAX];
	if (kiwi_image_pack(argv[optind], argv[optind + 1], &o, digest, &err) < 0)
		return cli_fail(&err);
	if (!cli_json) {
		puts(digest);
		return 0;
	}
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
	if (!w)
		return 0;
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "event");
	kiwi_jw_string(w, "packed");
	kiwi_jw_key(w, "layout");
	kiwi_jw_string(w, argv[optind + 1]);
	kiwi_jw_key(w, "manifest");
	kiwi_jw_string(w, digest);
	kiwi_jw_close_object(w);
	cli_print_json(w);
	return 0;
}
