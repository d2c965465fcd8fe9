# SPDX-License-Identifier: Apache-2.0
"""kiwi-run run --network audit: no way out, but every attempt is logged,
refused at once and reported in the verdict (network_attempted,
network_attempts). Root and rootless, like every test here.

A refusal is told from a silent drop by errno, never by a clock: the probe
waits 20 s for a TCP answer, so ECONNREFUSED means the audit answered and
ETIMEDOUT would mean it did not.
"""
import errno
import json
import os
import shlex
import subprocess

import pytest

from conftest import PROBE, explain

HAVE_IPV6 = os.path.exists("/proc/sys/net/ipv6")
AUDIT = ["--network", "audit"]


def audited(kiwi, script, opts=()):
    """Runs the shell SCRIPT under the audit with --verdict; returns the
    probe's JSON lines and the verdict."""
    out = kiwi.workdir() / "verdict.json"
    r = kiwi.sh(script, opts=[*AUDIT, "--verdict", out, *opts], timeout=60)
    assert r.returncode == 0, explain(r)
    lines = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    return lines, json.loads(out.read_text())


def probe(*args):
    return " ".join([PROBE, *map(shlex.quote, map(str, args))])


def attempts(v):
    return {(a["proto"], a["dst"], a["port"]): a["count"] for a in v["network_attempts"]}


TARGETS = [
    # (probe arguments, the verdict's (proto, dst, port), the errno inside)
    (("tcp", "192.0.2.1", 443), ("tcp", "192.0.2.1", 443), errno.ECONNREFUSED),
    (("udp", "198.51.100.53", 53), ("udp", "198.51.100.53", 53), errno.EPERM),
    (("tcp", "169.254.169.254", 80), ("tcp", "169.254.169.254", 80), errno.ECONNREFUSED),
]
if HAVE_IPV6:
    TARGETS.append((("tcp", "2001:db8::1", 443), ("tcp", "2001:db8::1", 443), errno.ECONNREFUSED))


def test_each_attempt_is_refused_and_reported(kiwi):
    script = "; ".join(probe("connect", *t[0]) for t in TARGETS)
    lines, v = audited(kiwi, script)
    assert len(lines) == len(TARGETS), lines
    for (args, _, want), got in zip(TARGETS, lines):
        # refused by the audit's reject, not left to time out
        assert not got["ok"] and got["errno"] == want, (args, got)
    assert v["network"] == "audit", v
    assert v["network_attempted"] is True, v
    assert attempts(v) == {t[1]: 1 for t in TARGETS}, v["network_attempts"]
    assert v["network_attempt_count"] == len(TARGETS), v
    # in the order they were made
    assert [(a["proto"], a["dst"], a["port"]) for a in v["network_attempts"]] == [t[1] for t in TARGETS]


def test_repeated_attempts_are_counted_once_each(kiwi):
    script = "; ".join([probe("connect", "tcp", "203.0.113.7", 8080)] * 3)
    _, v = audited(kiwi, script)
    assert attempts(v) == {("tcp", "203.0.113.7", 8080): 3}, v
    assert v["network_attempt_count"] == 3, v


def test_the_list_is_bounded_the_count_is_not(kiwi):
    ports = range(1000, 1040)
    script = "; ".join(probe("connect", "tcp", "192.0.2.9", p, 5000) for p in ports)
    _, v = audited(kiwi, script)
    assert v["network_attempt_count"] == len(ports), v
    kept = v["network_attempts"]
    assert 0 < len(kept) < len(ports), kept
    assert [a["port"] for a in kept] == list(ports)[:len(kept)], kept


def test_a_flood_stays_one_entry_and_is_counted(kiwi):
    """50000 datagrams as fast as one socket sends them: every one refused,
    one entry kept, and a count no larger than what was sent (the kernel may
    drop log messages when kiwi-run falls behind: each drop counts once)."""
    n = 50000
    lines, v = audited(kiwi, probe("udp-flood", "198.51.100.7", 9999, n))
    assert lines == [{"sent": 0, "refused": n, "errno": 0}], lines
    assert v["network_attempted"] is True, v
    assert [(a["proto"], a["dst"], a["port"]) for a in v["network_attempts"]] == [("udp", "198.51.100.7", 9999)]
    assert 0 < v["network_attempts"][0]["count"] <= v["network_attempt_count"] <= n, v


def test_a_quiet_run_reports_no_attempt(kiwi):
    _, v = audited(kiwi, probe("sleep", 1))
    assert v["network"] == "audit", v
    assert v["network_attempted"] is False, v
    assert v["network_attempt_count"] == 0 and v["network_attempts"] == [], v


def test_loopback_works_and_is_not_reported(kiwi):
    closed = [probe("connect", "tcp", "127.0.0.1", 9), probe("connect", "tcp", "127.0.0.2", 9),
              probe("connect", "tcp", "192.0.0.8", 9)]
    if HAVE_IPV6:
        closed.append(probe("connect", "tcp", "::1", 9))
    lines, v = audited(kiwi, "; ".join([probe("loopback"), *closed]))
    assert lines[0]["ok"], lines  # a TCP round trip over 127.0.0.1
    for got in lines[1:]:
        assert got["errno"] == errno.ECONNREFUSED, lines  # no listener: the kernel's own refusal
    assert v["network_attempted"] is False, v


@pytest.mark.parametrize("seccomp", ["default", "unconfined"])
def test_the_sandbox_cannot_undo_the_audit(kiwi, seccomp):
    """Attack: every netlink request that would remove the table, the
    routes or the address, or steal the log, fails (capabilities are gone;
    from a nested user namespace the sandbox's network is not its own).
    Unconfined, so that seccomp is not what stops the nested namespace."""
    opts = ["--seccomp", "unconfined"] if seccomp == "unconfined" else []
    script = probe("netlink-attack") + "; " + probe("connect", "tcp", "192.0.2.1", 443)
    lines, v = audited(kiwi, script, opts)
    attack, after = lines
    for name, res in attack.items():
        if name == "userns_nft_delete_table" and seccomp == "default" and res["errno"] == 100:
            continue  # the default profile refused the nested namespace itself
        assert not res["ok"] and res["errno"] == errno.EPERM, (name, attack)
    assert after["errno"] == errno.ECONNREFUSED, after
    assert attempts(v) == {("tcp", "192.0.2.1", 443): 1}, v


def test_no_network_reports_no_audit_fields(kiwi):
    out = kiwi.workdir() / "verdict.json"
    r = kiwi.run([PROBE, "exit", "0"], opts=["--verdict", out])
    assert r.returncode == 0, explain(r)
    v = json.loads(out.read_text())
    assert v["network"] == "none", v
    assert not any(k.startswith("network_") for k in v), v


def test_unknown_network_value_names_audit(kiwi):
    r = kiwi.run([PROBE, "exit", "0"], opts=["--network", "bogus"])
    assert r.returncode == 125, explain(r)
    assert "none, egress or audit" in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_audit_excludes_egress_settings(kiwi):
    r = kiwi.run([PROBE, "exit", "0"], opts=[*AUDIT, "--egress", "public_internet"])
    assert r.returncode == 125, explain(r)
    assert "--egress needs --network egress" in r.stderr, r.stderr


# ---------------------------------------------------------------------------
# nothing on the host: kiwi-run runs in a network namespace of the test's
# own, so nothing else on this machine changes what is seen there

STATE = ("nft list ruleset; ip -o link; ip -o addr; ip route show table all; "
         "ip -6 route show table all")


def in_fresh_netns(kiwi, body):
    """Runs the shell BODY in a fresh network namespace, with $KIWI set to
    an audited kiwi-run command line (minus the command); prints the
    namespace's state, `===`, BODY's output, `===`, the state again."""
    if os.geteuid() != 0:
        pytest.skip("needs root to make a network namespace for kiwi-run")
    kiwi_cmd = " ".join(map(shlex.quote, kiwi.argv([], AUDIT)))
    script = f"KIWI={shlex.quote(kiwi_cmd)}; {STATE}; echo ===; {body}; echo ===; {STATE}"
    r = subprocess.run(["unshare", "--net", "sh", "-c", script], capture_output=True, text=True,
                       env=kiwi.env(), timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, explain(r)
    before, out, after = r.stdout.split("===\n")
    return before, out, after


def test_nothing_is_left_in_the_callers_network(kiwi):
    before, out, after = in_fresh_netns(
        kiwi, f"$KIWI {PROBE} connect tcp 192.0.2.1 443")
    assert json.loads(out)["errno"] == errno.ECONNREFUSED, out
    assert after == before, (before, after)


def test_nothing_is_left_after_kiwi_run_is_killed(kiwi):
    """kill -9 of kiwi-run: the table and routes lived in the sandbox's own
    namespace, which dies with the sandbox."""
    body = (f"f=$(mktemp -u); mkfifo $f; $KIWI {PROBE} pause 60 >$f & kid=$!; "
            "read line <$f; rm $f; echo $line; kill -9 $kid; wait $kid; echo killed $?; sleep 0.5")
    before, out, after = in_fresh_netns(kiwi, body)
    assert out == "ready\nkilled 137\n", out
    assert after == before, (before, after)
