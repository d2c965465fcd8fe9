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
