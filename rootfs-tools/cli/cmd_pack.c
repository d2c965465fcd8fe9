/* SPDX-License-Identifier: Apache-2.0 */
#include "cli.h"
int cmd_pack(int argc, char **argv)
{
	(void)argc; (void)argv;
	return cli_usage("todo");
}
