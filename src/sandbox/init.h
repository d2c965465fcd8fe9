/* SPDX-License-Identifier: Apache-2.0 */
#ifndef KIWI_INIT_H
#define KIWI_INIT_H

#include "kiwi/idmount.h"
#include "kiwi/sandbox.h"

#include <sys/ioctl.h>

/* What the parent hands to the child beyond the configuration. */
struct kiwi_init_args {
	const struct kiwi_sandbox_config *cfg;
	int sock;          /* the child's end of the sync socket */
	int stdin_fd;      /* become the command's 0, 1, 2 */
	int stdout_fd;
	int stderr_fd;
	struct winsize winsize;  /* cfg->tty: the pty's size at start */
	bool drop_groups;  /* setgroups is allowed: drop the host's supplementary groups */
	/* The idmapped rootfs and binds kiwi-run made (kiwi/idmount.h), or
	 * NULL: pid 1 mounts the host's trees as they are. */
	const struct kiwi_idmounts *trees;
};

/* The child side of clone3: pid 1 of the sandbox. Builds the sandbox,
 * starts the command as its only child, then reaps, forwards signals and
 * reports the command's end to the parent over sock. Never returns. */
_Noreturn void kiwi_init_main(const struct kiwi_init_args *args);

/* For a session's exec leaders (keeper.c): start args->cfg's command as
 * pid 1 starts a run's. */
pid_t kiwi_init_start_command(const struct kiwi_init_args *args, int64_t *exec_ns, kiwi_err *err);

/* The same in steps, for a command's process made ahead (keeper.c):
 * fork with the start-up report's pipe (*report: the child's write end,
 * the parent's read end); in the child, reset, optionally restrict
 * first, then exec (or report a failure); in the parent, wait for the
 * report: the pid once it exec'd, -1 with why it did not. */
pid_t kiwi_init_fork_command(int *report, kiwi_err *err);
void kiwi_init_command_reset(void);
int kiwi_init_command_restrict(const struct kiwi_sandbox_config *cfg, kiwi_err *err);
_Noreturn void kiwi_init_command_exec(const struct kiwi_init_args *args, int errfd, bool restricted);
_Noreturn void kiwi_init_command_failed(int errfd, const kiwi_err *err);
pid_t kiwi_init_command_started(pid_t pid, int report, int64_t *exec_ns, kiwi_err *err);

#endif
