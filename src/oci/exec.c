/* SPDX-License-Identifier: Apache-2.0 */
/* exec: a new process in a running container. The caller (P) forks C1,
 * which enters every namespace of the container's init at once through a
 * pidfd (setns(2) with a pidfd, Linux 5.8) and clone3s C2 with CLONE_PARENT
 * into the init's cgroup: C2 is then in the container's pid namespace and
 * P's own child, so P waits for it as runc exec does. C2 applies the same
 * process rules as the init (user, capabilities, rlimits, no_new_privs,
 * the container's seccomp filter) and executes the program; a failure
 * before that comes back to P whole over a close-on-exec pipe.
 * P runs from a sealed memfd copy of kiwi-run (sealed.c) and is not
 * dumpable, so C1 and C2 show the container nothing it could write. */
#include "oci_int.h"
#include "kiwi/cgroup.h"
#include "kiwi/cleanup.h"
#include "kiwi/fileio.h"
#include "kiwi/openat2.h"
#include "kiwi/seccomp.h"
#include "kiwi/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CLONE_PARENT
#define CLONE_PARENT 0x00008000
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

struct exec_ctx {
	const struct kiwi_oci_exec_opts *o;
	struct kiwi_oci_config *cfg;       /* the container's */
	struct kiwi_oci_config *proc_cfg;  /* holds --process, or NULL */
	struct kiwi_oci_process p;         /* what runs */
	char **env;                        /* owned when --env was given */
	struct kiwi_seccomp *seccomp;
	struct kiwi_oci_state st;
	int pidfd, cgroup, console, report[2];
	uint64_t ns_flags;
};

/* --process FILE: a runtime-spec `process` object, checked by the config
 * parser inside a minimal config around it. */
static int load_process_file(struct exec_ctx *c, kiwi_err *err)
{
	_cleanup_close_ int fd = open(c->o->process_file, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return kiwi_error(err, errno, "exec", "cannot open process file `%s`", c->o->process_file);
	_cleanup_free_ char *text = NULL;
	size_t len;
	if (kiwi_read_bounded(fd, KIWI_OCI_CONFIG_MAX, c->o->process_file, &text, &len, err) < 0)
		return -1;
	static const char head[] = "{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"/\"},\"linux\":{},\"process\":";
	_cleanup_free_ char *doc = malloc(sizeof(head) + len + 2);
	if (!doc)
		return kiwi_error(err, ENOMEM, "exec", "cannot allocate");
	memcpy(doc, head, sizeof(head) - 1);
	memcpy(doc + sizeof(head) - 1, text, len);
	memcpy(doc + sizeof(head) - 1 + len, "}", 2);
	if (kiwi_oci_config_parse(doc, strlen(doc), &c->proc_cfg, err) < 0)
		return kiwi_error_wrap(err, "process file `%s`", c->o->process_file);
	c->p = c->proc_cfg->process;
	return 0;
}

static int add_env(struct exec_ctx *c, kiwi_err *err)
{
	size_t n = 0, add = 0;
	while (c->p.env[n])
		n++;
	while (c->o->env && c->o->env[add])
		add++;
	if (!add)
		return 0;
	c->env = calloc(n + add + 1, sizeof(*c->env));
	if (!c->env)
		return kiwi_error(err, ENOMEM, "exec", "cannot allocate the environment");
	memcpy(c->env, c->p.env, n * sizeof(*c->env));
	for (size_t i = 0; i < add; i++) {
		const char *kv = c->o->env[i];
		const char *eq = strchr(kv, '=');
		if (!eq || eq == kv)
			return kiwi_error(err, EINVAL, "exec", "--env `%s` is not KEY=VALUE", kv);
		size_t k = 0;
		while (k < n && (strncmp(c->env[k], kv, (size_t)(eq - kv + 1)) != 0))
			k++;
		c->env[k] = (char *)kv;
		if (k == n)
			n++;
	}
	c->p.env = c->env;
	return 0;
}

static int parse_user(const char *s, uint32_t *uid, uint32_t *gid, kiwi_err *err)
{
	char *end;
	unsigned long u = strtoul(s, &end, 10), g = *gid;
	if (end != s && *end == ':')
		g = strtoul(end + 1, &end, 10);
	if (end == s || *end || u >= UINT32_MAX || g >= UINT32_MAX)
		return kiwi_error(err, EINVAL, "exec", "--user `%s` is not UID[:GID] (names are not looked up)", s);
	*uid = (uint32_t)u;
	*gid = (uint32_t)g;
	return 0;
}

/* The process: --process, or the container's with the flags applied. */
static int build_process(struct exec_ctx *c, kiwi_err *err)
{
	const struct kiwi_oci_exec_opts *o = c->o;
	if (o->process_file) {
		if (o->args && o->args[0])
			return kiwi_error(err, EINVAL, "exec", "give --process or a command, not both");
		if (load_process_file(c, err) < 0)
			return -1;
	} else {
		if (!o->args || !o->args[0])
			return kiwi_error(err, EINVAL, "exec", "no command given");
		c->p = c->cfg->process;
		c->p.args = o->args;
		c->p.terminal = o->tty;
		c->p.console_height = c->p.console_width = 0;
		if (o->cwd)
			c->p.cwd = o->cwd;
		if (o->user && parse_user(o->user, &c->p.uid, &c->p.gid, err) < 0)
			return -1;
		if (o->n_gids) {
			c->p.additional_gids = o->gids;
			c->p.n_additional_gids = o->n_gids;
		}
		if (o->no_new_privs)
			c->p.no_new_privileges = true;
		for (size_t i = 0; i < o->n_caps; i++) {
			int cap = kiwi_oci_cap_from_name(o->caps[i]);
			if (cap < 0)
				return kiwi_error(err, EINVAL, "exec", "--cap `%s` is not a capability", o->caps[i]);
			for (int s = 0; s < KIWI_OCI_CAP_SETS; s++)
				if (s != KIWI_OCI_CAP_INHERITABLE)
					c->p.caps[s] |= 1ULL << cap;
		}
	}
	if (c->p.terminal != !!o->console_socket)
		return kiwi_error(err, EINVAL, "console", c->p.terminal ? "a terminal needs --console-socket"
								   : "--console-socket given but no terminal asked for");
	return add_env(c, err);
}

/* The init's cgroup v2 directory, when it is not ours: C2 starts in it. */
static int open_init_cgroup(pid_t init, kiwi_err *err)
{
	char mine[PATH_MAX], theirs[PATH_MAX], mount[PATH_MAX];
	if (kiwi_cgroup_of(init, theirs, sizeof(theirs), NULL) < 0 ||
	    kiwi_cgroup_of(0, mine, sizeof(mine), NULL) < 0 || !strcmp(mine, theirs) ||
	    kiwi_cgroup_mount(mount, sizeof(mount), NULL) < 0)
		return -1;   /* no cgroup2, or already there */
	char dir[2 * PATH_MAX];
	snprintf(dir, sizeof(dir), "%s%s", mount, theirs);
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return kiwi_error(err, errno, "cgroup", "cannot open the container's cgroup `%s`", dir);
	return fd;
}

/* --cgroup SUB: an existing cgroup below the container's, as runc takes
 * it (a plain path; runc's controller:path form names v1 hierarchies). */
static int open_sub_cgroup(struct exec_ctx *c, kiwi_err *err)
{
	const char *sub = c->o->cgroup;
	if (c->cgroup < 0)
		return kiwi_error(err, EINVAL, "exec", "--cgroup `%s`: the container has no cgroup of its own", sub);
	if (!sub[0] || sub[0] == '/' || strchr(sub, ':'))
		return kiwi_error(err, EINVAL, "exec", "--cgroup `%s` is not a path below the container's cgroup", sub);
	struct open_how how = { .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV };
	int fd = kiwi_openat2(c->cgroup, sub, &how);
	if (fd < 0)
		return kiwi_error(err, errno, "exec", "--cgroup `%s`: no such sub-cgroup of the container's", sub);
	close(c->cgroup);
	c->cgroup = fd;
	return 0;
}

static int namespaces_of(const struct kiwi_oci_config *cfg, uint64_t *flags)
{
	*flags = 0;
	for (size_t i = 0; i < cfg->n_namespaces; i++)
		*flags |= (uint64_t)cfg->namespaces[i].type;
	return 0;
}

static bool setgroups_allowed(void)
{
	char buf[16] = "";
	_cleanup_close_ int fd = open("/proc/self/setgroups", O_RDONLY | O_CLOEXEC);
	return fd < 0 || read(fd, buf, sizeof(buf) - 1) <= 0 || strncmp(buf, "deny", 4) != 0;
}

/* C2, in the container: the same steps as the init after pivot_root. */
static int become_process(struct exec_ctx *c, char *prog, size_t len, kiwi_err *err)
{
	const struct kiwi_oci_process *p = &c->p;
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if ((c->ns_flags & CLONE_NEWCGROUP) && setns(c->pidfd, CLONE_NEWCGROUP) < 0)
		return kiwi_error(err, errno, "exec", "cannot join the container's cgroup namespace");
	if (setsid() < 0)
		return kiwi_error(err, errno, "exec", "cannot start a session");
	if (p->terminal && kiwi_oci_setup_console(c->console, p, err) < 0)
		return -1;
	if (kiwi_oci_set_rlimits(p, err) < 0)
		return -1;
	umask(p->umask_text ? p->umask : 022);
	/* Without no_new_privs the filter goes on while we may still load it. */
	if (c->seccomp && !p->no_new_privileges && kiwi_seccomp_load(c->seccomp, err) < 0)
		return -1;
	if (kiwi_oci_env_with_home(p, &c->p.env, err) < 0 || kiwi_oci_become_user(p, setgroups_allowed(), err) < 0)
		return -1;
	if (chdir(p->cwd) < 0)
		return kiwi_error(err, errno, "cwd", "cannot enter working directory `%s`", p->cwd);
	if (kiwi_oci_find_program(p, prog, len, err) < 0)
		return -1;
	if (syscall(SYS_close_range, 3 + c->o->preserve_fds, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
		return kiwi_error(err, errno, "fds", "cannot mark fds close-on-exec");
	for (int fd = 3; fd < 3 + c->o->preserve_fds; fd++)
		if (fcntl(fd, F_SETFD, 0) < 0 && errno != EBADF)
			return kiwi_error(err, errno, "fds", "cannot pass fd %d", fd);
	if (c->seccomp && p->no_new_privileges && kiwi_seccomp_load(c->seccomp, err) < 0)
		return -1;
	return 0;
}

_Noreturn static void run_process(struct exec_ctx *c)
{
	kiwi_err err = { 0 };
	char prog[4096];
	if (become_process(c, prog, sizeof(prog), &err) == 0) {
		execve(prog, c->p.args, c->p.env);
		kiwi_error(&err, errno, "exec", "cannot execute `%s`", prog);
	}
	(void)!write(c->report[1], &err, sizeof(err));
	_exit(127);
}

/* C1: joins, spawns C2 as a sibling, says its pid, leaves. */
_Noreturn static void join_and_spawn(struct exec_ctx *c, int pid_pipe)
{
	kiwi_err err = { 0 };
	close(c->report[0]);
	/* Not the cgroup namespace yet: inside it, CLONE_INTO_CGROUP would
	 * move C2 from a cgroup outside the namespace's root, which the
	 * kernel refuses (ENOENT). C2 enters it from the init's cgroup. */
	if (setns(c->pidfd, (int)(c->ns_flags & ~(uint64_t)CLONE_NEWCGROUP)) < 0) {
		kiwi_error(&err, errno, "exec", "cannot join the container's namespaces");
		(void)!write(c->report[1], &err, sizeof(err));
		_exit(1);
	}
	int tmp = -1;
	pid_t pid = kiwi_spawn(CLONE_PARENT, c->cgroup, &tmp, &err);
	if (pid == 0)
		run_process(c);
	if (pid < 0)
		(void)!write(c->report[1], &err, sizeof(err));
	else
		(void)!write(pid_pipe, &pid, sizeof(pid));
	_exit(pid < 0);
}

static int prepare(struct exec_ctx *c, kiwi_err *err)
{
	if (kiwi_oci_state_load(c->o->root, c->o->id, &c->st, err) < 0)
		return -1;
	enum kiwi_oci_status s = kiwi_oci_state_status(c->o->root, &c->st, &c->pidfd);
	if (s == KIWI_OCI_STOPPED)
		return kiwi_error(err, EINVAL, "exec", "cannot exec in a stopped container");
	if (kiwi_oci_config_load(c->st.bundle, &c->cfg, err) < 0)
		return kiwi_error_wrap(err, "the container's bundle");
	if (build_process(c, err) < 0)
		return -1;
	if (kiwi_oci_compile_seccomp(c->cfg, &c->seccomp, err) < 0)
		return -1;
	namespaces_of(c->cfg, &c->ns_flags);
	c->cgroup = open_init_cgroup(c->st.pid, err);
	if (c->cgroup < 0 && err->step[0])
		return -1;
	if (c->o->cgroup && open_sub_cgroup(c, err) < 0)
		return -1;
	if (c->o->console_socket && (c->console = kiwi_connect_unix_nofollow(c->o->console_socket, "console", err)) < 0)
		return -1;
	if (pipe2(c->report, O_CLOEXEC) < 0)
		return kiwi_error(err, errno, "exec", "cannot create a pipe");
	return 0;
}

/* Starts C1 and learns C2's pid, or C1's or C2's error. */
static pid_t launch(struct exec_ctx *c, kiwi_err *err)
{
	int pp[2];
	if (pipe2(pp, O_CLOEXEC) < 0)
		return kiwi_error(err, errno, "exec", "cannot create a pipe");
	pid_t c1 = fork();
	if (c1 == 0) {
		close(pp[0]);
		join_and_spawn(c, pp[1]);
	}
	close(pp[1]);
	close(c->report[1]);
	c->report[1] = -1;
	if (c1 < 0) {
		close(pp[0]);
		return kiwi_error(err, errno, "exec", "cannot fork");
	}
	pid_t pid = -1;
	ssize_t n = read(pp[0], &pid, sizeof(pid));
	close(pp[0]);
	waitpid(c1, NULL, 0);
	kiwi_err report;
	ssize_t r = read(c->report[0], &report, sizeof(report));
	if (r == (ssize_t)sizeof(report)) {
		*err = report;
		if (pid > 0)
			waitpid(pid, NULL, 0);
		return -1;
	}
	if (n != (ssize_t)sizeof(pid) || pid <= 0)
		return kiwi_error(err, EPROTO, "exec", "lost the process on its way into the container");
	return pid;
}

static int write_pid_file(const char *path, pid_t pid, kiwi_err *err)
{
	char tmp[4200], text[16];
	snprintf(tmp, sizeof(tmp), "%s.kiwi-tmp", path);
	int n = snprintf(text, sizeof(text), "%d", (int)pid);
	return kiwi_write_file_replace(path, tmp, text, (size_t)n, 0644, "pid-file", err);
}

pid_t kiwi_oci_exec(const struct kiwi_oci_exec_opts *o, int *pidfd_out, kiwi_err *err)
{
	struct exec_ctx c = { .o = o, .pidfd = -1, .cgroup = -1, .console = -1, .report = { -1, -1 } };
	/* Nothing of this process may be read from inside: its copies (C1,
	 * C2) inherit the flag until C2's execve resets it. */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	pid_t pid = prepare(&c, err) < 0 ? -1 : launch(&c, err);
	if (pid > 0 && o->pid_file && write_pid_file(o->pid_file, pid, err) < 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		pid = -1;
	}
	if (pid > 0 && pidfd_out)
		*pidfd_out = (int)syscall(SYS_pidfd_open, pid, 0);
	int fds[] = { c.pidfd, c.cgroup, c.console, c.report[0], c.report[1] };
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(fds); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(c.env);
	kiwi_seccomp_free(c.seccomp);
	kiwi_oci_config_free(c.cfg);
	kiwi_oci_config_free(c.proc_cfg);
	kiwi_oci_state_clear(&c.st);
	return pid;
}
