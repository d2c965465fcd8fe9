/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-run exec: a process in a running container, with runc's flags. */
#include "cli.h"
#include "cmd_oci.h"
#include "kiwi/cleanup.h"
#include "kiwi/oci_runtime.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
	E_CONSOLE = 0x100,
	E_PID_FILE,
	E_PRESERVE_FDS,
	E_NO_NEW_PRIVS,
	E_IGNORED,
	E_CGROUP,
};

static const struct option exec_options[] = {
	{ "console-socket", required_argument, NULL, E_CONSOLE },
	{ "cwd", required_argument, NULL, 'w' },
	{ "env", required_argument, NULL, 'e' },
	{ "tty", no_argument, NULL, 't' },
	{ "user", required_argument, NULL, 'u' },
	{ "additional-gids", required_argument, NULL, 'g' },
	{ "process", required_argument, NULL, 'p' },
	{ "detach", no_argument, NULL, 'd' },
	{ "pid-file", required_argument, NULL, E_PID_FILE },
	{ "no-new-privs", no_argument, NULL, E_NO_NEW_PRIVS },
	{ "cap", required_argument, NULL, 'c' },
	{ "preserve-fds", required_argument, NULL, E_PRESERVE_FDS },
	{ "cgroup", required_argument, NULL, E_CGROUP },
	/* Labels of LSMs kiwi-run does not drive, and a state it has not. */
	{ "process-label", required_argument, NULL, E_IGNORED },
	{ "apparmor", required_argument, NULL, E_IGNORED },
	{ "ignore-paused", no_argument, NULL, E_IGNORED },
	{ 0 },
};

struct exec_cli {
	struct kiwi_oci_exec_opts o;
	char **env, **caps;
	size_t n_env;
	bool detach;
};

static int push(char ***list, size_t *n, char *item)
{
	char **more = realloc(*list, (*n + 2) * sizeof(**list));
	if (!more)
		return -1;
	more[(*n)++] = item;
	more[*n] = NULL;
	*list = more;
	return 0;
}

static int parse_gid(struct exec_cli *a, const char *s)
{
	char *end;
	unsigned long g = strtoul(s, &end, 10);
	if (!s[0] || *end || g >= UINT32_MAX)
		return kiwi_oci_usage("exec", "--additional-gids `%s` is not a gid", s);
	uint32_t *more = realloc(a->o.gids, (a->o.n_gids + 1) * sizeof(*more));
	if (!more)
		return kiwi_oci_usage("exec", "out of memory");
	more[a->o.n_gids++] = (uint32_t)g;
	a->o.gids = more;
	return 0;
}

static int parse_exec(int argc, char **argv, struct exec_cli *a)
{
	int c;
	opterr = 0;
	while ((c = getopt_long_only(argc, argv, "+w:e:tu:g:p:dc:", exec_options, NULL)) != -1) {
		switch (c) {
		case E_CONSOLE: a->o.console_socket = optarg; break;
		case 'w': a->o.cwd = optarg; break;
		case 'e':
			if (push(&a->env, &a->n_env, optarg) < 0)
				return kiwi_oci_usage("exec", "out of memory");
			break;
		case 't': a->o.tty = true; break;
		case 'u': a->o.user = optarg; break;
		case 'g':
			if (parse_gid(a, optarg))
				return 1;
			break;
		case 'p': a->o.process_file = optarg; break;
		case 'd': a->detach = true; break;
		case E_PID_FILE: a->o.pid_file = optarg; break;
		case E_NO_NEW_PRIVS: a->o.no_new_privs = true; break;
		case 'c':
			if (push(&a->caps, &a->o.n_caps, optarg) < 0)
				return kiwi_oci_usage("exec", "out of memory");
			break;
		case E_PRESERVE_FDS: {
			char *end;
			long n = strtol(optarg, &end, 10);
			if (!optarg[0] || *end || n < 0 || n > 65536)
				return kiwi_oci_usage("exec", "--preserve-fds `%s` is not a count of fds", optarg);
			a->o.preserve_fds = (int)n;
			break;
		}
		case E_CGROUP: a->o.cgroup = optarg; break;
		case E_IGNORED:
			kiwi_oci_log("debug", "exec: `%s` is ignored", argv[optind - 1]);
			break;
		default:
			return kiwi_oci_usage("exec", "unknown option `%s`", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return kiwi_oci_usage("exec", "needs a container id");
	a->o.id = argv[optind];
	a->o.args = argv + optind + 1;
	a->o.env = a->env;
	a->o.caps = a->caps;
	return 0;
}

/* The process started and, unless detached, waited for: its status, or 1
 * when it could not start. pidfd lives here, not in kiwi_oci_cmd_exec:
 * there a goto past its initialisation left its cleanup closing whatever
 * the stack held when the arguments were bad. */
static int start_exec(struct exec_cli *a)
{
	kiwi_err err = { 0 };
	_cleanup_close_ int pidfd = -1;
	if (kiwi_oci_exec(&a->o, &pidfd, &err) < 0) {
		kiwi_oci_fail(&err);
		return 1;
	}
	return a->detach ? 0 : kiwi_oci_wait_forwarding(pidfd);
}

int kiwi_oci_cmd_exec(int argc, char **argv)
{
	struct exec_cli a = { .o = { .root = kiwi_oci_g.root } };
	int status = parse_exec(argc, argv, &a) ? 1 : start_exec(&a);
	free(a.env);
	free(a.caps);
	free(a.o.gids);
	return status;
}
