# SPDX-License-Identifier: Apache-2.0
"""Issue 19: the helper's cgroup is not its caller's. A caller with a
delegated cgroup owns its children's cgroup.freeze, cpu.max, pids.max and
memory.high, and may move any process between them, the helper too: it
could freeze or throttle the helper. The helper moves, as root and before
it makes anything, to a root-owned cgroup of its own (kiwi.helper) at the
root of the unified hierarchy, beside any delegated subtree; its keepers
start there; the caller's sandbox never does.

Runs wherever a cgroup2 hierarchy is mounted: on a hybrid host (this
repository's build machines) its unified hierarchy has no controllers but
every non-root cgroup has cgroup.freeze; in the VM lane (pure cgroup v2)
the caller also throttles with cpu.max and pids.max and the cgroup
operation runs too."""
import os
from pathlib import Path

import pytest

from conftest import attach, idmap, in_world, settle, world  # noqa: F401 (fixtures)
from fakenet import leftovers


def _mount():
    for m in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified")):
        if (m / "cgroup.procs").exists() and (m / "cgroup.controllers").exists():
            return m
    return None


MOUNT = _mount()
pytestmark = pytest.mark.skipif(MOUNT is None, reason="no cgroup2 hierarchy mounted")
CONTROLLERS = set((MOUNT / "cgroup.controllers").read_text().split()) if MOUNT else set()
V2 = {"memory", "pids", "cpu"} <= CONTROLLERS
OWN = "/kiwi.helper"


def cgroup_of(pid):
    """The "0::" path of a process, as root sees it."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            return line[3:]
    return None


def children(pid):
    return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def assert_own_cgroup_is_roots():
    d = MOUNT / OWN.lstrip("/")
    for p in (d, d / "cgroup.procs", d / "cgroup.freeze"):
        st = p.stat()
        assert st.st_uid == 0 and not st.st_mode & 0o022, (p, st.st_uid, oct(st.st_mode))
    if V2:
        assert (d / "cpu.max").read_text().split()[0] == "max"
        assert (d / "pids.max").read_text().strip() == "max"


def check_helper_and_keeper(c, users):
    helper_pid = c.start()
    prep, sb = attach(c, users)
    assert cgroup_of(helper_pid) == OWN
    (keeper,) = children(helper_pid)
    assert cgroup_of(keeper) == OWN
    caller_cg = cgroup_of(c.p.pid)
    assert caller_cg != OWN and cgroup_of(sb["pid"]) == caller_cg
    assert_own_cgroup_is_roots()
    c.call("close")


def test_the_helper_and_its_egress_keeper_leave_the_callers_cgroup(clients, users, world):
    """The egress keeper is forked after the move: it starts in the
    helper's cgroup. The sandbox stays in the caller's."""
    c = clients(prefix=("nsenter", f"--net=/run/netns/{world.host}"))
    check_helper_and_keeper(c, users)
    assert leftovers(world.host) == ([], [])


def test_a_mount_namespace_without_the_hierarchy(in_world, users, world):
    """`ip netns exec` mounts a fresh /sys: no cgroup2 in the caller's
    mount namespace, while its processes outside still reach it. The
    helper takes init's (/proc/1/root), where root may look there."""
    try:
        os.statvfs("/proc/1/root/sys/fs/cgroup")
    except OSError:
        pytest.skip("root cannot look into pid 1's root here (its capabilities exceed ours)")
    check_helper_and_keeper(in_world(), users)


@pytest.fixture
def delegated(users):
    """X, delegated to kiwi-test as systemd's Delegate=yes does (the
    directory and cgroup.procs, .threads, .subtree_control), with two
    cgroups of kiwi-test's own inside: X/caller (where the test puts the
    caller) and X/work (where the caller starts the helper)."""
    pw = users["kiwi-test"]
    x = MOUNT / f"kiwi-helper-test-delegated-{os.getpid()}"
    x.mkdir()
    try:
        for p in (x, x / "cgroup.procs", x / "cgroup.threads", x / "cgroup.subtree_control"):
            os.chown(p, pw.pw_uid, pw.pw_gid)
        if V2:
            (x / "cgroup.subtree_control").write_text("+cpu +pids +memory")
        for leaf in ("caller", "work"):
            (x / leaf).mkdir()
            for p in (x / leaf, *(x / leaf).iterdir()):
                os.chown(p, pw.pw_uid, pw.pw_gid)
        yield x
    finally:
        for leaf in ("work", "caller"):
            d = x / leaf
            if d.exists():
                (d / "cgroup.freeze").write_text("0")
                for pid in (d / "cgroup.procs").read_text().split():
                    try:
                        (MOUNT / "cgroup.procs").write_text(pid)
                    except OSError:
                        pass   # gone meanwhile
                settle(lambda: not (d / "cgroup.procs").read_text().strip(), 10)
                d.rmdir()
        x.rmdir()


RULES = [{"user": "kiwi-test", "operations": ["idmap", "cgroup"], "max_memory": "256M", "max_pids": 64,
          "max_sandboxes": 2}]


def test_a_delegated_caller_can_neither_freeze_throttle_nor_pull_back_the_helper(config, clients, users,
                                                                                 delegated):
    """The caller starts the helper in a cgroup of its own (X/work), and
    freezes and throttles that cgroup while the helper works: the helper
    has left it before it took anything, answers, and cannot be moved
    back; the caller cannot enter the helper's cgroup either, and its
    sandbox stays in the caller's cgroup (or the one the helper made for
    it, under the admin's caps)."""
    config.write(RULES)
    x = delegated
    c = clients()
    (x / "caller" / "cgroup.procs").write_text(str(c.p.pid))   # as systemd would place a user's shell
    helper_pid = c.start(cgroup=str(x / "work"))
    assert settle(lambda: cgroup_of(helper_pid) == OWN), cgroup_of(helper_pid)
    # the attack, by the caller, on what it owns: each write succeeds
    attacks = [("cgroup.freeze", "1")]
    if V2:
        attacks += [("cpu.max", "1000 100000"), ("pids.max", "1"), ("memory.high", str(1 << 20))]
    for f, v in attacks:
        assert c.call("write", path=str(x / "work" / f), text=v) == {"errno": 0}, f
    # ...and it would pull the helper back in: refused
    for leaf in ("work", "caller"):
        assert c.call("write", path=str(x / leaf / "cgroup.procs"), text=str(helper_pid))["errno"] != 0
    # nor may the caller enter the helper's cgroup or touch it
    own = MOUNT / OWN.lstrip("/")
    for f, v in (("cgroup.procs", str(c.p.pid)), ("cgroup.freeze", "1"),
                 *((("cpu.max", "1000 100000"),) if V2 else ())):
        assert c.call("write", path=str(own / f), text=v)["errno"] != 0, f
    assert_own_cgroup_is_roots()
    # the helper works on, its sandbox the caller's
    sb = c.call("sandbox")
    assert cgroup_of(sb["pid"]) == cgroup_of(c.p.pid) == "/" + str((x / "caller").relative_to(MOUNT))
    assert c.request(idmap(users), [{"sandbox": sb["id"]}]) == {"ok": True}
    if V2:
        ans = c.request({"op": "cgroup-prepare", "pids": 10})
        assert ans.get("ok"), ans
        assert c.request({"op": "cgroup-attach"}, [{"sandbox": sb["id"]}]) == {"ok": True}
        assert cgroup_of(sb["pid"]) == ans["path"]
        (keeper,) = children(helper_pid)
        assert cgroup_of(keeper) == OWN
    assert cgroup_of(helper_pid) == OWN
    c.finish()
