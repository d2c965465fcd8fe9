/* SPDX-License-Identifier: Apache-2.0 */
/* A resolver asked directly, once, for the start-time check of
 * host_allowlist's names: the same upstream the name gate asks later
 * (--dns, else the host's resolv.conf), so that a name only that
 * resolver knows (a local one on loopback) passes the check too. The
 * messages are kiwi/dns.h's. */
#ifndef KIWI_DNS_CLIENT_H
#define KIWI_DNS_CLIENT_H

#include <stdint.h>

#include "kiwi/dns.h"
#include "kiwi/err.h"

/* The first IPv4 nameserver of resolv_conf; 0 when it has none. */
uint32_t kiwi_dns_system_resolver(const char *resolv_conf);
/* The A records of name from server (host byte order) on port 53: a few
 * tries, one second each. An answer with no address (NXDOMAIN, or none
 * of type A) is an error naming the name. */
int kiwi_dns_lookup(uint32_t server, const char *name, struct kiwi_dns_answer *a, kiwi_err *err);

#endif
