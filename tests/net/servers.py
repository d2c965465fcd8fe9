# SPDX-License-Identifier: Apache-2.0
"""The fake internet's servers, run inside the test's "internet" network
namespace (or, with role "host", the services of the fake host that a
sandbox must never reach).

Every TCP and UDP port listens on IPv4 and IPv6.
TCP: answers one read with "pong LOCAL:PORT PEER PEERPORT" (an HTTP
response when the request starts with GET); on BULK_ADDR it is the bulk
download instead (after the first read, BULK_BYTES, then EOF), so that
bench/names-cost.py can download over 443, the name gate's kernel path. UDP: the same, per datagram. DNS on udp/53
answers A queries from NAMES; a name starting with "rebind" answers
203.0.113.10 for SWITCH_S seconds after it was first asked, then
169.254.169.254 (a rebinding attack); one starting with "rotate" answers
203.0.113.10, then 203.0.113.11 (a CDN moving a name). Every answer has
TTL 0 (kiwi-run's name gate keeps an answer 30 s at least).
XFER (tcp/9001): a byte-exact two-way transfer for the name gate's relay
(netprobe xfer): after a TLS record (the ClientHello) and a header (bytes
up, bytes down: two big-endian u64), it sends the down bytes of PATTERN
while it reads the up bytes and checks each against PATTERN; once the
client has shut its side down, it sends a trailer (the count it got, and
1 when every byte matched and the count is right) and closes.
Prints "ready" once every socket is bound.
"""
import socket
import struct
import sys
import threading
import time

ROLES = {
    "internet": {"tcp": [22, 53, 80, 443, 8080], "udp": [443, 5000, 9999], "dns": True, "bulk": [9000],
                 "xfer": [9001]},
    "host": {"tcp": [8081], "udp": [8083], "dns": False, "loopback_tcp": [8082], "host_dns": True},
}
# The fake host's own resolver (on its loopback and its addresses, as a
# local caching resolver would be), which alone knows these names
HOST_NAMES = {"inside.test": ["203.0.113.11"]}

NAMES = {
    "good.test": ["203.0.113.10"],
    "two.test": ["203.0.113.10", "203.0.113.11"],
    "mixed.test": ["203.0.113.10", "169.254.169.254"],
    "meta.test": ["169.254.169.254"],
    "private.test": ["10.99.0.10"],
    "public.test": ["5.5.5.5"],
    "mixpub.test": ["5.5.5.5", "10.99.0.10"],
    "loop.test": ["127.0.0.1"],
    "shared.test": ["203.0.113.10"],
    "bulk.test": ["203.0.113.12"],
    "a.wild.test": ["203.0.113.11"],
    "b.a.wild.test": ["203.0.113.11"],
    "wild.test": ["203.0.113.11"],
}
_seen = {}
_lock = threading.Lock()


def pong(local, peer, data):
    text = f"pong {local[0]}:{local[1]} {peer[0]} {peer[1]}\n"
    if data.startswith(b"GET"):
        text = f"HTTP/1.0 200 OK\r\nContent-Length: {len(text)}\r\n\r\n{text}"
    return text.encode()


BULK_BYTES = 100 * 1024 * 1024
BULK_ADDR = "203.0.113.12"


def serve_bulk(sock):
    """For bench/names-cost.py: after the first read, BULK_BYTES, then EOF."""
    while True:
        conn, _ = sock.accept()
        threading.Thread(target=bulk_one, args=(conn,), daemon=True).start()


def bulk_one(conn):
    chunk = memoryview(b"\0" * (1 << 20))
    with conn:
        try:
            conn.recv(4096)
            for _ in range(BULK_BYTES // len(chunk)):
                conn.sendall(chunk)
        except OSError:
            pass


# Byte i of a transfer is PATTERN[i % PERIOD] (netprobe.c has the same):
# a prime period, so a lost or repeated stretch shows.
PERIOD = 65521
PATTERN = bytes(((j * 2654435761) & 0xFFFFFFFF) >> 24 for j in range(PERIOD))
_BIG = PATTERN * ((1 << 20) // PERIOD + 2)   # any 1 MiB stretch from any phase


def recv_exact(conn, n):
    b = b""
    while len(b) < n:
        got = conn.recv(n - len(b))
        if not got:
            raise OSError("short")
        b += got
    return b


def serve_xfer(sock):
    while True:
        conn, _ = sock.accept()
        threading.Thread(target=xfer_one, args=(conn,), daemon=True).start()


def xfer_check(conn, want, result):
    got, ok = 0, True
    while True:
        b = conn.recv(1 << 20)
        if not b:
            break
        o = got % PERIOD
        ok = ok and b == _BIG[o:o + len(b)]
        got += len(b)
    result.extend([got, ok and got == want])


def xfer_one(conn):
    with conn:
        conn.settimeout(60)
        try:
            head = recv_exact(conn, 5)
            recv_exact(conn, struct.unpack(">H", head[3:5])[0])
            up, down = struct.unpack(">QQ", recv_exact(conn, 16))
            result = []
            reader = threading.Thread(target=xfer_check, args=(conn, up, result), daemon=True)
            reader.start()
            sent = 0
            while sent < down:
                n, o = min(1 << 20, down - sent), sent % PERIOD
                conn.sendall(_BIG[o:o + n])
                sent += n
            reader.join()
            if result:
                conn.sendall(struct.pack(">QB", result[0], result[1]))
        except OSError:
            pass


def serve_tcp(sock):
    while True:
        conn, peer = sock.accept()
        threading.Thread(target=tcp_one, args=(conn, peer), daemon=True).start()


def tcp_one(conn, peer):
    if conn.getsockname()[0] == BULK_ADDR:
        return bulk_one(conn)
    with conn:
        conn.settimeout(5)
        try:
            data = conn.recv(512)
            conn.sendall(pong(conn.getsockname(), peer, data))
        except OSError:
            pass


IP_PKTINFO = 8


def recv_dgram(sock):
    """(data, peer, local address): a wildcard socket must answer from the
    address the datagram was sent to, or the sandbox's conntrack entry
    (and masquerade) would not match the answer."""
    data, anc, _, peer = sock.recvmsg(2048, socket.CMSG_SPACE(12))
    local = "0.0.0.0"
    for level, kind, value in anc:
        if level == socket.IPPROTO_IP and kind == IP_PKTINFO:
            local = socket.inet_ntoa(value[8:12])
    return data, peer, local


def send_dgram(sock, data, peer, local):
    info = struct.pack("=I4s4s", 0, socket.inet_aton(local), b"\0" * 4)
    sock.sendmsg([data], [(socket.IPPROTO_IP, IP_PKTINFO, info)], 0, peer)


def serve_udp(sock):
    while True:
        data, peer, local = recv_dgram(sock)
        send_dgram(sock, pong((local, sock.getsockname()[1]), peer, data), peer, local)


def serve_udp6(sock):
    """The same in IPv6: answers from the address the datagram came to."""
    while True:
        data, anc, _, peer = sock.recvmsg(2048, socket.CMSG_SPACE(20))
        local = "::"
        info = b""
        for level, kind, value in anc:
            if level == socket.IPPROTO_IPV6 and kind == socket.IPV6_PKTINFO:
                local, info = socket.inet_ntop(socket.AF_INET6, value[:16]), value[:16] + b"\0" * 4
        reply = pong((local, sock.getsockname()[1]), peer, data)
        sock.sendmsg([reply], [(socket.IPPROTO_IPV6, socket.IPV6_PKTINFO, info)] if info else [], 0, peer)


SWITCH_S = 15


def answers_for(name, names):
    if names is not NAMES:
        return names.get(name, [])
    later = {"rebind": "169.254.169.254", "rotate": "203.0.113.11"}
    for prefix, then in later.items():
        if name.startswith(prefix):
            with _lock:
                first = _seen.setdefault(name, time.monotonic())
            return ["203.0.113.10"] if time.monotonic() - first < SWITCH_S else [then]
    return NAMES.get(name, [])


def dns_reply(q, names=NAMES):
    qid, flags, qd = struct.unpack("!HHH", q[:6])
    labels, o = [], 12
    while q[o]:
        labels.append(q[o + 1:o + 1 + q[o]].decode())
        o += 1 + q[o]
    qtype = struct.unpack("!H", q[o + 1:o + 3])[0]
    question = q[12:o + 5]
    name = ".".join(labels).lower()
    addrs = answers_for(name, names) if qtype == 1 else []
    rcode = 0 if addrs or name in names or (names is NAMES and name.startswith(("rebind", "rotate"))) else 3
    head = struct.pack("!HHHHHH", qid, 0x8180 | rcode, 1, len(addrs), 0, 0)
    body = b"".join(struct.pack("!HHHIH", 0xC00C, 1, 1, 0, 4) + socket.inet_aton(a) for a in addrs)
    return head + question + body


def serve_dns(sock, names=NAMES):
    while True:
        q, peer, local = recv_dgram(sock)
        try:
            send_dgram(sock, dns_reply(q, names), peer, local)
        except (IndexError, struct.error, UnicodeDecodeError):
            pass


def bound6(kind, port):
    s = socket.socket(socket.AF_INET6, kind)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind(("::", port))
    if kind == socket.SOCK_STREAM:
        s.listen(64)
    else:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVPKTINFO, 1)
    return s


def bound(kind, addr, port):
    s = socket.socket(socket.AF_INET, kind)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    if kind == socket.SOCK_STREAM:
        # data in a SYN is taken only where the namespace's
        # net.ipv4.tcp_fastopen enables a server (a test of the name
        # gate's does, for a while)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_FASTOPEN, 16)
        s.listen(64)
    else:
        s.setsockopt(socket.IPPROTO_IP, IP_PKTINFO, 1)
    return s


def main():
    role = ROLES[sys.argv[1]]
    jobs = [(serve_tcp, bound(socket.SOCK_STREAM, "0.0.0.0", p)) for p in role["tcp"]]
    jobs += [(serve_tcp, bound(socket.SOCK_STREAM, "127.0.0.1", p)) for p in role.get("loopback_tcp", [])]
    jobs += [(serve_udp, bound(socket.SOCK_DGRAM, "0.0.0.0", p)) for p in role["udp"]]
    jobs += [(serve_bulk, bound(socket.SOCK_STREAM, "0.0.0.0", p)) for p in role.get("bulk", [])]
    jobs += [(serve_xfer, bound(socket.SOCK_STREAM, "0.0.0.0", p)) for p in role.get("xfer", [])]
    jobs += [(serve_tcp, bound6(socket.SOCK_STREAM, p)) for p in role["tcp"]]
    jobs += [(serve_udp6, bound6(socket.SOCK_DGRAM, p)) for p in role["udp"]]
    if role["dns"]:
        jobs.append((serve_dns, bound(socket.SOCK_DGRAM, "0.0.0.0", 53)))
    if role.get("host_dns"):
        jobs.append((lambda sock: serve_dns(sock, HOST_NAMES), bound(socket.SOCK_DGRAM, "0.0.0.0", 53)))
    for fn, s in jobs:
        threading.Thread(target=fn, args=(s,), daemon=True).start()
    print("ready", flush=True)
    sys.stdin.read()  # until the harness closes our stdin


if __name__ == "__main__":
    main()
