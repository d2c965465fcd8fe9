/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-rootfs: unpack, pack, inspect OCI images; manage the image cache. */
#include "cli.h"
#include "kiwi/cleanup.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool cli_json;

static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
} commands[] = {
	{ "unpack", cmd_unpack, "unpack LAYOUT[:TAG|@DIGEST] DEST | --cache LAYOUT[:TAG]" },
	{ "pack", cmd_pack, "pack DIR LAYOUT:TAG [--entrypoint ARG]... [--env K=V]..." },
	{ "inspect", cmd_inspect, "inspect LAYOUT[:TAG|@DIGEST]" },
	{ "gc", cmd_gc, "gc [--cache-dir DIR] [--older-than DAYS]" },
	{ "snapshot", cmd_snapshot, "snapshot [--base REF] --tree FD:PREFIX... LAYOUT:TAG (kiwi-run's)" },
	{ "snapshot-check", cmd_snapshot_check, "snapshot-check LAYOUT:TAG" },
	{ "snapshot-restore", cmd_snapshot_restore, "snapshot-restore --root FD --map FROM=TO... --blob FD ... (kiwi-run's)" },
};

int cli_fail(const kiwi_err *err)
{
	char buf[1024];
	kiwi_error_format(err, buf, sizeof(buf));
	fprintf(stderr, "kiwi-rootfs: %s\n", buf);
	if (cli_json) {
		_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
		if (w) {
			kiwi_jw_open_object(w);
			kiwi_jw_key(w, "event");
			kiwi_jw_string(w, "error");
			kiwi_jw_key(w, "step");
			kiwi_jw_string(w, err->step);
			kiwi_jw_key(w, "message");
			kiwi_jw_string(w, buf);
			kiwi_jw_close_object(w);
			cli_print_json(w);
		}
	}
	return KIWI_EXIT_FAIL;
}

int cli_usage(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("kiwi-rootfs: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputs(" (see kiwi-rootfs --help)\n", stderr);
	va_end(ap);
	return KIWI_EXIT_FAIL;
}

void cli_note(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("kiwi-rootfs: note: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

bool cli_parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return false;
	static const char units[] = "KMGT";
	unsigned shift = 0;
	if (*end) {
		const char *u = strchr(units, *end & ~0x20);
		if (!u || (end[1] && strcmp(end + 1, "iB") && strcmp(end + 1, "B")))
			return false;
		shift = 10 * (unsigned)(u - units + 1);
	}
	if (shift && v > (~0ULL >> shift))
		return false;
	*out = v << shift;
	return *out > 0;
}

void cli_print_json(kiwi_json_writer *w)
{
	size_t len;
	const char *text = kiwi_jw_text(w, &len);
	fwrite(text, 1, len, stdout);
	fputc('\n', stdout);
	fflush(stdout);
}

static void usage(FILE *f)
{
	fputs("usage: kiwi-rootfs COMMAND [OPTIONS] ...\n\ncommands:\n", f);
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(commands); i++)
		fprintf(f, "  %s\n", commands[i].summary);
	fputs("\nsee kiwi-rootfs(1) for the options of each command\n", f);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage(stderr), KIWI_EXIT_FAIL;
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
		return usage(stdout), 0;
	if (!strcmp(argv[1], "--version"))
		return puts("kiwi-rootfs " KIWI_VERSION), 0;
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(commands); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	return cli_usage("unknown command `%s`", argv[1]);
}
