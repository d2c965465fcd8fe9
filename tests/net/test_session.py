# SPDX-License-Identifier: Apache-2.0
"""A session with --network egress in the fake world (kiwi-run-session(1)):
the policy pinned at create holds for every exec, and destroy removes the
veth and the table (its evidence says so, and the host netns shows none)."""
import json
import subprocess

from fakenet import leftovers
from test_kiwi_run import PROBE, PUBLIC, kiwi_run, rootfs  # noqa: F401  (fixtures)


def test_session_egress_policy_holds_for_every_exec(world, kiwi_run, rootfs):  # noqa: F811
    def kiwi(*args):
        return subprocess.run(world.hx(kiwi_run, *map(str, args)), capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL)
    before = leftovers(world.host)
    r = kiwi("session", "create", "--rootfs", rootfs, *PUBLIC)
    assert r.returncode == 0, r.stderr
    sid = r.stdout.strip()
    try:
        for _ in range(2):
            r = kiwi("session", "exec", sid, "--", "/bin/sh", "-c",
                     f"{PROBE} tcp 203.0.113.10 80; {PROBE} tcp 169.254.169.254 80")
            assert r.returncode == 0, r.stderr
            allowed, metadata = [json.loads(l) for l in r.stdout.splitlines()]
            assert allowed["ok"], allowed
            assert not metadata["ok"], metadata
        r = kiwi("session", "list", "--json")
        assert [e["network"] for e in json.loads(r.stdout) if e["id"] == sid] == ["egress"]
    finally:
        r = kiwi("session", "destroy", sid)
    ev = json.loads(r.stdout)
    assert r.returncode == 0 and ev["clean"] and ev["network_removed"] is True, r.stdout + r.stderr
    assert leftovers(world.host) == before, "the session's veth or table outlived it"


class Sess:
    """One session in the fake world; destroy() checks its clean end."""

    def __init__(self, world, kiwi_run, rootfs, scratch, opts=PUBLIC):
        self.world, self.kiwi_run, self.scratch = world, kiwi_run, scratch
        r = self.kiwi("session", "create", "--rootfs", rootfs, *opts)
        assert r.returncode == 0, r.stderr
        self.id = r.stdout.strip()

    def kiwi(self, *args, env=None):
        return subprocess.run(self.world.hx(self.kiwi_run, *map(str, args)), capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL, env=env)

    def verdict_of(self, *args, env=None):
        v = self.scratch / f"v-{len(list(self.scratch.iterdir()))}.json"
        r = self.kiwi(*args[:-1], "--verdict", v, "--", *args[-1], env=env)
        return r, json.loads(v.read_text()) if v.exists() and v.stat().st_size else None

    def probes(self, how, script, env=None):
        """(result, verdict, probe results) of `session exec` or a phase."""
        r, v = self.verdict_of(*how, ["/bin/sh", "-c", script], env=env)
        res = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
        return r, v, res

    def network_listed(self):
        """The NETWORK that `session list` and `session list --json` show."""
        r = self.kiwi("session", "list", "--json")
        assert r.returncode == 0, r.stderr
        js = [e["network"] for e in json.loads(r.stdout) if e["id"] == self.id]
        r = self.kiwi("session", "list")
        assert r.returncode == 0, r.stderr
        head, *rows = r.stdout.splitlines()
        col = head.split().index("NETWORK")
        text = [row.split()[col] for row in rows if row.split()[0] == self.id]
        return js, text

    def destroy(self):
        r = self.kiwi("session", "destroy", self.id)
        ev = json.loads(r.stdout)
        assert r.returncode == 0 and ev["clean"], r.stdout + r.stderr


def test_each_exec_verdict_has_its_own_egress_attempts(world, kiwi_run, rootfs, scratch):  # noqa: F811
    """Two execs one after the other: each verdict lists the attempts made
    while it ran, not the session's whole story."""
    s = Sess(world, kiwi_run, rootfs, scratch)
    try:
        _, v1, res = s.probes(("session", "exec", s.id), f"{PROBE} tcp 203.0.113.10 80")
        assert res[0]["ok"], res
        _, v2, res = s.probes(("session", "exec", s.id), f"{PROBE} tcp 169.254.169.254 80; "
                              f"{PROBE} tcp 169.254.169.254 80")
        assert not res[0]["ok"], res
        _, v3, _ = s.probes(("session", "exec", s.id), "true")
    finally:
        s.destroy()
    assert v1["network"] == "egress"
    assert [(a["dst"], a["port"], a["count"]) for a in v1["egress_allowed"]] == [("203.0.113.10", 80, 1)], v1
    assert v1["egress_blocked"] == [] and v1["network_attempt_count"] == 1, v1
    assert v2["egress_allowed"] == [], v2
    assert [(b["dst"], b["port"], b["rule"]) for b in v2["egress_blocked"]] == [
        ("169.254.169.254", 80, "always_deny:metadata")], v2
    assert v2["egress_blocked"][0]["count"] >= 2 and v2["network_attempted"] is True, v2
    assert v3["egress_allowed"] == v3["egress_blocked"] == [] and v3["network_attempted"] is False, v3


def test_install_then_verify_over_one_session(world, kiwi_run, rootfs, scratch):  # noqa: F811
    """install reaches the fake upstream with an empty environment; the
    switch to verify kills what install left running and takes the
    network away for good (the veth and the table are gone at once);
    verify then cannot connect and gets no model-provider key; an install
    after it is refused."""
    before = leftovers(world.host)
    s = Sess(world, kiwi_run, rootfs, scratch)
    env = {"PATH": "/usr/bin:/bin", "OPENAI_API_KEY": "sk-test", "SECRET_TOKEN": "s3cr3t"}
    try:
        assert leftovers(world.host) != before
        # a daemon kept from a plain exec, another from install
        r = s.kiwi("session", "exec", s.id, "--keep-background", "--", "/bin/sh", "-c", "sleep 1001 &")
        assert r.returncode == 0, r.stderr
        r, v, res = s.probes(("phase", "install", "--session", s.id, "--keep-background"),
                             f"sleep 1002 & env; {PROBE} tcp 203.0.113.10 80", env=env)
        assert r.returncode == 0 and res[0]["ok"], r.stdout + r.stderr
        names = {l.split("=")[0] for l in r.stdout.splitlines() if "=" in l and not l.startswith("{")}
        assert names <= {"PATH", "HOME", "PWD", "SHLVL"}, names
        assert v["phase"] == "install" and v["network"] == "egress", v
        assert [(a["dst"], a["port"]) for a in v["egress_allowed"]] == [("203.0.113.10", 80)], v
        r = s.kiwi("session", "exec", s.id, "--", "/bin/ps")
        assert "sleep 1001" in r.stdout and "sleep 1002" in r.stdout, r.stdout
        assert s.network_listed() == (["egress"], ["egress"])

        r, v, res = s.probes(("phase", "verify", "--session", s.id),
                             f"ps; env; {PROBE} tcp 203.0.113.10 80", env=env)
        assert r.returncode == 0, r.stderr
        assert "sleep 100" not in r.stdout, r.stdout
        assert "OPENAI_API_KEY" not in r.stdout and "SECRET_TOKEN" not in r.stdout, r.stdout
        assert not res[0]["ok"], res
        # no way out, and the attempt seen, as a verify of its own sees it
        assert v["phase"] == "verify" and v["network"] == "audit" and v["reason"] is None, v
        assert v["network_attempted"] is True, v
        assert [(a["dst"], a["port"]) for a in v["network_attempts"]] == [("203.0.113.10", 80)], v
        # the host side went at the switch, not at destroy
        assert leftovers(world.host) == before, "the session's veth or table outlived the switch to verify"
        # and `session list` shows the network the session has now
        assert s.network_listed() == (["audit"], ["audit"])

        # for good: plain execs have no network either, install is refused
        r, v, res = s.probes(("session", "exec", s.id), f"{PROBE} tcp 198.51.100.10 443; {PROBE} cat /proc/net/dev")
        assert not res[0]["ok"] and v["network"] == "audit", (res, v)
        assert [(a["dst"], a["port"]) for a in v["network_attempts"]] == [("198.51.100.10", 443)], v
        assert [l.split(":")[0].strip() for l in res[1]["reply"].splitlines()[2:]] == ["lo"], res[1]
        r = s.kiwi("phase", "install", "--session", s.id, "--", "true")
        assert r.returncode == 125 and len(r.stderr.splitlines()) == 1 and "verify" in r.stderr, r.stderr
        # a model-provider key is refused by name, one line
        r = s.kiwi("phase", "verify", "--session", s.id, "--pass-env", "OPENAI_API_KEY", "--", "true", env=env)
        assert r.returncode == 125 and len(r.stderr.splitlines()) == 1 and "model-provider" in r.stderr, r.stderr
    finally:
        s.destroy()
    assert leftovers(world.host) == before


def test_install_refuses_a_session_without_its_network(world, kiwi_run, rootfs, scratch):  # noqa: F811
    s = Sess(world, kiwi_run, rootfs, scratch, opts=())
    try:
        r = s.kiwi("phase", "install", "--session", s.id, "--", "true")
        assert r.returncode == 125 and len(r.stderr.splitlines()) == 1, r.stderr
        assert "--network egress" in r.stderr, r.stderr
    finally:
        s.destroy()


def test_an_exec_past_the_kept_attempts_still_counts_them(world, kiwi_run, rootfs, scratch):  # noqa: F811
    """The supervisor keeps a session's newest 256 attempts: an exec that
    made more has the older ones in the counts, never another exec's."""
    s = Sess(world, kiwi_run, rootfs, scratch)
    try:
        s.probes(("session", "exec", s.id), f"{PROBE} tcp 203.0.113.10 80")
        _, v, res = s.probes(("session", "exec", s.id),
                             f"i=0; while [ $i -lt 300 ]; do {PROBE} tcp 169.254.169.254 80 >/dev/null; "
                             f"i=$((i+1)); done")
    finally:
        s.destroy()
    assert v["egress_allowed"] == [] and v["egress_allowed_other"] == 0, v
    kept = sum(b["count"] for b in v["egress_blocked"])
    assert kept == 256 and kept + v["egress_blocked_other"] == 300, v
    assert v["network_attempt_count"] == 300, v
