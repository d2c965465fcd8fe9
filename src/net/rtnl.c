/* SPDX-License-Identifier: Apache-2.0 */
#include "kiwi/rtnl.h"
#include "kiwi/cleanup.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Large enough for any single request here and for one ACK or dump part. */
#define RTNL_BUF 8192

static uint32_t next_seq(void)
{
	static uint32_t seq;
	if (!seq)
		seq = (uint32_t)time(NULL) << 8;
	return ++seq;
}

struct mnl_socket *kiwi_rtnl_open(kiwi_err *err)
{
	struct mnl_socket *nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
	if (!nl) {
		kiwi_error(err, errno, "rtnetlink", "cannot open an rtnetlink socket");
		return NULL;
	}
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		kiwi_error(err, errno, "rtnetlink", "cannot bind an rtnetlink socket");
		mnl_socket_close(nl);
		return NULL;
	}
	return nl;
}

void kiwi_rtnl_closep(struct mnl_socket **nl)
{
	if (*nl)
		mnl_socket_close(*nl);
}

static struct nlmsghdr *put_request(char *buf, uint16_t type, uint16_t flags)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
	nlh->nlmsg_seq = next_seq();
	return nlh;
}

/* A link request for index, or for name when index is 0. */
static struct nlmsghdr *put_link(char *buf, uint16_t type, uint16_t flags, int index, const char *name)
{
	struct nlmsghdr *nlh = put_request(buf, type, flags);
	struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	ifm->ifi_index = index;
	if (name)
		mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	if (type == RTM_GETLINK)
		mnl_attr_put_u32(nlh, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
	return nlh;
}

/* Sends len bytes holding n requests numbered from seq0 and waits for all
 * n ACKs. rtnetlink goes on after a failed request and ACKs every one,
 * so the first failure is reported with its index in *failed. */
static int talk(struct mnl_socket *nl, const void *buf, size_t len, uint32_t seq0, unsigned n,
		unsigned *failed)
{
	char rbuf[RTNL_BUF];
	int first_errno = 0;
	if (mnl_socket_sendto(nl, buf, len) < 0)
		return -1;
	for (unsigned acked = 0; acked < n;) {
		ssize_t got = mnl_socket_recvfrom(nl, rbuf, sizeof(rbuf));
		if (got < 0)
			return -1;
		int left = (int)got;
		for (struct nlmsghdr *h = (struct nlmsghdr *)rbuf; mnl_nlmsg_ok(h, left);
		     h = mnl_nlmsg_next(h, &left)) {
			if (h->nlmsg_type != NLMSG_ERROR || h->nlmsg_seq - seq0 >= n)
				continue;
			const struct nlmsgerr *e = mnl_nlmsg_get_payload(h);
			if (e->error && !first_errno) {
				first_errno = -e->error;
				if (failed)
					*failed = h->nlmsg_seq - seq0;
			}
			acked++;
		}
	}
	errno = first_errno;
	return first_errno ? -1 : 0;
}

/* IPv6 off on a link: no link-local address, so no router solicitation or
 * MLD report ever leaves the sandbox (they would fill the audit), and no
 * fe80:: path from the sandbox to the host exists at all. */
static void put_no_ipv6(struct nlmsghdr *nlh)
{
	struct nlattr *spec = mnl_attr_nest_start(nlh, IFLA_AF_SPEC);
	struct nlattr *in6 = mnl_attr_nest_start(nlh, AF_INET6);
	mnl_attr_put_u8(nlh, IFLA_INET6_ADDR_GEN_MODE, IN6_ADDR_GEN_MODE_NONE);
	mnl_attr_nest_end(nlh, in6);
	mnl_attr_nest_end(nlh, spec);
}

int kiwi_rtnl_veth_create(struct mnl_socket *nl, const char *name, const char *peer,
			  int netns_fd, kiwi_err *err)
{
	return kiwi_rtnl_veth_create_mac(nl, name, peer, netns_fd, NULL, NULL, err);
}

int kiwi_rtnl_veth_create_mac(struct mnl_socket *nl, const char *name, const char *peer, int netns_fd,
			      const uint8_t *mac, const uint8_t *peer_mac, kiwi_err *err)
{
	char buf[RTNL_BUF] = { 0 };
	struct nlmsghdr *nlh = put_link(buf, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, 0, name);
	if (mac)
		mnl_attr_put(nlh, IFLA_ADDRESS, 6, mac);
	struct nlattr *info = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
	mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
	struct nlattr *data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
	struct nlattr *peer_nest = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
	/* The peer's attributes follow a struct ifinfomsg of their own. */
	nlh->nlmsg_len += MNL_ALIGN(sizeof(struct ifinfomsg));
	mnl_attr_put_strz(nlh, IFLA_IFNAME, peer);
	mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)netns_fd);
	if (peer_mac)
		mnl_attr_put(nlh, IFLA_ADDRESS, 6, peer_mac);
	mnl_attr_nest_end(nlh, peer_nest);
	mnl_attr_nest_end(nlh, data);
	mnl_attr_nest_end(nlh, info);

	if (talk(nl, nlh, nlh->nlmsg_len, nlh->nlmsg_seq, 1, NULL) < 0)
		return kiwi_error(err, errno, "veth", "cannot create veth `%s` with peer `%s`", name, peer);
	return kiwi_rtnl_link_index(nl, name, err);
}

static void put_setlink_up(char *buf, int ifindex)
{
	struct nlmsghdr *nlh = put_link(buf, RTM_NEWLINK, 0, ifindex, NULL);
	struct ifinfomsg *ifm = mnl_nlmsg_get_payload(nlh);
	ifm->ifi_flags = IFF_UP;
	ifm->ifi_change = IFF_UP;
}

static void put_addr(char *buf, int ifindex, uint32_t addr, unsigned prefix)
{
	struct nlmsghdr *nlh = put_request(buf, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL);
	struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = AF_INET;
	ifa->ifa_prefixlen = (unsigned char)prefix;
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	ifa->ifa_index = (unsigned)ifindex;
	uint32_t be = htonl(addr);
	mnl_attr_put_u32(nlh, IFA_LOCAL, be);
	mnl_attr_put_u32(nlh, IFA_ADDRESS, be);
}

/* A default route through gateway (4 or 16 bytes, network order). */
static void put_default_route(char *buf, uint8_t family, int ifindex, const void *gateway)
{
	struct nlmsghdr *nlh = put_request(buf, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL);
	struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
	rtm->rtm_family = family;
	rtm->rtm_table = RT_TABLE_MAIN;
	rtm->rtm_protocol = RTPROT_STATIC;
	rtm->rtm_scope = RT_SCOPE_UNIVERSE;
	rtm->rtm_type = RTN_UNICAST;
	mnl_attr_put(nlh, RTA_GATEWAY, family == AF_INET6 ? 16 : 4, gateway);
	mnl_attr_put_u32(nlh, RTA_OIF, (uint32_t)ifindex);
}

/* Sends a batch of n requests and names the first that failed, from what. */
static int send_steps(struct mnl_socket *nl, struct mnl_nlmsg_batch *b, uint32_t seq0, unsigned n,
		      const char *const *what, int ifindex, kiwi_err *err)
{
	unsigned failed = 0;
	int r = talk(nl, mnl_nlmsg_batch_head(b), mnl_nlmsg_batch_size(b), seq0, n, &failed);
	mnl_nlmsg_batch_stop(b);
	if (r < 0)
		return kiwi_error(err, errno, "netconfig", "cannot %s on link %d", what[failed < n ? failed : 0],
				  ifindex);
	return 0;
}

static void put_addr6(char *buf, int ifindex, const struct kiwi_rtnl_ip6 *v6)
{
	struct nlmsghdr *nlh = put_request(buf, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL);
	struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = AF_INET6;
	ifa->ifa_prefixlen = (unsigned char)v6->prefix;
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	ifa->ifa_index = (unsigned)ifindex;
	/* no duplicate detection: the /126 is ours, and a tentative address
	 * would make the first second's connections fail */
	ifa->ifa_flags = IFA_F_NODAD;
	mnl_attr_put(nlh, IFA_LOCAL, 16, v6->addr);
	mnl_attr_put(nlh, IFA_ADDRESS, 16, v6->addr);
}

static void put_neigh6(char *buf, int ifindex, const struct kiwi_rtnl_ip6 *v6)
{
	struct nlmsghdr *nlh = put_request(buf, RTM_NEWNEIGH, NLM_F_CREATE | NLM_F_REPLACE);
	struct ndmsg *ndm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ndm));
	ndm->ndm_family = AF_INET6;
	ndm->ndm_ifindex = ifindex;
	ndm->ndm_state = NUD_PERMANENT;
	mnl_attr_put(nlh, NDA_DST, 16, v6->neigh);
	mnl_attr_put(nlh, NDA_LLADDR, 6, v6->neigh_mac);
}

int kiwi_rtnl_configure(struct mnl_socket *nl, int ifindex, uint32_t addr, unsigned prefix,
			uint32_t gateway, const struct kiwi_rtnl_ip6 *v6, kiwi_err *err)
{
	static const char *const names[] = { "turn IPv6 link-local off", "add the address",
					     "bring the link up", "add the IPv6 address",
					     "add the default route", "add the IPv6 neighbour",
					     "add the IPv6 default route" };
	char buf[RTNL_BUF] = { 0 };
	const char *what[KIWI_ARRAY_SIZE(names)];
	unsigned n = 0;
	struct mnl_nlmsg_batch *b = mnl_nlmsg_batch_start(buf, sizeof(buf));
	uint32_t seq0 = 0;
	bool has6 = access("/proc/sys/net/ipv6", F_OK) == 0;
	/* Link-local off while the link is still down. The IPv4 stack adds
	 * the connected route only once the link is up, and the gateways
	 * need them: address, up, then the routes. The IPv6 address comes
	 * after up: added to a link that is down, it waits, tentative, for a
	 * random part of rtr_solicit_delay (up to 1 s) once the link comes
	 * up, nodad or not, and the first packets' answers are lost. */
	for (unsigned step = 0; step < KIWI_ARRAY_SIZE(names); step++) {
		char *m = mnl_nlmsg_batch_current(b);
		if (step == 0 && has6)
			put_no_ipv6(put_link(m, RTM_NEWLINK, 0, ifindex, NULL));
		else if (step == 1)
			put_addr(m, ifindex, addr, prefix);
		else if (step == 2)
			put_setlink_up(m, ifindex);
		else if (step == 3 && has6 && v6)
			put_addr6(m, ifindex, v6);
		else if (step == 4 && gateway)
			put_default_route(m, AF_INET, ifindex, &(uint32_t){ htonl(gateway) });
		else if (step == 5 && has6 && v6 && v6->has_neigh)
			put_neigh6(m, ifindex, v6);
		else if (step == 6 && has6 && v6 && v6->has_gateway)
			put_default_route(m, AF_INET6, ifindex, v6->gateway);
		else
			continue;
		what[n++] = names[step];
		if (!seq0)
			seq0 = ((struct nlmsghdr *)m)->nlmsg_seq;
		mnl_nlmsg_batch_next(b);
	}
	return send_steps(nl, b, seq0, n, what, ifindex, err);
}

/* A default route of family straight out of ifindex, with no gateway:
 * what `ip route add default dev NAME` asks for. */
static void put_device_default_route(char *buf, uint8_t family, int ifindex)
{
	struct nlmsghdr *nlh = put_request(buf, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL);
	struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
	rtm->rtm_family = family;
	rtm->rtm_table = RT_TABLE_MAIN;
	rtm->rtm_protocol = RTPROT_STATIC;
	rtm->rtm_scope = family == AF_INET ? RT_SCOPE_LINK : RT_SCOPE_UNIVERSE;
	rtm->rtm_type = RTN_UNICAST;
	mnl_attr_put_u32(nlh, RTA_OIF, (uint32_t)ifindex);
}

int kiwi_rtnl_default_via(struct mnl_socket *nl, int ifindex, uint32_t addr, bool ipv6, kiwi_err *err)
{
	char buf[RTNL_BUF] = { 0 };
	struct mnl_nlmsg_batch *b = mnl_nlmsg_batch_start(buf, sizeof(buf));
	static const char *const what[] = { "add the address", "add the IPv4 default route",
					     "add the IPv6 default route" };
	unsigned n = ipv6 ? 3 : 2;
	uint32_t seq0 = 0;
	for (unsigned step = 0; step < n; step++) {
		char *m = mnl_nlmsg_batch_current(b);
		if (step == 0)
			put_addr(m, ifindex, addr, 32);
		else
			put_device_default_route(m, step == 1 ? AF_INET : AF_INET6, ifindex);
		if (!seq0)
			seq0 = ((struct nlmsghdr *)m)->nlmsg_seq;
		mnl_nlmsg_batch_next(b);
	}
	return send_steps(nl, b, seq0, n, what, ifindex, err);
}

int kiwi_rtnl_link_del(struct mnl_socket *nl, const char *name, kiwi_err *err)
{
	char buf[RTNL_BUF] = { 0 };
	struct nlmsghdr *nlh = put_link(buf, RTM_DELLINK, 0, 0, name);
	if (talk(nl, nlh, nlh->nlmsg_len, nlh->nlmsg_seq, 1, NULL) < 0 && errno != ENODEV)
		return kiwi_error(err, errno, "veth", "cannot delete link `%s`", name);
	return 0;
}

/* ---- queries ---- */

struct dump {
	int (*fn)(const struct nlmsghdr *nlh, void *arg);
	void *arg;
};

static int dump_cb(const struct nlmsghdr *nlh, void *data)
{
	const struct dump *d = data;
	return d->fn(nlh, d->arg);
}

/* Sends one request and runs fn on every reply until the kernel is done. */
static int query(struct mnl_socket *nl, struct nlmsghdr *nlh, int (*fn)(const struct nlmsghdr *, void *),
		 void *arg)
{
	char rbuf[RTNL_BUF];
	struct dump d = { fn, arg };
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return -1;
	uint32_t seq = nlh->nlmsg_seq, portid = mnl_socket_get_portid(nl);
	for (;;) {
		ssize_t got = mnl_socket_recvfrom(nl, rbuf, sizeof(rbuf));
		if (got < 0)
			return -1;
		int r = mnl_cb_run(rbuf, (size_t)got, seq, portid, dump_cb, &d);
		if (r <= MNL_CB_STOP)
			return r;
	}
}

static int link_index_cb(const struct nlmsghdr *nlh, void *arg)
{
	const struct ifinfomsg *ifm = mnl_nlmsg_get_payload(nlh);
	*(int *)arg = ifm->ifi_index;
	return MNL_CB_OK;
}

int kiwi_rtnl_link_index(struct mnl_socket *nl, const char *name, kiwi_err *err)
{
	char buf[RTNL_BUF] = { 0 };
	struct nlmsghdr *nlh = put_link(buf, RTM_GETLINK, 0, 0, name);
	int index = 0;
	if (query(nl, nlh, link_index_cb, &index) < 0 || index <= 0)
		return kiwi_error(err, index <= 0 && !errno ? ENODEV : errno, "netconfig",
				  "cannot find link `%s`", name);
	return index;
}

struct link_state {
	bool up, active;
};

static int link_state_cb(const struct nlmsghdr *nlh, void *arg)
{
	struct link_state *st = arg;
	const struct nlattr *attr;
	mnl_attr_for_each(attr, nlh, sizeof(struct ifinfomsg)) {
		if (mnl_attr_get_type(attr) == IFLA_OPERSTATE && mnl_attr_get_payload_len(attr) >= 1)
			st->up = mnl_attr_get_u8(attr) == IF_OPER_UP;
		else if (mnl_attr_get_type(attr) == IFLA_QDISC && mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) == 0)
			st->active = strcmp(mnl_attr_get_str(attr), "noop") != 0;
	}
	return MNL_CB_OK;
}

int kiwi_rtnl_wait_ready(struct mnl_socket *nl, int ifindex, int timeout_ms, kiwi_err *err)
{
	struct timespec start, now, pause = { 0, 100000 };
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		char buf[RTNL_BUF] = { 0 };
		struct nlmsghdr *nlh = put_link(buf, RTM_GETLINK, 0, ifindex, NULL);
		struct link_state st = { 0 };
		if (query(nl, nlh, link_state_cb, &st) < 0)
			return kiwi_error(err, errno, "netconfig", "cannot read the state of link %d", ifindex);
		if (st.up && st.active)
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 > timeout_ms)
			return kiwi_error(err, ETIMEDOUT, "netconfig", "link %d did not come up within %d ms",
					  ifindex, timeout_ms);
		nanosleep(&pause, NULL);
	}
}

static bool link_exists(struct mnl_socket *nl, int ifindex)
{
	char buf[RTNL_BUF] = { 0 };
	struct nlmsghdr *nlh = put_link(buf, RTM_GETLINK, 0, ifindex, NULL);
	int index = 0;
	return query(nl, nlh, link_index_cb, &index) == 0 || errno != ENODEV;
}

int kiwi_rtnl_wait_link_gone(int ifindex, kiwi_err *err)
{
	_cleanup_rtnl_ struct mnl_socket *ask = kiwi_rtnl_open(err);
	_cleanup_rtnl_ struct mnl_socket *events = ask ? mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC) : NULL;
	if (!events || mnl_socket_bind(events, RTMGRP_LINK, MNL_SOCKET_AUTOPID) < 0)
		return kiwi_error(err, errno, "netconfig", "cannot watch the links");
	/* subscribed first, then asked: a deletion in between is seen */
	bool gone = !link_exists(ask, ifindex);
	while (!gone) {
		char buf[RTNL_BUF];
		ssize_t got = recv(mnl_socket_get_fd(events), buf, sizeof(buf), 0);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			/* ENOBUFS: events were lost. Ask again, never assume:
			 * the caller removes a filter once we return. */
			struct timespec pause = { 0, 100 * 1000 * 1000 };
			if (errno != ENOBUFS)
				nanosleep(&pause, NULL);
			gone = !link_exists(ask, ifindex);
			continue;
		}
		int left = (int)got;
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; mnl_nlmsg_ok(h, left); h = mnl_nlmsg_next(h, &left))
			if (h->nlmsg_type == RTM_DELLINK &&
			    ((const struct ifinfomsg *)mnl_nlmsg_get_payload(h))->ifi_index == ifindex)
				gone = true;
	}
	return 0;
}

struct addrs {
	uint32_t *out;
	size_t max, n;
};

static int addr_cb(const struct nlmsghdr *nlh, void *arg)
{
	struct addrs *a = arg;
	const struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(nlh);
	if (ifa->ifa_family != AF_INET)
		return MNL_CB_OK;
	const struct nlattr *attr;
	mnl_attr_for_each(attr, nlh, sizeof(*ifa)) {
		if (mnl_attr_get_type(attr) != IFA_LOCAL || mnl_attr_get_payload_len(attr) != 4)
			continue;
		if (a->n < a->max)
			a->out[a->n] = ntohl(mnl_attr_get_u32(attr));
		a->n++;
	}
	return MNL_CB_OK;
}

int kiwi_rtnl_addrs4(struct mnl_socket *nl, uint32_t *out, size_t max, size_t *n, kiwi_err *err)
{
	char buf[RTNL_BUF] = { 0 };
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_GETADDR;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	nlh->nlmsg_seq = next_seq();
	struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = AF_INET;
	struct addrs a = { out, max, 0 };
	if (query(nl, nlh, addr_cb, &a) < 0)
		return kiwi_error(err, errno, "netconfig", "cannot list the host's addresses");
	if (a.n > max)
		return kiwi_error(err, E2BIG, "netconfig", "the host has more than %zu IPv4 addresses", max);
	*n = a.n;
	return 0;
}

static int default6_cb(const struct nlmsghdr *nlh, void *arg)
{
	const struct rtmsg *rtm = mnl_nlmsg_get_payload(nlh);
	if (rtm->rtm_family == AF_INET6 && rtm->rtm_dst_len == 0 && rtm->rtm_type == RTN_UNICAST &&
	    rtm->rtm_table == RT_TABLE_MAIN)
		*(bool *)arg = true;
	return MNL_CB_OK;
}

int kiwi_rtnl_has_default6(struct mnl_socket *nl, bool *has, kiwi_err *err)
{
	char buf[RTNL_BUF] = { 0 };
	*has = false;
	if (access("/proc/sys/net/ipv6", F_OK) < 0)
		return 0;
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_GETROUTE;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	nlh->nlmsg_seq = next_seq();
	struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
	rtm->rtm_family = AF_INET6;
	if (query(nl, nlh, default6_cb, has) < 0)
		return kiwi_error(err, errno, "netconfig", "cannot list the host's IPv6 routes");
	return 0;
}

static int local_cb(const struct nlmsghdr *nlh, void *arg)
{
	const struct rtmsg *rtm = mnl_nlmsg_get_payload(nlh);
	if (nlh->nlmsg_type == RTM_NEWROUTE && rtm->rtm_type == RTN_LOCAL)
		*(bool *)arg = true;
	return MNL_CB_OK;
}

int kiwi_rtnl_wait_local6(struct mnl_socket *nl, const uint8_t addr[16], int timeout_ms, kiwi_err *err)
{
	struct timespec start, now, pause = { 0, 100000 };
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		char buf[RTNL_BUF] = { 0 };
		struct nlmsghdr *nlh = put_request(buf, RTM_GETROUTE, 0);
		struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
		rtm->rtm_family = AF_INET6;
		rtm->rtm_dst_len = 128;
		mnl_attr_put(nlh, RTA_DST, 16, addr);
		bool local = false;
		/* no route yet (ENETUNREACH) is "not yet" too */
		if (query(nl, nlh, local_cb, &local) < 0 && errno != ENETUNREACH && errno != EHOSTUNREACH)
			return kiwi_error(err, errno, "netconfig", "cannot look up the route to an IPv6 address");
		if (local)
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 > timeout_ms)
			return kiwi_error(err, ETIMEDOUT, "netconfig", "an IPv6 address was not usable within %d ms",
					  timeout_ms);
		nanosleep(&pause, NULL);
	}
}

struct named {
	const char *prefix;
	void (*fn)(const char *name, void *arg);
	void *arg;
};

static int named_cb(const struct nlmsghdr *nlh, void *arg)
{
	const struct named *w = arg;
	const struct nlattr *attr;
	mnl_attr_for_each(attr, nlh, sizeof(struct ifinfomsg)) {
		if (mnl_attr_get_type(attr) != IFLA_IFNAME || mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) < 0)
			continue;
		const char *name = mnl_attr_get_str(attr);
		if (!strncmp(name, w->prefix, strlen(w->prefix)))
			w->fn(name, w->arg);
	}
	return MNL_CB_OK;
}

int kiwi_rtnl_links_named(struct mnl_socket *nl, const char *prefix,
			  void (*fn)(const char *name, void *arg), void *arg, kiwi_err *err)
{
	char buf[RTNL_BUF] = { 0 };
	struct nlmsghdr *nlh = put_link(buf, RTM_GETLINK, NLM_F_DUMP, 0, NULL);
	struct named w = { prefix, fn, arg };
	if (query(nl, nlh, named_cb, &w) < 0)
		return kiwi_error(err, errno, "netconfig", "cannot list links");
	return 0;
}
