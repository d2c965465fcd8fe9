/* SPDX-License-Identifier: Apache-2.0 */
/* Egress, parent side, top to bottom: prepare (before clone), setup
 * (after clone), teardown; then the child's half and gc. The table is in
 * egress_rules.c, the audit in egress_audit.c. */
#include "egress_int.h"
#include "kiwi/cleanup.h"
#include "kiwi/conntrack.h"
#include "kiwi/dns_client.h"
#include "kiwi/fds.h"
#include "kiwi/fileio.h"
#include "kiwi/net_audit.h"
#include "kiwi/nflog.h"
#include "kiwi/rtnl.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/file.h>
#include <linux/nsfs.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define RUN_DIR "/run/kiwi"
#define EGRESS_DIR RUN_DIR "/egress"
#define TABLE_PREFIX "kiwi_"
#define PEER_NAME "eth0"
#define LINK_READY_MS 2000
#ifndef PIDFD_GET_NET_NAMESPACE
#define PIDFD_GET_NET_NAMESPACE _IO(0xFF, 4)
#endif

static const uint16_t default_ports[] = { 80, 443 };

static const char *ip4_str(uint32_t a, char buf[INET_ADDRSTRLEN])
{
	struct in_addr in = { htonl(a) };
	return inet_ntop(AF_INET, &in, buf, INET_ADDRSTRLEN);
}

static int need_net_admin(kiwi_err *err)
{
	cap_flag_value_t v = CAP_CLEAR;
	cap_t caps = cap_get_proc();
	if (caps) {
		cap_get_flag(caps, CAP_NET_ADMIN, CAP_EFFECTIVE, &v);
		cap_free(caps);
	}
	if (v != CAP_SET)
		return kiwi_error(err, EPERM, "egress",
				  "--network egress creates a veth and a firewall on the host, which needs root "
				  "(CAP_NET_ADMIN): run kiwi-run as root, or as a user through the setuid helper "
				  "kiwi-helper(8)");
	return 0;
}

/* ---- --allow-host: names checked once here, addresses pinned ---- */

/* Why an answer of class cls (kiwi_egress_forbidden) is refused, and the
 * key that would allow it when one would. */
static const char *why_forbidden(const char *cls, char *why, size_t size)
{
	if (!strncmp(cls, "not_allowed:", 12))
		snprintf(why, size, "in a %s range (%s, denied unless allowed): add it to --allow-cidr "
				    "(allow_cidr in a policy file)", cls + 12, cls);
	else
		snprintf(why, size, "%s (never reachable, whatever the policy allows)", cls);
	return why;
}

static int add_pin(struct kiwi_egress *e, uint32_t addr, uint16_t port, kiwi_err *err)
{
	for (size_t i = 0; i < e->n_pins; i++)
		if (e->pin_addrs[i] == addr && e->pin_ports[i] == port)
			return 0;
	if (e->n_pins == EGRESS_MAX_PINS)
		return kiwi_error(err, 0, "egress", "--allow-host: more than %d address and port pairs",
				  EGRESS_MAX_PINS);
	e->pin_addrs[e->n_pins] = addr;
	e->pin_ports[e->n_pins++] = port;
	return 0;
}

uint32_t kiwi_egress_upstream(const struct kiwi_egress_config *c)
{
	return c->dns ? c->dns : kiwi_dns_system_resolver("/etc/resolv.conf");
}

/* Asked of the gate's own upstream, not through this host's resolver
 * configuration: a name only --dns knows must pass here too. */
static int lookup(const struct kiwi_egress *e, const struct kiwi_egress_host *h, uint32_t *addrs, size_t *n,
		  kiwi_err *err)
{
	struct in_addr a;
	*n = 0;
	if (kiwi_egress_host_is_addr(h) && inet_pton(AF_INET, h->name, &a) == 1) {
		addrs[(*n)++] = ntohl(a.s_addr);
		return 0;
	}
	uint32_t upstream = kiwi_egress_upstream(&e->cfg);
	if (!upstream)
		return kiwi_error(err, 0, "egress", "--allow-host `%s`: host_allowlist needs a resolver to ask: give "
						    "--dns, or a nameserver in /etc/resolv.conf", h->name);
	struct kiwi_dns_answer ans;
	if (kiwi_dns_lookup(upstream, h->name, &ans, err) < 0)
		return kiwi_error_wrap(err, "--allow-host `%s`: cannot resolve it: ", h->name);
	*n = ans.n_addrs < KIWI_EGRESS_MAX_ADDRS ? ans.n_addrs : KIWI_EGRESS_MAX_ADDRS;
	memcpy(addrs, ans.addrs, *n * sizeof(*addrs));
	return 0;
}

/* A name with any forbidden answer is refused, mixed or not: an attacker
 * who controls a name's DNS must not get a metadata or host address
 * opened next to a harmless one. Checked here to fail fast on a policy
 * that cannot work; the name gate checks every later answer the same
 * way. Only an entry written as an address is pinned in the table:
 * names are opened per answer by the gate. */
static int resolve_host(struct kiwi_egress *e, const struct kiwi_egress_host *h, kiwi_err *err)
{
	uint32_t addrs[KIWI_EGRESS_MAX_ADDRS];
	size_t n = 0, bad = 0, bad_at = 0;
	char s[INET_ADDRSTRLEN], why[192];
	const char *cls = NULL;
	if (h->name[0] == '*')
		return 0;   /* a pattern: only its names' answers can be checked */
	if (lookup(e, h, addrs, &n, err) < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		const char *c = kiwi_egress_forbidden(&e->cfg, e->host_addrs, e->n_host_addrs, addrs[i]);
		if (c && !bad++) {
			bad_at = i;
			cls = c;
		}
	}
	if (bad)
		return kiwi_error(err, 0, "egress", "--allow-host `%s`: %s %s, %s: refused", h->name,
				  bad < n ? "its answers mix allowed addresses with" : "it resolves to",
				  ip4_str(addrs[bad_at], s), why_forbidden(cls, why, sizeof(why)));
	if (!kiwi_egress_host_is_addr(h))
		return 0;
	const uint16_t *ports = h->port ? &h->port : e->cfg.n_allow_ports ? e->cfg.allow_ports : default_ports;
	size_t n_ports = h->port ? 1 : e->cfg.n_allow_ports ? e->cfg.n_allow_ports : 2;
	for (size_t p = 0; p < n_ports; p++)
		if (add_pin(e, addrs[0], ports[p], err) < 0)
			return -1;
	return 0;
}

static int write_file(const char *path, const char *text, size_t len, kiwi_err *err)
{
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0 || write(fd, text, len) != (ssize_t)len)
		return kiwi_error(err, errno, "egress", "cannot write `%s`", path);
	return 0;
}

/* An allowlist with a name in it: its DNS is the name gate's. */
static bool by_name(const struct kiwi_egress_config *c)
{
	for (size_t i = 0; c->kind == KIWI_EGRESS_HOST_ALLOWLIST && i < c->n_allow_hosts; i++)
		if (!kiwi_egress_host_is_addr(&c->allow_hosts[i]))
			return true;
	return false;
}

/* /etc/hosts with localhost only, and /etc/resolv.conf naming the
 * name gate (host_allowlist), --dns, or nothing (glibc then tries
 * 127.0.0.1, which fails at once). */
static int write_name_files(struct kiwi_egress *e, kiwi_err *err)
{
	static const char hosts[] = "127.0.0.1\tlocalhost\n::1\tlocalhost\n";
	for (size_t i = 0; i < e->cfg.n_allow_hosts; i++)
		if (resolve_host(e, &e->cfg.allow_hosts[i], err) < 0)
			return -1;
	if (write_file(e->hosts_path, hosts, sizeof(hosts) - 1, err) < 0)
		return -1;
	char resolv[96], s[INET_ADDRSTRLEN];
	uint32_t ns = by_name(&e->cfg) ? e->block + 1 : e->cfg.dns;
	int n = ns ? snprintf(resolv, sizeof(resolv), "nameserver %s\n", ip4_str(ns, s))
		   : snprintf(resolv, sizeof(resolv), "# kiwi-run: no --dns, so no resolver\n");
	return write_file(e->resolv_path, resolv, (size_t)n, err);
}

/* ---- a /30 of the pool, under a lock ---- */

/* pool6 with the low 32 bits of addr */
static void addr6_of(const struct kiwi_egress *e, uint32_t addr, uint8_t *out)
{
	memcpy(out, e->pool6, 16);
	uint32_t be = htonl(addr);
	memcpy(out + 12, &be, 4);
}

static void set_names(struct kiwi_egress *e, uint32_t block)
{
	e->block = block;
	addr6_of(e, block + 1, e->host6);
	addr6_of(e, block + 2, e->sandbox6);
	snprintf(e->id, sizeof(e->id), "%08x", block);
	snprintf(e->host_if, sizeof(e->host_if), EGRESS_VETH_PREFIX "%s", e->id);
	snprintf(e->table, sizeof(e->table), TABLE_PREFIX "%s", e->id);
	snprintf(e->lock_path, sizeof(e->lock_path), EGRESS_DIR "/%s.lock", e->id);
	snprintf(e->hosts_path, sizeof(e->hosts_path), EGRESS_DIR "/%s.hosts", e->id);
	snprintf(e->resolv_path, sizeof(e->resolv_path), EGRESS_DIR "/%s.resolv", e->id);
}

static int make_dirs(kiwi_err *err)
{
	if ((mkdir(RUN_DIR, 0755) < 0 && errno != EEXIST) || (mkdir(EGRESS_DIR, 0755) < 0 && errno != EEXIST))
		return kiwi_error(err, errno, "egress", "cannot create `%s`", EGRESS_DIR);
	return 0;
}

/* The lock is the open file's flock, held for the whole run. A file
 * that can be locked belongs to a dead run and is ours to reuse; the
 * inode check closes the race with a run unlinking it meanwhile. */
static int lock_path(const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return -1;
	struct stat a, b;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0 || fstat(fd, &a) < 0 || stat(path, &b) < 0 ||
	    a.st_ino != b.st_ino || a.st_dev != b.st_dev) {
		close(fd);
		return -1;
	}
	return fd;
}

static bool block_free_on_host(const struct kiwi_egress *e, uint32_t block)
{
	for (size_t i = 0; i < e->n_host_addrs; i++)
		if ((e->host_addrs[i] & ~3u) == block)
			return false;
	return true;
}

static int take_block(struct kiwi_egress *e, kiwi_err *err)
{
	uint64_t n_blocks = 1ull << (30 - e->cfg.pool.prefix), start = 0;
	if (make_dirs(err) < 0)
		return -1;
	if (getrandom(&start, sizeof(start), 0) != sizeof(start))
		start = (uint64_t)getpid();
	for (uint64_t i = 0; i < n_blocks; i++) {
		uint32_t block = e->cfg.pool.addr + (uint32_t)((start + i) % n_blocks) * 4;
		if (!block_free_on_host(e, block))
			continue;
		set_names(e, block);
		int fd = lock_path(e->lock_path);
		if (fd < 0)
			continue;
		/* One log group per block; a group bound by someone else
		 * (another tool, or another pool's block) means: next block. */
		e->group = (uint16_t)(0x8000 | ((block >> 2) & 0x7fff));
		e->nflog = kiwi_nflog_open(e->group, err);
		if (!e->nflog) {
			unlink(e->lock_path);
			close(fd);
			if (err->errnum == EBUSY || err->errnum == EPERM)
				continue;
			return -1;
		}
		e->lock_fd = fd;
		dprintf(fd, "%d\n", (int)getpid());
		return 0;
	}
	char s[INET_ADDRSTRLEN];
	return kiwi_error(err, EADDRNOTAVAIL, "egress", "the address pool %s/%u is exhausted (--egress-pool)",
			  ip4_str(e->cfg.pool.addr, s), e->cfg.pool.prefix);
}

static struct kiwi_egress *egress_new(const struct kiwi_egress_config *c)
{
	struct kiwi_egress *e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->cfg = *c;
	e->lock_fd = e->audit_file = e->log_fd = -1;
	inet_pton(AF_INET6, EGRESS_POOL6, e->pool6);
	pthread_mutex_init(&e->audit_lock, NULL);
	return e;
}

static int open_audit(struct kiwi_egress *e, kiwi_err *err)
{
	if (!e->cfg.audit_path)
		return 0;
	e->audit_file = kiwi_open_output(e->cfg.audit_path, KIWI_OUTPUT_APPEND, 0644, "egress", "--egress-audit", err);
	return e->audit_file < 0 ? -1 : 0;
}

static int host_addrs(struct kiwi_egress *e, kiwi_err *err)
{
	_cleanup_rtnl_ struct mnl_socket *nl = kiwi_rtnl_open(err);
	if (!nl || kiwi_rtnl_addrs4(nl, e->host_addrs, EGRESS_MAX_HOST_ADDRS, &e->n_host_addrs, err) < 0 ||
	    kiwi_rtnl_has_default6(nl, &e->host_ipv6, err) < 0)
		return -1;
	/* host_allowlist: the gate asks it, from the host */
	if (e->cfg.kind == KIWI_EGRESS_HOST_ALLOWLIST)
		return 0;
	char s[INET_ADDRSTRLEN];
	for (size_t i = 0; i < e->n_host_addrs; i++)
		if (e->cfg.dns == e->host_addrs[i])
			return kiwi_error(err, 0, "egress", "--dns `%s` is this host's own address, which the "
						     "sandbox itself asks in this kind and can never reach: only "
						     "host_allowlist, whose resolver asks from the host, takes it",
					  ip4_str(e->cfg.dns, s));
	return 0;
}

/* Forwarding sysctls are per network namespace but host-wide within it;
 * only written when off (a write resets offloads on every device), and
 * left on: other sandboxes may rely on them. The write is judged by
 * reading the value back, not by its count: Debian 12's 6.1.176 returns
 * 1 from every write to net.ipv6.conf.all.forwarding (6.1.192 the count). */
static int turn_on(const char *path, const char *name, kiwi_err *err)
{
	_cleanup_close_ int fd = open(path, O_RDWR | O_CLOEXEC);
	char c = 0;
	if (fd < 0 || pread(fd, &c, 1, 0) != 1)
		return kiwi_error(err, errno, "egress", "cannot read %s", name);
	if (c == '1')
		return 0;
	ssize_t n = pwrite(fd, "1", 1, 0);
	int saved = errno;
	if (pread(fd, &c, 1, 0) == 1 && c == '1')
		return 0;
	return kiwi_error(err, n < 0 ? saved : 0, "egress", "cannot turn on %s: it still reads %c", name, c);
}

static bool sysctl_is(const char *path, char want)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	char c = 0;
	return fd >= 0 && pread(fd, &c, 1, 0) == 1 && c == want;
}

/* IPv6 for the sandbox, decided before anything is made, by whoever may
 * write the host's sysctls (kiwi-run as root, kiwi-helper). The sandbox
 * gets an address and route whenever this host's kernel can give one, so
 * that its IPv6 attempts reach the table and are audited even where none
 * may leave (no route, no CIDR: the table denies them all before routing,
 * see egress_rules.c). Leaving needs forwarding on, which makes the host
 * ignore router advertisements (unless accept_ra is 2), see
 * kiwi-run-network(7). Whatever IPv6 cannot do here, IPv4 goes on and the
 * verdict says why. */
static void decide_ipv6(struct kiwi_egress *e)
{
	e->ipv6 = e->ipv6_out = false;
	kiwi_err one = { 0 };
	if (access("/proc/sys/net/ipv6", F_OK) < 0) {
		snprintf(e->ipv6_off, sizeof(e->ipv6_off), "this kernel has no IPv6");
		return;
	}
	if (!sysctl_is("/proc/sys/net/ipv6/conf/all/disable_ipv6", '0') ||
	    !sysctl_is("/proc/sys/net/ipv6/conf/default/disable_ipv6", '0')) {
		snprintf(e->ipv6_off, sizeof(e->ipv6_off), "IPv6 is turned off on this host (net.ipv6.conf.all or "
							  "default.disable_ipv6)");
		return;
	}
	e->ipv6 = true;
	if (!e->host_ipv6 && !e->cfg.n_allow_cidrs6)
		snprintf(e->ipv6_off, sizeof(e->ipv6_off), "no IPv6 default route on the host and no IPv6 --allow-cidr");
	else if (turn_on("/proc/sys/net/ipv6/conf/all/forwarding", "net.ipv6.conf.all.forwarding", &one) < 0)
		snprintf(e->ipv6_off, sizeof(e->ipv6_off), "%.100s", one.msg);
	else
		e->ipv6_out = true;
}

/* Each end's MAC, from its IPv4 address (locally administered, unique
 * per end): both sides know the other's without asking, for the
 * permanent IPv6 neighbour entries. */
static void mac_of(uint32_t addr, uint8_t mac[6])
{
	const uint8_t m[6] = { 0x02, 0x6b, (uint8_t)(addr >> 24), (uint8_t)(addr >> 16), (uint8_t)(addr >> 8),
			       (uint8_t)addr };
	memcpy(mac, m, 6);
}

static const struct kiwi_rtnl_ip6 *ip6_of(const struct kiwi_egress_child *c, struct kiwi_rtnl_ip6 *v6, bool sandbox)
{
	if (!c->prefix6)
		return NULL;
	*v6 = (struct kiwi_rtnl_ip6){ .prefix = c->prefix6, .has_gateway = sandbox, .has_neigh = true };
	memcpy(v6->addr, sandbox ? c->addr6 : c->gateway6, 16);
	memcpy(v6->gateway, c->gateway6, 16);
	memcpy(v6->neigh, sandbox ? c->gateway6 : c->addr6, 16);
	mac_of(sandbox ? c->gateway : c->addr, v6->neigh_mac);
	return v6;
}

static struct kiwi_egress_child child_of(const struct kiwi_egress *e)
{
	struct kiwi_egress_child c = { .addr = e->block + 2, .gateway = e->block + 1, .prefix = 30 };
	if (e->ipv6) {
		memcpy(c.addr6, e->sandbox6, 16);
		memcpy(c.gateway6, e->host6, 16);
		c.prefix6 = EGRESS_PREFIX6;
	}
	return c;
}

int kiwi_egress_prepare(const struct kiwi_egress_config *c, struct kiwi_egress **out,
			struct kiwi_egress_child *child, kiwi_err *err)
{
	*out = NULL;
	if (kiwi_egress_config_check(c, err) < 0 || need_net_admin(err) < 0)
		return -1;
	struct kiwi_egress *e = egress_new(c);
	if (!e)
		return kiwi_error(err, ENOMEM, "egress", "out of memory");
	if (!(e->nft = kiwi_nft_open(err)) || host_addrs(e, err) < 0) {
		kiwi_egress_teardown(e, NULL);
		return -1;
	}
	decide_ipv6(e);
	if (take_block(e, err) < 0 || write_name_files(e, err) < 0 || open_audit(e, err) < 0) {
		kiwi_egress_teardown(e, NULL);
		return -1;
	}
	*child = child_of(e);
	snprintf(child->ipv6_off, sizeof(child->ipv6_off), "%s", e->ipv6_off);
	snprintf(child->ifname, sizeof(child->ifname), PEER_NAME);
	snprintf(child->hosts_path, sizeof(child->hosts_path), "%s", e->hosts_path);
	snprintf(child->resolv_path, sizeof(child->resolv_path), "%s", e->resolv_path);
	*out = e;
	return 0;
}

int kiwi_egress_shell(const struct kiwi_egress_config *c, const struct kiwi_egress_child *child,
		      struct kiwi_egress **out, kiwi_err *err)
{
	*out = NULL;
	struct kiwi_egress *e = egress_new(c);
	if (!e)
		return kiwi_error(err, ENOMEM, "egress", "out of memory");
	e->block = child->gateway - 1;
	/* as kiwi-helper decided */
	e->ipv6 = child->prefix6 != 0;
	e->ipv6_out = e->ipv6 && !child->ipv6_off[0];
	snprintf(e->ipv6_off, sizeof(e->ipv6_off), "%s", child->ipv6_off);
	/* --egress-audit: the caller's own file, opened with its own rights */
	if (host_addrs(e, err) < 0 || open_audit(e, err) < 0) {
		kiwi_egress_teardown(e, NULL);
		return -1;
	}
	*out = e;
	return 0;
}

void kiwi_egress_gate_ports(const struct kiwi_egress *e, uint16_t *dns, uint16_t *tcp)
{
	*dns = e ? e->gate_dns : 0;
	*tcp = e ? e->gate_tcp : 0;
}

uint32_t kiwi_egress_gateway(const struct kiwi_egress *e)
{
	return e->block + 1;
}

void kiwi_egress_set_gate(struct kiwi_egress *e, uint16_t dns, uint16_t tcp)
{
	e->gate_dns = dns;
	e->gate_tcp = tcp;
}

int kiwi_egress_gate_start(struct kiwi_egress *e, kiwi_err *err)
{
	return e && e->gate ? e->gate_ops->start(e->gate, err) : 0;
}

/* ---- after clone ---- */

static int child_netns(pid_t child, int pidfd, kiwi_err *err)
{
	if (pidfd >= 0) {
		int fd = ioctl(pidfd, PIDFD_GET_NET_NAMESPACE, 0);
		/* checked: an ioctl number the kernel means otherwise must not
		 * hand us some other namespace */
		if (fd >= 0 && ioctl(fd, NS_GET_NSTYPE) == CLONE_NEWNET)
			return fd;
		if (fd >= 0)
			close(fd);
	}
	/* Kernels before 6.11 have no pidfd ioctl. The child is ours and
	 * not reaped, so its pid cannot have been reused. */
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)child);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return kiwi_error(err, errno, "egress", "cannot open the sandbox's network namespace");
	return fd;
}


/* An rtnetlink socket in the sandbox's netns: a socket stays in the
 * namespace it was made in, so we step in, make it, and step out. The
 * child is waiting at sync #1 and runs nothing yet. */
static struct mnl_socket *rtnl_in(int ns, kiwi_err *err)
{
	_cleanup_close_ int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self < 0 || setns(ns, CLONE_NEWNET) < 0) {
		kiwi_error(err, errno, "egress", "cannot enter the sandbox's network namespace");
		return NULL;
	}
	struct mnl_socket *nl = kiwi_rtnl_open(err);
	/* Staying would put the host's table and routes in the sandbox. */
	if (setns(self, CLONE_NEWNET) < 0)
		abort();
	return nl;
}

/* The sandbox's end: IPv6 off, address, up, default route; configured
 * from here, so the child has nothing to do and no privilege to use. */
static int sandbox_end(struct kiwi_egress *e, struct mnl_socket *nl, int *index, kiwi_err *err)
{
	*index = kiwi_rtnl_link_index(nl, PEER_NAME, err);
	if (*index < 0)
		return -1;
	struct kiwi_egress_child c = child_of(e);
	struct kiwi_rtnl_ip6 v6;
	return kiwi_rtnl_configure(nl, *index, c.addr, c.prefix, c.gateway, ip6_of(&c, &v6, true), err);
}

/* The sandbox's IPv6 address, once its local route is in: before, the
 * first answers to it are dropped (see kiwi_rtnl_wait_local6). */
static int sandbox_ready6(struct mnl_socket *nl, const struct kiwi_egress_child *c, kiwi_err *err)
{
	return c->prefix6 ? kiwi_rtnl_wait_local6(nl, c->addr6, LINK_READY_MS, err) : 0;
}

/* The pair, its peer made directly in the sandbox's netns ns. */
static int make_veth(struct kiwi_egress *e, struct mnl_socket *nl, int ns, kiwi_err *err)
{
	uint8_t mac[6], peer_mac[6];
	mac_of(e->block + 1, mac);
	mac_of(e->block + 2, peer_mac);
	int index = kiwi_rtnl_veth_create_mac(nl, e->host_if, PEER_NAME, ns, mac, peer_mac, err);
	if (index < 0 && err->errnum == EEXIST) {
		/* a dead run's, whose block we now hold */
		if (kiwi_rtnl_link_del(nl, e->host_if, err) < 0)
			return -1;
		index = kiwi_rtnl_veth_create_mac(nl, e->host_if, PEER_NAME, ns, mac, peer_mac, err);
	}
	if (index < 0)
		return -1;
	e->veth_made = true;
	e->host_ifindex = index;
	return index;
}

/* The host's half, once the veth exists: the filter before the host end
 * comes up. */
static int host_end(struct kiwi_egress *e, struct mnl_socket *nl, kiwi_err *err)
{
	if (kiwi_egress_build_table(e, err) < 0)
		return -1;
	e->table_made = true;
	struct kiwi_egress_child c = child_of(e);
	struct kiwi_rtnl_ip6 v6;
	return turn_on("/proc/sys/net/ipv4/ip_forward", "net.ipv4.ip_forward", err) < 0 ||
	       kiwi_rtnl_configure(nl, e->host_ifindex, c.gateway, c.prefix, 0, ip6_of(&c, &v6, false), err) < 0 ||
	       (c.prefix6 && kiwi_rtnl_wait_local6(nl, c.gateway6, LINK_READY_MS, err) < 0) ? -1 : 0;
}

/* Only the host end's going, never a timeout or an error, ends the wait:
 * the filter must not go while the link is there. Gone, it can carry
 * nothing more (its unregistering drops what was still queued). */
static void wait_link_gone(int ifindex)
{
	while (kiwi_rtnl_wait_link_gone(ifindex, NULL) < 0)
		sleep(1);
}

/* Before 6.9 the table cannot be persistent: it dies with our nfnetlink
 * socket, and a kiwi-run killed with SIGKILL closes that socket a moment
 * before its death reaches the sandbox (the parent-death signal comes
 * after the files are closed), so the sandbox's packets would leave
 * unfiltered in between. A holder keeps a copy of the socket until the
 * sandbox's link is gone, whatever happens to us: not only until its
 * pid 1 is (the network namespace, and the datagrams it still had
 * queued on the link, outlive the processes a moment; a loaded host let
 * 192 of a flood through that way). */
static int hold_table(struct kiwi_egress *e, kiwi_err *err)
{
	int nft = mnl_socket_get_fd(e->nft);
	pid_t pid = fork();
	if (pid < 0)
		return kiwi_error(err, errno, "egress", "cannot fork the holder of the filter");
	if (pid == 0) {
		setsid();   /* out of the caller's job: no terminal signal ends it */
		kiwi_fds_keep_only((int[]){ nft }, 1);
		wait_link_gone(e->host_ifindex);
		_exit(0);
	}
	e->holder = pid;
	return 0;
}

int kiwi_egress_setup(struct kiwi_egress *e, pid_t child, int child_pidfd, kiwi_err *err)
{
	_cleanup_close_ int ns = child_netns(child, child_pidfd, err);
	if (ns < 0)
		return -1;
	_cleanup_rtnl_ struct mnl_socket *nl = kiwi_rtnl_open(err);
	_cleanup_rtnl_ struct mnl_socket *sb = nl ? rtnl_in(ns, err) : NULL;
	if (!sb)
		return -1;
	int index = make_veth(e, nl, ns, err);
	if (index < 0)
		return -1;
	int sb_index;
	if (sandbox_end(e, sb, &sb_index, err) < 0 || host_end(e, nl, err) < 0)
		return -1;
	if (e->owned_only && hold_table(e, err) < 0)
		return -1;
	/* the gate's thread last: nothing forks after it */
	struct kiwi_egress_child c = child_of(e);
	return kiwi_rtnl_wait_ready(sb, sb_index, LINK_READY_MS, err) < 0 ||
	       kiwi_rtnl_wait_ready(nl, index, LINK_READY_MS, err) < 0 || sandbox_ready6(sb, &c, err) < 0 ||
	       kiwi_egress_gate_start(e, err) < 0 ? -1 : 0;
}

int kiwi_egress_keep(struct kiwi_egress *e, const int *also, size_t n, kiwi_err *err)
{
	int keep[8] = { mnl_socket_get_fd(e->nft), e->lock_fd };
	if (n > 6)
		return kiwi_error(err, EINVAL, "egress", "the keeper keeps at most 6 more fds");
	memcpy(keep + 2, also, n * sizeof(int));
	pid_t pid = fork();
	if (pid < 0)
		return kiwi_error(err, errno, "egress", "cannot fork the keeper of the filter");
	if (pid == 0) {
		kiwi_fds_keep_only(keep, n + 2);
		wait_link_gone(e->host_ifindex);
		kiwi_egress_delete_table(e->table, e->nft, NULL);
		/* still ours: the lock is held until we exit */
		unlink(e->hosts_path);
		unlink(e->resolv_path);
		unlink(e->lock_path);
		_exit(0);
	}
	e->holder = pid;
	return 0;
}

int kiwi_egress_setup_host(struct kiwi_egress *e, int netns_fd, kiwi_err *err)
{
	_cleanup_rtnl_ struct mnl_socket *nl = kiwi_rtnl_open(err);
	if (!nl)
		return -1;
	return make_veth(e, nl, netns_fd, err) < 0 || host_end(e, nl, err) < 0 ? -1 : 0;
}

int kiwi_egress_host_ifindex(const struct kiwi_egress *e)
{
	return e->host_ifindex;
}

int kiwi_egress_wait_host(int host_ifindex, kiwi_err *err)
{
	_cleanup_rtnl_ struct mnl_socket *nl = kiwi_rtnl_open(err);
	return nl ? kiwi_rtnl_wait_ready(nl, host_ifindex, LINK_READY_MS, err) : -1;
}

int kiwi_egress_setup_inside(const struct kiwi_egress_child *child, kiwi_err *err)
{
	_cleanup_rtnl_ struct mnl_socket *nl = kiwi_rtnl_open(err);
	if (!nl)
		return -1;
	int index = kiwi_rtnl_link_index(nl, child->ifname, err);
	struct kiwi_rtnl_ip6 v6;
	if (index < 0 || kiwi_rtnl_configure(nl, index, child->addr, child->prefix, child->gateway,
					     ip6_of(child, &v6, true), err) < 0)
		return -1;
	return kiwi_rtnl_wait_ready(nl, index, LINK_READY_MS, err) < 0 ? -1 : sandbox_ready6(nl, child, err);
}

const char *kiwi_egress_tls_kernel_off(const struct kiwi_egress *e)
{
	return e && e->tls_kernel_off[0] ? e->tls_kernel_off : NULL;
}

int kiwi_egress_audit_fd(const struct kiwi_egress *e)
{
	return !e ? -1 : e->nflog ? mnl_socket_get_fd(e->nflog) : e->log_fd;
}

void kiwi_egress_adopt_log(struct kiwi_egress *e, int fd)
{
	if (e && e->log_fd < 0)
		e->log_fd = fd;
	else if (fd >= 0)
		close(fd);
}

/* ---- inside the sandbox's namespaces ---- */

int kiwi_egress_run_inside(int user, int net, int (*fn)(void *arg, int *fd, kiwi_err *err), void *arg, int *fd,
			   kiwi_err *err)
{
	int sp[2];
	if (fd)
		*fd = -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		return kiwi_error(err, errno, "egress", "cannot create a socket pair");
	pid_t pid = fork();
	if (pid == 0) {
		kiwi_err e = { 0 };
		int out = -1;
		if (net < 0 ? setns(user, CLONE_NEWUSER | CLONE_NEWNET) < 0
			    : setns(user, CLONE_NEWUSER) < 0 || setns(net, CLONE_NEWNET) < 0)
			kiwi_error(&e, errno, "egress", "cannot enter the sandbox's network namespace");
		else
			fn(arg, &out, &e);
		_exit(kiwi_send_fd(sp[1], &e, sizeof(e), out) == (ssize_t)sizeof(e) ? 0 : 1);
	}
	close(sp[1]);
	kiwi_err e = { 0 };
	int got = -1;
	ssize_t n = pid < 0 ? -1 : kiwi_recv_fd(sp[0], &e, sizeof(e), 0, &got);
	close(sp[0]);
	if (pid > 0)
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	if (n != (ssize_t)sizeof(e) || e.step[0]) {
		if (got >= 0)
			close(got);
		if (n != (ssize_t)sizeof(e))
			return kiwi_error(err, pid < 0 ? errno : EIO, "egress",
					  "cannot act in the sandbox's network namespace");
		*err = e;
		return -1;
	}
	if (fd)
		*fd = got;
	else if (got >= 0)
		close(got);
	return 0;
}

/* ---- sealing: the network taken away for good ---- */

struct links {
	char names[16][32];
	size_t n, other;
};

static void note_link(const char *name, void *arg)
{
	struct links *l = arg;
	if (!strcmp(name, "lo"))
		return;
	if (l->n < KIWI_ARRAY_SIZE(l->names))
		snprintf(l->names[l->n++], sizeof(l->names[0]), "%s", name);
	else
		l->other++;
}

/* In the sandbox's namespaces: every link but lo goes (a veth's peer on
 * the host with it), then none may be left; then the network audit, as a
 * verify of its own has it (kiwi/net_audit.h): its log socket comes back
 * in *fd. */
static int drop_links(void *arg, int *fd, kiwi_err *err)
{
	(void)arg;
	_cleanup_rtnl_ struct mnl_socket *nl = kiwi_rtnl_open(err);
	if (!nl)
		return -1;
	for (int round = 0; round < 4; round++) {
		struct links l = { 0 };
		if (kiwi_rtnl_links_named(nl, "", note_link, &l, err) < 0)
			return -1;
		if (!l.n && !l.other) {
			*fd = kiwi_net_audit_setup(err);
			return *fd < 0 ? -1 : 0;
		}
		for (size_t i = 0; i < l.n; i++)
			if (kiwi_rtnl_link_del(nl, l.names[i], err) < 0)
				return -1;
	}
	return kiwi_error(err, EBUSY, "egress", "the sandbox's links would not go");
}

int kiwi_egress_seal(struct kiwi_egress *e, int userns_fd, int netns_fd, int *audit_fd, kiwi_err *err)
{
	/* The gate's thread first: the fork below wants one thread, and
	 * nothing is left for it to serve. */
	if (e && e->gate) {
		kiwi_egress_audit_read(e, NULL);
		e->gate_ops->close(TAKE_PTR(e->gate));
		e->gate_dns = e->gate_tcp = 0;
		e->gate_kernel = false;
	}
	if (kiwi_egress_run_inside(userns_fd, netns_fd, drop_links, NULL, audit_fd, err) < 0) {
		/* Nothing is sealed: a later try starts afresh. */
		kiwi_closep(audit_fd);
		return -1;
	}
	if (e)
		kiwi_egress_audit_read(e, NULL);
	/* The links are gone: the sandbox has no network now, whatever
	 * follows. Ours (root): the host end went with its peer, and the
	 * table goes now, or at the end with the rest when it will not
	 * (a sealed session must not be sealed again). kiwi-helper's keeper
	 * removes its own once the link is gone. */
	if (e && e->table_made && kiwi_egress_delete_table(e->table, e->nft, NULL) == 0)
		e->table_made = false;
	if (e)
		e->veth_made = false;
	return 0;
}

/* ---- the end ---- */

static void keep_first(kiwi_err *first, const kiwi_err *e, int r)
{
	if (r < 0 && first && !first->step[0])
		*first = *e;
}

/* The conntrack entries of the sandbox's flows (kiwi/conntrack.h). */
static int forget_flows(const struct kiwi_egress *e, kiwi_err *err)
{
	uint32_t v4 = htonl(e->block + 2);
	unsigned n;
	if (kiwi_ct_forget_source(AF_INET, &v4, &n, err) < 0)
		return -1;
	return e->ipv6 ? kiwi_ct_forget_source(AF_INET6, e->sandbox6, &n, err) : 0;
}

int kiwi_egress_teardown(struct kiwi_egress *e, kiwi_err *err)
{
	if (!e)
		return 0;
	kiwi_err one = { 0 };
	if (err)
		err->step[0] = '\0';
	/* The gate's thread first: it audits into the file closed below. */
	if (e->gate)
		e->gate_ops->close(e->gate);
	/* Then the veth: once it is gone the sandbox has no way out, so a
	 * sandbox still alive (kiwi-helper's caller killed, its sandbox's own
	 * death still to come) never sees its link without the filter. */
	if (e->veth_made) {
		_cleanup_rtnl_ struct mnl_socket *nl = kiwi_rtnl_open(&one);
		keep_first(err, &one, nl ? kiwi_rtnl_link_del(nl, e->host_if, &one) : -1);
	}
	if (e->table_made)
		keep_first(err, &one, kiwi_egress_delete_table(e->table, e->nft, &one));
	/* No way out is left: what its flows left in conntrack goes too,
	 * while the lock still keeps its address from the next run. */
	if (e->veth_made)
		keep_first(err, &one, forget_flows(e, &one));
	if (e->holder > 0) {
		/* The table is gone (or ours to delete by gc): no need to wait
		 * for the sandbox, which is over anyway. */
		kill(e->holder, SIGKILL);
		waitpid(e->holder, NULL, 0);
	}
	/* Last: the socket that owns the table. */
	if (e->nft)
		mnl_socket_close(e->nft);
	if (e->nflog)
		mnl_socket_close(e->nflog);
	if (e->log_fd >= 0)
		close(e->log_fd);
	if (e->audit_file >= 0)
		close(e->audit_file);
	if (e->lock_fd >= 0) {
		unlink(e->hosts_path);
		unlink(e->resolv_path);
		unlink(e->lock_path);
		close(e->lock_fd);
	}
	pthread_mutex_destroy(&e->audit_lock);
	free(e->ring);
	free(e);
	return err && err->step[0] ? -1 : 0;
}

/* ---- gc ---- */

struct names {
	char (*v)[32];
	size_t n, max;
};

static void collect(const char *name, void *arg)
{
	struct names *ns = arg;
	if (ns->n < ns->max)
		snprintf(ns->v[ns->n++], sizeof(ns->v[0]), "%s", name);
}

/* True when the block with this id belongs to a live run. */
static bool live(const char *id)
{
	char path[64];
	snprintf(path, sizeof(path), EGRESS_DIR "/%.8s.lock", id);
	_cleanup_close_ int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	return fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK;
}

static bool our_id(const char *s)
{
	return strlen(s) == 8 && strspn(s, "0123456789abcdef") == 8;
}

static unsigned gc_files(void)
{
	unsigned removed = 0;
	DIR *d = opendir(EGRESS_DIR);
	if (!d)
		return 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		char id[9];
		if (strlen(de->d_name) != 13 || strcmp(de->d_name + 8, ".lock"))
			continue;
		snprintf(id, sizeof(id), "%.8s", de->d_name);
		struct kiwi_egress probe;
		set_names(&probe, (uint32_t)strtoul(id, NULL, 16));
		int fd = our_id(id) ? lock_path(probe.lock_path) : -1;
		if (fd < 0)
			continue;
		unlink(probe.hosts_path);
		unlink(probe.resolv_path);
		unlink(probe.lock_path);
		close(fd);
		removed++;
	}
	closedir(d);
	return removed;
}

int kiwi_egress_gc(unsigned *removed, kiwi_err *err)
{
	char v[256][32];
	struct names tables = { v, 0, 256 };
	*removed = 0;
	if (kiwi_nft_tables_named(NFPROTO_INET, TABLE_PREFIX, collect, &tables, err) < 0)
		return -1;
	for (size_t i = 0; i < tables.n; i++) {
		const char *id = tables.v[i] + strlen(TABLE_PREFIX);
		if (!our_id(id) || live(id))
			continue;
		/* EPERM: owned by a live process after all */
		if (kiwi_egress_delete_table(tables.v[i], NULL, err) < 0) {
			if (err->errnum == EPERM)
				continue;
			return -1;
		}
		(*removed)++;
		/* Its IPv4 flows' entries (the IPv6 address needs the pool).
		 * Best effort: they also expire on their own, and the tables
		 * and links below must not wait on them. */
		uint32_t v4 = htonl((uint32_t)strtoul(id, NULL, 16) + 2);
		unsigned n;
		kiwi_err ignored = { 0 };
		kiwi_ct_forget_source(AF_INET, &v4, &n, &ignored);
	}
	_cleanup_rtnl_ struct mnl_socket *nl = kiwi_rtnl_open(err);
	struct names links = { v, 0, 256 };
	if (!nl || kiwi_rtnl_links_named(nl, EGRESS_VETH_PREFIX, collect, &links, err) < 0)
		return -1;
	for (size_t i = 0; i < links.n; i++) {
		const char *id = links.v[i] + strlen(EGRESS_VETH_PREFIX);
		if (!our_id(id) || live(id))
			continue;
		if (kiwi_rtnl_link_del(nl, links.v[i], err) < 0)
			return -1;
		(*removed)++;
	}
	*removed += gc_files();
	return 0;
}
