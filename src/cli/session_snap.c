/* SPDX-License-Identifier: Apache-2.0 */
/* `session snapshot` writes the layout as the caller, from the layer the
 * session's supervisor lends it (kiwi/session.h); `create --from` checks a
 * snapshot and fills the new session's layer from it, in the sandbox. */
#include "session_snap.h"
#include "cli.h"
#include "kiwi/cleanup.h"
#include "kiwi/fslayer.h"
#include "kiwi/json.h"
#include "kiwi/openat2.h"
#include "kiwi/userns.h"
#include "image.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* PATH, PATH:TAG or PATH@DIGEST (kiwi/oci_image.h): where PATH ends. */
static size_t ref_path_len(const char *ref)
{
	const char *at = strchr(ref, '@'), *slash = strrchr(ref, '/'), *colon = strrchr(ref, ':');
	if (at)
		return (size_t)(at - ref);
	if (colon && (!slash || colon > slash))
		return (size_t)(colon - ref);
	return strlen(ref);
}

int session_abs_ref(const char *ref, char *out, size_t len, kiwi_err *err)
{
	size_t n = ref_path_len(ref);
	char path[PATH_MAX], abs[PATH_MAX];
	snprintf(path, sizeof(path), "%.*s", (int)n, ref);
	if (!realpath(path, abs))
		return kiwi_error(err, errno, "image", "cannot find `%s` of `%s`", path, ref);
	if (snprintf(out, len, "%s%s", abs, ref + n) >= (int)len)
		return kiwi_error(err, ENAMETOOLONG, "image", "`%s` is too long", abs);
	return 0;
}

/* ---- snapshot ----------------------------------------------------------- */

/* LAYOUT of LAYOUT:TAG, absolute, whether it exists yet or not (its
 * parent must). */
static int layout_abs_path(const char *ref, char *out, size_t len, kiwi_err *err)
{
	char path[PATH_MAX], abs[PATH_MAX];
	snprintf(path, sizeof(path), "%.*s", (int)ref_path_len(ref), ref);
	size_t n = strlen(path);
	while (n > 1 && path[n - 1] == '/')
		path[--n] = '\0';
	char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path, *parent = !slash ? "." : slash == path ? "/" : path;
	bool named = *base && strcmp(base, ".") && strcmp(base, "..");
	if (named && slash && slash != path)
		*slash = '\0';
	if (!realpath(named ? parent : path, abs))
		return kiwi_error(err, errno, "snapshot", "cannot find where `%s` goes", ref);
	if (snprintf(out, len, "%s%s%s", abs, named && strcmp(abs, "/") ? "/" : "", named ? base : "") >= (int)len)
		return kiwi_error(err, ENAMETOOLONG, "snapshot", "`%s` is too long", abs);
	return 0;
}

/* The session's id map (/proc/PID/uid_map), as kiwi-rootfs takes it. */
static size_t idmap_args(pid_t pid, const char *which, const char *flag, const char **args, size_t at,
			 char (*buf)[64], size_t cap)
{
	struct kiwi_id_extent map[16];
	int n = kiwi_userns_read_map(pid, which, map, cap < 16 ? cap : 16);
	for (int i = 0; i < n; i++) {
		snprintf(buf[i], sizeof(buf[i]), "%u:%u:%u", map[i].inside, map[i].outside, map[i].count);
		args[at++] = flag;
		args[at++] = buf[i];
	}
	return at;
}

/* kiwi-rootfs's result, with what only kiwi-run knows. */
static int print_result(const char *id, const char *ref, const struct kiwi_session_snapshot *s, const char *line,
			double ms, kiwi_err *err)
{
	_cleanup_json_ kiwi_json *r = kiwi_json_parse(line, strlen(line), err);
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
	if (!r || !w)
		return kiwi_error(err, EPROTO, "snapshot", "kiwi-rootfs gave no result");
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "id");
	kiwi_jw_string(w, id);
	kiwi_jw_key(w, "ref");
	kiwi_jw_string(w, ref);
	kiwi_jw_key(w, "base");
	kiwi_jw_string(w, s->src.image ? "image" : "rootfs");
	for (size_t i = 0; i < kiwi_json_len(r); i++) {
		kiwi_jw_key(w, kiwi_json_key_at(r, i));
		kiwi_jw_value(w, kiwi_json_at(r, i));
	}
	kiwi_jw_key(w, "frozen");
	kiwi_jw_bool(w, s->frozen);
	kiwi_jw_key(w, "wall_ms");
	kiwi_jw_fixed(w, ms, 3);
	kiwi_jw_close_object(w);
	size_t len;
	printf("%s\n", kiwi_jw_text(w, &len));
	return 0;
}

/* kiwi-rootfs snapshot, given the upper directories as fds: it resolves
 * no path of the session's. */
static int write_snapshot(const struct kiwi_registry_entry *e, const char *ref, const char *comp,
			  const struct kiwi_session_snapshot *s, int *fds, char *line, size_t len, kiwi_err *err)
{
	/* The scratch kiwi-rootfs makes in the layout is tagged and recorded,
	 * the record locked by kiwi-rootfs too (it inherits the fd): killed
	 * midway, its scratch is `kiwi-run gc`'s to remove. */
	char layout[PATH_MAX];
	struct kiwi_snapshot_scratch scratch;
	if (layout_abs_path(ref, layout, sizeof(layout), err) < 0 ||
	    kiwi_session_scratch_begin(layout, &scratch, err) < 0)
		return -1;
	const char *args[96] = { "snapshot", "--json", "--compression", comp, "--scratch", scratch.tag };
	size_t at = 6;
	fds[s->src.n] = scratch.fd;
	char trees[KIWI_SNAPSHOT_MAX_TREES][300], uids[16][64], gids[16][64];
	if (s->src.image) {
		args[at++] = "--base";
		args[at++] = s->src.image;
	}
	for (size_t i = 0; i < s->src.n; i++) {
		snprintf(trees[i], sizeof(trees[i]), "%d:%s", fds[i], s->src.dests[i] + (s->src.dests[i][0] == '/'));
		args[at++] = "--tree";
		args[at++] = trees[i];
	}
	/* The layer's files carry the host's ids of the session's: the image
	 * gets the ids the session saw. */
	at = idmap_args(e->pid, "uid_map", "--uidmap", args, at, uids, 16);
	at = idmap_args(e->pid, "gid_map", "--gidmap", args, at, gids, 16);
	args[at] = ref;
	char what[512];
	snprintf(what, sizeof(what), "write the snapshot `%s`", ref);
	int rc = kiwi_cli_rootfs_run(what, args, fds, s->src.n + 1, line, len, err);
	kiwi_session_scratch_end(&scratch, rc < 0);
	return rc;
}

static int snapshot(const struct kiwi_registry_entry *e, const char *ref, const char *comp, kiwi_err *err)
{
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	struct kiwi_session_snapshot s;
	int fds[KIWI_SNAPSHOT_MAX_TREES + 1];   /* the trees, then the scratch record */
	size_t n = 0;
	int rc = kiwi_session_snapshot_begin(e, &s, err);
	for (; rc == 0 && n < s.src.n; n++)
		rc = (fds[n] = kiwi_fslayer_export_upper(s.layer, s.src.names[n], err)) < 0 ? -1 : 0;
	char line[4096];
	if (rc == 0)
		rc = write_snapshot(e, ref, comp, &s, fds, line, sizeof(line), err);
	for (size_t i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (rc == 0)
		rc = print_result(e->id, ref, &s, line,
				  (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6, err);
	kiwi_session_snapshot_end(&s);
	return rc;
}

int kiwi_cli_session_snapshot(int argc, char **argv)
{
	const char *comp = "zstd";
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("usage: kiwi-run session snapshot [--compression zstd|gzip|none] ID LAYOUT:TAG\n\n"
		       "Writes what session ID changed as one OCI layer into LAYOUT, tagged TAG, and prints\n"
		       "the result as JSON. See kiwi-run-session(1).\n");
		return 0;
	}
	if (argc == 5 && !strcmp(argv[1], "--compression")) {
		comp = argv[2];
		argv += 2;
		argc -= 2;
	}
	if (strcmp(comp, "zstd") && strcmp(comp, "gzip") && strcmp(comp, "none"))
		return kiwi_cli_usage_error("session snapshot", "--compression takes zstd, gzip or none");
	if (argc != 3 || argv[1][0] == '-')
		return kiwi_cli_usage_error("session snapshot", "give a session id and where: session snapshot "
					    "[--compression zstd|gzip|none] ID LAYOUT:TAG");
	const char *colon = strrchr(argv[2], ':'), *slash = strrchr(argv[2], '/');
	if (!colon || !colon[1] || (slash && slash > colon) || strchr(argv[2], '@'))
		return kiwi_cli_usage_error("session snapshot", "`%s`: give the layout and a tag, LAYOUT:TAG", argv[2]);
	kiwi_err err = { 0 };
	struct kiwi_registry_entry e;
	if (kiwi_session_find(argv[1], &e, &err) < 0 || snapshot(&e, argv[2], comp, &err) < 0) {
		kiwi_cli_print_error(&err);
		return KIWI_EXIT_FAILED;
	}
	return 0;
}

/* ---- create --from ------------------------------------------------------- */

/* Takes the layer's description from snapshot-check's answer. */
static int take_layer(struct session_from *f, const kiwi_json *r, kiwi_err *err)
{
	const kiwi_json *l = kiwi_json_get(r, "layer");
	const char *mt = kiwi_json_string(kiwi_json_get(l, "mediaType"));
	const char *dg = kiwi_json_string(kiwi_json_get(l, "digest"));
	const char *di = kiwi_json_string(kiwi_json_get(l, "diff_id"));
	if (!mt || !dg || !di || !kiwi_json_int(kiwi_json_get(l, "size"), &f->size) || f->size < 0 ||
	    snprintf(f->media_type, sizeof(f->media_type), "%s", mt) >= (int)sizeof(f->media_type) ||
	    snprintf(f->digest, sizeof(f->digest), "%s", dg) >= (int)sizeof(f->digest) ||
	    snprintf(f->diff_id, sizeof(f->diff_id), "%s", di) >= (int)sizeof(f->diff_id))
		return kiwi_error(err, EPROTO, "image", "kiwi-rootfs described no snapshot layer");
	return 0;
}

/* The layer's blob, opened here, as the caller: the restore runs as the
 * sandbox's root, which may not reach the layout at all (a 0700 directory
 * of host root's, as root; kiwi's id range is nobody on the host). The
 * digest is the check's, kiwi-rootfs's own parse: only its form is
 * checked here, for the path; the restore checks the bytes. */
static int open_blob(struct session_from *f, kiwi_err *err)
{
	char path[PATH_MAX];
	const char *hex = strchr(f->digest, ':');
	size_t alg_len = hex ? (size_t)(hex - f->digest) : 0;
	if (!alg_len || strspn(f->digest, "abcdefghijklmnopqrstuvwxyz0123456789") != alg_len || !hex[1] ||
	    strspn(hex + 1, "0123456789abcdef") != strlen(hex + 1))
		return kiwi_error(err, EPROTO, "image", "kiwi-rootfs gave a bad digest `%s`", f->digest);
	snprintf(path, sizeof(path), "%.*s", (int)ref_path_len(f->ref), f->ref);
	_cleanup_close_ int layout = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (layout < 0)
		return kiwi_error(err, errno, "image", "cannot open the layout `%s`", path);
	snprintf(path, sizeof(path), "blobs/%.*s/%s", (int)alg_len, f->digest, hex + 1);
	struct open_how how = { .flags = O_RDONLY | O_NOCTTY | O_CLOEXEC,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	_cleanup_close_ int fd = kiwi_openat2(layout, path, &how);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return kiwi_error(err, errno, "image", "cannot open the snapshot's blob %s", f->digest);
	if (!S_ISREG(st.st_mode))
		return kiwi_error(err, EINVAL, "image", "the snapshot's blob %s is not a file", f->digest);
	f->blob = TAKE_FD(fd);
	return 0;
}

int session_from_take(struct session_from *f, struct run_args *a, const char *ref)
{
	kiwi_err err = { 0 };
	if (f->ref[0])
		return kiwi_cli_usage_error(a->cmd, "--from is given once");
	char line[1024], what[512];
	snprintf(what, sizeof(what), "restore `%s`", ref);
	const char *args[] = { "snapshot-check", "--json", f->ref, NULL };
	_cleanup_json_ kiwi_json *r = NULL;
	f->blob = -1;
	if (session_abs_ref(ref, f->ref, sizeof(f->ref), &err) < 0 ||
	    kiwi_cli_rootfs_run(what, args, NULL, 0, line, sizeof(line), &err) < 0 ||
	    !(r = kiwi_json_parse(line, strlen(line), &err)) || take_layer(f, r, &err) < 0 || open_blob(f, &err) < 0) {
		f->ref[0] = '\0';
		kiwi_cli_print_error(&err);
		return KIWI_EXIT_FAILED;
	}
	const char *base = kiwi_json_string(kiwi_json_get(r, "base"));
	f->image_based = base && !strcmp(base, "image");
	if (f->image_based)
		a->image = f->ref;
	return 0;
}

/* In the sandbox, before any overlay is mounted: the snapshot's entries
 * in the layer's upper directories, in overlayfs's form, by kiwi-rootfs in
 * one pass (the blob's digest is checked as it is read). kiwi-rootfs reads
 * the blob from the fd the caller opened and parses it confined
 * (--confine: pivoted into a clone of the layer, so that nothing of the
 * host's tree or its /proc is in view). An image-based snapshot's root is
 * the image's (a->image): only its workspace part. */
static int restore_layer(void *arg, int layer, kiwi_err *err)
{
	struct session_from *f = arg;
	const char *args[48] = { "snapshot-restore", "--json", "--confine", "--root" };
	char fd[16], blob[16], size[24], maps[KIWI_SNAPSHOT_MAX_TREES][320];
	snprintf(fd, sizeof(fd), "%d", layer);
	snprintf(blob, sizeof(blob), "%d", f->blob);
	snprintf(size, sizeof(size), "%lld", f->size);
	size_t at = 4, n = 0;
	args[at++] = fd;
	if (!f->image_based) {
		args[at++] = "--map";
		args[at++] = "=root/upper";
	}
	for (size_t i = 0; i < f->cfg->n_binds && n < KIWI_SNAPSHOT_MAX_TREES; i++) {
		const struct kiwi_bind *b = &f->cfg->binds[i];
		if (!b->layered || b->read_only)
			continue;
		snprintf(maps[n], sizeof(maps[n]), "%s=bind%zu/upper", b->dest + (b->dest[0] == '/'), i);
		args[at++] = "--map";
		args[at++] = maps[n++];
	}
	if (at == 5)
		return 0;
	const char *layer_args[] = { "--blob", blob, "--media-type", f->media_type, "--digest", f->digest,
				     "--size", size, "--diff-id", f->diff_id };
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(layer_args); i++)
		args[at++] = layer_args[i];
	const int keep[] = { layer, f->blob };
	char line[1024];
	return kiwi_cli_rootfs_run("restore the snapshot", args, keep, 2, line, sizeof(line), err);
}

int session_from_arm(struct session_from *f, struct run_args *a)
{
	if (!f->ref[0])
		return 0;
	if (!f->image_based && !a->cfg.rootfs)
		return kiwi_cli_usage_error(a->cmd, "this snapshot holds changes to a --rootfs DIR: give the same one");
	f->cfg = &a->cfg;
	a->cfg.restore = restore_layer;
	a->cfg.restore_arg = f;
	a->cfg.restore_fd = f->blob;
	return 0;
}
