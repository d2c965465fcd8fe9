/* SPDX-License-Identifier: Apache-2.0 */
/* See include/kiwi/dns_client.h. */
#include "kiwi/dns_client.h"
#include "kiwi/cleanup.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#define TRIES 3
#define TRY_MS 1000

uint32_t kiwi_dns_system_resolver(const char *resolv_conf)
{
	FILE *f = fopen(resolv_conf, "re");
	char line[256], addr[64];
	uint32_t found = 0;
	while (f && !found && fgets(line, sizeof(line), f)) {
		struct in_addr a;
		if (sscanf(line, " nameserver %63s", addr) == 1 && inet_pton(AF_INET, addr, &a) == 1)
			found = ntohl(a.s_addr);
	}
	if (f)
		fclose(f);
	return found;
}

/* 1: the answer to (id, name), 0: nothing that is one within a try, -1:
 * the server refused (ICMP unreachable) or the socket failed. */
static int await_answer(int fd, uint16_t id, const char *name, struct kiwi_dns_answer *a)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	while (poll(&p, 1, TRY_MS) > 0) {
		uint8_t buf[1500];
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -1;
		if (n > 0 && kiwi_dns_parse_answer(buf, (size_t)n, id, name, KIWI_DNS_TYPE_A, a) == 0)
			return 1;
	}
	return 0;
}

int kiwi_dns_lookup(uint32_t server, const char *name, struct kiwi_dns_answer *a, kiwi_err *err)
{
	char s[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &(uint32_t){ htonl(server) }, s, sizeof(s));
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(53), .sin_addr = { htonl(server) } };
	_cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&to, sizeof(to)) < 0)
		return kiwi_error(err, errno, "egress", "cannot reach the resolver %s to check `%s`", s, name);
	uint16_t id = 0;
	uint8_t q[512];
	if (getrandom(&id, sizeof(id), 0) != sizeof(id))
		id = (uint16_t)getpid();
	size_t len = kiwi_dns_build_query(q, sizeof(q), id, name, KIWI_DNS_TYPE_A);
	int got = 0;
	for (int i = 0; i < TRIES && !got; i++)
		got = send(fd, q, len, 0) < 0 ? -1 : await_answer(fd, id, name, a);
	if (got < 0)
		return kiwi_error(err, errno, "egress", "the resolver %s refused the question for `%s`", s, name);
	if (!got)
		return kiwi_error(err, ETIMEDOUT, "egress", "the resolver %s did not answer for `%s`", s, name);
	if (a->rcode != KIWI_DNS_NOERROR || !a->n_addrs)
		return kiwi_error(err, 0, "egress", "`%s` has no IPv4 address at the resolver %s (%s)", name, s,
				  a->rcode == KIWI_DNS_NXDOMAIN ? "no such name"
				  : a->rcode == KIWI_DNS_NOERROR ? "no A record" : "it failed");
	return 0;
}
