/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-run doctor: checks the host, one line per check, or one JSON object. */
#include "cli.h"
#include "kiwi/cleanup.h"
#include "kiwi/doctor.h"
#include "kiwi/json.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

static const struct option doctor_options[] = {
	{ "json", no_argument, NULL, 'j' },
	{ "fix", no_argument, NULL, 'f' },
	{ "help", no_argument, NULL, 'h' },
	{ 0 },
};

static void print_text(const struct kiwi_check_result *r, size_t n, bool ok)
{
	for (size_t i = 0; i < n; i++)
		printf("%-4s  %-13s  %s%s%s\n", kiwi_check_status_name(r[i].status), r[i].name, r[i].detail,
		       r[i].fix[0] ? "; fix: " : "", r[i].fix);
	printf("%s\n", ok ? "kiwi-run can run its default sandbox here"
			  : "kiwi-run cannot run its default sandbox here: see the `fail` lines");
}

static int print_json(const struct kiwi_check_result *r, size_t n, bool ok)
{
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
	if (!w)
		return -1;
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "ok");
	kiwi_jw_bool(w, ok);
	kiwi_jw_key(w, "checks");
	kiwi_jw_open_array(w);
	for (size_t i = 0; i < n; i++) {
		kiwi_jw_open_object(w);
		kiwi_jw_key(w, "name");
		kiwi_jw_string(w, r[i].name);
		kiwi_jw_key(w, "status");
		kiwi_jw_string(w, kiwi_check_status_name(r[i].status));
		kiwi_jw_key(w, "required");
		kiwi_jw_bool(w, r[i].required);
		kiwi_jw_key(w, "detail");
		kiwi_jw_string(w, r[i].detail);
		kiwi_jw_key(w, "fix");
		kiwi_jw_string(w, r[i].fix[0] ? r[i].fix : NULL);
		kiwi_jw_close_object(w);
	}
	kiwi_jw_close_array(w);
	kiwi_jw_close_object(w);
	const char *text = kiwi_jw_text(w, NULL);
	if (!text)
		return -1;
	printf("%s\n", text);
	return 0;
}

int kiwi_cmd_doctor(int argc, char **argv)
{
	bool json = false, fix = false;
	int c;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "+", doctor_options, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'f':
			fix = true;
			break;
		case 'h':
			printf("usage: kiwi-run doctor [--json] [--fix]\n\n"
			       "Checks what kiwi-run needs from this host and says how to fix what\n"
			       "does not work. Exits 0 when a default run works here, 1 when not.\n"
			       "--fix (root) first adds kiwi's id range to /etc/subuid and /etc/subgid.\n"
			       "See kiwi-run-doctor(1).\n");
			return 0;
		default:
			return kiwi_cli_usage_error("doctor", "unknown option `%s`", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return kiwi_cli_usage_error("doctor", "unexpected argument `%s`", argv[optind]);
	if (fix) {
		kiwi_err e = { 0 };
		if (kiwi_doctor_fix(stdout, &e) < 0) {
			kiwi_cli_print_error(&e);
			return KIWI_EXIT_FAILED;
		}
	}
	size_t n = kiwi_doctor_count();
	_cleanup_free_ struct kiwi_check_result *r = calloc(n, sizeof(*r));
	if (!r)
		return KIWI_EXIT_FAILED;
	fflush(stdout);   /* the checks fork: nothing buffered may be written twice */
	bool ok = kiwi_doctor_run(r);
	if (!json)
		print_text(r, n, ok);
	else if (print_json(r, n, ok) < 0)
		return KIWI_EXIT_FAILED;
	return ok ? 0 : 1;
}
