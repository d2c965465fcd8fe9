/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-rootfs snapshot, snapshot-check, snapshot-restore: the image side
 * of kiwi-run's `session snapshot` and `session create --from`
 * (kiwi-run-session(1)). kiwi-run hands over directories as inherited
 * fds, so nothing here resolves a path inside a session. */
#include "cli.h"
#include "kiwi/cleanup.h"
#include "kiwi/oci_image.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_TREES 8
#define MAX_RANGES 64

static bool parse_fd(const char *s, int *fd, const char **rest)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	struct stat st;
	if (errno || end == s || v < 3 || v > 1 << 20 || (*end && *end != ':') || fstat((int)v, &st) < 0 ||
	    !S_ISDIR(st.st_mode))
		return false;
	*fd = (int)v;
	if (rest)
		*rest = *end ? end + 1 : end;
	return !rest == !*end;
}

static bool parse_range(const char *s, struct kiwi_id_range *r)
{
	int64_t in, out, n;
	char tail;
	if (sscanf(s, "%" SCNd64 ":%" SCNd64 ":%" SCNd64 "%c", &in, &out, &n, &tail) != 3 || in < 0 || out < 0 || n <= 0)
		return false;
	*r = (struct kiwi_id_range){ .inside = in, .outside = out, .count = n };
	return true;
}

static void print_result(const struct kiwi_snapshot_result *res)
{
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
	if (!w)
		return;
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "manifest");
	kiwi_jw_string(w, res->manifest);
	kiwi_jw_key(w, "digest");
	kiwi_jw_string(w, res->layer.digest);
	kiwi_jw_key(w, "size");
	kiwi_jw_int(w, res->layer.size);
	kiwi_jw_key(w, "diff_id");
	kiwi_jw_string(w, res->diff_id);
	kiwi_jw_close_object(w);
	cli_print_json(w);
}

/* snapshot [--base REF] [--uidmap I:O:N]... [--gidmap I:O:N]... --tree FD[:PREFIX]... LAYOUT:TAG */
int cmd_snapshot(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "base", required_argument, NULL, 'b' },
		{ "tree", required_argument, NULL, 't' },
		{ "uidmap", required_argument, NULL, 'u' },
		{ "gidmap", required_argument, NULL, 'g' },
		{ "compression", required_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },
		{ 0 },
	};
	struct kiwi_layer_tree trees[MAX_TREES];
	struct kiwi_id_range uids[MAX_RANGES], gids[MAX_RANGES];
	struct kiwi_image_idmap ids = { .uids = uids, .gids = gids };
	struct kiwi_snapshot_opts o = { .trees = trees, .compression = KIWI_LAYER_ZSTD };
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'b': o.base = optarg; break;
		case 'j': cli_json = true; break;
		case 't':
			if (o.n_trees == MAX_TREES || !parse_fd(optarg, &trees[o.n_trees].dir_fd, &trees[o.n_trees].prefix))
				return cli_usage("snapshot: --tree takes FD:PREFIX, FD an open directory");
			o.n_trees++;
			break;
		case 'u':
		case 'g':
			if ((c == 'u' ? ids.n_uids : ids.n_gids) == MAX_RANGES ||
			    !parse_range(optarg, c == 'u' ? &uids[ids.n_uids++] : &gids[ids.n_gids++]))
				return cli_usage("snapshot: --%cidmap takes INSIDE:OUTSIDE:COUNT", c);
			break;
		case 'c':
			if (!strcmp(optarg, "zstd") || !strcmp(optarg, "gzip") || !strcmp(optarg, "none"))
				o.compression = optarg[0] == 'z' ? KIWI_LAYER_ZSTD : optarg[0] == 'g' ? KIWI_LAYER_GZIP
												  : KIWI_LAYER_TAR;
			else
				return cli_usage("snapshot: --compression takes zstd, gzip or none");
			break;
		default: return cli_usage("snapshot: bad option");
		}
	}
	if (argc - optind != 1 || !o.n_trees)
		return cli_usage("snapshot takes --tree FD:PREFIX... and one LAYOUT:TAG");
	if (ids.n_uids || ids.n_gids)
		o.ids = &ids;
	kiwi_err err = { 0 };
	struct kiwi_snapshot_result res;
	if (kiwi_image_snapshot(argv[optind], &o, &res, &err) < 0)
		return cli_fail(&err);
	print_result(&res);
	return 0;
}

/* snapshot-check LAYOUT:TAG: {"base":"image"|"rootfs"} once its layer is checked. */
int cmd_snapshot_check(int argc, char **argv)
{
	int start = argc > 1 && !strcmp(argv[1], "--json") ? 2 : 1;
	cli_json = start == 2;
	if (argc - start != 1)
		return cli_usage("snapshot-check takes one LAYOUT:TAG");
	kiwi_err err = { 0 };
	const char *base;
	if (kiwi_image_snapshot_check(argv[start], &base, &err) < 0)
		return cli_fail(&err);
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
	if (!w)
		return KIWI_EXIT_FAIL;
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "base");
	kiwi_jw_string(w, base);
	kiwi_jw_close_object(w);
	cli_print_json(w);
	return 0;
}

/* snapshot-restore --root FD --map FROM=TO... LAYOUT:TAG */
int cmd_snapshot_restore(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "root", required_argument, NULL, 'r' },
		{ "map", required_argument, NULL, 'm' },
		{ "json", no_argument, NULL, 'j' },
		{ 0 },
	};
	int root = -1;
	struct kiwi_extract_map map[MAX_TREES];
	char *owned[MAX_TREES];
	size_t n_map = 0;
	int c, rc = KIWI_EXIT_FAIL;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		char *eq = c == 'm' && n_map < MAX_TREES ? strchr(optarg, '=') : NULL;
		if (c == 'r' && !parse_fd(optarg, &root, NULL)) {
			cli_usage("snapshot-restore: --root takes an open directory's fd");
			goto out;
		} else if (c == 'm' && (!eq || !(owned[n_map] = strdup(optarg)))) {
			cli_usage("snapshot-restore: --map takes FROM=TO (at most %d)", MAX_TREES);
			goto out;
		} else if (c == 'm') {
			owned[n_map][eq - optarg] = '\0';
			map[n_map] = (struct kiwi_extract_map){ .from = owned[n_map], .to = owned[n_map] + (eq - optarg) + 1 };
			n_map++;
		} else if (c == 'j') {
			cli_json = true;
		} else if (c != 'r') {
			cli_usage("snapshot-restore: bad option");
			goto out;
		}
	}
	kiwi_err err = { 0 };
	if (argc - optind != 1 || root < 0 || !n_map)
		cli_usage("snapshot-restore takes --root FD, --map FROM=TO... and one LAYOUT:TAG");
	else if (kiwi_image_snapshot_restore(argv[optind], root, map, n_map, &err) < 0)
		cli_fail(&err);
	else
		rc = 0;
out:
	for (size_t i = 0; i < n_map; i++)
		free(owned[i]);
	return rc;
}
