/* SPDX-License-Identifier: Apache-2.0 */
/* Landlock on the real kernel: the rules are applied in a forked child (a
 * domain cannot be left) on host paths, and the child reports what each
 * access did. The directories are made writable by mode, so every EACCES
 * below comes from Landlock, not from permissions or mounts. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kiwi/landlock.h"

static char base[64];
static char rw_dir[96], ro_dir[96], other_dir[96];

static void setup(void)
{
	if (kiwi_landlock_abi() == 0)
		cr_skip_test("the kernel has no Landlock");
	/* Not /tmp: the rules allow /tmp as a whole. */
	snprintf(base, sizeof(base), "/var/tmp/kiwi-landlock-XXXXXX");
	cr_assert_not_null(mkdtemp(base));
	snprintf(rw_dir, sizeof(rw_dir), "%s/rw", base);
	snprintf(ro_dir, sizeof(ro_dir), "%s/ro", base);
	snprintf(other_dir, sizeof(other_dir), "%s/other", base);
	cr_assert_eq(mkdir(rw_dir, 0777), 0);
	cr_assert_eq(mkdir(ro_dir, 0777), 0);
	cr_assert_eq(mkdir(other_dir, 0777), 0);
}

static void teardown(void)
{
	char cmd[128];
	if (base[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
		cr_expect_eq(system(cmd), 0);
	}
}

TestSuite(landlock, .init = setup, .fini = teardown);

/* errno of creating DIR/name, 0 on success. */
static int create_in(const char *dir, const char *name)
{
	char p[160];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}

/* Runs check() in a restricted child; returns the child's exit status:
 * 0 when every check held, else the number of the failed one. */
static int in_restricted_child(const struct kiwi_landlock_rules *r, int (*check)(void))
{
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		kiwi_err err = { 0 };
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
			_exit(100);
		int abi = kiwi_landlock_restrict(r, &err);
		if (abi <= 0) {
			fprintf(stderr, "restrict: %d %s: %s\n", abi, err.step, err.msg);
			_exit(101);
		}
		_exit(check());
	}
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status), "child died: status %#x", status);
	return WEXITSTATUS(status);
}

static int check_default_rules(void)
{
	if (create_in(other_dir, "f") != EACCES)
		return 1;  /* outside every rule: refused, though mode 0777 allows */
	if (create_in(ro_dir, "f") != EACCES)
		return 2;  /* a read-only bind */
	if (create_in(rw_dir, "f") != 0)
		return 3;  /* a writable bind */
	char tmpl[] = "/tmp/kiwi-landlock-XXXXXX";
	int fd = mkstemp(tmpl);
	if (fd < 0)
		return 4;  /* /tmp */
	close(fd);
	unlink(tmpl);
	fd = open("/dev/null", O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0)
		return 5;  /* a shell's >/dev/null */
	close(fd);
	fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 6;  /* the root stays readable */
	close(fd);
	if (mkdir("/var/tmp/kiwi-landlock-escape", 0755) == 0 || errno != EACCES)
		return 7;
	if (rename(rw_dir, other_dir) == 0 || errno != EACCES)
		return 8;  /* nothing moves out of its rule */
	return 0;
}

Test(landlock, writes_outside_the_allowed_set_are_refused)
{
	struct kiwi_bind binds[] = {
		{ .source = "unused", .dest = rw_dir, .read_only = false },
		{ .source = "unused", .dest = ro_dir, .read_only = true },
	};
	struct kiwi_landlock_rules r = { .binds = binds, .n_binds = 2 };
	cr_assert_eq(in_restricted_child(&r, check_default_rules), 0);
	cr_assert_eq(access("/var/tmp/kiwi-landlock-escape", F_OK), -1);
}

/* `echo > /dev/stdout` with stdout a pipe: the reopen goes through
 * /proc/self/fd, outside every rule, yet pipes are no filesystem path. */
static int check_pipe_reopen(void)
{
	int p[2];
	char path[64];
	if (pipe(p) < 0)
		return 1;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", p[1]);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return 2;
	close(fd);
	return 0;
}

Test(landlock, pipes_reopen_through_proc)
{
	struct kiwi_landlock_rules r = { 0 };
	cr_assert_eq(in_restricted_child(&r, check_pipe_reopen), 0);
}

static int check_writable_root(void)
{
	return create_in(other_dir, "f") == 0 ? 0 : 1;
}

Test(landlock, root_writable_lets_the_root_be_written)
{
	struct kiwi_landlock_rules r = { .root_writable = true };
	cr_assert_eq(in_restricted_child(&r, check_writable_root), 0);
}

static int check_exec(void)
{
	int status = system("exec /bin/true");
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

Test(landlock, programs_in_the_root_still_run)
{
	struct kiwi_landlock_rules r = { 0 };
	cr_assert_eq(in_restricted_child(&r, check_exec), 0);
}

Test(landlock, a_missing_bind_destination_is_skipped)
{
	struct kiwi_bind b = { .source = "unused", .dest = "/nonexistent/kiwi", .read_only = false };
	struct kiwi_landlock_rules r = { .binds = &b, .n_binds = 1 };
	cr_assert_eq(in_restricted_child(&r, check_writable_root), 1);
}

Test(landlock, a_symlinked_rule_path_is_an_error)
{
	char link[128];
	snprintf(link, sizeof(link), "%s/link", base);
	cr_assert_eq(symlink(other_dir, link), 0);
	struct kiwi_bind b = { .source = "unused", .dest = link, .read_only = false };
	struct kiwi_landlock_rules r = { .binds = &b, .n_binds = 1 };
	kiwi_err err = { 0 };
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
		_exit(kiwi_landlock_restrict(&r, &err) == -1 && err.errnum == ELOOP &&
		      !strcmp(err.step, "landlock") ? 0 : 1);
	}
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
