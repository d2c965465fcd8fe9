# SPDX-License-Identifier: Apache-2.0
"""linux.cgroupsPath and linux.resources: the container's init starts in
exactly that cgroup (CLONE_INTO_CGROUP), exec joins it, delete removes
it; limits are written where cgroup v2 has the controllers and refused in
one line (nothing left) where it has not (this hybrid host)."""
import json
import os
from pathlib import Path

import pytest

from conftest import reap


def cgroup2_mount():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            if " - cgroup2 " in line:
                return Path(line.split()[4])
    return None


def controllers(mount):
    try:
        return (mount / "cgroup.controllers").read_text().split()
    except OSError:
        return []


def own_cgroup(pid):
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            if line.startswith("0::"):
                return line[3:].strip()
    return None


def test_cgroups_path_places_init_and_exec(oci):
    mount = cgroup2_mount()
    if not mount:
        pytest.skip("no cgroup2 mount")
    rel = f"/kiwi-oci-test-{os.getpid()}/{oci.mode}"
    cfg = oci.spec(["sleep", "1000"])
    cfg["linux"]["cgroupsPath"] = rel
    b = oci.bundle(cfg)
    oci.cli("run", "-d", "-b", str(b), "cg1", check=True)
    st = oci.state("cg1")
    try:
        if oci.mode == "rootless" and own_cgroup(st["pid"]) != rel:
            # Nothing delegated to the test user here: the container runs
            # without a cgroup of its own (no limits were asked for).
            assert not (mount / rel.lstrip("/")).exists()
            return
        assert own_cgroup(st["pid"]) == rel
        pidfile = oci.work / "x.pid"
        oci.cli("exec", "-d", "--pid-file", str(pidfile), "cg1", "sleep", "1000", check=True)
        xpid = int(pidfile.read_text())
        assert own_cgroup(xpid) == rel, "exec joins the init's cgroup"
        os.kill(xpid, 9)
        os.waitpid(xpid, 0)
        oci.cli("delete", "-f", "cg1", check=True)
        reap()
        assert not (mount / rel.lstrip("/")).exists(), "delete removes the cgroup it made"
    finally:
        parent = mount / rel.lstrip("/").split("/")[0]
        oci.cli("delete", "-f", "cg1")
        reap()
        if parent.exists():
            for d in sorted(parent.glob("**/"), reverse=True):
                d.rmdir()


def test_limits_written_or_refused(oci):
    mount = cgroup2_mount()
    if not mount:
        pytest.skip("no cgroup2 mount")
    if oci.mode == "rootless":
        pytest.skip("rootless limits need a delegated subtree (the VM lane's bounds tests)")
    rel = f"/kiwi-oci-test-{os.getpid()}/limits"
    cfg = oci.spec(["sleep", "1000"])
    cfg["linux"]["cgroupsPath"] = rel
    cfg["linux"]["resources"]["pids"] = {"limit": 10}
    cfg["linux"]["resources"]["memory"] = {"limit": 64 << 20, "swap": 64 << 20}
    b = oci.bundle(cfg)
    r = oci.cli("create", "-b", str(b), "lim")
    try:
        if "pids" not in controllers(mount) or "memory" not in controllers(mount):
            assert r.returncode == 1 and r.stderr.count("\n") == 1 and "controller" in r.stderr, r.stderr
            assert not list(oci.root.iterdir())
            assert not (mount / rel.lstrip("/")).exists()
            return
        assert r.returncode == 0, r.stderr
        d = mount / rel.lstrip("/")
        assert (d / "pids.max").read_text().strip() == "10"
        assert (d / "memory.max").read_text().strip() == str(64 << 20)
        assert (d / "memory.swap.max").read_text().strip() == "0"
        oci.cli("delete", "lim", check=True)
        reap()
        assert not d.exists()
    finally:
        parent = mount / rel.lstrip("/").split("/")[0]
        oci.cli("delete", "-f", "lim")
        reap()
        if parent.exists():
            for d in sorted(parent.glob("**/"), reverse=True):
                d.rmdir()


def test_systemd_cgroups_path_is_refused(oci):
    cfg = oci.spec(["true"])
    cfg["linux"]["cgroupsPath"] = "system.slice:kiwi:c1"
    b = oci.bundle(cfg)
    r = oci.cli("create", "-b", str(b), "sd")
    assert r.returncode == 1 and "systemd" in r.stderr and r.stderr.count("\n") == 1
    assert not list(oci.root.iterdir())


@pytest.mark.parametrize("field, value, switch", [
    ("pids", {"limit": 2048}, "--pids-limit 0"),
    ("cpu", {"shares": 1024}, "--cpu-shares 0"),
])
def test_caller_default_is_named_where_unenforceable(oci, field, value, switch):
    """containerd and podman write a pids limit and cpu shares nobody asked
    for: where cgroup v2 lacks the controller (this hybrid host), the one
    line names the field, its value and the caller's switch that turns it
    off, and nothing is left behind."""
    mount = cgroup2_mount()
    ctl = "pids" if field == "pids" else "cpu"
    if mount and ctl in controllers(mount):
        pytest.skip(f"the {ctl} controller is in cgroup v2 here: the limit is enforced")
    cfg = oci.spec(["true"])
    cfg["linux"]["cgroupsPath"] = f"/kiwi-oci-test-{os.getpid()}/default"
    cfg["linux"]["resources"] = {field: value}
    r = oci.cli("create", "-b", str(oci.bundle(cfg)), "dflt")
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
    key = next(iter(value))
    assert f"linux.resources.{field}.{key} {value[key]}" in r.stderr and switch in r.stderr, r.stderr
    assert f"`{ctl}`" in r.stderr, r.stderr
    assert not list(oci.root.iterdir())
    assert not mount or not (mount / f"kiwi-oci-test-{os.getpid()}").exists()
