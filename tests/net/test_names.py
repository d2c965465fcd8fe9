# SPDX-License-Identifier: Apache-2.0
"""host_allowlist by name (issue 16): the name gate answers the sandbox's
DNS and checks the name of every TCP connection (TLS server_name, HTTP
Host), through egresstool in the fake world, against the tests' own DNS
server (servers.py)."""
import errno
import json
import shlex
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from fakenet import HOST_UPLINK
from servers import SWITCH_S

NAMES = ["--egress", "host_allowlist", "--allow-cidr", "203.0.113.0/24", "--dns", "192.0.2.53"]
FAST_MS = 500


def connected(res, what):
    assert res["ok"] and res["reply"].startswith(("pong", "HTTP/1.0 200")), f"{what} should connect: {res}"


def reset(res, what):
    """The gate took the connection, read its name, and reset it."""
    assert not res["ok"] and res["errno"] == errno.ECONNRESET, f"{what} should be reset: {res}"


def denied_fast(res, what):
    assert not res["ok"] and res["errno"] in (errno.ECONNREFUSED, errno.EHOSTUNREACH), f"{what}: {res}"
    assert res["ms"] < FAST_MS, f"{what} took {res['ms']} ms to fail"


def audit_lines(path):
    return [json.loads(l) for l in path.read_text().splitlines()]


def test_allowed_name_connects_by_tls_and_http(egress, scratch):
    audit = scratch / "audit.jsonl"
    calls = [["resolve", "good.test"], ["tls", "203.0.113.10", 443, "good.test"],
             ["http", "203.0.113.10", 80, "GOOD.test."], ["cat", "/etc/resolv.conf"], ["hosts", "good.test"]]
    res, rep = egress.probes([*NAMES, "--allow-host", "good.test", "--egress-audit", audit], calls)
    assert res[0]["ok"] and res[0]["reply"] == "203.0.113.10", res[0]
    connected(res[1], "TLS with the allowed name")
    connected(res[2], "HTTP with the allowed name (case and final dot do not matter)")
    assert res[3]["reply"] == f"nameserver {rep['gateway']}\n", "the sandbox asks the gate"
    assert res[4]["reply"] == "", "no name is pinned in /etc/hosts"
    assert rep["egress_blocked"] == []
    lines = audit_lines(audit)
    accepted = {(l["proto"], l["dst"], l["port"], l["name"]) for l in lines if l["verdict"] == "allow"}
    assert accepted == {("udp", "203.0.113.10", None, "good.test"), ("tcp", "203.0.113.10", 443, "good.test"),
                        ("tcp", "203.0.113.10", 80, "good.test")}, lines


def test_second_name_on_the_same_address_is_refused(egress, scratch):
    """shared.test lives on good.test's address (a shared CDN edge): the
    address is open for good.test only."""
    audit = scratch / "audit.jsonl"
    calls = [["resolve", "good.test"], ["tls", "203.0.113.10", 443, "shared.test"],
             ["http", "203.0.113.10", 80, "shared.test"], ["http", "203.0.113.10", 80, "good.test"]]
    res, rep = egress.probes([*NAMES, "--allow-host", "good.test", "--egress-audit", audit], calls)
    reset(res[1], "TLS naming another host")
    reset(res[2], "HTTP naming another host")
    connected(res[3], "the allowed name on the same address, after")
    refused = [l for l in audit_lines(audit) if l["verdict"] == "deny"]
    assert [(l["proto"], l["port"], l["name"], l["rule"]) for l in refused] == [
        ("tcp", 443, "shared.test", "not_allowed"), ("tcp", 80, "shared.test", "not_allowed")], refused
    got = {(b["proto"], b["dst"], b["port"], b.get("name")): b["count"] for b in rep["egress_blocked"]}
    assert got == {("tcp", "203.0.113.10", 443, "shared.test"): 1, ("tcp", "203.0.113.10", 80, "shared.test"): 1}


def test_an_address_not_given_for_the_name_is_refused(egress, scratch):
    audit = scratch / "audit.jsonl"
    calls = [["tls", "203.0.113.10", 443, "good.test"],      # never resolved
             ["resolve", "good.test"],
             ["tls", "203.0.113.11", 443, "good.test"],      # another address, same name
             ["tls", "203.0.113.10", 8080, "good.test"]]     # a port not allowed: not redirected, denied
    res, rep = egress.probes([*NAMES, "--allow-host", "good.test", "--egress-audit", audit], calls)
    reset(res[0], "an address the gate never gave")
    reset(res[2], "an address given for no name")
    denied_fast(res[3], "a port no name is allowed on")
    rules = [l.get("rule") for l in audit_lines(audit) if l["verdict"] == "deny"]
    assert rules == ["not_resolved", "not_resolved", "not_allowed"], rules


def test_unlisted_name_gets_nxdomain_and_is_audited(egress, scratch):
    audit = scratch / "audit.jsonl"
    res, rep = egress.probes([*NAMES, "--allow-host", "good.test", "--egress-audit", audit],
                             [["resolve", "shared.test"], ["resolve", "evil.example"],
                              ["dns", "192.0.2.53", "good.test"]])
    assert res[0]["error"] == "NXDOMAIN" and res[1]["error"] == "NXDOMAIN", res
    denied_fast(res[2], "the upstream asked directly")
    names = [(l["name"], l["rule"]) for l in audit_lines(audit) if l.get("name")]
    assert names == [("shared.test", "not_allowed"), ("evil.example", "not_allowed")], names
    assert {b.get("name") for b in rep["egress_blocked"]} == {"shared.test", "evil.example", None}


def test_no_sni_and_ech_are_refused(egress, scratch):
    audit = scratch / "audit.jsonl"
    calls = [["resolve", "good.test"], ["tls", "203.0.113.10", 443, "-"], ["ech", "203.0.113.10", 443, "good.test"],
             ["tcp", "203.0.113.10", 443]]
    res, rep = egress.probes([*NAMES, "--allow-host", "good.test", "--egress-audit", audit], calls)
    for r, c in zip(res[1:], calls[1:]):
        reset(r, c)
    rules = [l["rule"] for l in audit_lines(audit) if l["verdict"] == "deny"]
    assert rules == ["no_name", "ech", "no_name"], rules


def test_quic_is_refused(egress):
    res, rep = egress.probes([*NAMES, "--allow-host", "good.test"],
                             [["resolve", "good.test"], ["udp", "203.0.113.10", 443]])
    denied_fast(res[1], "QUIC to an allowed name's address")
    assert ("udp", "203.0.113.10", 443) in {(b["proto"], b["dst"], b["port"]) for b in rep["egress_blocked"]}


def test_wildcard_entry(egress):
    calls = [["resolve", "a.wild.test"], ["resolve", "b.a.wild.test"], ["resolve", "wild.test"],
             ["tls", "203.0.113.11", 443, "a.wild.test"], ["tls", "203.0.113.11", 443, "wild.test"]]
    res, _ = egress.probes([*NAMES, "--allow-host", "*.wild.test:443"], calls)
    assert res[0]["reply"] == "203.0.113.11" and res[1]["reply"] == "203.0.113.11", res
    assert res[2]["error"] == "NXDOMAIN", "the pattern covers the names under it, not itself"
    connected(res[3], "a name under the pattern")
    reset(res[4], "the pattern's own name")


def test_rotation_and_rebinding_follow_the_ttl(egress, scratch):
    """Both names answer 203.0.113.10 at first; SWITCH_S seconds later
    rotate-* moves to 203.0.113.11 and rebind-* to the metadata address.
    The gate keeps an answer 30 s (TTL 0 is raised to the floor), then asks
    again: the moved name keeps working on its new address, the rebound
    one is refused whole and its address stays closed."""
    tag = uuid.uuid4().hex[:8]
    rot, reb = f"rotate-{tag}.test", f"rebind-{tag}.test"
    audit = scratch / "audit.jsonl"
    p = egress.tools["netprobe"]
    script = (f"{p} resolve {rot}; {p} resolve {reb}; {p} tls 203.0.113.10 443 {rot}; "
              f"sleep 31; {p} resolve {rot}; {p} tls 203.0.113.11 443 {rot}; {p} tls 203.0.113.10 443 {rot}; "
              f"{p} resolve {reb}; {p} tcp 169.254.169.254 443")
    opts = [*NAMES, "--allow-host", f"{rot},{reb}", "--egress-audit", audit]
    assert SWITCH_S < 30
    r, rep = egress.run(opts, ["/bin/sh", "-c", script], timeout=90)
    assert r.returncode == 0, r.stderr
    res = [json.loads(l) for l in r.stdout.splitlines()]
    assert [x["reply"] for x in res[:2]] == ["203.0.113.10", "203.0.113.10"], res
    connected(res[2], "the first answer")
    assert res[3]["reply"] == "203.0.113.11", "asked again after the TTL: the new address"
    connected(res[4], "the new address")
    reset(res[5], "the old address, no longer given")
    assert res[6]["error"] == "REFUSED", res[6]
    denied_fast(res[7], "the metadata address")
    refused = [(l["dst"], l.get("name"), l.get("rule")) for l in audit_lines(audit) if l["verdict"] == "deny"]
    assert ("169.254.169.254", reb, "always_deny:metadata") in refused, refused


def test_every_http_request_on_a_connection_is_checked(egress, scratch):
    """Plain HTTP keeps a connection for request after request: a second
    request naming another host on the same connection is refused too;
    a body that looks like a header is only a body."""
    audit = scratch / "audit.jsonl"
    crlf = "\\r\\n"
    req = lambda host, extra="": f"GET / HTTP/1.1{crlf}Host: {host}{crlf}{extra}{crlf}"  # noqa: E731
    body = f"Host: shared.test{crlf}{crlf}"
    size = len(body.replace(crlf, "xx"))   # each escaped CRLF is two bytes on the wire
    post = f"POST / HTTP/1.1{crlf}Host: good.test{crlf}Content-Length: {size}{crlf}{crlf}{body}"
    chunked = (f"POST / HTTP/1.1{crlf}Host: good.test{crlf}Transfer-Encoding: chunked{crlf}{crlf}"
               f"5{crlf}hello{crlf}0{crlf}{crlf}")
    texts = [req("good.test") + req("shared.test"), req("good.test") + req("good.test"), post + req("good.test"),
             chunked + req("shared.test"), req("good.test", f"Host: shared.test{crlf}"),
             req("good.test", f"Upgrade: websocket{crlf}")]
    calls = [["resolve", "good.test"], *(["send", "203.0.113.10", 80, shlex.quote(t)] for t in texts)]
    res, rep = egress.probes([*NAMES, "--allow-host", "good.test", "--egress-audit", audit], calls)
    reset(res[1], "a second request for another host")
    connected(res[2], "two requests for the allowed host")
    connected(res[3], "a body that looks like a Host header")
    reset(res[4], "a request for another host after a chunked body")
    reset(res[5], "two Host headers")
    reset(res[6], "an upgrade to another protocol")
    refused = [(l["name"], l["rule"]) for l in audit_lines(audit) if l["verdict"] == "deny"]
    assert refused == [("shared.test", "not_allowed"), ("shared.test", "not_allowed"), (None, "no_name"),
                       ("good.test", "http_unframed")], refused


def test_each_sandbox_has_its_own_gate(egress, scratch):
    """An address is open only for the sandbox it was given to: a second
    sandbox running at the same time, which never asked, is refused."""
    p = egress.tools["netprobe"]
    a = f"{p} resolve good.test; sleep 2; {p} tls 203.0.113.10 443 good.test"
    b = f"sleep 1; {p} tls 203.0.113.10 443 good.test; {p} resolve good.test; {p} tls 203.0.113.10 443 good.test"
    opts = [*NAMES, "--allow-host", "good.test"]
    with ThreadPoolExecutor(2) as pool:
        runs = [pool.submit(egress.run, opts, ["/bin/sh", "-c", script]) for script in (a, b)]
        (ra, repa), (rb, repb) = (f.result() for f in runs)
    assert ra.returncode == 0 and rb.returncode == 0, (ra.stderr, rb.stderr)
    resa = [json.loads(l) for l in ra.stdout.splitlines()]
    resb = [json.loads(l) for l in rb.stdout.splitlines()]
    assert repa["gateway"] != repb["gateway"]
    connected(resa[1], "the sandbox that resolved the name")
    reset(resb[0], "the other sandbox, before it asked")
    connected(resb[2], "the other sandbox, once it asked its own gate")


@pytest.mark.parametrize("dns", ["127.0.0.1", HOST_UPLINK])
def test_the_gate_asks_a_resolver_on_the_hosts_loopback_or_address(egress, scratch, dns):
    """The gate asks its upstream from the host: a local resolver (here the
    fake host's own, which alone knows inside.test) serves the sandbox."""
    audit = scratch / "audit.jsonl"
    opts = ["--egress", "host_allowlist", "--allow-cidr", "203.0.113.0/24", "--dns", dns,
            "--allow-host", "inside.test", "--egress-audit", audit]
    res, rep = egress.probes(opts, [["resolve", "inside.test"], ["tls", "203.0.113.11", 443, "inside.test"],
                                    ["resolve", "good.test"]])
    assert res[0]["ok"] and res[0]["reply"] == "203.0.113.11", res[0]
    connected(res[1], "TLS to the name the host's resolver gave")
    assert not res[2]["ok"], "good.test is not on the list"
    assert ("tcp", "203.0.113.11", 443, "inside.test") in {
        (l["proto"], l["dst"], l["port"], l["name"]) for l in audit_lines(audit) if l["verdict"] == "allow"}


@pytest.mark.parametrize("kind", [["--egress", "public_internet"],
                                  ["--egress", "private_network", "--allow-cidr", "10.99.0.0/16"]])
@pytest.mark.parametrize("dns", ["127.0.0.1", HOST_UPLINK])
def test_a_resolver_the_sandbox_asks_itself_must_be_reachable(egress, kind, dns):
    r, _ = egress.run([*kind, "--dns", dns], ["/bin/true"])
    assert r.returncode == 125, r
    assert len(r.stderr.strip().splitlines()) == 1 and f"--dns `{dns}`" in r.stderr, r.stderr
    assert "only host_allowlist" in r.stderr, r.stderr


MIB = 1 << 20
RELAY = [*NAMES, "--allow-host", "good.test:9001"]


def xfer(up, down, conns=1, mode="both", sni="good.test"):
    """netprobe xfer against servers.py's XFER (port 9001)."""
    return ["xfer", "203.0.113.10", 9001, sni, up, down, conns, mode]


def relay_cases(unit=MIB):
    """What the relay is asked to carry once the name is checked (also
    for a rootless run, in tests/helper/test_egress.py, with a smaller
    unit: it runs in the VM lane too)."""
    return [
        # both ways at once: the server answers while the client still sends
        xfer(24 * unit, 24 * unit),
        # an upload, then the client's half-close: the server answers (its
        # trailer) only once that FIN has reached it, and the client reads on
        xfer(8 * unit, 0),
        # the client waits for the server before it sends: its header, sent
        # after the ClientHello, sits queued in the gate's socket meanwhile
        xfer(4 * unit, 4 * unit, mode="wait"),
        xfer(unit, unit, conns=32),
        # a reader slower than the server, with a small receive buffer
        xfer(1000, 8 * unit, mode="slow"),
    ]


def test_the_relay_is_byte_exact(egress, scratch):
    """Every byte the gate relays after the name check arrives, once and
    in order, both ways, and each side's end is passed on; the name
    check still refuses another name on the same port."""
    audit = scratch / "audit.jsonl"
    cases = relay_cases()
    calls = [["resolve", "good.test"], *cases, xfer(1000, 1000, sni="shared.test")]
    # room for each case to report a stall (15 s without progress)
    res, rep = egress.probes([*RELAY, "--egress-audit", audit], calls, timeout=150)
    for r, c in zip(res[1:-1], cases):
        assert r["ok"] and r["failed"] == 0, f"{c}: {r}"
    assert not res[-1]["ok"] and res[-1]["failed"] == 1, f"another name on the relayed port: {res[-1]}"
    refused = [(l["port"], l["name"], l["rule"]) for l in audit_lines(audit) if l["verdict"] == "deny"]
    assert refused == [(9001, "shared.test", "not_allowed")], refused
