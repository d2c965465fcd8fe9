/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox's one writable layer: a tmpfs of --disk's size (default
 * KIWI_FSLAYER_DEFAULT_SIZE) that holds every byte the sandbox can write.
 * The rootfs and each layered bind (the workspace) are overlays whose
 * upper directory lives in it; /tmp and /dev/shm are directories of it.
 * One filesystem, so one bound: past it every write meets ENOSPC.
 *
 * Layout of the layer (names are the API between the two sides):
 *   root/{upper,work}    the rootfs overlay (--rw-root writes here)
 *   bind<N>/{upper,work} the overlay of bind N (cfg->binds[N].layered)
 *   tmp, shm             /tmp and /dev/shm
 *
 * Child side: made and mounted in the sandbox's namespaces (mount.c), its
 * root fd passed to kiwi-run over the sync socket. Parent side: the same
 * fd outlives the sandbox, so its changes can be landed on the host,
 * dropped, or kept for a snapshot (the sessions' API). */
#ifndef KIWI_FSLAYER_H
#define KIWI_FSLAYER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "kiwi/err.h"

/* Koder's default workspace quota, and enough for a large `npm ci`: a
 * memory-backed layer costs only what is written, so the default bounds
 * without reserving anything. */
#define KIWI_FSLAYER_DEFAULT_SIZE (1ULL << 30)

/* What holds the layer (--disk-backend). */
enum kiwi_disk_backend {
	KIWI_DISK_TMPFS = 0,  /* memory, charged to the sandbox's memory cgroup */
	KIWI_DISK_LOOP,       /* an ext4 image on a loop device (kiwi/loopfs.h) */
};

/* What happens to a layered bind's changes when the sandbox ends. */
enum kiwi_ws_mode {
	KIWI_WS_LAND = 0,  /* applied to the host directory (the default) */
	KIWI_WS_DISCARD,   /* dropped with the layer */
	KIWI_WS_LAYER,     /* left in the layer for kiwi_fslayer_export_upper() */
};

/* Child side. A new layer of size bytes attached over the directory
 * at_fd names (it is detached with the old root at pivot_root). Returns an
 * fd of its root. disk_fd >= 0: the layer is that detached mount (made by
 * kiwi-run, kiwi/loopfs.h) instead of a new tmpfs. */
int kiwi_fslayer_create(uint64_t size, int disk_fd, int at_fd, kiwi_err *err);
/* Makes name/upper and name/work in the layer; returns the fd of upper.
 * *workfd gets work's. Both O_PATH. */
int kiwi_fslayer_dirs(int layer, const char *name, int *workfd, kiwi_err *err);
/* A detached overlay of lower (an fd) with name/{upper,work} of the layer.
 * The mount table shows /proc/self/fd/N for each, never a host path. */
int kiwi_fslayer_overlay(int upper, int work, int lower, kiwi_err *err);
/* A detached bind of the layer's directory name (made with mode). */
int kiwi_fslayer_subdir(int layer, const char *name, mode_t mode, kiwi_err *err);

/* Whether overlayfs can keep its whiteouts and opaque directories in the
 * layer: user.* xattrs on tmpfs came with Linux 6.6. Without them a
 * layered bind could not replace a directory of its source (EIO), so it
 * is bound in place instead. */
bool kiwi_fslayer_holds_xattrs(int layer);

/* Either side: what the layer holds now, in KiB, and whether it is full. */
int kiwi_fslayer_usage(int layer, uint64_t *used_kib, bool *full);
/* Either side: what holds the layer (a session's exec asks its keeper). */
enum kiwi_disk_backend kiwi_fslayer_backend(int layer);

/* Parent side, once every process of the sandbox is gone. Applies the
 * changes of name/upper to the directory destfd: files are written beside
 * their final name and renamed over it, whiteouts delete, opaque
 * directories replace. */
int kiwi_fslayer_land(int layer, const char *name, int destfd, kiwi_err *err);
/* An fd (O_RDONLY | O_DIRECTORY) of name/upper: what a sandbox changed in
 * one layered bind, in overlayfs's format (whiteouts are 0:0 character
 * devices, opaque directories carry user.overlay.opaque=y). */
int kiwi_fslayer_export_upper(int layer, const char *name, kiwi_err *err);

#endif
