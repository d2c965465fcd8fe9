/* SPDX-License-Identifier: Apache-2.0 */
/* The messages of one netlink datagram, framing checked. */
#ifndef KIWI_NLMSG_H
#define KIWI_NLMSG_H

#include <errno.h>
#include <linux/netlink.h>
#include <stddef.h>

/* Calls fn on each message of buf; -1 (errno EPROTO) on a message whose
 * length does not fit, or when fn returns < 0. Not mnl_cb_run(): libmnl
 * compares a message's length as a signed int, so a length of 2^31 or
 * more would be taken as fitting. The kernel never sends one, but what
 * the messages carry (queued or logged packets) is a sandbox's, and the
 * framing costs nothing to check. */
static inline int kiwi_nlmsg_each(const void *buf, size_t len, int (*fn)(const struct nlmsghdr *nlh, void *arg),
				  void *arg)
{
	const char *p = buf;
	while (len >= sizeof(struct nlmsghdr)) {
		const struct nlmsghdr *nlh = (const struct nlmsghdr *)p;
		if (nlh->nlmsg_len < sizeof(*nlh) || nlh->nlmsg_len > len) {
			errno = EPROTO;
			return -1;
		}
		if (fn(nlh, arg) < 0)
			return -1;
		size_t step = NLMSG_ALIGN(nlh->nlmsg_len);
		if (step >= len)
			break;
		p += step;
		len -= step;
	}
	return 0;
}

#endif
