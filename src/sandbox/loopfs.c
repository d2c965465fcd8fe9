/* SPDX-License-Identifier: Apache-2.0 */
/* The disk-backed writable layer (kiwi/loopfs.h). The image is formatted
 * with libext2fs, e2fsprogs' own library: mke2fs's tables and checksums
 * are not code to write again, and running mke2fs is not an option (no
 * shelling out). */
#include "kiwi/loopfs.h"
#include "kiwi/cleanup.h"
#include "kiwi/mount.h"

#include <errno.h>
#include <ext2fs/ext2fs.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define STEP "disk"
#define BLOCK 4096
/* One inode per 8 KiB: an `npm ci` of 50,000 small files fits in 1 GiB
 * (131,072 inodes) while the tables cost 3% of the image, and only what
 * is used of them is ever written to the sparse file. */
#define BYTES_PER_INODE 8192

static int open_dir(const char *dir, kiwi_err *err)
{
	if (!dir) {
		dir = KIWI_LOOPFS_DEFAULT_DIR;
		if ((mkdir("/var/lib/kiwi-run", 0755) < 0 && errno != EEXIST) || (mkdir(dir, 0700) < 0 && errno != EEXIST))
			return kiwi_error(err, errno, STEP, "cannot create `%s`", dir);
	}
	int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return kiwi_error(err, errno, STEP, "cannot open the image directory `%s`", dir);
	return fd;
}

/* An unnamed, sparse file of size bytes: nothing to find or remove after
 * a crash, and the host's filesystem holds only what the layer wrote. */
static int make_image(const char *dir, uint64_t size, kiwi_err *err)
{
	_cleanup_close_ int dfd = open_dir(dir, err);
	if (dfd < 0)
		return -1;
	_cleanup_close_ int fd = openat(dfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return kiwi_error(err, errno, STEP, "cannot create an unnamed image file in `%s` (O_TMPFILE)",
				  dir ? dir : KIWI_LOOPFS_DEFAULT_DIR);
	if (ftruncate(fd, (off_t)size) < 0)
		return kiwi_error(err, errno, STEP, "cannot size the image to %llu bytes", (unsigned long long)size);
	return TAKE_FD(fd);
}

static void set_param(struct ext2_super_block *p, uint64_t size)
{
	memset(p, 0, sizeof(*p));
	uint64_t blocks = size / BLOCK;
	uint64_t inodes = size / BYTES_PER_INODE;
	ext2fs_blocks_count_set(p, blocks);
	p->s_log_block_size = 2;  /* 1024 << 2 */
	p->s_inodes_count = inodes > UINT32_MAX - 1 ? UINT32_MAX - 1 : (uint32_t)inodes;
	p->s_rev_level = EXT2_DYNAMIC_REV;
	p->s_inode_size = 256;
	/* No reserved blocks: --disk is what the sandbox can write. */
	ext2fs_r_blocks_count_set(p, 0);
	/* ext4 without a journal (a scratch layer has nothing to recover)
	 * and without checksums or lazily zeroed tables: the sparse file
	 * reads as zeros, so the tables are valid unwritten, and nothing is
	 * left for the kernel's lazy-init thread to fill the file with. */
	/* Every group's bitmaps and inode table packed together at the
	 * start (flex_bg), and no backup superblocks (sparse_super2 with
	 * none): the image holds a few runs of blocks instead of one per
	 * group, and the host frees each run with one discard. */
	ext2fs_set_feature_flex_bg(p);
	p->s_log_groups_per_flex = 4;
	ext2fs_set_feature_sparse_super2(p);
	p->s_backup_bgs[0] = p->s_backup_bgs[1] = 0;
	ext2fs_set_feature_xattr(p);
	ext2fs_set_feature_dir_index(p);
	ext2fs_set_feature_filetype(p);
	ext2fs_set_feature_extents(p);
	ext2fs_set_feature_large_file(p);
	ext2fs_set_feature_huge_file(p);
	ext2fs_set_feature_dir_nlink(p);
	ext2fs_set_feature_extra_isize(p);
	if (blocks > UINT32_MAX)
		ext2fs_set_feature_64bit(p);
}

/* ext2fs's error codes are com_err's, not errnos: what it said goes into
 * the message, EIO into errnum. */
static int format_failed(kiwi_err *err, errcode_t e, const char *what)
{
	initialize_ext2_error_table();
	return kiwi_error(err, e > 0 && e < 4096 ? (int)e : EIO, STEP, "cannot format the image (%s): %s", what,
			  error_message(e));
}

static int format(int fd, uint64_t size, kiwi_err *err)
{
	char name[32];
	snprintf(name, sizeof(name), "/proc/self/fd/%d", fd);
	struct ext2_super_block param;
	set_param(&param, size);
	ext2_filsys fs = NULL;
	errcode_t e = ext2fs_initialize(name, EXT2_FLAG_RW | EXT2_FLAG_64BITS, &param, unix_io_manager, &fs);
	if (e)
		return format_failed(err, e, "initialize");
	if (getrandom(fs->super->s_uuid, sizeof(fs->super->s_uuid), 0) < 0 ||
	    getrandom(fs->super->s_hash_seed, sizeof(fs->super->s_hash_seed), 0) < 0)
		memset(fs->super->s_hash_seed, 0, sizeof(fs->super->s_hash_seed));
	fs->super->s_def_hash_version = EXT2_HASH_HALF_MD4;
	const char *what = "tables";
	if (!(e = ext2fs_allocate_tables(fs))) {
		/* The bad-block inode and the reserved ones below the
		 * first, as mke2fs marks them. */
		ext2fs_inode_alloc_stats2(fs, EXT2_BAD_INO, +1, 0);
		for (ext2_ino_t i = EXT2_ROOT_INO + 1; i < EXT2_FIRST_INODE(fs->super); i++)
			ext2fs_inode_alloc_stats2(fs, i, +1, 0);
		ext2fs_mark_ib_dirty(fs);
		what = "root directory";
		e = ext2fs_mkdir(fs, EXT2_ROOT_INO, EXT2_ROOT_INO, NULL);
	}
	if (e) {
		ext2fs_free(fs);
		return format_failed(err, e, what);
	}
	/* No fsync: the image lives no longer than this boot, and the
	 * loop device reads it through the same page cache. */
	e = ext2fs_close2(fs, EXT2_FLAG_FLUSH_NO_SYNC);
	if (e)
		ext2fs_free(fs);  /* freed by ext2fs_close2 only when it worked */
	return e ? format_failed(err, e, "write") : 0;
}

/* The blocks of mem's data, written at the same offsets in out. */
static int copy_data(int mem, int out, kiwi_err *err)
{
	char buf[1 << 16];
	off_t at = 0;
	while ((at = lseek(mem, at, SEEK_DATA)) >= 0) {
		off_t end = lseek(mem, at, SEEK_HOLE);
		if (end < 0)
			break;
		while (at < end) {
			size_t want = (size_t)(end - at) < sizeof(buf) ? (size_t)(end - at) : sizeof(buf);
			ssize_t n = pread(mem, buf, want, at);
			if (n <= 0 || pwrite(out, buf, (size_t)n, at) != n)
				return kiwi_error(err, n < 0 ? errno : EIO, STEP, "cannot write the image");
			at += n;
		}
	}
	if (errno != ENXIO)  /* ENXIO: no data past at */
		return kiwi_error(err, errno, STEP, "cannot read the formatted image");
	return 0;
}

/* Formatted in memory, then written through the loop device: libext2fs
 * fsyncs what it opens (on the host's filesystem a journal commit and a
 * disk flush), and the loop device would write back whatever the file
 * held when attached. Through the device, the blocks go into the image's
 * page cache only: an image freed before the host writes it back costs
 * the host's disk nothing (not even the discards of a `discard` mount). */
static int format_image(int loop, uint64_t size, kiwi_err *err)
{
	_cleanup_close_ int mem = memfd_create("kiwi-layer", MFD_CLOEXEC);
	if (mem < 0 || ftruncate(mem, (off_t)size) < 0)
		return kiwi_error(err, errno, STEP, "cannot make the image in memory");
	if (format(mem, size, err) < 0)
		return -1;
	return copy_data(mem, loop, err);
}

/* A free loop device configured over the image in one call; a device
 * another process takes between GET_FREE and CONFIGURE is EBUSY: the
 * next free one is tried. Returns the device's fd, its number in *nr. */
static int attach_loop(int image, int *nr, kiwi_err *err)
{
	_cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0)
		return kiwi_error(err, errno, STEP, "cannot open /dev/loop-control");
	struct loop_config lc = {
		.fd = (uint32_t)image,
		.block_size = BLOCK,
		.info = { .lo_flags = LO_FLAGS_AUTOCLEAR },
	};
	snprintf((char *)lc.info.lo_file_name, sizeof(lc.info.lo_file_name), "kiwi-run layer");
	for (int tries = 0; tries < 16; tries++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (n < 0)
			return kiwi_error(err, errno, STEP, "no free loop device");
		char dev[32];
		snprintf(dev, sizeof(dev), "/dev/loop%d", n);
		_cleanup_close_ int fd = open(dev, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			return kiwi_error(err, errno, STEP, "cannot open `%s`", dev);
		if (ioctl(fd, LOOP_CONFIGURE, &lc) == 0) {
			*nr = n;
			return TAKE_FD(fd);
		}
		if (errno != EBUSY)
			return kiwi_error(err, errno, STEP, "cannot attach the image to `%s`", dev);
	}
	return kiwi_error(err, EBUSY, STEP, "every free loop device was taken before it could be attached");
}

int kiwi_loopfs_create(const char *dir, uint64_t size, uid_t uid, gid_t gid, int *image_out, kiwi_err *err)
{
	if (size < KIWI_LOOPFS_MIN_SIZE)
		return kiwi_error(err, EINVAL, STEP, "a loop-backed layer needs --disk of at least 1M");
	_cleanup_close_ int image = make_image(dir, size, err);
	if (image < 0)
		return -1;
	int nr = -1;
	/* Held open until the filesystem holds the device: with autoclear,
	 * the last close of an unmounted device clears it. */
	_cleanup_close_ int loop = attach_loop(image, &nr, err);
	if (loop < 0 || format_image(loop, size, err) < 0)
		return -1;
	char dev[32];
	snprintf(dev, sizeof(dev), "/dev/loop%d", nr);
	/* ext4's user_xattr default holds the overlays' user.* xattrs;
	 * noatime: a read never costs a write. */
	const char *const opts[] = { "source", dev, NULL };
	_cleanup_close_ int mfd = kiwi_mount_new_fs("ext4", opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOATIME,
						    err);
	if (mfd < 0)
		return -1;
	if (fchownat(mfd, "", uid, gid, AT_EMPTY_PATH) < 0)
		return kiwi_error(err, errno, STEP, "cannot give the layer's root to %u:%u", (unsigned)uid,
				  (unsigned)gid);
	if (image_out)
		*image_out = TAKE_FD(image);
	return TAKE_FD(mfd);
}

/* ext4's (and XFS's) shutdown ioctl, not in the uapi headers. */
#define EXT4_IOC_SHUTDOWN _IOR('X', 125, uint32_t)
#define EXT4_GOING_FLAGS_NOLOGFLUSH 0x2

void kiwi_loopfs_discard(int mfd)
{
	if (mfd < 0)
		return;
	_cleanup_close_ int fd = openat(mfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	uint32_t how = EXT4_GOING_FLAGS_NOLOGFLUSH;
	if (fd >= 0)
		(void)ioctl(fd, EXT4_IOC_SHUTDOWN, &how);
}

int kiwi_loopfs_offered(kiwi_err *err)
{
	if (geteuid() != 0)
		return kiwi_error(err, EPERM, STEP, "kiwi-run makes a loop-backed layer as root only: a user "
				  "namespace cannot mount ext4 (kiwi-helper makes one for others)");
	if (access("/dev/loop-control", R_OK | W_OK) < 0)
		return kiwi_error(err, errno, STEP, "no /dev/loop-control (modprobe loop)");
	_cleanup_close_ int fs = fsopen("ext4", FSOPEN_CLOEXEC);
	if (fs < 0)
		return kiwi_error(err, errno, STEP, "the kernel mounts no ext4");
	return 0;
}
