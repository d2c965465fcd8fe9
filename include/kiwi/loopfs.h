/* SPDX-License-Identifier: Apache-2.0 */
/* A disk-backed writable layer (--disk-backend loop, kiwi/fslayer.h): a
 * new ext4 filesystem (no journal) of exactly --disk's size in a sparse,
 * unnamed file (O_TMPFILE) of a kiwi-owned directory, on a loop device
 * that clears itself when its last user goes (LO_FLAGS_AUTOCLEAR).
 *
 * Parent side, as root: a user namespace cannot mount ext4, so kiwi-run
 * mounts it before clone and the sandbox attaches the detached mount as
 * its layer. Nothing of it has a name that could outlive its users: the
 * file is unnamed, the loop device clears itself once the filesystem is
 * unmounted, and the filesystem is unmounted when the last of kiwi-run's
 * fd and the sandbox's mount namespace goes, however kiwi-run ends
 * (kill -9 included). */
#ifndef KIWI_LOOPFS_H
#define KIWI_LOOPFS_H

#include <stdint.h>
#include <sys/types.h>

#include "kiwi/err.h"

/* Where the images live unless --disk-dir says otherwise: on disk (never
 * /run, often a tmpfs), made 0700 root on first use. */
#define KIWI_LOOPFS_DEFAULT_DIR "/var/lib/kiwi-run/layers"

/* ext4 needs room for its own tables: a smaller --disk is refused. */
#define KIWI_LOOPFS_MIN_SIZE (1ULL << 20)

/* A new filesystem of size bytes in an unnamed file of dir (NULL: the
 * default), mounted and detached, its root owned by uid:gid (the ids the
 * sandbox's setup runs as, seen from the host). Returns the mount's fd
 * (O_CLOEXEC, inherited across clone3); with image_out, the image file's
 * fd goes there too (kiwi-helper frees its blocks at the end). */
int kiwi_loopfs_create(const char *dir, uint64_t size, uid_t uid, gid_t gid, int *image_out, kiwi_err *err);

/* Once nothing will read the layer again: shuts the filesystem down
 * without flushing, so that its unmount writes nothing back to an image
 * that is about to be freed, and a write to it fails from then on (EIO).
 * Needs CAP_SYS_ADMIN. Best effort; mfd < 0 is ignored. */
void kiwi_loopfs_discard(int mfd);

/* Whether this host offers the backend to this caller: 0, or -1 with
 * the reason (not root, no /dev/loop-control, no ext4). */
int kiwi_loopfs_offered(kiwi_err *err);

#endif
