/* SPDX-License-Identifier: Apache-2.0 */
/* process.*: rlimits, the user and its capabilities, the program's path
 * and the console, applied by the container's init before it waits on
 * exec.fifo. */
#include "oci_int.h"
#include "kiwi/cleanup.h"
#include "kiwi/fds.h"
#include "kiwi/fileio.h"
#include "kiwi/passwd.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define CAP_MKNOD_BIT 27

int kiwi_oci_set_rlimits(const struct kiwi_oci_process *p, kiwi_err *err)
{
	for (size_t i = 0; i < p->n_rlimits; i++) {
		struct rlimit rl = { .rlim_cur = p->rlimits[i].soft, .rlim_max = p->rlimits[i].hard };
		if (setrlimit(p->rlimits[i].resource, &rl) < 0)
			return kiwi_error(err, errno, "rlimits", "cannot set %s to %llu/%llu",
					  kiwi_oci_rlimit_name(p->rlimits[i].resource),
					  (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max);
	}
	return 0;
}

/* Drops from the bounding set what is not in it, CAP_MKNOD always (see
 * rootfs.c: devices). Stops at the first number the kernel does not know. */
static int drop_bounding(uint64_t keep, kiwi_err *err)
{
	for (int cap = 0; cap < 64; cap++) {
		if ((keep & (1ULL << cap)) && cap != CAP_MKNOD_BIT)
			continue;
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0)
			continue;
		if (errno == EINVAL && cap > 0)
			break;
		return kiwi_error(err, errno, "caps", "cannot drop bounding capability %d", cap);
	}
	return 0;
}

static int set_ids(const struct kiwi_oci_process *p, bool may_setgroups, kiwi_err *err)
{
	/* Without this the init would keep the runtime's own supplementary
	 * groups. A user namespace with setgroups denied has none to keep. */
	if (may_setgroups) {
		if (setgroups(p->n_additional_gids, p->additional_gids) < 0)
			return kiwi_error(err, errno, "user", "cannot set the additional gids");
	} else if (p->n_additional_gids) {
		return kiwi_error(err, EPERM, "user",
				  "additionalGids need setgroups, which a rootless user namespace denies");
	}
	if (setresgid(p->gid, p->gid, p->gid) < 0)
		return kiwi_error(err, errno, "user", "cannot become gid %u (is it mapped?)", p->gid);
	if (setresuid(p->uid, p->uid, p->uid) < 0)
		return kiwi_error(err, errno, "user", "cannot become uid %u (is it mapped?)", p->uid);
	return 0;
}

/* The capabilities this kernel knows: names kiwi-run knows but an older
 * kernel does not are skipped, as runc skips them. */
static uint64_t kernel_caps(void)
{
	uint64_t known = 0;
	for (int cap = 0; cap < 64 && prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; cap++)
		known |= 1ULL << cap;
	return known;
}

int kiwi_oci_become_user(const struct kiwi_oci_process *p, bool may_setgroups, kiwi_err *err)
{
	uint64_t known = kernel_caps(), caps[KIWI_OCI_CAP_SETS];
	for (int s = 0; s < KIWI_OCI_CAP_SETS; s++)
		caps[s] = p->caps[s] & known;
	if (drop_bounding(caps[KIWI_OCI_CAP_BOUNDING], err) < 0)
		return -1;
	/* Keep the permitted set across the change of uid; the effective
	 * set is rebuilt just below. */
	if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
		return kiwi_error(err, errno, "caps", "cannot keep capabilities across setuid");
	if (set_ids(p, may_setgroups, err) < 0)
		return -1;
	if (prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) < 0)
		return kiwi_error(err, errno, "caps", "cannot reset keepcaps");
	uint64_t mknod = 1ULL << CAP_MKNOD_BIT;
	uint64_t eff = caps[KIWI_OCI_CAP_EFFECTIVE] & ~mknod, perm = caps[KIWI_OCI_CAP_PERMITTED] & ~mknod,
		 inh = caps[KIWI_OCI_CAP_INHERITABLE] & ~mknod;
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = {
		{ (uint32_t)eff, (uint32_t)perm, (uint32_t)inh },
		{ (uint32_t)(eff >> 32), (uint32_t)(perm >> 32), (uint32_t)(inh >> 32) },
	};
	if (syscall(SYS_capset, &hdr, data) < 0)
		return kiwi_error(err, errno, "caps", "cannot set the capabilities (effective must be within permitted)");
	/* An ambient capability needs to be permitted and inheritable; runc
	 * skips the others, and so does kiwi-run. */
	for (int cap = 0; cap < 64; cap++) {
		uint64_t bit = 1ULL << cap;
		if ((caps[KIWI_OCI_CAP_AMBIENT] & bit) && (perm & bit) && (inh & bit) &&
		    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0) < 0)
			return kiwi_error(err, errno, "caps", "cannot raise ambient capability %d", cap);
	}
	if (p->no_new_privileges && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return kiwi_error(err, errno, "caps", "cannot set no_new_privs");
	return 0;
}

static const char *env_path(char *const *env)
{
	for (; env && *env; env++)
		if (!strncmp(*env, "PATH=", 5))
			return *env + 5;
	return DEFAULT_PATH;
}

/* HOME, when process.env has none: the user's home from the container's
 * /etc/passwd, else "/", as runc sets it. Read in the container, after
 * pivot_root and before the uid changes (passwd may be root's alone).
 * Called just before execve: what it allocates is never freed. */
int kiwi_oci_env_with_home(const struct kiwi_oci_process *p, char ***env, kiwi_err *err)
{
	size_t n = 0;
	*env = p->env;
	for (; p->env[n]; n++)
		if (!strncmp(p->env[n], "HOME=", 5))
			return 0;
	char home[4096] = "/";
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	_cleanup_close_ int fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	kiwi_err ignored;
	if (fd >= 0 && kiwi_read_bounded(fd, 4u << 20, "/etc/passwd", &text, &len, &ignored) == 0 &&
	    !kiwi_passwd_home(text, len, p->uid, home, sizeof(home)))
		snprintf(home, sizeof(home), "/");
	char **more = calloc(n + 2, sizeof(*more));
	if (!more || asprintf(&more[n], "HOME=%s", home) < 0) {
		free(more);
		return kiwi_error(err, ENOMEM, "env", "cannot allocate the environment");
	}
	memcpy(more, p->env, n * sizeof(*more));
	*env = more;
	return 0;
}

static bool executable(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

int kiwi_oci_find_program(const struct kiwi_oci_process *p, char *out, size_t len, kiwi_err *err)
{
	const char *name = p->args[0];
	if (strchr(name, '/')) {
		if (!executable(name))
			return kiwi_error(err, errno ? errno : EACCES, "exec", "cannot execute `%s`", name);
		snprintf(out, len, "%s", name);
		return 0;
	}
	const char *dirs = env_path(p->env);
	while (*dirs) {
		size_t n = strcspn(dirs, ":");
		snprintf(out, len, "%.*s%s%s", (int)n, n ? dirs : ".", "/", name);
		if (executable(out))
			return 0;
		dirs += n + (dirs[n] == ':');
	}
	return kiwi_error(err, ENOENT, "exec", "executable file `%s` not found in $PATH", name);
}

/* SCM_RIGHTS with the file's name as the payload, as runc sends it. */
static int send_fd(int sock, int fd, const char *name, kiwi_err *err)
{
	if (kiwi_send_fd(sock, name, strlen(name), fd) < 0)
		return kiwi_error(err, errno, "console", "cannot send the pty over the console socket");
	return 0;
}

int kiwi_oci_setup_console(int console_sock, const struct kiwi_oci_process *p, kiwi_err *err)
{
	_cleanup_close_ int master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (master < 0)
		return kiwi_error(err, errno, "console", "cannot open /dev/ptmx in the container (is devpts mounted?)");
	char name[64];
	if (unlockpt(master) < 0 || ptsname_r(master, name, sizeof(name)) != 0)
		return kiwi_error(err, errno, "console", "cannot unlock the pty");
	_cleanup_close_ int slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (slave < 0)
		return kiwi_error(err, errno, "console", "cannot open `%s`", name);
	if (fchown(slave, p->uid, p->gid) < 0 && errno != EINVAL && errno != EPERM)
		return kiwi_error(err, errno, "console", "cannot give `%s` to the user", name);
	if (p->console_height || p->console_width) {
		struct winsize ws = { .ws_row = (unsigned short)p->console_height,
				      .ws_col = (unsigned short)p->console_width };
		if (ioctl(master, TIOCSWINSZ, &ws) < 0)
			return kiwi_error(err, errno, "console", "cannot set the console size");
	}
	if (send_fd(console_sock, master, "/dev/ptmx", err) < 0)
		return -1;
	for (int fd = 0; fd < 3; fd++)
		if (dup2(slave, fd) < 0)
			return kiwi_error(err, errno, "console", "cannot make the pty fd %d", fd);
	if (ioctl(0, TIOCSCTTY, 0) < 0)
		return kiwi_error(err, errno, "console", "cannot make the pty the controlling terminal");
	return 0;
}
