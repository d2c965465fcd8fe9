/* SPDX-License-Identifier: Apache-2.0 */
/* Network egress for a sandbox: a veth pair to the host (rtnetlink), one
 * nftables table per sandbox on the host side of the veth, where the
 * sandbox cannot reach it (nft), and an audit of denied packets (nflog).
 * See kiwi-run-network(7) for the policy.
 *
 * The launcher's part, in order:
 *   before clone:  kiwi_egress_prepare()  (checks, name resolution, address)
 *   after clone, before the child goes on (sync #1):
 *                  kiwi_egress_setup()    (veth into the child's netns, table)
 *   the mounts:    bind child.hosts_path and child.resolv_path read-only
 *                  over /etc/hosts and /etc/resolv.conf; the child does
 *                  nothing else (setup configures its end of the veth)
 *   while running: poll kiwi_egress_audit_fd(), then kiwi_egress_audit_read()
 *   at the end:    kiwi_egress_audit_read(), kiwi_egress_write_verdict(),
 *                  and only after the verdict is out, kiwi_egress_teardown(). */
#ifndef KIWI_EGRESS_H
#define KIWI_EGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "kiwi/err.h"
#include "kiwi/json.h"

enum kiwi_net_mode { KIWI_NET_NONE, KIWI_NET_EGRESS };

enum kiwi_egress_kind {
	KIWI_EGRESS_PUBLIC_INTERNET,
	KIWI_EGRESS_PRIVATE_NETWORK,
	KIWI_EGRESS_HOST_ALLOWLIST,
};

#define KIWI_EGRESS_MAX_CIDRS 64
#define KIWI_EGRESS_MAX_HOSTS 32
#define KIWI_EGRESS_MAX_PORTS 32
#define KIWI_EGRESS_MAX_ADDRS 16   /* pinned addresses per host name */
#define KIWI_EGRESS_NAME_MAX 253
#define KIWI_EGRESS_IPV6_OFF_MAX 160

struct kiwi_cidr4 {
	uint32_t addr;                 /* host byte order */
	uint8_t prefix;
};

struct kiwi_cidr6 {
	uint8_t addr[16];              /* network order */
	uint8_t prefix;
};

struct kiwi_egress_host {
	char name[KIWI_EGRESS_NAME_MAX + 1];
	uint16_t port;                 /* 0: each allowed port */
};

/* An allowed entry written as a dotted IPv4 address, not a name. */
bool kiwi_egress_host_is_addr(const struct kiwi_egress_host *h);
/* Does name (lowercase, no final dot) fall under the entry: the same
 * name, or for "*.example.org" any name ending in ".example.org"? */
bool kiwi_egress_host_matches(const struct kiwi_egress_host *h, const char *name);

/* Plain data, filled by kiwi_egress_config_add(); no allocations. */
struct kiwi_egress_config {
	enum kiwi_egress_kind kind;
	struct kiwi_cidr4 allow_cidrs[KIWI_EGRESS_MAX_CIDRS];
	size_t n_allow_cidrs;
	struct kiwi_cidr6 allow_cidrs6[KIWI_EGRESS_MAX_CIDRS];
	size_t n_allow_cidrs6;
	struct kiwi_egress_host allow_hosts[KIWI_EGRESS_MAX_HOSTS];
	size_t n_allow_hosts;
	uint16_t allow_ports[KIWI_EGRESS_MAX_PORTS];  /* none given: the kind's default */
	size_t n_allow_ports;
	uint32_t dns;                  /* the resolver, 0: none */
	const char *audit_path;        /* JSON lines; NULL: none. Not copied. */
	struct kiwi_cidr4 pool;        /* carved into /30s; default 10.200.0.0/16 */
	/* Tests only (egresstool --queue-refused; no flag or policy key sets
	 * it): the table's queue rule is refused as a kernel without any
	 * queue target refuses it, so the fallback to the proxy can be tested
	 * where the kernel has one. */
	bool test_queue_refused;
};

void kiwi_egress_config_init(struct kiwi_egress_config *c);
/* Parses one flag's value into c. key is the flag's name without dashes,
 * the same in the JSON policy file: "egress" (public_internet,
 * private_network, host_allowlist), "allow-cidr", "allow-host"
 * (NAME[:PORT]), "allow-port" (those three also take comma lists), "dns",
 * "egress-audit", "egress-pool". Errors name the flag and the value. */
int kiwi_egress_config_add(struct kiwi_egress_config *c, const char *key, const char *value,
			   kiwi_err *err);
/* The checks that need every flag (host_allowlist without --allow-host...).
 * kiwi_egress_prepare() runs it too. */
int kiwi_egress_config_check(const struct kiwi_egress_config *c, kiwi_err *err);

/* Where an IPv4 destination stands before any --allow-cidr. */
enum kiwi_addr_class {
	KIWI_ADDR_PUBLIC,
	KIWI_ADDR_SPECIAL,   /* private, CGNAT, documentation, benchmarking: opened only by --allow-cidr */
	KIWI_ADDR_NEVER,     /* this host, link-local, multicast, reserved...: never */
};
enum kiwi_addr_class kiwi_egress_addr_class(uint32_t addr);
/* The same for IPv4 (family 4, 4 bytes) or IPv6 (family 6, 16 bytes) in
 * network order; *range names the range ("metadata", "documentation",
 * "ipv4_mapped"...), NULL for a public address. */
enum kiwi_addr_class kiwi_egress_classify(uint8_t family, const uint8_t *addr, const char **range);

/* What the sandbox gets. Fixed size, no pointers: it may cross the sync
 * socket. */
struct kiwi_egress_child {
	char ifname[16];     /* the veth end inside, "eth0" */
	uint32_t addr;       /* host byte order */
	uint32_t gateway;
	uint8_t prefix;
	uint8_t addr6[16], gateway6[16];   /* network order */
	uint8_t prefix6;     /* 0: no IPv6 (the host has none to give) */
	char ipv6_off[KIWI_EGRESS_IPV6_OFF_MAX];   /* then why, for the verdict */
	char hosts_path[64];   /* bind read-only on /etc/hosts */
	char resolv_path[64];  /* bind read-only on /etc/resolv.conf */
};

struct kiwi_egress;

/* Before clone: checks the config, needs CAP_NET_ADMIN here (EPERM with a
 * hint otherwise), resolves --allow-host names once, takes a /30 of the
 * pool under a lock in /run/kiwi/egress, binds the audit's log group and
 * writes the hosts and resolv.conf files. Fills *child. Nothing is left
 * behind on failure; after success, teardown undoes it. */
int kiwi_egress_prepare(const struct kiwi_egress_config *c, struct kiwi_egress **out,
			struct kiwi_egress_child *child, kiwi_err *err);
/* After clone, while the child waits (its netns exists): the veth with
 * its peer created directly in the child's netns, the sandbox's end
 * configured (address, route, up) from here, the table, forwarding on,
 * the host end up, and both ends ready to carry packets. child_pidfd may
 * be -1. Briefly enters the child's netns to open a socket there. */
int kiwi_egress_setup(struct kiwi_egress *e, pid_t child, int child_pidfd, kiwi_err *err);
/* The same in three parts, for kiwi-helper(8), which never enters a
 * caller's namespace: the host's half, made by the helper (veth with its
 * peer created in netns_fd, table, host end up); the sandbox's half, run
 * by the caller inside the sandbox's network namespace (its end
 * configured from child, up and ready); then the caller waits, from the
 * host's namespace and with no privilege, until the host end is ready
 * too (it cannot be before the sandbox's end is up). */
int kiwi_egress_setup_host(struct kiwi_egress *e, int netns_fd, kiwi_err *err);
int kiwi_egress_host_ifindex(const struct kiwi_egress *e);
/* kiwi-helper's keeper, once the host's half is made: a child process
 * holding the table's owning socket, the pool block's lock and the n
 * fds of also (at most 6: the caller's quota slots) for as long as the
 * host end of the veth exists, which is as long as the sandbox's network
 * namespace, whoever ends first. When the link goes it removes the
 * table and the name files and exits. So whatever ends the helper, the
 * table (owned only before Linux 6.9) outlives the veth, and the quota
 * counts the veth until it is gone. Teardown kills it. */
int kiwi_egress_keep(struct kiwi_egress *e, const int *also, size_t n, kiwi_err *err);
int kiwi_egress_setup_inside(const struct kiwi_egress_child *child, kiwi_err *err);
int kiwi_egress_wait_host(int host_ifindex, kiwi_err *err);

/* The audit: a non-blocking fd to poll; read drains it (never blocks). */
int kiwi_egress_audit_fd(const struct kiwi_egress *e);
/* Why TLS on 443 goes through the proxy although the kernel path was
 * wanted (a root run with a name allowed on 443): the verdict's
 * egress_tls_kernel_off, for --debug too. NULL when it was not wanted
 * or is taken. */
const char *kiwi_egress_tls_kernel_off(const struct kiwi_egress *e);
int kiwi_egress_audit_read(struct kiwi_egress *e, kiwi_err *err);

/* ---- the audit: one event per connection attempt ----
 * Every attempt, allowed or denied, becomes one JSON line of
 * --egress-audit and one count in the verdict's summary:
 *   {"time":"2026-...Z","verdict":"allow"|"deny","rule":RULE,
 *    "proto":"tcp","src":"10.200.0.2","dst":"203.0.113.10","port":443,
 *    "name":"pkgs.example.org"|null}
 * RULE is the class that decided: "allowed:public", "allowed:cidr",
 * "allowed:name", "allowed:dns", "not_allowed", "not_allowed:RANGE" (a
 * range opened only by allow_cidr: private, documentation...),
 * "always_deny:RANGE" (metadata, loopback, host, sandbox_pool...),
 * "always_deny:spoofed_source"; name-related classes ("not_allowed:name",
 * "dns:nxdomain", ...) come from the name checks. Lines stop after 10000
 * (one last {"truncated":true}); the counts go on. */
struct kiwi_egress_event {
	uint8_t family;          /* 4 or 6 */
	uint8_t proto;           /* IPPROTO_* */
	uint16_t port;           /* destination port, 0: none */
	uint8_t src[16], dst[16];  /* 4 or 16 bytes used, network order */
	bool allowed;
	const char *rule;        /* the class, as above */
	const char *name;        /* the host name when known, else NULL */
};
void kiwi_egress_audit_event(struct kiwi_egress *e, const struct kiwi_egress_event *ev);

/* Into an open object: "egress_blocked": [{proto, dst, port, rule,
 * count}] and "egress_allowed": [{proto, dst, port, rule, name?, count}]
 * (at most 64 entries each, in the order first seen; a connection counts
 * once, a denied attempt each time it is retried), then
 * "egress_blocked_other" and "egress_allowed_other": what did not fit,
 * plus the times the kernel dropped log messages; then the network
 * audit's "network_attempted", "network_attempt_count" and
 * "network_attempts" (kiwi/net_audit.h) over every attempt, allowed or
 * denied. NULL e: empty. */
void kiwi_egress_write_verdict(const struct kiwi_egress *e, kiwi_json_writer *w);

/* ---- one exec's attempts, in a session ----
 * A mark is where an exec began in the session's audit; the tally since
 * it holds every attempt made from then until the call, whoever made it
 * (the audit knows addresses, not processes: concurrent execs, and what
 * an earlier exec kept running, share their windows). The first mark
 * starts recording the events (the newest 256 kept; older ones are
 * still counted, in *_other). */
struct kiwi_egress_mark {
	uint64_t seq, allowed, blocked, lost;
};
struct kiwi_egress_tally;
void kiwi_egress_mark(struct kiwi_egress *e, struct kiwi_egress_mark *m);
/* NULL e: an empty tally. NULL on ENOMEM. Free with free(). */
struct kiwi_egress_tally *kiwi_egress_tally_since(struct kiwi_egress *e, const struct kiwi_egress_mark *m);
size_t kiwi_egress_tally_size(void);
/* A tally as received (len bytes): checked and its strings terminated,
 * or NULL. The result is a copy, freed with free(). */
struct kiwi_egress_tally *kiwi_egress_tally_load(const void *buf, size_t len);
/* The same fields as kiwi_egress_write_verdict(), over the tally. */
void kiwi_egress_write_tally(const struct kiwi_egress_tally *t, kiwi_json_writer *w);

/* host_allowlist by name: the name gate (kiwi/proxy.h), a thread of the
 * launcher that answers the sandbox's DNS and checks each connection's
 * name. Attached after prepare (it binds on the gateway address, and the
 * table redirects to its ports), started by setup once the sandbox is
 * cloned, stopped by teardown. A no-op for other kinds and for an
 * allowlist of addresses only. The gate's decisions go to e's audit
 * (kiwi_egress_audit_event). */
int kiwi_egress_gate_attach(struct kiwi_egress *e, kiwi_err *err);
/* The gate's two ports on the gateway (both 0: no gate). */
void kiwi_egress_gate_ports(const struct kiwi_egress *e, uint16_t *dns, uint16_t *tcp);
/* kiwi-helper's side: the table it builds redirects to the caller's gate,
 * listening on the gateway address (host byte order). */
uint32_t kiwi_egress_gateway(const struct kiwi_egress *e);
void kiwi_egress_set_gate(struct kiwi_egress *e, uint16_t dns, uint16_t tcp);
/* The caller's side through kiwi-helper: an egress that owns nothing on
 * the host (the helper has the veth, the table, the pool's lock), only
 * the policy, the block and this host's addresses, for a gate of its
 * own; attach a gate to it, send the helper the ports, and once the
 * helper has attached, start it. Torn down with kiwi_egress_teardown(). */
int kiwi_egress_shell(const struct kiwi_egress_config *c, const struct kiwi_egress_child *child,
		      struct kiwi_egress **out, kiwi_err *err);
int kiwi_egress_gate_start(struct kiwi_egress *e, kiwi_err *err);
/* The shell's audit: the log socket kiwi-helper handed over (fd < 0:
 * none), read by kiwi_egress_audit_read() like a socket of our own;
 * e takes it. */
void kiwi_egress_adopt_log(struct kiwi_egress *e, int fd);

/* Runs fn in a child of ours inside the sandbox's user and network
 * namespaces (ours, so we have every capability there), its error and the
 * fd it may set brought back (into *fd, NULL: closed): user and net are
 * their fds, or with net -1, user is a pidfd of its pid 1 (only while
 * that runs with our credentials). Forks: call with no other thread
 * running. */
int kiwi_egress_run_inside(int user, int net, int (*fn)(void *arg, int *fd, kiwi_err *err), void *arg, int *fd,
			   kiwi_err *err);

/* A session's switch to verify (kiwi-run-phase(1)): the name gate
 * stopped, every link of the sandbox but lo deleted from inside (the
 * veth's host end with it, whoever made it: with kiwi-helper, its keeper
 * then removes the table), checked gone, and our table removed. Nothing
 * can bring it back: the sandbox holds no capability and no way to ask.
 * e may be NULL (no egress of ours: the links are dropped all the same).
 * userns_fd, netns_fd: the sandbox's namespaces, opened while its pid 1
 * still ran with our credentials. Then the sandbox gets the network
 * audit (kiwi/net_audit.h) as a verify of its own would: *audit_fd is its
 * log socket. The egress audit read so far stays; teardown still frees
 * e. */
int kiwi_egress_seal(struct kiwi_egress *e, int userns_fd, int netns_fd, int *audit_fd, kiwi_err *err);

/* Removes the table, the veth, the files and the lock, and frees e (NULL
 * is fine). Goes on past failures and reports the first. */
int kiwi_egress_teardown(struct kiwi_egress *e, kiwi_err *err);
/* Removes what dead runs left in this network namespace and in
 * /run/kiwi/egress: tables kiwi_*, veths kiwi*, unlocked pool entries. */
int kiwi_egress_gc(unsigned *removed, kiwi_err *err);

#endif
