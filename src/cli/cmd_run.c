/* SPDX-License-Identifier: Apache-2.0 */
int kiwi_cmd_run(int argc, char **argv);
int kiwi_cmd_run(int argc, char **argv) { (void)argc; (void)argv; return 125; }
