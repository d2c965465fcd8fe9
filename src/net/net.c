/* SPDX-License-Identifier: Apache-2.0 */
#include "kiwi/net.h"

#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/rtnetlink.h>
#include <time.h>

/* lo is always the first device of a network namespace (LOOPBACK_IFINDEX). */
#define LOOPBACK_IFINDEX 1

static void mnl_socket_closep(struct mnl_socket **nl)
{
	if (*nl)
		mnl_socket_close(*nl);
}

int kiwi_net_loopback_up(kiwi_err *err)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	__attribute__((cleanup(mnl_socket_closep))) struct mnl_socket *nl = mnl_socket_open(NETLINK_ROUTE);
	if (!nl || mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0)
		return kiwi_error(err, errno, "net", "cannot open an rtnetlink socket");

	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_NEWLINK;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = (unsigned)time(NULL);
	struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	ifm->ifi_index = LOOPBACK_IFINDEX;
	ifm->ifi_flags = IFF_UP;
	ifm->ifi_change = IFF_UP;

	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return kiwi_error(err, errno, "net", "cannot ask for lo to come up");
	ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
	if (n < 0 || mnl_cb_run(buf, (size_t)n, nlh->nlmsg_seq, mnl_socket_get_portid(nl), NULL, NULL) < 0)
		return kiwi_error(err, errno, "net", "cannot bring lo up");
	return 0;
}
