/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for a session exec's request as the leader reads it
 * (kiwi_exec_recv_request): the input is sent as one SOCK_SEQPACKET packet.
 * Properties: never crashes; an accepted request has argc >= 1 strings with
 * a non-empty program, envc strings and a cwd, all inside the packet. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kiwi/keeper.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int sp[2];
	if (size == 0 || size > KIWI_EXEC_REQUEST_MAX || socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp) < 0)
		return 0;
	if (send(sp[0], data, size, 0) != (ssize_t)size) {
		close(sp[0]);
		close(sp[1]);
		return 0;
	}
	struct kiwi_exec_request r;
	char *buf = NULL;
	kiwi_err err = { 0 };
	if (kiwi_exec_recv_request(sp[1], &r, &buf, &err) == 0) {
		if (!r.argv || !r.argv[0] || !r.argv[0][0] || !r.envp || !r.cwd)
			abort();
		for (char **v = r.argv; *v; v++)
			if (*v < buf || *v >= buf + size)
				abort();
		for (char **v = r.envp; *v; v++)
			(void)strlen(*v);
		(void)strlen(r.cwd);
		for (int i = 0; i < 3; i++)
			if (r.fds[i] >= 0)
				abort();  /* none were sent */
		free(r.argv);
		free(r.envp);
		free(buf);
	} else if (!err.step[0]) {
		abort();
	}
	close(sp[0]);
	close(sp[1]);
	return 0;
}
