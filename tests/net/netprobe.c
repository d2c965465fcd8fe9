/* SPDX-License-Identifier: Apache-2.0 */
/* netprobe: the static client the network tests run inside sandboxes.
 * Every subcommand prints one JSON object and exits 0; the object says
 * what happened (ok, errno, error, ms), so a test can tell a fast reject
 * from a timeout.
 *   netprobe tcp ADDR PORT [TIMEOUT_MS]   connect, send "ping\n", read a reply (IPv4 or IPv6)
 *   netprobe udp ADDR PORT [TIMEOUT_MS]   send "ping", wait for a datagram
 *   netprobe dns SERVER NAME              one A query over UDP
 *   netprobe resolve NAME                 one A query to resolv.conf's nameserver
 *                                         (error: the rcode's name when not NOERROR)
 *   netprobe http ADDR PORT HOST          tcp, sending a GET with that Host header
 *   netprobe send ADDR PORT TEXT          tcp, sending TEXT with each "\r\n" written
 *                                         as the four characters backslash r backslash n
 *   netprobe tls ADDR PORT SNI            tcp, sending a ClientHello ("-": no SNI)
 *   netprobe ech ADDR PORT SNI            the same with an encrypted_client_hello
 *   netprobe tfo ADDR PORT SNI            the ClientHello in the SYN (TCP Fast Open:
 *                                         sendto MSG_FASTOPEN; the sandbox's
 *                                         net.ipv4.tcp_fastopen must allow it)
 *   netprobe tlsx ADDR PORT SNI SPLIT SRCPORT
 *                                         tls from source port SRCPORT (0: any), the
 *                                         ClientHello in two writes with TCP_NODELAY,
 *                                         the first SPLIT bytes, then after 100 ms the
 *                                         rest (SPLIT 0: one write)
 *   netprobe setups ADDR PORT SNI N       N connections one after the other, each
 *                                         timed from connect to the first reply byte:
 *                                         {"n", "p50_ms", "p95_ms", "min_ms"}
 *   netprobe download ADDR PORT SNI       a ClientHello, then read to EOF:
 *                                         {"bytes", "ms", "mb_per_s"}
 *   netprobe xfer ADDR PORT SNI UP DOWN N MODE
 *                                         N connections at once to the XFER server of
 *                                         servers.py, each a ClientHello, then UP bytes
 *                                         sent (then a shutdown of our side) while DOWN
 *                                         bytes are read and checked byte by byte, then
 *                                         the server's trailer (it got UP exact bytes);
 *                                         MODE: both (at once), wait (the first byte down
 *                                         before any byte up), slow (a small receive
 *                                         buffer, read 4 KiB a time with pauses).
 *                                         {"ok", "conns", "failed", "error"}: the first
 *                                         failure ("stalled": nothing moved for 15 s)
 *   netprobe hosts NAME                   the addresses /etc/hosts gives NAME
 *   netprobe cat FILE                     a file's text
 *   netprobe now                          CLOCK_REALTIME in ns (for start latency)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void json_str(const char *s, size_t n)
{
	putchar('"');
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20 || c > 0x7e)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static int report(int err, double t0, const char *reply, size_t n)
{
	printf("{\"ok\":%s,\"errno\":%d,\"error\":", err ? "false" : "true", err);
	const char *name = err ? strerrorname_np(err) : NULL;
	if (err)
		json_str(name ? name : "?", strlen(name ? name : "?"));
	else
		printf("null");
	printf(",\"ms\":%.3f,\"reply\":", now_ms() - t0);
	json_str(reply ? reply : "", reply ? n : 0);
	printf("}\n");
	return 0;
}

static int parse_addr(const char *addr, const char *port, struct sockaddr_in *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)atoi(port));
	return inet_pton(AF_INET, addr, &sa->sin_addr) == 1 ? 0 : -1;
}

/* An IPv4 or IPv6 address (with a colon) into ss; its length in *len. */
static int parse_any(const char *addr, const char *port, struct sockaddr_storage *ss, socklen_t *len)
{
	memset(ss, 0, sizeof(*ss));
	if (!strchr(addr, ':')) {
		*len = sizeof(struct sockaddr_in);
		return parse_addr(addr, port, (struct sockaddr_in *)ss);
	}
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
	s6->sin6_family = AF_INET6;
	s6->sin6_port = htons((uint16_t)atoi(port));
	*len = sizeof(*s6);
	return inet_pton(AF_INET6, addr, &s6->sin6_addr) == 1 ? 0 : -1;
}

/* Waits for events on fd; returns 0, or an errno (ETIMEDOUT). */
static int wait_fd(int fd, short events, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = events };
	int r = poll(&p, 1, timeout_ms);
	if (r < 0)
		return errno;
	if (r == 0)
		return ETIMEDOUT;
	int soerr = 0;
	socklen_t len = sizeof(soerr);
	getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
	return soerr;
}

static int exchange_msg(int type, const char *addr, const char *port, int timeout_ms, const void *msg,
			size_t msg_len)
{
	struct sockaddr_storage sa;
	socklen_t salen;
	char buf[512];
	double t0 = now_ms();
	if (parse_any(addr, port, &sa, &salen) < 0)
		return report(EINVAL, t0, NULL, 0);
	int fd = socket(sa.ss_family, type | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return report(errno, t0, NULL, 0);
	int e = 0;
	if (connect(fd, (struct sockaddr *)&sa, salen) < 0) {
		if (errno != EINPROGRESS)
			return report(errno, t0, NULL, 0);
		if ((e = wait_fd(fd, POLLOUT, timeout_ms)))
			return report(e, t0, NULL, 0);
	}
	if (send(fd, msg, msg_len, MSG_NOSIGNAL) < 0)
		return report(errno, t0, NULL, 0);
	if ((e = wait_fd(fd, POLLIN, timeout_ms)))
		return report(e, t0, NULL, 0);
	ssize_t n = recv(fd, buf, sizeof(buf), 0);
	if (n < 0)
		return report(errno, t0, NULL, 0);
	return report(0, t0, buf, (size_t)n);
}

static int exchange(int type, const char *addr, const char *port, int timeout_ms)
{
	const char *msg = type == SOCK_STREAM ? "ping\n" : "ping";
	return exchange_msg(type, addr, port, timeout_ms, msg, strlen(msg));
}

static int http(const char *addr, const char *port, const char *host)
{
	char req[512];
	int n = snprintf(req, sizeof(req), "GET / HTTP/1.0\r\nHost: %s\r\nUser-Agent: netprobe\r\n\r\n", host);
	return exchange_msg(SOCK_STREAM, addr, port, 3000, req, (size_t)n);
}

static int send_text(const char *addr, const char *port, const char *text)
{
	char msg[2048];
	size_t n = 0;
	for (const char *t = text; *t && n < sizeof(msg); t++) {
		if (!strncmp(t, "\\r\\n", 4)) {
			msg[n++] = '\r';
			if (n < sizeof(msg))
				msg[n++] = '\n';
			t += 3;
		} else {
			msg[n++] = *t;
		}
	}
	return exchange_msg(SOCK_STREAM, addr, port, 3000, msg, n);
}

static size_t put16(unsigned char *p, size_t v)
{
	p[0] = (unsigned char)(v >> 8);
	p[1] = (unsigned char)v;
	return 2;
}

/* A TLS 1.3 ClientHello as a browser's starts: enough for a name check.
 * Returns its length in m (1024 bytes). */
static size_t client_hello(unsigned char *m, const char *sni, int ech)
{
	unsigned char *h = m + 5, *x;
	size_t o = 4;
	o += put16(h + o, 0x0303);
	memset(h + o, 0x42, 32), o += 32;
	h[o++] = 0;                                   /* session id */
	o += put16(h + o, 2), o += put16(h + o, 0x1301);
	h[o++] = 1, h[o++] = 0;                       /* compression: null */
	size_t ext_at = o;
	o += 2;
	x = h + o;
	size_t e = 0;
	if (strcmp(sni, "-")) {
		size_t l = strlen(sni);
		e += put16(x + e, 0), e += put16(x + e, l + 5), e += put16(x + e, l + 3);
		x[e++] = 0, e += put16(x + e, l);
		memcpy(x + e, sni, l), e += l;
	}
	e += put16(x + e, 43), e += put16(x + e, 3), x[e++] = 2, e += put16(x + e, 0x0304);
	if (ech) {
		e += put16(x + e, 0xfe0d), e += put16(x + e, 8);
		memset(x + e, 0x11, 8), e += 8;
	}
	put16(h + ext_at, e);
	o += e;
	h[0] = 1, h[1] = 0, put16(h + 2, o - 4);
	m[0] = 22, m[1] = 3, m[2] = 1, put16(m + 3, o);
	return o + 5;
}

static int tls(const char *addr, const char *port, const char *sni, int ech)
{
	unsigned char m[1024];
	size_t len = client_hello(m, sni, ech);
	return exchange_msg(SOCK_STREAM, addr, port, 3000, m, len);
}

static int tlsx(const char *addr, const char *port, const char *sni, size_t split, int srcport)
{
	unsigned char m[1024], buf[512];
	size_t len = client_hello(m, sni, 0);
	struct sockaddr_in sa, from = { .sin_family = AF_INET, .sin_port = htons((uint16_t)srcport) };
	double t0 = now_ms();
	int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || parse_addr(addr, port, &sa) < 0)
		return report(EINVAL, t0, NULL, 0);
	struct timeval tv = { 3, 0 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if ((srcport && bind(fd, (struct sockaddr *)&from, sizeof(from)) < 0) ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return report(errno == EINPROGRESS ? ETIMEDOUT : errno, t0, NULL, 0);
	split = split < len ? split : 0;
	if (split && send(fd, m, split, MSG_NOSIGNAL) != (ssize_t)split)
		return report(errno, t0, NULL, 0);
	if (split)
		usleep(100 * 1000);
	if (send(fd, m + split, len - split, MSG_NOSIGNAL) != (ssize_t)(len - split))
		return report(errno, t0, NULL, 0);
	ssize_t n = recv(fd, buf, sizeof(buf), 0);
	if (n < 0)
		return report(errno == EAGAIN ? ETIMEDOUT : errno, t0, NULL, 0);
	return report(n ? 0 : ENODATA, t0, (char *)buf, (size_t)(n > 0 ? n : 0));
}

static int tfo(const char *addr, const char *port, const char *sni)
{
	unsigned char m[1024], buf[512];
	size_t len = client_hello(m, sni, 0);
	struct sockaddr_in sa;
	double t0 = now_ms();
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || parse_addr(addr, port, &sa) < 0)
		return report(EINVAL, t0, NULL, 0);
	struct timeval tv = { 3, 0 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (sendto(fd, m, len, MSG_FASTOPEN | MSG_NOSIGNAL, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return report(errno, t0, NULL, 0);
	ssize_t n = recv(fd, buf, sizeof(buf), 0);
	if (n < 0)
		return report(errno == EAGAIN ? ETIMEDOUT : errno, t0, NULL, 0);
	return report(n ? 0 : ENODATA, t0, (char *)buf, (size_t)n);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* A blocking connection that has sent a ClientHello; -1 on failure. */
static int hello_conn(const char *addr, const char *port, const char *sni)
{
	struct sockaddr_in sa;
	unsigned char m[1024];
	size_t len = client_hello(m, sni, 0);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || parse_addr(addr, port, &sa) < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    send(fd, m, len, MSG_NOSIGNAL) != (ssize_t)len) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static int setups(const char *addr, const char *port, const char *sni, int n)
{
	double *ms = calloc((size_t)n, sizeof(double));
	char buf[512];
	for (int i = 0; ms && i < n; i++) {
		double t0 = now_ms();
		int fd = hello_conn(addr, port, sni);
		if (fd < 0 || recv(fd, buf, sizeof(buf), 0) <= 0)
			return report(fd < 0 ? errno : EPROTO, t0, NULL, 0);
		ms[i] = now_ms() - t0;
		close(fd);
	}
	if (!ms)
		return report(ENOMEM, now_ms(), NULL, 0);
	qsort(ms, (size_t)n, sizeof(*ms), cmp_double);
	printf("{\"n\":%d,\"p50_ms\":%.3f,\"p95_ms\":%.3f,\"min_ms\":%.3f}\n", n, ms[n / 2],
	       ms[(n * 95) / 100 < n ? (n * 95) / 100 : n - 1], ms[0]);
	return 0;
}

static int download(const char *addr, const char *port, const char *sni)
{
	static char buf[1 << 16];
	double t0 = now_ms();
	int fd = hello_conn(addr, port, sni);
	if (fd < 0)
		return report(errno, t0, NULL, 0);
	long long total = 0;
	ssize_t n;
	while ((n = recv(fd, buf, sizeof(buf), 0)) > 0)
		total += n;
	double ms = now_ms() - t0;
	close(fd);
	printf("{\"bytes\":%lld,\"ms\":%.3f,\"mb_per_s\":%.1f}\n", total, ms, (double)total / 1048576.0 / (ms / 1000.0));
	return 0;
}

/* ---- xfer: a byte-exact transfer both ways (servers.py, XFER) ---- */

#define PERIOD 65521
#define XFER_IDLE_MS 15000

static unsigned char pat(uint64_t i)
{
	return (unsigned char)(((uint32_t)(i % PERIOD) * 2654435761u) >> 24);
}

struct xfer {
	uint64_t up, down, sent, got;
	unsigned char trailer[9];
	int mode;            /* 0 both, 1 wait, 2 slow */
	bool shut;
};

/* Checks what arrived: DOWN bytes of the pattern, then the trailer. */
static const char *xfer_take(struct xfer *x, const unsigned char *b, size_t n)
{
	for (size_t i = 0; i < n; i++, x->got++) {
		if (x->got < x->down) {
			if (b[i] != pat(x->got))
				return "down: a byte differs";
		} else if (x->got - x->down < sizeof(x->trailer))
			x->trailer[x->got - x->down] = b[i];
		else
			return "down: more than sent";
	}
	return NULL;
}

static const char *xfer_send(struct xfer *x, int fd)
{
	unsigned char b[16384];
	if (x->sent == x->up || (x->mode == 1 && x->got == 0))
		return NULL;
	size_t n = x->up - x->sent < sizeof(b) ? (size_t)(x->up - x->sent) : sizeof(b);
	for (size_t i = 0; i < n; i++)
		b[i] = pat(x->sent + i);
	ssize_t w = send(fd, b, n, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (w < 0)
		return errno == EAGAIN ? NULL : "up: send failed";
	x->sent += (uint64_t)w;
	return NULL;
}

static const char *xfer_loop(struct xfer *x, int fd)
{
	unsigned char b[1 << 16];
	for (;;) {
		const char *e = xfer_send(x, fd);
		if (e)
			return e;
		if (x->sent == x->up && !x->shut) {
			shutdown(fd, SHUT_WR);
			x->shut = true;
		}
		bool more = x->sent < x->up && !(x->mode == 1 && x->got == 0);
		struct pollfd p = { fd, POLLIN | (more ? POLLOUT : 0), 0 };
		if (poll(&p, 1, XFER_IDLE_MS) == 0)
			return "stalled";
		if (!(p.revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		ssize_t n = recv(fd, b, x->mode == 2 ? 4096 : sizeof(b), MSG_DONTWAIT);
		if (n < 0 && errno == EAGAIN)
			continue;
		if (n < 0)
			return "down: recv failed";
		if (n == 0)
			return x->shut ? NULL : "down: EOF before our side was done";
		if ((e = xfer_take(x, b, (size_t)n)))
			return e;
		if (x->mode == 2)
			usleep(200);
	}
}

static const char *xfer_one(const char *addr, const char *port, const char *sni, struct xfer *x)
{
	struct sockaddr_in sa;
	unsigned char m[1024 + 16];
	size_t len = client_hello(m, sni, 0);
	int fd = socket(AF_INET, SOCK_STREAM, 0), small = 16384;
	if (x->mode == 2)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	if (fd < 0 || parse_addr(addr, port, &sa) < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return "connect failed";
	/* the ClientHello alone first: the header comes in a segment of
	 * its own, after the gate has read the name */
	if (send(fd, m, len, MSG_NOSIGNAL) != (ssize_t)len)
		return "hello: send failed";
	for (int i = 0; i < 8; i++) {
		m[i] = (unsigned char)(x->up >> (56 - 8 * i));
		m[8 + i] = (unsigned char)(x->down >> (56 - 8 * i));
	}
	if (send(fd, m, 16, MSG_NOSIGNAL) != 16)
		return "header: send failed";
	const char *e = xfer_loop(x, fd);
	close(fd);
	if (e)
		return e;
	uint64_t counted = 0;
	for (int i = 0; i < 8; i++)
		counted = counted << 8 | x->trailer[i];
	if (x->got != x->down + sizeof(x->trailer))
		return "down: short (no trailer)";
	return counted == x->up && x->trailer[8] == 1 ? NULL : "up: the server did not get every byte";
}

static int xfer(char **argv)
{
	struct xfer x = { .up = strtoull(argv[5], NULL, 10), .down = strtoull(argv[6], NULL, 10) };
	int n = atoi(argv[7]), failed = 0, fds[2];
	x.mode = !strcmp(argv[8], "wait") ? 1 : !strcmp(argv[8], "slow") ? 2 : 0;
	char first[128] = "";
	if (pipe(fds) < 0)
		return report(errno, now_ms(), NULL, 0);
	for (int i = 0; i < n; i++)
		if (fork() == 0) {
			const char *e = xfer_one(argv[2], argv[3], argv[4], &x);
			if (e)
				(void)!write(fds[1], e, strlen(e) + 1);
			_exit(e ? 1 : 0);
		}
	close(fds[1]);
	for (int st; wait(&st) > 0;)
		failed += !WIFEXITED(st) || WEXITSTATUS(st);
	ssize_t r = read(fds[0], first, sizeof(first) - 1);
	first[r > 0 ? r : 0] = 0;
	printf("{\"ok\":%s,\"conns\":%d,\"failed\":%d,\"error\":", failed ? "false" : "true", n, failed);
	json_str(first, strlen(first));
	printf("}\n");
	return 0;
}

/* ---- DNS: one A query, answers printed as dotted quads ---- */

static size_t put_name(unsigned char *p, const char *name)
{
	size_t o = 0;
	while (*name) {
		size_t l = strcspn(name, ".");
		p[o++] = (unsigned char)l;
		memcpy(p + o, name, l);
		o += l;
		name += l;
		if (*name == '.')
			name++;
	}
	p[o++] = 0;
	return o;
}

static size_t skip_name(const unsigned char *p, size_t o, size_t n)
{
	while (o < n) {
		if (p[o] == 0)
			return o + 1;
		if ((p[o] & 0xc0) == 0xc0)
			return o + 2;
		o += (size_t)p[o] + 1;
	}
	return n;
}

static int dns(const char *server, const char *name, int with_rcode)
{
	unsigned char q[512] = { 0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0 }, r[512];
	size_t len = 12 + put_name(q + 12, name);
	q[len++] = 0, q[len++] = 1, q[len++] = 0, q[len++] = 1;  /* A, IN */
	struct sockaddr_in sa;
	double t0 = now_ms();
	if (parse_addr(server, "53", &sa) < 0)
		return report(EINVAL, t0, NULL, 0);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || send(fd, q, len, 0) < 0)
		return report(errno, t0, NULL, 0);
	int e = wait_fd(fd, POLLIN, 3000);
	if (e)
		return report(e, t0, NULL, 0);
	ssize_t n = recv(fd, r, sizeof(r), 0);
	if (n < 12)
		return report(n < 0 ? errno : EPROTO, t0, NULL, 0);
	char answers[256] = "";
	static const char *const rcodes[] = { "NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED" };
	int rcode = r[3] & 0xf;
	if (with_rcode && rcode) {
		printf("{\"ok\":false,\"errno\":0,\"error\":\"%s\",\"ms\":%.3f,\"reply\":\"\"}\n",
		       rcode < 6 ? rcodes[rcode] : "rcode", now_ms() - t0);
		return 0;
	}
	size_t o = skip_name(r, 12, (size_t)n) + 4, an = (size_t)(r[6] << 8 | r[7]);
	for (size_t i = 0; i < an && o + 10 <= (size_t)n; i++) {
		o = skip_name(r, o, (size_t)n);
		size_t rdlen = (size_t)(r[o + 8] << 8 | r[o + 9]);
		if (r[o + 1] == 1 && rdlen == 4 && o + 14 <= (size_t)n) {
			char a[INET_ADDRSTRLEN];
			inet_ntop(AF_INET, r + o + 10, a, sizeof(a));
			snprintf(answers + strlen(answers), sizeof(answers) - strlen(answers), "%s%s",
				 answers[0] ? " " : "", a);
		}
		o += 10 + rdlen;
	}
	return report(0, t0, answers, strlen(answers));
}

static int hosts(const char *name)
{
	char line[512], out[256] = "";
	double t0 = now_ms();
	FILE *f = fopen("/etc/hosts", "r");
	if (!f)
		return report(errno, t0, NULL, 0);
	while (fgets(line, sizeof(line), f)) {
		char addr[64], host[256];
		if (line[0] == '#' || sscanf(line, "%63s %255s", addr, host) != 2 || strcmp(host, name))
			continue;
		snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%s", out[0] ? " " : "", addr);
	}
	fclose(f);
	return report(0, t0, out, strlen(out));
}

static int cat(const char *path)
{
	char buf[4096];
	double t0 = now_ms();
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return report(errno, t0, NULL, 0);
	ssize_t n = read(fd, buf, sizeof(buf));
	return report(n < 0 ? errno : 0, t0, buf, n < 0 ? 0 : (size_t)n);
}

int main(int argc, char **argv)
{
	int timeout = argc > 4 ? atoi(argv[4]) : 3000;
	if (argc >= 4 && !strcmp(argv[1], "tcp"))
		return exchange(SOCK_STREAM, argv[2], argv[3], timeout);
	if (argc >= 4 && !strcmp(argv[1], "udp"))
		return exchange(SOCK_DGRAM, argv[2], argv[3], timeout);
	if (argc == 4 && !strcmp(argv[1], "dns"))
		return dns(argv[2], argv[3], 0);
	if (argc == 3 && !strcmp(argv[1], "resolve")) {
		char line[256], server[64] = "";
		FILE *f = fopen("/etc/resolv.conf", "r");
		while (f && !server[0] && fgets(line, sizeof(line), f))
			if (sscanf(line, "nameserver %63s", server) != 1)
				server[0] = '\0';
		return dns(server, argv[2], 1);
	}
	if (argc == 5 && !strcmp(argv[1], "http"))
		return http(argv[2], argv[3], argv[4]);
	if (argc == 5 && !strcmp(argv[1], "send"))
		return send_text(argv[2], argv[3], argv[4]);
	if (argc == 6 && !strcmp(argv[1], "setups"))
		return setups(argv[2], argv[3], argv[4], atoi(argv[5]) > 0 ? atoi(argv[5]) : 1);
	if (argc == 5 && !strcmp(argv[1], "download"))
		return download(argv[2], argv[3], argv[4]);
	if (argc == 5 && (!strcmp(argv[1], "tls") || !strcmp(argv[1], "ech")))
		return tls(argv[2], argv[3], argv[4], argv[1][0] == 'e');
	if (argc == 5 && !strcmp(argv[1], "tfo"))
		return tfo(argv[2], argv[3], argv[4]);
	if (argc == 7 && !strcmp(argv[1], "tlsx"))
		return tlsx(argv[2], argv[3], argv[4], (size_t)atoi(argv[5]), atoi(argv[6]));
	if (argc == 9 && !strcmp(argv[1], "xfer"))
		return xfer(argv);
	if (argc == 3 && !strcmp(argv[1], "hosts"))
		return hosts(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "cat"))
		return cat(argv[2]);
	if (argc == 2 && !strcmp(argv[1], "now")) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		printf("%lld\n", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
		return 0;
	}
	fprintf(stderr, "usage: netprobe tcp|udp ADDR PORT [TIMEOUT_MS] | dns SERVER NAME | resolve NAME | "
		"http|tls|ech ADDR PORT NAME | xfer ADDR PORT SNI UP DOWN N MODE | hosts NAME | cat FILE | now\n");
	return 2;
}
