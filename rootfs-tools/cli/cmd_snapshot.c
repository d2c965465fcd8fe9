/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-rootfs snapshot, snapshot-check, snapshot-restore: the image side
 * of kiwi-run's `session snapshot` and `session create --from`
 * (kiwi-run-session(1)). kiwi-run hands over directories as inherited
 * fds, so nothing here resolves a path inside a session. */
#include "cli.h"
#include "kiwi/cleanup.h"
#include "kiwi/oci_image.h"

#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

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

/* snapshot [--base REF] [--uidmap I:O:N]... [--gidmap I:O:N]... [--scratch TAG] --tree FD[:PREFIX]... LAYOUT:TAG */
int cmd_snapshot(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "base", required_argument, NULL, 'b' },
		{ "tree", required_argument, NULL, 't' },
		{ "uidmap", required_argument, NULL, 'u' },
		{ "gidmap", required_argument, NULL, 'g' },
		{ "compression", required_argument, NULL, 'c' },
		{ "scratch", required_argument, NULL, 's' },
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
		case 's':
			/* It names files: letters and digits only. */
			if (!*optarg || strlen(optarg) > 32 ||
			    strspn(optarg, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") != strlen(optarg))
				return cli_usage("snapshot: --scratch takes up to 32 letters and digits");
			o.scratch = optarg;
			break;
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

/* snapshot-check LAYOUT:TAG: {"base":"image"|"rootfs","layer":{...}} once
 * its layer blob is found and its size checked (its digest is checked by
 * snapshot-restore as it reads it): what the caller needs to open the
 * blob itself and hand it to snapshot-restore. */
int cmd_snapshot_check(int argc, char **argv)
{
	int start = argc > 1 && !strcmp(argv[1], "--json") ? 2 : 1;
	cli_json = start == 2;
	if (argc - start != 1)
		return cli_usage("snapshot-check takes one LAYOUT:TAG");
	kiwi_err err = { 0 };
	const char *base;
	struct kiwi_snapshot_layer l;
	if (kiwi_image_snapshot_check(argv[start], &base, &l, &err) < 0)
		return cli_fail(&err);
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
	if (!w)
		return KIWI_EXIT_FAIL;
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "base");
	kiwi_jw_string(w, base);
	kiwi_jw_key(w, "layer");
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "mediaType");
	kiwi_jw_string(w, l.media_type);
	kiwi_jw_key(w, "digest");
	kiwi_jw_string(w, l.digest);
	kiwi_jw_key(w, "size");
	kiwi_jw_int(w, l.size);
	kiwi_jw_key(w, "diff_id");
	kiwi_jw_string(w, l.diff_id);
	kiwi_jw_close_object(w);
	kiwi_jw_close_object(w);
	cli_print_json(w);
	return 0;
}

#if defined(__SANITIZE_ADDRESS__)
/* LeakSanitizer's check at exit reads /proc/self/task and stops the
 * threads with ptrace; confined there is no /proc, and the check would
 * turn a good restore into a failure. The extraction code is the same
 * as unpack's, whose runs (tests/rootfs) are not confined and still are
 * checked for leaks. */
static bool lsan_off;
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
	return lsan_off;
}
#define LSAN_OFF() (lsan_off = true)
#else
#define LSAN_OFF() ((void)0)
#endif

/* --confine: the untrusted blob is parsed with nothing of the tree this
 * process started in in view. In a mount namespace of its own, the root
 * becomes a clone of the --root mount (pivot_root, the old root detached):
 * no host path, no outer /proc, and the clone's ".." is its own root, where
 * the fd of a mount of the old namespace would walk up into the host's
 * tree. Only the inherited fds (the blob, stdio) reach anything else. */
static int confine(int *root, kiwi_err *err)
{
	_cleanup_close_ int tree = open_tree(*root, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	if (tree < 0)
		return kiwi_error(err, errno, "confine", "cannot clone the --root mount");
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return kiwi_error(err, errno, "confine", "cannot make a mount namespace of its own");
	if (move_mount(tree, "", AT_FDCWD, "/", MOVE_MOUNT_F_EMPTY_PATH) < 0 || fchdir(tree) < 0 ||
	    syscall(SYS_pivot_root, ".", ".") < 0 || umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		return kiwi_error(err, errno, "confine", "cannot pivot into the --root mount");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return kiwi_error(err, errno, "confine", "cannot set no_new_privs");
	close(*root);
	*root = TAKE_FD(tree);
	LSAN_OFF();
	return 0;
}

static bool parse_layer_opt(int c, const char *v, struct kiwi_snapshot_layer *l, int *blob)
{
	char *end;
	struct stat st;
	switch (c) {
	case 'b': {
		errno = 0;
		long fd = strtol(v, &end, 10);
		if (errno || end == v || *end || fd < 3 || fd > 1 << 20 || fstat((int)fd, &st) < 0 || !S_ISREG(st.st_mode))
			return false;
		*blob = (int)fd;
		return true;
	}
	case 't': return snprintf(l->media_type, sizeof(l->media_type), "%s", v) < (int)sizeof(l->media_type);
	case 'd': return snprintf(l->digest, sizeof(l->digest), "%s", v) < (int)sizeof(l->digest);
	case 'i': return snprintf(l->diff_id, sizeof(l->diff_id), "%s", v) < (int)sizeof(l->diff_id);
	case 's':
		errno = 0;
		l->size = strtoll(v, &end, 10);
		return !errno && end != v && !*end && l->size >= 0;
	default: return false;
	}
}

/* snapshot-restore --root FD --map FROM=TO... --blob FD --media-type T
 *     --digest D --size N --diff-id D [--confine] */
int cmd_snapshot_restore(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "root", required_argument, NULL, 'r' },
		{ "map", required_argument, NULL, 'm' },
		{ "blob", required_argument, NULL, 'b' },
		{ "media-type", required_argument, NULL, 't' },
		{ "digest", required_argument, NULL, 'd' },
		{ "size", required_argument, NULL, 's' },
		{ "diff-id", required_argument, NULL, 'i' },
		{ "confine", no_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },
		{ 0 },
	};
	int root = -1, blob = -1;
	bool confined = false;
	struct kiwi_snapshot_layer l = { .size = -1 };
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
		} else if (c == 'c') {
			confined = true;
		} else if (c != 'r' && !parse_layer_opt(c, optarg, &l, &blob)) {
			cli_usage("snapshot-restore: bad option or value `%s`", argv[optind - 1]);
			goto out;
		}
	}
	kiwi_err err = { 0 };
	if (argc != optind || root < 0 || !n_map || blob < 0 || !l.media_type[0] || !l.digest[0] || l.size < 0 ||
	    !l.diff_id[0])
		cli_usage("snapshot-restore takes --root FD, --map FROM=TO..., --blob FD, --media-type, --digest, "
			  "--size and --diff-id");
	else if ((confined && confine(&root, &err) < 0) ||
		 kiwi_image_snapshot_restore(&l, blob, root, map, n_map, &err) < 0)
		cli_fail(&err);
	else
		rc = 0;
out:
	for (size_t i = 0; i < n_map; i++)
		free(owned[i]);
	return rc;
}
