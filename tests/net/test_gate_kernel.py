# SPDX-License-Identifier: Apache-2.0
"""The name gate's kernel path (root runs): TLS on 443 is not proxied;
the table queues a flow's first packets to the gate, which checks the
ClientHello's name and marks the flow, and the kernel forwards it like a
direct one. netprobe tlsx binds a source port of its own: the server
(servers.py) names the port it sees, the sandbox's (masqueraded, port
kept) on the kernel path, a port of the gate's own through the proxy.

Those source ports sit below the ephemeral range (32768-60999): masquerade
keeps a port only while no other flow in the host's conntrack table holds
it. A dead sandbox's flows stayed there until 337d3eb (the 300 connections
of test_many_connections_in_a_row, from ephemeral ports, among them): a
port one of them had used made NAT pick another, and a flow on the kernel
path looked like one through the proxy. Teardown now deletes them
(test_kiwi_run.py: test_a_sandboxs_flows_leave_no_conntrack_entry_behind);
the ports stay out of the range that any other flow of the test's host
may hold."""
import ipaddress
import json
import subprocess
import time

import pytest
from concurrent.futures import ThreadPoolExecutor

from test_names import NAMES, audit_lines, connected, reset


def peer_port(res):
    return int(res["reply"].split()[3])


def tlsx(sni, src, split=0, port=443, addr="203.0.113.10"):
    return ["tlsx", addr, port, sni, split, src]


def test_tls_on_443_goes_through_the_kernel_not_the_proxy(egress, scratch):
    audit = scratch / "audit.jsonl"
    opts = [*NAMES, "--allow-host", "good.test:443,good.test:8080", "--egress-audit", audit]
    res, rep = egress.probes(opts, [["resolve", "good.test"], tlsx("good.test", 20401),
                                    tlsx("good.test", 20402, port=8080)])
    connected(res[1], "TLS on 443")
    assert peer_port(res[1]) == 20401, f"the server sees the sandbox's own port: {res[1]}"
    connected(res[2], "TLS on another port, through the proxy")
    assert peer_port(res[2]) != 20402, f"the proxy connects from a port of its own: {res[2]}"
    allowed = [(l["port"], l["name"], l["rule"]) for l in audit_lines(audit)
               if l["verdict"] == "allow" and l["proto"] == "tcp"]
    assert allowed == [(443, "good.test", "allowed:name"), (8080, "good.test", "allowed:name")], allowed
    assert rep["egress_blocked"] == []


def test_the_kernel_path_refuses_another_name_no_name_and_plain_http(egress, scratch):
    """shared.test is served from good.test's address: refused by its
    ClientHello; a ClientHello without a name, and plain HTTP (even with
    an allowed Host) on 443, are refused too; then the allowed name still
    connects on the same address."""
    audit = scratch / "audit.jsonl"
    calls = [["resolve", "good.test"], tlsx("shared.test", 20411), tlsx("-", 20412),
             ["http", "203.0.113.10", 443, "good.test"], tlsx("shared.test", 20413, split=60),
             tlsx("good.test", 20414)]
    res, rep = egress.probes([*NAMES, "--allow-host", "good.test", "--egress-audit", audit], calls)
    for r, c in zip(res[1:5], calls[1:5]):
        reset(r, c)
    connected(res[5], "the allowed name after")
    assert peer_port(res[5]) == 20414, res[5]
    refused = [(l["port"], l["name"], l["rule"]) for l in audit_lines(audit) if l["verdict"] == "deny"]
    assert refused == [(443, "shared.test", "not_allowed"), (443, None, "no_name"), (443, None, "no_name"),
                       (443, "shared.test", "not_allowed")], refused
    got = {(b["dst"], b["port"], b.get("name")): b["count"] for b in rep["egress_blocked"]}
    assert got == {("203.0.113.10", 443, "shared.test"): 2, ("203.0.113.10", 443, None): 2}, got


def test_a_client_hello_in_two_segments_is_held_until_whole(egress, scratch):
    """Two writes with TCP_NODELAY and 100 ms between them: two segments,
    the first not enough to read a name. The gate holds it, and lets
    both through in order once the second completes the ClientHello."""
    audit = scratch / "audit.jsonl"
    calls = [["resolve", "good.test"], tlsx("good.test", 20421, split=5), tlsx("good.test", 20422, split=300)]
    res, _ = egress.probes([*NAMES, "--allow-host", "good.test", "--egress-audit", audit], calls)
    for r, src in zip(res[1:], (20421, 20422)):
        connected(r, "a ClientHello split in two")
        assert peer_port(r) == src, r
    assert [l["rule"] for l in audit_lines(audit) if l["proto"] == "tcp"] == ["allowed:name"] * 2


def test_many_connections_in_a_row_stay_on_the_kernel_path(egress):
    """300 connections one after the other (more than the gate holds
    flows at once): a decided flow's slot is taken back, so the next
    connection still goes direct, not to the proxy."""
    res, _ = egress.probes([*NAMES, "--allow-host", "good.test"],
                           [["resolve", "good.test"], ["setups", "203.0.113.10", 443, "good.test", 300],
                            tlsx("good.test", 20451)], timeout=60)
    assert res[1].get("n") == 300, res[1]
    connected(res[2], "after 300 connections")
    assert peer_port(res[2]) == 20451, f"still the kernel path: {res[2]}"


def queues(world):
    r = subprocess.run(world.hx("cat", "/proc/net/netfilter/nfnetlink_queue"), capture_output=True, text=True,
                       check=True)
    return {int(l.split()[0]) for l in r.stdout.splitlines()}


def test_two_sandboxes_at_once_each_have_their_own_queue(egress, world):
    p = egress.tools["netprobe"]
    script = "{p} resolve good.test >/dev/null; sleep 2; {p} tlsx 203.0.113.10 443 good.test 0 {src}; sleep 1"
    opts = [*NAMES, "--allow-host", "good.test"]
    before = queues(world)
    seen = set()
    with ThreadPoolExecutor(2) as pool:
        runs = [pool.submit(egress.run, opts, ["/bin/sh", "-c", script.format(p=p, src=src)])
                for src in (20431, 20432)]
        for _ in range(100):
            seen |= queues(world) - before
            if len(seen) >= 2 or all(f.done() for f in runs):
                break
            time.sleep(0.05)
        (ra, _), (rb, _) = (f.result() for f in runs)
    assert len(seen) == 2, f"two queues bound at once: {seen}"
    for r, src in ((ra, 20431), (rb, 20432)):
        assert r.returncode == 0, r.stderr
        res = json.loads(r.stdout)
        connected(res, "each sandbox on its own queue")
        assert peer_port(res) == src, res
    assert not queues(world) - before, "each queue unbound when its run ended"


NFQ_TRIES = 64   # src/net/nfq.c: the numbers a gate tries from its first


def own_queues_while(egress, world, scratch, extra, src):
    """One sandbox: a TLS connection from port src to good.test:443, then
    the command lingers. Returns (result, report, the queues of this run's
    gate seen bound once its command ran): a queue bound before the
    command (the child holds a copy of the socket until it execs) is no
    queue left bound."""
    ran = scratch / f"ran-{src}"
    p = egress.tools["netprobe"]
    script = f"{p} resolve good.test >/dev/null; {p} tlsx 203.0.113.10 443 good.test 0 {src}; touch {ran}; sleep 1"
    before, seen = queues(world), set()
    with ThreadPoolExecutor(1) as pool:
        run = pool.submit(egress.run, [*extra, *NAMES, "--allow-host", "good.test"], ["/bin/sh", "-c", script])
        while not run.done():
            if ran.exists():
                seen |= queues(world) - before
            time.sleep(0.05)
        r, rep = run.result()
    assert r.returncode == 0, r.stderr
    first = ((int(ipaddress.IPv4Address(rep["address"])) - 2) >> 2) & 0xffff
    return json.loads(r.stdout), rep, {q for q in seen if first <= q < first + NFQ_TRIES}


def test_a_queue_rule_the_kernel_refuses_is_said_and_its_queue_let_go(egress, world, scratch):
    """The kernel refuses the table's queue rule (forced with egresstool's
    --queue-refused, as a kernel with neither nft's queue nor xtables'
    NFQUEUE refuses it): 443 goes through the proxy, the verdict says so
    and why, and the gate's queue is not left bound for nothing. The same
    run without the knob shows its queue bound: the check can see one."""
    res, rep, bound = own_queues_while(egress, world, scratch, [], 20461)
    connected(res, "the kernel path")
    assert peer_port(res) == 20461, res
    assert "egress_tls_kernel_off" not in rep, rep
    assert len(bound) == 1, f"the kernel path's queue, seen bound: {bound}"

    res, rep, bound = own_queues_while(egress, world, scratch, ["--queue-refused", "yes"], 20462)
    connected(res, "through the proxy")
    assert peer_port(res) != 20462, f"the proxy connects from a port of its own: {res}"
    off = rep.get("egress_tls_kernel_off", "")
    assert off.startswith("the kernel refused the queue rule"), rep
    assert not bound, f"no queue left bound for a table that does not use it: {bound}"


def test_with_the_verdict_loop_gone_flows_fail_closed(egress, scratch):
    """The gate's queue socket closed under it (as when the loop dies):
    what the table queues is dropped (no bypass), so a new flow to the
    allowed name is not let through, neither directly nor by the proxy."""
    audit, flag = scratch / "audit.jsonl", scratch / "drop"
    p = egress.tools["netprobe"]
    script = (f"{p} resolve good.test; {p} tlsx 203.0.113.10 443 good.test 0 20441; touch {flag}; sleep 0.5; "
              f"{p} tlsx 203.0.113.10 443 good.test 0 20442")
    r, _ = egress.run(["--drop-queue-when", flag, *NAMES, "--allow-host", "good.test", "--egress-audit", audit],
                      ["/bin/sh", "-c", script])
    assert r.returncode == 0, r.stderr
    res = [json.loads(l) for l in r.stdout.splitlines()]
    connected(res[1], "before the loop is gone")
    assert not res[2]["ok"] and res[2]["error"] == "ETIMEDOUT", f"after: nothing answers: {res[2]}"
    tcp = [(l["verdict"], l.get("rule")) for l in audit_lines(audit) if l["proto"] == "tcp"]
    assert tcp == [("allow", "allowed:name")], tcp


@pytest.fixture
def fast_open_server(world):
    """The fake internet accepts data in a SYN (TCP Fast Open without a
    cookie: servers.py's listeners ask for it) while the test runs."""
    def sysctl(value=None):
        argv = ["sysctl", "-n", "net.ipv4.tcp_fastopen"] if value is None else \
            ["sysctl", "-q", "-w", f"net.ipv4.tcp_fastopen={value}"]
        return subprocess.run(["ip", "netns", "exec", world.inet, *argv], capture_output=True, text=True,
                              check=True).stdout.strip()
    old = sysctl()
    sysctl(0x203)
    yield
    sysctl(old)


def test_data_in_a_syn_never_reaches_the_server_unchecked(egress, scratch, fast_open_server):
    """A ClientHello carried in the SYN itself (TCP Fast Open), which the
    server here would take at once: the kernel path does not let such a
    SYN through. It goes to the proxy, which has no Fast Open, reads the
    name after the handshake and refuses another name as ever."""
    audit = scratch / "audit.jsonl"
    p = egress.tools["netprobe"]
    script = (f"echo 5 > /proc/sys/net/ipv4/tcp_fastopen; {p} resolve good.test; "
              f"{p} tfo 203.0.113.10 443 shared.test; {p} tfo 203.0.113.10 443 good.test")
    r, _ = egress.run([*NAMES, "--allow-host", "good.test", "--egress-audit", audit], ["/bin/sh", "-c", script])
    assert r.returncode == 0, r.stderr
    res = [json.loads(l) for l in r.stdout.splitlines()]
    reset(res[1], "another name in a SYN's data")
    connected(res[2], "the allowed name in a SYN's data, through the proxy")
    refused = [(l["port"], l["name"], l["rule"]) for l in audit_lines(audit) if l["verdict"] == "deny"]
    assert refused == [(443, "shared.test", "not_allowed")], refused
