/* SPDX-License-Identifier: Apache-2.0 */
/* Bind sources the parent opens before the init enters its namespaces
 * (create.c hands them over; rootfs.c attaches them):
 * - with a user namespace, a clone of every bind source, for the init to
 *   fall back on when the namespace's root may not reach one (a 0700
 *   directory of the host's root), as runc opens them;
 * - idmapped binds (idmap/ridmap): a clone with MOUNT_ATTR_IDMAP, which
 *   only a detached mount takes, and only from whoever may change the
 *   filesystem's ids, the host's root. The idmapping is a user namespace
 *   holding the mount's maps (or the container's), made for this alone.
 * Every fd sits above the preserved fds, so none is taken for one of them. */
#include "oci_int.h"
#include "kiwi/cleanup.h"
#include "kiwi/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

/* A user namespace holding the maps, as an fd: a child made in it by
 * clone3 exists until its maps are written and the namespace is open. */
static int userns_with(const struct kiwi_oci_idmap *u, size_t nu, const struct kiwi_oci_idmap *g, size_t ng,
		       kiwi_err *err)
{
	int hold[2];
	if (pipe2(hold, O_CLOEXEC) < 0)
		return kiwi_error(err, errno, "idmap", "cannot create a pipe");
	_cleanup_close_ int pidfd = -1;
	pid_t pid = kiwi_spawn(CLONE_NEWUSER, -1, &pidfd, err);
	if (pid == 0) {
		char c;
		close(hold[1]);
		(void)!read(hold[0], &c, 1);
		_exit(0);
	}
	close(hold[0]);
	int fd = -1;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
	if (pid > 0 && kiwi_oci_write_map(pid, "uid_map", u, nu, err) == 0 &&
	    kiwi_oci_write_map(pid, "gid_map", g, ng, err) == 0 && (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		kiwi_error(err, errno, "idmap", "cannot open the idmapping's user namespace");
	close(hold[1]);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	return fd;
}

static int idmapped_tree(const struct kiwi_oci_config *cfg, const struct kiwi_oci_mount *m, int tree, kiwi_err *err)
{
	bool own = m->n_uid_maps > 0;
	_cleanup_close_ int ns = userns_with(own ? m->uid_maps : cfg->uid_maps, own ? m->n_uid_maps : cfg->n_uid_maps,
					     own ? m->gid_maps : cfg->gid_maps, own ? m->n_gid_maps : cfg->n_gid_maps,
					     err);
	if (ns < 0)
		return -1;
	struct mount_attr a = { .attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t)ns };
	if (mount_setattr(tree, "", AT_EMPTY_PATH | (m->idmap_recursive ? AT_RECURSIVE : 0), &a, sizeof(a)) < 0)
		return kiwi_error(err, errno, "idmap",
				  "cannot idmap bind source `%s` (it needs root, and a filesystem that takes "
				  "idmapped mounts)", m->source);
	return 0;
}

int kiwi_oci_open_bind_sources(const struct kiwi_oci_config *cfg, const char *bundle_path, int floor, int **out,
			       kiwi_err *err)
{
	bool userns = cfg->new_ns & CLONE_NEWUSER, any = false;
	for (size_t i = 0; i < cfg->n_mounts; i++)
		any |= cfg->mounts[i].bind && (userns || cfg->mounts[i].idmap);
	*out = NULL;
	if (!any)
		return 0;
	int *trees = calloc(cfg->n_mounts, sizeof(int));
	_cleanup_close_ int bundle = open(bundle_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (!trees || bundle < 0) {
		free(trees);
		return kiwi_error(err, trees ? errno : ENOMEM, "mount", "cannot open the bundle for the bind sources");
	}
	*out = trees;
	for (size_t i = 0; i < cfg->n_mounts; i++)
		trees[i] = -1;
	for (size_t i = 0; i < cfg->n_mounts; i++) {
		const struct kiwi_oci_mount *m = &cfg->mounts[i];
		if (!m->bind || (!userns && !m->idmap))
			continue;
		_cleanup_close_ int t = open_tree(bundle, m->source,
						  OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (m->recursive ? AT_RECURSIVE : 0));
		/* A fallback only: the init opens it itself, and says why not. */
		if (t < 0 && !m->idmap)
			continue;
		if (t < 0)
			return kiwi_error(err, errno, "idmap", "cannot clone bind source `%s`", m->source);
		if (m->idmap && idmapped_tree(cfg, m, t, err) < 0)
			return -1;
		trees[i] = fcntl(t, F_DUPFD_CLOEXEC, floor);
		if (trees[i] < 0)
			return kiwi_error(err, errno, "mount", "cannot keep bind source `%s`", m->source);
	}
	return 0;
}

void kiwi_oci_close_bind_sources(const struct kiwi_oci_config *cfg, int **trees)
{
	for (size_t i = 0; *trees && i < cfg->n_mounts; i++)
		if ((*trees)[i] >= 0)
			close((*trees)[i]);
	free(*trees);
	*trees = NULL;
}
