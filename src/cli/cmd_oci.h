/* SPDX-License-Identifier: Apache-2.0 */
/* The OCI runtime command line: global flags, the log, and one function
 * per command (cmd_oci.c: dispatch, log, spec, features, state;
 * cmd_oci_life.c: create, start, run, kill, delete, ps; cmd_oci_exec.c). */
#ifndef KIWI_CMD_OCI_H
#define KIWI_CMD_OCI_H

#include <stdbool.h>

#include "kiwi/err.h"

struct kiwi_oci_globals {
	const char *root;          /* state root */
	bool debug;
};

extern struct kiwi_oci_globals kiwi_oci_g;

/* Writes a line to the --log file (json or text), or to stderr without
 * one; debug lines only with --debug. */
void kiwi_oci_log(const char *level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Reports a failed command: stderr and the log. Returns 1 (runc's status
 * for every failure of the runtime itself). */
int kiwi_oci_fail(const kiwi_err *err);
int kiwi_oci_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void kiwi_oci_note(const char *msg);
void kiwi_oci_warn(const char *msg);

int kiwi_oci_cmd_create(int argc, char **argv);
int kiwi_oci_cmd_start(int argc, char **argv);
int kiwi_oci_cmd_run(int argc, char **argv);
int kiwi_oci_cmd_kill(int argc, char **argv);
int kiwi_oci_cmd_delete(int argc, char **argv);
int kiwi_oci_cmd_ps(int argc, char **argv);
int kiwi_oci_cmd_exec(int argc, char **argv);
/* Waits for the child behind pidfd, forwarding the usual signals to it;
 * returns its exit status, or 128+N for signal N. */
int kiwi_oci_wait_forwarding(int pidfd);

#endif
