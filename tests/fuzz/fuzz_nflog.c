/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the packet log reader: the input is one netlink
 * datagram as the kernel would queue it on the NFLOG socket (its packet
 * bytes come from the sandbox), read through kiwi_net_audit_drain exactly
 * as kiwi-run reads the audit's socket, then written out as the verdict's
 * fields. Properties: never crashes, the kept attempts stay within
 * KIWI_NET_AUDIT_KEEP and add up to no more than the count, and every
 * kept attempt is IPv4 or IPv6, and the egress audit classifies each
 * destination (a range name exactly when it is not public). */
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kiwi/egress.h"
#include "kiwi/json.h"
#include "kiwi/net_audit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sp) < 0)
		abort();
	int buf = 1 << 20;
	setsockopt(sp[0], SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	/* twice: the second one must land in the entries the first made */
	for (int i = 0; i < 2; i++)
		if (send(sp[0], data, size, 0) != (ssize_t)size)
			abort();
	struct kiwi_net_attempts a = { 0 };
	kiwi_err err = { 0 };
	kiwi_net_audit_drain(sp[1], &a, &err);
	close(sp[0]);
	close(sp[1]);
	if (a.n > KIWI_NET_AUDIT_KEEP)
		abort();
	uint64_t kept = 0;
	for (size_t i = 0; i < a.n; i++) {
		if (a.first[i].family != 4 && a.first[i].family != 6)
			abort();
		kept += a.first[i].count;
		/* the egress audit names each destination's range from the
		 * sandbox's bytes: a class always, a range name unless public */
		const char *range = NULL;
		enum kiwi_addr_class k = kiwi_egress_classify(a.first[i].family, a.first[i].dst, &range);
		if ((k == KIWI_ADDR_PUBLIC) != (range == NULL))
			abort();
	}
	if (kept > a.total)
		abort();
	kiwi_json_writer *w = kiwi_jw_new(false);
	if (!w)
		return 0;
	kiwi_jw_open_object(w);
	kiwi_net_audit_write_verdict(w, &a);
	kiwi_jw_close_object(w);
	kiwi_jw_free(w);
	return 0;
}
