# SPDX-License-Identifier: Apache-2.0
"""IPv6 egress through egresstool: the same two tiers as IPv4 (never
reachable; opened only by --allow-cidr), every attempt audited with the
class that decided it. The fake host has an IPv6 default route (fakenet),
so sandboxes get an address; without one they get none."""
import json
import os
import subprocess

import pytest

from checks import FAST_MS, REFUSED, connected
from conftest import Egress
from fakenet import HOST_UPLINK6, INET_UPLINK6, World, leftovers, sh

POOL6 = "fd6b:6977:6900::"
# Each test's first IPv6 connection is a fresh sandbox's: it once lost its
# first answer 4 to 14 times in 100 (the address's local route came after
# the address: kiwi_rtnl_wait_local6) and waited a 1 s SYN retransmit, so
# the same bound as IPv4 also catches that coming back.


def denied_fast(res, what):
    assert not res["ok"], f"{what} should be denied: {res}"
    assert res["errno"] in REFUSED, f"{what} should be rejected, not dropped: {res}"
    assert res["ms"] < FAST_MS, f"{what} took {res['ms']} ms to fail"


def rules(rep):
    return {(b["proto"], b["dst"], b["port"]): b["rule"] for b in rep["egress_blocked"]}


# every class of the never tier, reached through the default route
NEVER6 = [
    (("tcp", "fd00:ec2::254", 80), "always_deny:metadata"),
    (("tcp", "64:ff9b::a9fe:a9fe", 80), "always_deny:metadata"),      # NAT64 of 169.254.169.254
    (("tcp", "64:ff9b:1::a9fe:a9fe", 80), "always_deny:metadata"),    # local-use NAT64
    (("tcp", "2002:a9fe:a9fe::1", 80), "always_deny:metadata"),       # 6to4 of it
    (("tcp", "64:ff9b::505:505", 80), "always_deny:nat64"),
    (("tcp", "2002:505:505::1", 80), "always_deny:6to4"),
    (("tcp", "2001:0:505:505::1", 80), "always_deny:teredo"),
    (("tcp", "fec0::1", 80), "always_deny:site_local"),
    (("tcp", "fd6b:6977:6900::a0b:c0d", 80), "always_deny:sandbox_pool"),  # another sandbox
]
SPECIAL6 = [
    (("tcp", "2001:db8::10", 80), "not_allowed:documentation"),
    (("tcp", "fd99::10", 80), "not_allowed:private"),
    (("tcp", "100::1", 80), "not_allowed:discard"),
]


def test_the_sandbox_gets_ipv6_from_the_pool(egress):
    r, rep = egress.run(["--egress", "public_internet"],
                        ["/bin/sh", "-c", "sleep 0.3; ip -6 -o addr show dev eth0; ip -6 route show default"])
    assert r.returncode == 0, r.stderr
    addrs = [l.split()[3] for l in r.stdout.splitlines() if " inet6 " in l]
    assert len(addrs) == 1 and addrs[0].startswith(POOL6) and addrs[0].endswith("/126"), r.stdout
    assert "fe80" not in r.stdout, "no link-local address"
    assert "default via " + POOL6 in r.stdout, r.stdout
    assert rep["egress_blocked"] == [], "nothing (no router solicitation, no MLD) audited on its own"


def test_public_ipv6_connects_masqueraded_and_audited(egress, scratch):
    audit = scratch / "audit6.jsonl"
    res, rep = egress.probes(["--egress", "public_internet", "--egress-audit", audit],
                             [["tcp", "2a00:5::5", 80], ["udp", "2a00:5::5", 443], ["tcp", "2a00:5::5", 8080]])
    connected(res[0], "a public IPv6 address")
    assert HOST_UPLINK6 in res[0]["reply"], res[0]
    connected(res[1], "a public IPv6 address over UDP")
    denied_fast(res[2], "a port not allowed")
    lines = [json.loads(l) for l in audit.read_text().splitlines()]
    got = {(l["proto"], l["dst"], l["port"]): (l["verdict"], l["rule"]) for l in lines}
    assert got == {("tcp", "2a00:5::5", 80): ("allow", "allowed:public"),
                   ("udp", "2a00:5::5", 443): ("allow", "allowed:public"),
                   ("tcp", "2a00:5::5", 8080): ("deny", "not_allowed:port")}, got
    assert all(l["src"].startswith(POOL6) for l in lines), lines


@pytest.mark.parametrize("kind,cidr", [("public_internet", "::/0"), ("private_network", "fc00::/7")])
def test_never_tier_refused_whatever_the_cidr(egress, kind, cidr):
    calls = [list(c) for c, _ in NEVER6]
    res, rep = egress.probes(["--egress", kind, "--allow-cidr", cidr, "--allow-port", "80"], calls)
    for (call, _), r in zip(NEVER6, res):
        denied_fast(r, call)
    got = rules(rep)
    for call, rule in NEVER6:
        assert got.get(call) == rule, (call, got)


def test_special_tier_needs_allow_cidr(egress):
    calls = [list(c) for c, _ in SPECIAL6]
    res, rep = egress.probes(["--egress", "public_internet"], calls)
    for (call, _), r in zip(SPECIAL6, res):
        denied_fast(r, call)
    assert {c: rules(rep).get(c) for c, _ in SPECIAL6} == dict(SPECIAL6)
    res, rep = egress.probes(["--egress", "public_internet", "--allow-cidr", "2001:db8::/32,fd99::/16"],
                             [["tcp", "2001:db8::10", 80], ["tcp", "fd99::10", 80], ["tcp", "2001:db8:1::10", 8080]])
    connected(res[0], "documentation range under --allow-cidr")
    connected(res[1], "unique local range under --allow-cidr")
    denied_fast(res[2], "a port not allowed")
    allowed = {a["dst"]: a["rule"] for a in rep["egress_allowed"]}
    assert allowed == {"2001:db8::10": "allowed:cidr", "fd99::10": "allowed:cidr"}, allowed


def test_ipv4_mapped_metadata_is_refused(egress):
    """A v4-mapped destination is IPv4 on the wire: still the metadata deny."""
    script = ("/usr/bin/python3 -c \"\n"
              "import json, socket\n"
              "s = socket.socket(socket.AF_INET6); s.settimeout(2)\n"
              "try: s.connect(('::ffff:169.254.169.254', 80)); print(json.dumps({'ok': True}))\n"
              "except OSError as e: print(json.dumps({'ok': False, 'errno': e.errno}))\n\"")
    r, rep = egress.run(["--egress", "public_internet", "--allow-cidr", "0.0.0.0/0,::/0"], ["/bin/sh", "-c", script])
    res = json.loads(r.stdout)
    assert not res["ok"] and res["errno"] in REFUSED, res
    assert rules(rep) == {("tcp", "169.254.169.254", 80): "always_deny:metadata"}, rep["egress_blocked"]


def test_link_multicast_is_refused_and_audited(egress):
    script = ("/usr/bin/python3 -c \"\n"
              "import socket\n"
              "s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)\n"
              "s.sendto(b'x', ('ff02::1%eth0', 5000))\n\"; sleep 0.2")
    r, rep = egress.run(["--egress", "public_internet"], ["/bin/sh", "-c", script])
    assert r.returncode == 0, r.stderr
    assert rules(rep) == {("udp", "ff02::1", 5000): "always_deny:multicast"}, rep["egress_blocked"]


def test_private_network_ipv6(egress):
    res, rep = egress.probes(["--egress", "private_network", "--allow-cidr", "fd99::/16"],
                             [["tcp", "fd99::10", 80], ["tcp", "2a00:5::5", 80], ["tcp", "2001:db8::10", 80]])
    connected(res[0], "the allowed unique local range")
    denied_fast(res[1], "a public address")
    denied_fast(res[2], "a documentation address")
    assert set(rules(rep).values()) == {"not_allowed"}, rep["egress_blocked"]


@pytest.fixture
def no_ipv6_route(world):
    """The fake host without its IPv6 default route, for one test."""
    hx = lambda *a: subprocess.run(world.hx(*a), capture_output=True, text=True)
    hx("ip", "-6", "route", "del", "default")
    yield
    hx("ip", "-6", "route", "add", "default", "via", INET_UPLINK6)


@pytest.mark.parametrize("kind", ["public_internet", "private_network"])
def test_ipv6_without_a_route_fails_at_once_and_is_audited(egress, no_ipv6_route, scratch, kind):
    """No IPv6 default route on the host and no IPv6 CIDR: nothing may
    leave, yet the sandbox has an address, so each attempt reaches the
    table and is refused at once with the class that decided it."""
    audit = scratch / "nov6.jsonl"
    v4 = "203.0.113.10" if kind == "public_internet" else "10.99.0.10"
    calls = [["tcp", "2a00:5::5", 80], ["udp", "2a00:5::5", 443], ["tcp", "fd00:ec2::254", 80],
             ["tcp", "2001:db8::10", 80], ["tcp", v4, 80]]
    opts = ["--egress", kind, "--allow-cidr", f"{v4}/32", "--allow-port", "80,443", "--egress-audit", audit]
    res, rep = egress.probes(opts, calls)
    denied_fast(res[0], "public IPv6 without a route")
    assert not res[1]["ok"] or res[1]["reply"] == "", res[1]
    denied_fast(res[2], "the metadata address")
    denied_fast(res[3], "documentation IPv6")
    connected(res[4], "IPv4 goes on")
    public = "not_allowed:no_ipv6_route" if kind == "public_internet" else "not_allowed"
    want = {("tcp", "2a00:5::5", 80): public, ("udp", "2a00:5::5", 443): public,
            ("tcp", "fd00:ec2::254", 80): "always_deny:metadata",
            ("tcp", "2001:db8::10", 80): "not_allowed:documentation" if kind == "public_internet" else "not_allowed"}
    assert rules(rep) == want, rep["egress_blocked"]
    lines = [json.loads(l) for l in audit.read_text().splitlines()]
    assert {(l["proto"], l["dst"], l["port"]): l["rule"] for l in lines if l["verdict"] == "deny"} == want, lines
    assert rep["egress_ipv6"] is False and "no IPv6 default route" in rep["egress_ipv6_off"], rep


@pytest.fixture
def egress_no_ipv6(tools, scratch):
    """A fake world of its own whose host has IPv6 turned off
    (disable_ipv6 on all and default: its IPv6 addresses and route go)."""
    w = World(f"kw6{os.getpid() % 100000}")
    with w:
        for key in ("all", "default"):
            sh(*w.hx("sysctl", "-qw", f"net.ipv6.conf.{key}.disable_ipv6=1"))
        yield Egress(w, tools, scratch)
        assert leftovers(w.host) == ([], []), leftovers(w.host)


def test_ipv4_egress_goes_on_when_the_host_has_ipv6_turned_off(egress_no_ipv6):
    """An IPv6 CIDR asks for IPv6, which this host cannot give: IPv6 is off
    (the verdict says why), IPv4 works."""
    res, rep = egress_no_ipv6.probes(
        ["--egress", "public_internet", "--allow-cidr", "203.0.113.0/24,2001:db8::/32"],
        [["tcp", "203.0.113.10", 80], ["tcp", "2001:db8::10", 80], ["cat", "/proc/net/if_inet6"]])
    connected(res[0], "IPv4 with IPv6 off on the host")
    assert not res[1]["ok"], res[1]
    assert "eth0" not in res[2]["reply"], "no IPv6 address in the sandbox"
    assert rep["egress_ipv6"] is False and "turned off" in rep["egress_ipv6_off"], rep


def test_the_verdict_says_ipv6_is_on(egress):
    _, rep = egress.probe(["--egress", "public_internet"], "tcp", "2a00:5::5", 80)
    assert rep["egress_ipv6"] is True and "egress_ipv6_off" not in rep, rep
