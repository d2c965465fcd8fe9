/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-rootfs's command line: one cmd_<verb>.c per subcommand, dispatched
 * from the table in main.c. Only this layer prints. */
#ifndef KIWI_ROOTFS_CLI_H
#define KIWI_ROOTFS_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "kiwi/err.h"
#include "kiwi/json.h"

#define KIWI_EXIT_FAIL 125

int cmd_unpack(int argc, char **argv);
int cmd_pack(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_gc(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);
int cmd_snapshot_check(int argc, char **argv);
int cmd_snapshot_restore(int argc, char **argv);

/* Prints "kiwi-rootfs: <step>: <msg>: <strerror>" (and, in --json mode, an
 * error event on stdout); returns KIWI_EXIT_FAIL. */
int cli_fail(const kiwi_err *err);
/* For bad command lines: one line naming what and why; returns 125. */
int cli_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cli_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "8G", "512M", "100k", "1234": binary multiples. */
bool cli_parse_size(const char *s, uint64_t *out);
/* Prints a writer's text and a newline on stdout. */
void cli_print_json(kiwi_json_writer *w);

extern bool cli_json;

#endif
