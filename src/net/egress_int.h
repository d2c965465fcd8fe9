/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by egress.c (lifecycle), egress_config.c (parsing), egress_rules.c
 * (the nftables table) and egress_audit.c (nflog, verdict). */
#ifndef KIWI_EGRESS_INT_H
#define KIWI_EGRESS_INT_H

#include "kiwi/egress.h"
#include "kiwi/net_audit.h"
#include "kiwi/nft.h"

#include <pthread.h>

#define EGRESS_MAX_PINS 1024
#define EGRESS_MAX_HOST_ADDRS 1024
#define EGRESS_MAX_SUMMARY 64     /* entries of egress_blocked, of egress_allowed */
#define EGRESS_NEVER_RANGES 6
#define EGRESS_SPECIAL_RANGES 10
#define EGRESS_NEVER_RANGES6 13
#define EGRESS_SPECIAL_RANGES6 5
#define EGRESS_RULE_MAX 64

struct mnl_socket;

/* One destination of the verdict's summary. */
struct egress_dest {
	uint8_t family, proto;
	uint16_t port;
	uint8_t dst[16];
	uint64_t count;
	char rule[EGRESS_RULE_MAX];   /* the first seen */
	char name[KIWI_EGRESS_NAME_MAX + 1];  /* "" unknown */
};

struct egress_summary {
	struct egress_dest v[EGRESS_MAX_SUMMARY];
	size_t n;
	uint64_t other;               /* attempts whose destination did not fit */
};

/* Why the name gate's kernel path is not taken (kiwi_egress_tls_kernel_off). */
#define EGRESS_TLS_OFF_MAX 256

/* What one stretch of a session's life tried (kiwi_egress_tally_since):
 * the verdict's fields, as a whole run's, over its events alone. Plain
 * data: it crosses the session's socket to the exec's client. */
struct kiwi_egress_tally {
	uint32_t magic;
	struct egress_summary blocked, allowed;
	struct kiwi_net_attempts attempts;
	uint64_t lost;
	bool ipv6;                    /* the session's, as egress_ipv6 */
	char ipv6_off[KIWI_EGRESS_IPV6_OFF_MAX];
	char tls_kernel_off[EGRESS_TLS_OFF_MAX];
};

#define TALLY_MAGIC 0x6b657467u
/* egress_tally.c: the verdict's fields over these (each may be NULL). */
void kiwi_egress_write_fields(kiwi_json_writer *w, const struct egress_summary *blocked,
			      const struct egress_summary *allowed, uint64_t lost, const struct kiwi_net_attempts *attempts,
			      bool ipv6, const char *ipv6_off, const char *tls_kernel_off);

/* The events since a session's first mark, the newest EGRESS_RING kept:
 * an exec's tally is folded from them. */
#define EGRESS_RING 256
struct egress_event_copy {
	struct kiwi_egress_event ev;  /* rule and name point into the copy */
	char rule[EGRESS_RULE_MAX];
	char name[KIWI_EGRESS_NAME_MAX + 1];
};
struct egress_ring {
	struct egress_event_copy v[EGRESS_RING];
	uint64_t seq;                 /* events recorded so far; v[seq % EGRESS_RING] is next */
	uint64_t allowed, blocked;    /* and of those, each kind */
};

/* The sandboxes' IPv6 addresses: a unique local /96 of kiwi-run's whose
 * last 32 bits are the IPv4 block's (so one lock serves both): a /126
 * each, ::block+1 the host side, ::block+2 the sandbox. */
/* The host ends of the sandboxes' veths are named VETH_PREFIX<id>. */
#define EGRESS_VETH_PREFIX "kiwi"

/* Before 6.9 a sandbox's table dies with the socket that owns it, and
 * so with its keeper (or holder), while the veth may live on. A guard,
 * one table for the host, not owned, so never gone with a process, drops
 * whatever enters or leaves a kiwi veth unless the packet carries this
 * mark bit, which only the sandbox's own table sets (and the guard
 * clears again): no table, no traffic. 6.9 and later keep the table
 * (PERSIST) and need no guard. Not named kiwi_*: gc leaves it alone. */
#define EGRESS_GUARD_TABLE "kiwiguard"
#define EGRESS_GUARD_MARK 0x08000000u

#define EGRESS_POOL6 "fd6b:6977:6900::"
#define EGRESS_POOL6_PREFIX 96
#define EGRESS_PREFIX6 126

struct kiwi_egress {
	struct kiwi_egress_config cfg;
	uint32_t block;             /* the /30: block+1 host side, block+2 sandbox */
	bool ipv6;                  /* the sandbox gets an IPv6 address: the kernel has IPv6 */
	bool ipv6_out;              /* and IPv6 may leave it: the host has a route, or a CIDR allows */
	bool host_ipv6;             /* the host has an IPv6 default route */
	char ipv6_off[KIWI_EGRESS_IPV6_OFF_MAX];   /* why not ipv6_out, for the verdict */
	uint8_t pool6[16];
	uint8_t host6[16], sandbox6[16];
	char id[9];                 /* block in hex: names everything below */
	char host_if[16];
	int host_ifindex;
	char table[24];
	uint16_t group;             /* nflog group */
	int lock_fd, audit_file;
	char lock_path[64], hosts_path[64], resolv_path[64];
	bool veth_made, table_made;
	bool owned_only;            /* no PERSIST (before 6.9): the table dies with e->nft */
	pid_t holder;               /* keeps a copy of e->nft while the sandbox lives; 0: none */
	uint32_t host_addrs[EGRESS_MAX_HOST_ADDRS];
	size_t n_host_addrs;
	uint32_t pin_addrs[EGRESS_MAX_PINS];
	uint16_t pin_ports[EGRESS_MAX_PINS];
	size_t n_pins;
	struct mnl_socket *nflog;
	int log_fd;                 /* instead, through kiwi-helper: its log socket, handed over */
	struct mnl_socket *nft;     /* kept open: see kiwi_nft_open() */
	struct egress_summary blocked, allowed;
	struct kiwi_net_attempts attempts;   /* the network audit's fields, from the same events */
	uint64_t audit_lines;
	unsigned lost;
	struct egress_ring *ring;   /* NULL until the first mark (sessions only) */
	/* host_allowlist: the name gate, attached by the launcher (never by
	 * kiwi-helper, which has no gate code); ports 0: none */
	struct kiwi_egress_gate *gate;
	const struct egress_gate_ops *gate_ops;
	uint16_t gate_dns, gate_tcp;
	bool gate_kernel;           /* TLS on 443 through the gate's queue (root only) */
	uint16_t gate_queue;
	bool queue_compat;          /* queued through nft_compat's NFQUEUE (no CONFIG_NFT_QUEUE) */
	char tls_kernel_off[EGRESS_TLS_OFF_MAX];  /* wanted, not taken: why, for the verdict */
	pthread_mutex_t audit_lock; /* the gate's thread audits too */
};

struct egress_gate_ops {
	int (*start)(struct kiwi_egress_gate *g, kiwi_err *err);
	void (*close)(struct kiwi_egress_gate *g);
	/* the queue unbound and closed: the table does not use it */
	void (*unqueue)(struct kiwi_egress_gate *g);
};

size_t kiwi_egress_never_ranges(struct kiwi_ip4_range *out);
size_t kiwi_egress_special_ranges(struct kiwi_ip4_range *out);
/* egress_config.c: NULL when a sandbox may be given address a, else the
 * rule class that forbids it; host: this host's addresses. */
const char *kiwi_egress_forbidden(const struct kiwi_egress_config *c, const uint32_t *host, size_t n_host,
				  uint32_t a);
size_t kiwi_egress_never_ranges6(struct kiwi_ip6_range *out);
size_t kiwi_egress_special_ranges6(struct kiwi_ip6_range *out);
void kiwi_cidr6_bounds(const uint8_t *net, unsigned prefix, uint8_t *lo, uint8_t *hi);
bool kiwi_in_cidr6(const uint8_t *a, const uint8_t *net, unsigned prefix);

/* The nflog prefixes the table's log rules carry: the rule's class, or a
 * coarse one the audit names precisely from the address. */
#define EGRESS_LOG_NEVER "always_deny"
#define EGRESS_LOG_SPECIAL "not_allowed:special"

/* The resolver host_allowlist's names are asked of: --dns, else the
 * host's resolv.conf's first (0: none). */
uint32_t kiwi_egress_upstream(const struct kiwi_egress_config *c);

int kiwi_egress_build_table(struct kiwi_egress *e, kiwi_err *err);
/* sock may be NULL */
int kiwi_egress_delete_table(const char *table, struct mnl_socket *sock, kiwi_err *err);

#endif
