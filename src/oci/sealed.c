/* SPDX-License-Identifier: Apache-2.0 */
/* CVE-2019-5736: a process of kiwi-run that enters a container (the init
 * of create before it executes the program, the process of exec before
 * its execve) shows the container its own binary as /proc/<pid>/exe. A
 * container root that keeps that file open could write through it once
 * the binary is no longer busy, and every later kiwi-run on the host
 * would run the container's code. So those commands first re-execute
 * themselves from a copy in a memfd sealed against any change: what the
 * container can reach is that copy, which nothing can write. */
#include "oci_int.h"
#include "kiwi/cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

bool kiwi_oci_running_sealed(void)
{
	char exe[64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return false;
	exe[n] = '\0';
	if (strncmp(exe, "/memfd:", 7) != 0)
		return false;
	/* A memfd of our own making is sealed; anything else is not ours. */
	_cleanup_close_ int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	int seals = fd >= 0 ? fcntl(fd, F_GET_SEALS) : -1;
	return seals >= 0 && (seals & F_SEAL_SEAL) && (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE));
}

#define KIWI_SEALS_FIXED (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

/* F_SEAL_WRITE waits for the kernel's transient references to the new
 * pages to drop and gives EBUSY when they outlast its short wait, which a
 * loaded machine shows (seen under ASan in CI). F_SEAL_FUTURE_WRITE (Linux
 * 5.1) refuses every later write() and writable mapping without that wait;
 * no writable mapping of this memfd ever existed, so it holds the same. */
static int seal(int mfd)
{
	if (fcntl(mfd, F_ADD_SEALS, KIWI_SEALS_FIXED | F_SEAL_WRITE) == 0)
		return 0;
	if (errno != EBUSY)
		return -1;
	return fcntl(mfd, F_ADD_SEALS, KIWI_SEALS_FIXED | F_SEAL_FUTURE_WRITE);
}

static int copy_self(kiwi_err *err)
{
	_cleanup_close_ int self = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (self < 0)
		return kiwi_error(err, errno, "sealed", "cannot open our own binary");
	struct stat st;
	if (fstat(self, &st) < 0)
		return kiwi_error(err, errno, "sealed", "cannot stat our own binary");
	int mfd = memfd_create("kiwi-run", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (mfd < 0)
		return kiwi_error(err, errno, "sealed", "cannot create a memfd for our binary");
	off_t off = 0;
	while (off < st.st_size) {
		ssize_t n = sendfile(mfd, self, &off, (size_t)(st.st_size - off));
		if (n <= 0) {
			close(mfd);
			return kiwi_error(err, n < 0 ? errno : EIO, "sealed", "cannot copy our binary into a memfd");
		}
	}
	if (seal(mfd) < 0) {
		close(mfd);
		return kiwi_error(err, errno, "sealed", "cannot seal the memfd of our binary");
	}
	return mfd;
}

int kiwi_oci_reexec_sealed(char **argv, kiwi_err *err)
{
	if (kiwi_oci_running_sealed())
		return 0;
	_cleanup_close_ int mfd = copy_self(err);
	if (mfd < 0)
		return -1;
	fexecve(mfd, argv, environ);
	return kiwi_error(err, errno, "sealed", "cannot execute the sealed copy of our binary");
}
