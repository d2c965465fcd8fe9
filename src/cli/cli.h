/* SPDX-License-Identifier: Apache-2.0 */
#ifndef KIWI_CLI_H
#define KIWI_CLI_H

#include <stdbool.h>

#include "kiwi/err.h"

/* Exit statuses kiwi-run itself uses (the podman/docker convention). */
#define KIWI_EXIT_FAILED 125
#define KIWI_EXIT_CANNOT_EXEC 126
#define KIWI_EXIT_NOT_FOUND 127

/* One subcommand: argv[0] is its name. Returns the process exit status. */
int kiwi_cmd_run(int argc, char **argv);
int kiwi_cmd_gc(int argc, char **argv);
int kiwi_cmd_phase(int argc, char **argv);
int kiwi_cmd_plan(int argc, char **argv);
int kiwi_cmd_list(int argc, char **argv);
int kiwi_cmd_kill(int argc, char **argv);
int kiwi_cmd_doctor(int argc, char **argv);
int kiwi_cmd_policy(int argc, char **argv);
/* The OCI runtime command line (cmd_oci.c): argv is kiwi-run's own, global
 * flags first. kiwi_cli_is_oci() says whether argv asks for it. */
int kiwi_cmd_oci(int argc, char **argv);
bool kiwi_cli_is_oci(int argc, char **argv);
int kiwi_cmd_shell(int argc, char **argv);
int kiwi_cmd_session(int argc, char **argv);
/* list's table or JSON, of sessions only when asked (cmd_list.c). */
int kiwi_cli_list(int argc, char **argv, bool sessions_only);

/* Prints "kiwi-run: <step>: <reason>" once, on stderr. */
void kiwi_cli_print_error(const kiwi_err *err);
/* Prints a usage error for a subcommand and returns KIWI_EXIT_FAILED. */
int kiwi_cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
