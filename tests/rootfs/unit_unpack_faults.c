/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi_image_unpack's failure paths that the kernel will not take on
 * demand: fdopendir failing (ENOMEM, its buffer's allocation). This binary
 * is linked with -Wl,--wrap=fdopendir, so the library's calls come here. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kiwi/oci_image.h"

DIR *__real_fdopendir(int fd);
DIR *__wrap_fdopendir(int fd);

static bool fail_fdopendir;

DIR *__wrap_fdopendir(int fd)
{
	if (fail_fdopendir) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_fdopendir(fd);
}

static int open_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	cr_assert_not_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* The destination's emptiness check gives up (the destination counts as
 * taken) and closes the directory it opened. */
Test(unpack_faults, no_fd_leaked_when_fdopendir_fails)
{
	char dir[] = "/tmp/kiwi-unpack-faults-XXXXXX", dest[64];
	cr_assert_not_null(mkdtemp(dir));
	snprintf(dest, sizeof(dest), "%s/dest", dir);
	cr_assert_eq(mkdir(dest, 0755), 0);
	int before = open_fds();
	kiwi_err err;
	fail_fdopendir = true;
	for (int i = 0; i < 3; i++)
		cr_assert_eq(kiwi_image_unpack("/nonexistent-layout:t", dest, NULL, NULL, &err), -1);
	fail_fdopendir = false;
	cr_assert(strstr(err.msg, "not an empty directory"), "%s", err.msg);
	cr_assert_eq(open_fds(), before, "fds before %d, after %d", before, open_fds());
	rmdir(dest);
	rmdir(dir);
}
