/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-run list: the caller's running sandboxes, from the registry. */
#include "cli.h"
#include "kiwi/cleanup.h"
#include "kiwi/json.h"
#include "kiwi/registry.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

static const struct option list_options[] = {
	{ "json", no_argument, NULL, 'j' },
	{ "help", no_argument, NULL, 'h' },
	{ 0 },
};

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* "42s", "3m04s", "2h05m", "3d04h": two units at most, for a person. */
static void format_age(int64_t ns, char *buf, size_t len)
{
	long long s = ns > 0 ? ns / 1000000000 : 0;
	if (s < 60)
		snprintf(buf, len, "%llds", s);
	else if (s < 3600)
		snprintf(buf, len, "%lldm%02llds", s / 60, s % 60);
	else if (s < 86400)
		snprintf(buf, len, "%lldh%02lldm", s / 3600, s % 3600 / 60);
	else
		snprintf(buf, len, "%lldd%02lldh", s / 86400, s % 86400 / 3600);
}

static void print_table(const struct kiwi_registry_entry *v, size_t n, int64_t now)
{
	printf("%-12s  %-8s  %-10s  %-32s  %-7s  %-7s  %s\n", "ID", "PID", "PHASE", "CGROUP", "NETWORK",
	       "AGE", "COMMAND");
	for (size_t i = 0; i < n; i++) {
		char age[32];
		format_age(now - v[i].started_ns, age, sizeof(age));
		printf("%-12s  %-8d  %-10s  %-32s  %-7s  %-7s  %s\n", v[i].id, (int)v[i].pid,
		       v[i].phase[0] ? v[i].phase : "-", v[i].cgroup[0] ? v[i].cgroup : "-",
		       kiwi_registry_network_now(&v[i]),
		       age, v[i].command);
	}
}

static void iso_time(int64_t ns, char *buf, size_t len)
{
	time_t s = (time_t)(ns / 1000000000);
	struct tm tm;
	gmtime_r(&s, &tm);
	size_t o = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + o, len - o, ".%06lldZ", (long long)(ns % 1000000000 / 1000));
}

static int print_json(const struct kiwi_registry_entry *v, size_t n, int64_t now)
{
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
	if (!w)
		return -1;
	kiwi_jw_open_array(w);
	for (size_t i = 0; i < n; i++) {
		char started[64];
		iso_time(v[i].started_ns, started, sizeof(started));
		kiwi_jw_open_object(w);
		kiwi_jw_key(w, "id");
		kiwi_jw_string(w, v[i].id);
		kiwi_jw_key(w, "pid");
		kiwi_jw_int(w, v[i].pid);
		kiwi_jw_key(w, "supervisor_pid");
		kiwi_jw_int(w, v[i].supervisor_pid);
		kiwi_jw_key(w, "uid");
		kiwi_jw_int(w, v[i].uid);
		kiwi_jw_key(w, "phase");
		kiwi_jw_string(w, v[i].phase[0] ? v[i].phase : NULL);
		kiwi_jw_key(w, "cgroup");
		kiwi_jw_string(w, v[i].cgroup[0] ? v[i].cgroup : NULL);
		kiwi_jw_key(w, "network");
		kiwi_jw_string(w, kiwi_registry_network_now(&v[i]));
		kiwi_jw_key(w, "command");
		kiwi_jw_string(w, v[i].command);
		kiwi_jw_key(w, "started");
		kiwi_jw_string(w, started);
		kiwi_jw_key(w, "age_s");
		kiwi_jw_fixed(w, (double)(now - v[i].started_ns) / 1e9, 3);
		kiwi_jw_close_object(w);
	}
	kiwi_jw_close_array(w);
	const char *text = kiwi_jw_text(w, NULL);
	if (!text)
		return -1;
	printf("%s\n", text);
	return 0;
}

int kiwi_cmd_list(int argc, char **argv)
{
	return kiwi_cli_list(argc, argv, false);
}

int kiwi_cli_list(int argc, char **argv, bool sessions_only)
{
	bool json = false;
	int c;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "+", list_options, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'h':
			if (sessions_only)
				printf("usage: kiwi-run session list [--json]\n\n"
				       "Lists the caller's sessions: id, pid, cgroup, network, age.\n"
				       "See kiwi-run-session(1).\n");
			else
				printf("usage: kiwi-run list [--json]\n\n"
				       "Lists the caller's running sandboxes: id, pid, phase, cgroup, network,\n"
				       "age and command. See kiwi-run(1).\n");
			return 0;
		default:
			return kiwi_cli_usage_error("list", "unknown option `%s`", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return kiwi_cli_usage_error("list", "unexpected argument `%s`", argv[optind]);
	kiwi_err err = { 0 };
	_cleanup_free_ struct kiwi_registry_entry *v = NULL;
	size_t n = 0;
	if (kiwi_registry_list(&v, &n, &err) < 0) {
		kiwi_cli_print_error(&err);
		return KIWI_EXIT_FAILED;
	}
	if (sessions_only) {
		size_t k = 0;
		for (size_t i = 0; i < n; i++)
			if (v[i].session)
				v[k++] = v[i];
		n = k;
	}
	int64_t now = now_ns();
	if (!json) {
		print_table(v, n, now);
		return 0;
	}
	if (print_json(v, n, now) < 0) {
		kiwi_error(&err, ENOMEM, "list", "cannot write the JSON");
		kiwi_cli_print_error(&err);
		return KIWI_EXIT_FAILED;
	}
	return 0;
}
