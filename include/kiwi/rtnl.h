/* SPDX-License-Identifier: Apache-2.0 */
/* rtnetlink through libmnl: veth pairs, IPv4 addresses, routes, link state.
 * Never the ip command. Addresses are IPv4 in host byte order. Every request
 * asks for an ACK, and a group of requests goes out in one sendmsg. */
#ifndef KIWI_RTNL_H
#define KIWI_RTNL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiwi/err.h"

struct mnl_socket;

/* An rtnetlink socket bound to the caller's network namespace. */
struct mnl_socket *kiwi_rtnl_open(kiwi_err *err);
void kiwi_rtnl_closep(struct mnl_socket **nl);
#define _cleanup_rtnl_ __attribute__((cleanup(kiwi_rtnl_closep)))

/* Creates the pair NAME <-> PEER with PEER created directly in the network
 * namespace netns_fd (moving an end afterwards costs ~33 ms, creating it in
 * place ~0.8 ms). Returns NAME's ifindex. */
int kiwi_rtnl_veth_create(struct mnl_socket *nl, const char *name, const char *peer,
			  int netns_fd, kiwi_err *err);
/* The same with both ends' MAC addresses chosen (NULL: the kernel's). */
int kiwi_rtnl_veth_create_mac(struct mnl_socket *nl, const char *name, const char *peer, int netns_fd,
			      const uint8_t *mac, const uint8_t *peer_mac, kiwi_err *err);

/* An IPv6 address for kiwi_rtnl_configure(), network order. */
struct kiwi_rtnl_ip6 {
	uint8_t addr[16];
	unsigned prefix;
	uint8_t gateway[16];
	bool has_gateway;
	/* a permanent neighbour entry: the other end's address and MAC, so
	 * that no neighbour discovery is needed (its first solicitation is
	 * sometimes lost on a fresh veth, which costs a 1 s retransmit) */
	uint8_t neigh[16], neigh_mac[6];
	bool has_neigh;
};

/* One batch: ADDR/PREFIX on ifindex, no IPv6 link-local address, v6's
 * address (NULL: none; added without duplicate detection, so usable at
 * once), the link up, and default routes through gateway (!= 0) and
 * v6's gateway. */
int kiwi_rtnl_configure(struct mnl_socket *nl, int ifindex, uint32_t addr, unsigned prefix,
			uint32_t gateway, const struct kiwi_rtnl_ip6 *v6, kiwi_err *err);

/* True when this namespace has an IPv6 default route (the host can send
 * IPv6 off the machine). */
int kiwi_rtnl_has_default6(struct mnl_socket *nl, bool *has, kiwi_err *err);

/* Waits until the link is operationally up and has its queueing
 * discipline: until the kernel's linkwatch work has run, a fresh veth
 * drops what is sent on it (the first SYN, a lone UDP datagram). */
int kiwi_rtnl_wait_ready(struct mnl_socket *nl, int ifindex, int timeout_ms, kiwi_err *err);

/* Waits until this namespace delivers packets sent to addr (IPv6,
 * network order) to itself. An address added without duplicate
 * detection is a source at once, but its local route comes from the
 * kernel's address work, run later: until then an answer to it is
 * taken for someone else's and dropped (InAddrErrors), and the
 * connection waits a SYN retransmit (1 s; seen in 4 to 14 runs in 100
 * on a loaded host). */
int kiwi_rtnl_wait_local6(struct mnl_socket *nl, const uint8_t addr[16], int timeout_ms, kiwi_err *err);

/* One batch: ADDR/32 on ifindex and default routes straight out of it
 * (IPv4, and IPv6 when ipv6), no gateway: every destination is sent
 * through that link, from ADDR. */
int kiwi_rtnl_default_via(struct mnl_socket *nl, int ifindex, uint32_t addr, bool ipv6, kiwi_err *err);

/* Returns once link ifindex of this namespace is gone (deleted, or its
 * veth's peer's namespace died). */
int kiwi_rtnl_wait_link_gone(int ifindex, kiwi_err *err);
/* Deletes a link (and so a veth's peer). A missing link is not an error. */
int kiwi_rtnl_link_del(struct mnl_socket *nl, const char *name, kiwi_err *err);

/* The ifindex of NAME in this namespace, or -1 with err set. */
int kiwi_rtnl_link_index(struct mnl_socket *nl, const char *name, kiwi_err *err);

/* Every IPv4 address of this namespace, at most max of them. */
int kiwi_rtnl_addrs4(struct mnl_socket *nl, uint32_t *out, size_t max, size_t *n, kiwi_err *err);

/* Calls fn for every link whose name starts with prefix. */
int kiwi_rtnl_links_named(struct mnl_socket *nl, const char *prefix,
			  void (*fn)(const char *name, void *arg), void *arg, kiwi_err *err);

#endif
