# SPDX-License-Identifier: Apache-2.0
"""kiwi-run run --network none|egress end to end, in the fake world: the
real launcher (user namespace, read-only busybox rootfs, no capabilities
left) with netprobe inside. Skipped while kiwi-run has no --network."""
import fcntl
import ipaddress
import json
import os
import subprocess
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from fakenet import HOST_UPLINK, leftovers

REPO = Path(__file__).resolve().parent.parent.parent
PROBE = "/usr/local/bin/netprobe"
DOCS = "192.0.2.0/24,198.51.100.0/24,203.0.113.0/24"
PUBLIC = ["--network", "egress", "--egress", "public_internet", "--allow-cidr", DOCS, "--dns", "192.0.2.53"]


@pytest.fixture(scope="module")
def kiwi_run():
    path = Path(os.environ.get("KIWI_RUN", REPO / "build" / "src" / "kiwi-run"))
    if not path.is_file():
        pytest.skip(f"{path} is missing")
    help_text = subprocess.run([str(path), "run", "--help"], capture_output=True, text=True).stdout
    if "--network" not in help_text:
        pytest.skip("kiwi-run run has no --network yet (the launcher wiring of issue 5)")
    return str(path)


@pytest.fixture(scope="module")
def rootfs(tools):
    """The busybox rootfs with netprobe in /usr/local/bin (and the
    /etc/resolv.conf the script makes to bind over); cached like the
    integration suite's."""
    dest = Path("/var/tmp/kiwi-net-rootfs")
    with open(f"{dest}.lock", "w") as lock:  # concurrent sessions share the cache
        fcntl.flock(lock, fcntl.LOCK_EX)
        r = subprocess.run(["sh", str(REPO / "rootfs-tools" / "busybox-rootfs.sh"), str(dest),
                            tools["netprobe"]], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"busybox-rootfs.sh failed: {r.stderr.strip()}")
    if not (dest / "etc" / "resolv.conf").exists():
        pytest.skip("the rootfs has no /etc/resolv.conf to bind over (busybox-rootfs.sh too old)")
    return str(dest)


class Run:
    def __init__(self, world, kiwi_run, rootfs, scratch):
        self.world, self.kiwi_run, self.rootfs, self.scratch = world, kiwi_run, rootfs, scratch

    def __call__(self, opts, cmd, prefix=(), timeout=30):
        verdict = self.scratch / f"verdict-{uuid.uuid4().hex}.json"
        # an unprivileged caller (prefix) cannot write into the root-owned scratch
        vopts = [] if prefix else ["--verdict", str(verdict)]
        argv = self.world.hx(*prefix, self.kiwi_run, "run", "--rootfs", self.rootfs, *vopts,
                             *map(str, opts), "--", *map(str, cmd))
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        v = json.loads(verdict.read_text()) if verdict.exists() and verdict.stat().st_size else None
        return r, v

    def probes(self, opts, calls):
        script = "; ".join(" ".join([PROBE, *map(str, c)]) for c in calls)
        r, v = self(opts, ["/bin/sh", "-c", script])
        assert r.returncode == 0, f"kiwi-run: {r.returncode} {r.stderr}"
        return [json.loads(l) for l in r.stdout.splitlines()], v


@pytest.fixture
def run(world, kiwi_run, rootfs, scratch):
    return Run(world, kiwi_run, rootfs, scratch)


def ok(res, what):
    assert res["ok"] and res["reply"], f"{what} should connect: {res}"


def rejected(res, what):
    assert not res["ok"] and res["errno"] in (111, 113) and res["ms"] < 500, f"{what} should fail fast: {res}"


def test_network_none_is_only_lo(run):
    res, v = run.probes([], [["tcp", "5.5.5.5", "80"], ["cat", "/proc/net/dev"]])
    assert not res[0]["ok"] and res[0]["error"] == "ENETUNREACH", res[0]
    devs = [l.split(":")[0].strip() for l in res[1]["reply"].splitlines()[2:]]
    assert devs == ["lo"], devs
    assert v.get("egress_blocked", []) == []


def test_public_internet(run, scratch):
    audit = scratch / "audit.jsonl"
    calls = [["tcp", "203.0.113.10", 80], ["udp", "198.51.100.10", 443], ["tcp", "5.5.5.5", 443],
             ["dns", "192.0.2.53", "good.test"],
             ["tcp", "169.254.169.254", 80], ["tcp", "10.99.0.10", 80], ["tcp", "203.0.113.10", 8080],
             ["tcp", HOST_UPLINK, 8081], ["udp", "203.0.113.10", 53]]
    res, v = run.probes([*PUBLIC, "--egress-audit", audit], calls)
    for r, c in zip(res[:4], calls[:4]):
        ok(r, c)
    for r, c in zip(res[4:], calls[4:]):
        rejected(r, c)
    got = {(b["proto"], b["dst"], b["port"]) for b in v["egress_blocked"]}
    assert got == {tuple(c) for c in calls[4:]}, v["egress_blocked"]
    lines = [json.loads(l) for l in audit.read_text().splitlines()]
    assert len(lines) == len(calls), lines  # allowed and denied alike
    assert [l["verdict"] for l in lines] == ["allow"] * 4 + ["deny"] * 5, lines
    assert {(a["proto"], a["dst"], a["port"]) for a in v["egress_allowed"]} == {
        ("tcp", "203.0.113.10", 80), ("udp", "198.51.100.10", 443), ("tcp", "5.5.5.5", 443),
        ("udp", "192.0.2.53", 53)}, v["egress_allowed"]
    # egress and the network audit are one mechanism: the audit's fields,
    # over every attempt allowed or denied
    assert v["network_attempted"] is True and v["network_attempt_count"] >= len(calls), v
    assert {(a["proto"], a["dst"], a["port"]) for a in v["network_attempts"]} == {
        (c[0], c[1], c[2]) for c in calls if c[0] != "dns"} | {("udp", "192.0.2.53", 53)}, v["network_attempts"]


def test_gateway_and_host_loopback_unreachable(run):
    p = PROBE
    script = f"gw=$(ip route | awk '/default/ {{print $3}}'); {p} tcp $gw 8081; {p} udp $gw 8083; {p} tcp $gw 8082"
    r, v = run(PUBLIC, ["/bin/sh", "-c", script])
    res = [json.loads(l) for l in r.stdout.splitlines()]
    assert len(res) == 3, r.stdout + r.stderr
    for x in res:
        rejected(x, "the host through the gateway")


def test_private_network(run):
    opts = ["--network", "egress", "--egress", "private_network", "--allow-cidr", "10.99.0.0/16"]
    res, v = run.probes(opts, [["tcp", "10.99.0.10", 8080], ["tcp", "5.5.5.5", 80]])
    ok(res[0], "the allowed private range")
    rejected(res[1], "a public address")


def test_host_allowlist_by_name(run, scratch):
    """The launcher runs the name gate: the sandbox resolves through it,
    connects by name, and another name on the same address is refused."""
    audit = scratch / "audit.jsonl"
    opts = ["--network", "egress", "--egress", "host_allowlist", "--allow-cidr", "203.0.113.0/24",
            "--allow-host", "good.test", "--dns", "192.0.2.53", "--egress-audit", audit]
    res, v = run.probes(opts, [["resolve", "good.test"], ["http", "203.0.113.10", 80, "good.test"],
                               ["tls", "203.0.113.10", 443, "shared.test"], ["resolve", "shared.test"]])
    assert res[0]["ok"] and res[0]["reply"] == "203.0.113.10", res[0]
    ok(res[1], "the allowed name")
    assert not res[2]["ok"] and res[2]["error"] == "ECONNRESET", res[2]
    assert res[3]["error"] == "NXDOMAIN", res[3]
    names = {(b.get("name"), b["proto"]) for b in v["egress_blocked"]}
    assert ("shared.test", "tcp") in names and ("shared.test", "udp") in names, v["egress_blocked"]


def test_host_allowlist_refuses_mixed_answers(run, world):
    r, v = run(["--network", "egress", "--egress", "host_allowlist", "--allow-cidr", "203.0.113.0/24",
                "--allow-host", "mixed.test:80"], ["true"])
    assert r.returncode == 125 and "mixed.test" in r.stderr, r
    assert leftovers(world.host) == ([], [])
    # failed before the network existed: the verdict says which was asked for
    assert v["network"] == "egress" and v["error"]["step"] == "egress", v
    assert v["egress_blocked"] == [] and v["egress_allowed"] == [], v


def test_rootless_is_refused(run):
    r, v = run(PUBLIC, ["true"], prefix=("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"))
    assert r.returncode == 125, r
    assert "root" in r.stderr and "kiwi-helper" in r.stderr, r.stderr


def test_many_sequential_and_concurrent_leave_nothing(run, world):
    for i in range(200):
        r, v = run(PUBLIC, ["true"])
        assert r.returncode == 0, (i, r.stderr)
    script = "ip -o -4 addr show dev eth0 | awk '{print $4}'"

    def one(_):
        r, v = run(PUBLIC, ["/bin/sh", "-c", script])
        return r.stdout.strip()

    with ThreadPoolExecutor(6) as pool:
        addrs = list(pool.map(one, range(6)))
    assert all(addrs) and len(set(addrs)) == 6, addrs
    assert leftovers(world.host) == ([], [])


def test_gc_after_kiwi_run_is_killed(run, world, tools):
    """SIGKILL to kiwi-run: the sandbox dies with it (and its veth with its
    namespace); the table and the lease stay until kiwi-run gc."""
    import signal
    import time
    p = subprocess.Popen(world.hx(run.kiwi_run, "run", "--rootfs", run.rootfs, *PUBLIC, "--", "sleep", "30"),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not leftovers(world.host)[1] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert leftovers(world.host)[1], "the run's table never appeared"
    finally:
        p.send_signal(signal.SIGKILL)  # ip netns exec execs: this is kiwi-run
        p.wait()
    deadline = time.monotonic() + 10
    while leftovers(world.host)[0] and time.monotonic() < deadline:
        time.sleep(0.05)
    veths, tables = leftovers(world.host)
    assert not veths, "the veth goes with the sandbox's namespace"
    assert len(tables) == 1, "the table outlives a killed kiwi-run"
    lease = Path("/run/kiwi/egress") / (tables[0][len("kiwi_"):] + ".lock")
    r = subprocess.run(world.hx(run.kiwi_run, "gc"), capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    # The table lives in this world's namespace, which only our gc sees;
    # the lease is the host's, and another suite's gc (or any egress
    # start, which collects unheld leases) may take it first: 1 or more.
    assert json.loads(r.stdout)["network_removed"] >= 1, r.stdout
    assert leftovers(world.host) == ([], [])
    assert not lease.exists(), "the lease is gone"


# Binds queue numbers argv[1].. (argv[2] of them) with one nfnetlink socket
# of its own, says so, and holds them until its stdin closes.
HOLD_QUEUES = r"""
import socket, struct, sys
first, n = int(sys.argv[1]), int(sys.argv[2])
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12)   # NETLINK_NETFILTER
s.bind((0, 0))
for seq, num in enumerate(range(first, first + n), 1):
    cmd = struct.pack("=HHBBH", 8, 1, 1, 0, 0)               # NFQA_CFG_CMD: BIND
    body = struct.pack("=BBH", 0, 0, socket.htons(num)) + cmd
    s.send(struct.pack("=IHHII", 16 + len(body), (3 << 8) | 2, 1 | 4, seq, 0) + body)
    err = struct.unpack_from("=i", s.recv(4096), 16)[0]
    if err:
        sys.exit(f"queue {num}: {-err}")
print("held", flush=True)
sys.stdin.read()
"""


def test_no_queue_for_the_name_gate_is_said(run, world):
    """Every queue number the gate tries is held by this test (one /30
    pool: the gate's first number is the block's): TLS on 443 goes
    through the proxy, and kiwi-run says so and why, on a --debug line
    and in the verdict, instead of falling back in silence."""
    pool = ipaddress.IPv4Network("10.201.7.0/30")
    first = (int(pool.network_address) >> 2) & 0xffff
    holder = subprocess.Popen(world.hx("python3", "-c", HOLD_QUEUES, str(first), "64"), stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held", "the test's queues"
        opts = ["--debug", "--network", "egress", "--egress", "host_allowlist", "--allow-cidr", "203.0.113.0/24",
                "--allow-host", "good.test", "--dns", "192.0.2.53", "--egress-pool", pool]
        r, v = run(opts, ["/bin/sh", "-c", f"{PROBE} resolve good.test; {PROBE} tls 203.0.113.10 443 good.test"])
    finally:
        holder.stdin.close()
        holder.wait()
    assert r.returncode == 0, r.stderr
    ok(json.loads(r.stdout.splitlines()[1]), "TLS on 443 through the proxy")
    off = v.get("egress_tls_kernel_off", "")
    assert off.startswith("no queue for the name gate"), v
    assert f"TLS on 443 through the proxy, not the kernel path: {off}" in r.stderr, r.stderr


def test_a_sandboxs_flows_leave_no_conntrack_entry_behind(run):
    """Two sandboxes one after the other, at two addresses (a /30 pool
    each), each a TLS flow on the kernel path to the same server from
    source port 20491. The masquerade keeps the second one's port only if
    the first one's conntrack entry (TIME_WAIT once closed, two minutes)
    went when the first sandbox ended."""
    seen = []
    for pool in ("10.201.8.0/30", "10.201.8.4/30"):
        opts = ["--network", "egress", "--egress", "host_allowlist", "--allow-cidr", "203.0.113.0/24",
                "--allow-host", "good.test", "--dns", "192.0.2.53", "--egress-pool", pool]
        r, v = run(opts, ["/bin/sh", "-c", f"{PROBE} resolve good.test >/dev/null; "
                                           f"{PROBE} tlsx 203.0.113.10 443 good.test 0 20491"])
        assert r.returncode == 0, r.stderr
        res = json.loads(r.stdout.splitlines()[-1])
        ok(res, "TLS on 443")
        assert "egress_tls_kernel_off" not in v, v
        seen.append(int(res["reply"].split()[3]))
    assert seen == [20491, 20491], f"the server saw ports {seen}: the first sandbox's entry was left"
