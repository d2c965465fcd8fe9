# SPDX-License-Identifier: Apache-2.0
"""runtime-spec config-linux.md "Control groups" on cgroup v2: cgroupsPath,
memory, pids, cpu, unified; the limits seen from the host's side of the
hierarchy and felt by the container. Needs the VM lane (pure cgroup v2)."""
import os
from pathlib import Path

import pytest

from oci import wait_for_file_text, wait_pid_gone

pytestmark = [pytest.mark.vm, pytest.mark.skipif(
    not os.path.exists("/sys/fs/cgroup/cgroup.controllers")
    or os.path.exists("/sys/fs/cgroup/unified"),
    reason="needs a pure cgroup v2 hierarchy: the VM lane")]


def cgroup_dir(pid):
    line = next(l for l in open(f"/proc/{pid}/cgroup") if l.startswith("0::"))
    return Path("/sys/fs/cgroup") / line.strip()[3:].lstrip("/")


def created(rt, bundle, resources, *steps, path=None):
    bundle.linux["resources"] = resources
    if path:
        bundle.linux["cgroupsPath"] = path
    bundle.args(*(steps or ("report",)))
    cid = rt.new_id()
    r = rt.create(cid, bundle)
    assert r.rc == 0, r
    return cid, rt.state(cid)["pid"]


def test_cgroups_path(rt, bundle):
    name = f"/oci-test-{rt.name}-{os.getpid()}"
    cid, pid = created(rt, bundle, {}, path=name)
    assert cgroup_dir(pid) == Path("/sys/fs/cgroup" + name)
    assert rt.cmd("delete", "--force", cid).rc == 0
    assert wait_pid_gone(pid)
    assert not Path("/sys/fs/cgroup" + name).exists(), "delete removes the cgroup"


def test_memory_limit(rt, bundle):
    _, pid = created(rt, bundle, {"memory": {"limit": 64 << 20}})
    assert (cgroup_dir(pid) / "memory.max").read_text().strip() == str(64 << 20)


def test_memory_limit_enforced(rt, bundle):
    bundle.linux["resources"] = {"memory": {"limit": 32 << 20, "swap": 32 << 20}}
    r = rt.run(bundle.args("alloc=200", "report"))
    assert r.rc != 0, r
    assert not any(d.get("step") == "alloc" for d in r.lines), "200 MiB fit under 32 MiB"


def test_pids_limit(rt, bundle):
    _, pid = created(rt, bundle, {"pids": {"limit": 20}})
    assert (cgroup_dir(pid) / "pids.max").read_text().strip() == "20"


def test_pids_limit_enforced(rt, bundle):
    bundle.linux["resources"] = {"pids": {"limit": 10}}
    r = rt.run(bundle.args("fork=50"))
    assert r.rc == 0, r
    f = r.step("fork")
    assert f["made"] < 10 and f["errno"] == 11  # EAGAIN


def test_cpu_max(rt, bundle):
    _, pid = created(rt, bundle, {"cpu": {"quota": 50000, "period": 100000}})
    assert (cgroup_dir(pid) / "cpu.max").read_text().split() == ["50000", "100000"]


def test_unified(rt, bundle):
    _, pid = created(rt, bundle, {"unified": {"cpu.weight": "42", "memory.high": "50000000"}})
    d = cgroup_dir(pid)
    assert (d / "cpu.weight").read_text().strip() == "42"
    assert (d / "memory.high").read_text().strip() == str(50000000 // 4096 * 4096)


def test_unified_pids_alone(rt, bundle):
    """A controller named only by a unified file is enabled and the file
    written as given: the CRI has no pids field, so its callers pass
    pids.max this way."""
    _, pid = created(rt, bundle, {"unified": {"pids.max": "40"}})
    assert (cgroup_dir(pid) / "pids.max").read_text().strip() == "40"


def test_container_sees_its_limits(rt, bundle):
    """With a cgroup namespace and a cgroup mount, the limits are visible inside."""
    bundle.linux["namespaces"].append({"type": "cgroup"})
    bundle.add_mount("/sys/fs/cgroup", "cgroup", "cgroup", ["nosuid", "noexec", "nodev", "ro"])
    bundle.linux["resources"] = {"memory": {"limit": 48 << 20}, "pids": {"limit": 33}}
    r = rt.run(bundle.args("cat=/sys/fs/cgroup/memory.max", "cat=/sys/fs/cgroup/pids.max"))
    assert r.rc == 0, r
    assert r.step("cat", "/sys/fs/cgroup/memory.max")["data"].strip() == str(48 << 20)
    assert r.step("cat", "/sys/fs/cgroup/pids.max")["data"].strip() == "33"


def test_exec_joins_cgroup(rt, bundle):
    cid, pid = created(rt, bundle, {"pids": {"limit": 40}}, "wait-signal")
    assert rt.cmd("start", cid).rc == 0
    assert wait_for_file_text(bundle.path / "out", '"ready"')
    r = rt.cmd("exec", cid, "/usr/local/bin/oci-probe", "cat=/proc/self/cgroup")
    assert r.rc == 0, r
    own = open(f"/proc/{pid}/cgroup").read()
    inside = r.step("cat")["data"]
    # The exec'd process is in the container's cgroup (or a child of it).
    assert inside.strip().split("::")[1].startswith(own.strip().split("::")[1])


def _rmtree_cgroup(top):
    if top.exists():
        for d in sorted((p for p in top.glob("**/") if p.is_dir()), reverse=True):
            d.rmdir()


def test_cgroups_path_parents_made_with_controllers(rt, bundle):
    """A cgroupsPath whose parents do not exist: they are made, and the
    controllers the limits need are enabled on the way down."""
    top = Path(f"/sys/fs/cgroup/oci-par-{rt.name}-{os.getpid()}")
    try:
        cid, pid = created(rt, bundle, {"pids": {"limit": 21}}, path=f"/{top.name}/a/b")
        assert cgroup_dir(pid) == top / "a" / "b"
        assert (top / "a" / "b" / "pids.max").read_text().strip() == "21"
        assert "pids" in (top / "a" / "cgroup.subtree_control").read_text().split()
        assert rt.cmd("delete", "--force", cid).rc == 0
        assert wait_pid_gone(pid)
        assert not (top / "a" / "b").exists()
    finally:
        _rmtree_cgroup(top)


def test_cgroups_path_parents_removed_at_delete(rt, bundle):
    """The parents the runtime made go at delete, once empty; a parent that
    existed before stays."""
    mine = Path(f"/sys/fs/cgroup/oci-own-{rt.name}-{os.getpid()}")
    mine.mkdir()
    try:
        cid, pid = created(rt, bundle, {"pids": {"limit": 22}}, path=f"/{mine.name}/made/leaf")
        assert (mine / "made" / "leaf" / "pids.max").read_text().strip() == "22"
        assert "pids" in (mine / "cgroup.subtree_control").read_text().split(), \
            "the existing parent enables the controller for its new child"
        assert rt.cmd("delete", "--force", cid).rc == 0
        assert wait_pid_gone(pid)
        assert not (mine / "made").exists(), "the parent the runtime made is removed"
        assert mine.exists(), "the parent that existed before stays"
    finally:
        _rmtree_cgroup(mine)


def test_exec_cgroup_sub(rt, bundle):
    """exec --cgroup SUB runs the process in an existing sub-cgroup of the
    container's; a missing one fails the exec."""
    name = f"/oci-sub-{rt.name}-{os.getpid()}"
    cid, pid = created(rt, bundle, {}, "wait-signal", path=name)
    try:
        assert rt.cmd("start", cid).rc == 0
        assert wait_for_file_text(bundle.path / "out", '"ready"')
        (Path("/sys/fs/cgroup" + name) / "sess").mkdir()
        r = rt.cmd("exec", "--cgroup", "sess", cid, "/usr/local/bin/oci-probe", "cat=/proc/self/cgroup")
        assert r.rc == 0, r
        assert r.step("cat")["data"].strip() == f"0::{name}/sess", r
        r = rt.cmd("exec", "--cgroup", "nope", cid, "/usr/local/bin/oci-probe", "report")
        assert r.rc != 0 and not r.lines, r
    finally:
        rt.cmd("delete", "--force", cid)
        wait_pid_gone(pid)
        _rmtree_cgroup(Path("/sys/fs/cgroup" + name))
