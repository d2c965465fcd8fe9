# SPDX-License-Identifier: Apache-2.0
"""runtime-spec config.md "Mounts": bind, proc, tmpfs, devpts, mqueue,
sysfs, cgroup and their options."""
import os
import subprocess

import pytest

from oci import control, mount_at


def opts(m):
    return set(m["opts"].split(",")) | set(m["super"].split(","))


def test_bind_rw_and_ro(rt, bundle, tmp_path):
    rw = tmp_path / "rw"
    ro = tmp_path / "ro"
    rw.mkdir()
    ro.mkdir()
    (ro / "f").write_text("host data")
    bundle.add_mount("/mnt/a", "bind", rw, ["rbind", "rw"])
    bundle.add_mount("/mnt/b", "bind", ro, ["rbind", "ro"])
    r = rt.run(bundle.args("write=/mnt/a/new", "read=/mnt/b/f", "write=/mnt/b/f", "report"))
    assert r.rc == 0, r
    assert r.step("write", "/mnt/a/new")["ok"]
    assert (rw / "new").read_text() == "1"
    assert r.step("read", "/mnt/b/f")["data"] == "host data"
    assert r.step("write", "/mnt/b/f")["errno"] == 30  # EROFS
    assert "ro" in mount_at(r.report(), "/mnt/b")["opts"].split(",")


def test_bind_file(rt, bundle, tmp_path):
    f = tmp_path / "file"
    f.write_text("one file")
    bundle.add_mount("/mnt/file", "bind", f, ["bind", "ro"])
    r = rt.run(bundle.args("read=/mnt/file"))
    assert r.rc == 0, r
    assert r.step("read")["data"] == "one file"


def test_bind_creates_missing_destination(rt, bundle, tmp_path, rootfs):
    """A destination missing in a writable rootfs is created."""
    import shutil
    root = bundle.path / "rootfs"
    shutil.copytree(rootfs, root, symlinks=True)
    bundle.config["root"] = {"path": str(root), "readonly": False}
    src = tmp_path / "src"
    src.mkdir()
    (src / "x").write_text("made")
    bundle.add_mount("/new/deep/dir", "bind", src, ["rbind", "ro"])
    r = rt.run(bundle.args("read=/new/deep/dir/x"))
    assert r.rc == 0, r
    assert r.step("read")["data"] == "made"


def test_bind_options_nosuid_nodev_noexec(rt, bundle, tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    bundle.add_mount("/mnt/c", "bind", d, ["rbind", "nosuid", "nodev", "noexec"])
    r = rt.run(bundle.args("report"))
    assert r.rc == 0, r
    o = opts(mount_at(r.report(), "/mnt/c"))
    assert {"nosuid", "nodev", "noexec"} <= o


def test_bind_missing_source_refused(rt, bundle, tmp_path):
    control(rt, bundle.args("report"))
    bundle.add_mount("/mnt/d", "bind", tmp_path / "absent", ["rbind"])
    r = rt.run(bundle.args("report"))
    assert r.rc != 0 and r.err.strip(), r


def test_proc(rt, bundle):
    r = rt.run(bundle.args("report", "read=/proc/1/cmdline"))
    assert r.rc == 0, r
    m = mount_at(r.report(), "/proc")
    assert m["fstype"] == "proc"
    assert r.step("read")["data"].startswith("/usr/local/bin/oci-probe")


def test_tmpfs_options(rt, bundle):
    bundle.add_mount("/mnt/e", "tmpfs", "tmpfs", ["size=1m", "mode=0700", "nosuid", "noexec"])
    r = rt.run(bundle.args("report", "stat=/mnt/e", "write=/mnt/e/x"))
    assert r.rc == 0, r
    m = mount_at(r.report(), "/mnt/e")
    assert m["fstype"] == "tmpfs"
    assert {"nosuid", "noexec"} <= opts(m)
    assert "size=1024k" in m["super"].split(",")
    assert r.step("stat")["mode"] == 0o700
    assert r.step("write")["ok"]


def test_dev_and_devpts(rt, bundle):
    r = rt.run(bundle.args("report", "stat=/dev/pts/ptmx", "stat=/dev/ptmx"))
    assert r.rc == 0, r
    rep = r.report()
    assert mount_at(rep, "/dev")["fstype"] == "tmpfs"
    pts = mount_at(rep, "/dev/pts")
    assert pts["fstype"] == "devpts"
    assert "ptmxmode=666" in pts["super"].split(",")
    assert r.step("stat", "/dev/pts/ptmx")["type"] == "char"
    assert r.step("stat", "/dev/ptmx")["ok"], "/dev/ptmx points at the private devpts"


def test_default_devices(rt, bundle):
    """runtime-spec config-linux.md "Default Devices"."""
    want = {"/dev/null": (1, 3), "/dev/zero": (1, 5), "/dev/full": (1, 7),
            "/dev/random": (1, 8), "/dev/urandom": (1, 9), "/dev/tty": (5, 0)}
    r = rt.run(bundle.args(*[f"stat={p}" for p in want], "write=/dev/null"))
    assert r.rc == 0, r
    for path, (ma, mi) in want.items():
        st = r.step("stat", path)
        assert st["ok"] and st["type"] == "char", path
        assert (st["major"], st["minor"]) == (ma, mi), path
    assert r.step("write")["ok"]


def test_mqueue(rt, bundle):
    r = rt.run(bundle.args("report"))
    assert r.rc == 0, r
    assert mount_at(r.report(), "/dev/mqueue")["fstype"] == "mqueue"


def test_sysfs_readonly(rt, bundle):
    r = rt.run(bundle.args("report", "write=/sys/kernel/uevent_helper"))
    assert r.rc == 0, r
    m = mount_at(r.report(), "/sys")
    assert m["fstype"] == "sysfs"
    assert "ro" in m["opts"].split(",")
    assert not r.step("write")["ok"]


@pytest.mark.vm
@pytest.mark.skipif(not os.path.exists("/sys/fs/cgroup/cgroup.controllers"),
                    reason="needs the cgroup v2 VM lane")
def test_cgroup_mount(rt, bundle):
    bundle.linux["namespaces"].append({"type": "cgroup"})
    bundle.add_mount("/sys/fs/cgroup", "cgroup", "cgroup",
                     ["nosuid", "noexec", "nodev", "relatime", "ro"])
    r = rt.run(bundle.args("report", "read=/sys/fs/cgroup/cgroup.controllers"))
    assert r.rc == 0, r
    m = mount_at(r.report(), "/sys/fs/cgroup")
    assert m["fstype"] == "cgroup2"
    assert "ro" in m["opts"].split(",")
    assert r.step("read")["ok"]
    assert r.report()["cgroup"].strip() == "0::/", "the cgroup namespace's root"


def test_mount_order_later_wins(rt, bundle, tmp_path):
    a = tmp_path / "a"
    b = tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "f").write_text("first")
    (b / "f").write_text("second")
    bundle.add_mount("/mnt/f", "bind", a, ["rbind"])
    bundle.add_mount("/mnt/f", "bind", b, ["rbind"])
    r = rt.run(bundle.args("read=/mnt/f/f"))
    assert r.rc == 0, r
    assert r.step("read")["data"] == "second"


def test_sync_and_dirsync(rt, bundle):
    """sync and dirsync on a new filesystem: flags of its superblock."""
    bundle.add_mount("/mnt/e", "tmpfs", "tmpfs", ["size=1m", "sync", "dirsync"])
    bundle.add_mount("/mnt/f", "tmpfs", "tmpfs", ["size=1m"])
    r = rt.run(bundle.args("report", "write=/mnt/e/x"))
    assert r.rc == 0, r
    assert {"sync", "dirsync"} <= opts(mount_at(r.report(), "/mnt/e")), mount_at(r.report(), "/mnt/e")
    assert not {"sync", "dirsync"} & opts(mount_at(r.report(), "/mnt/f"))
    assert r.step("write")["ok"]


def test_destination_through_dangling_symlink(rt, bundle, rootfs):
    """A destination that is a symlink to a path not there yet: the target
    is made inside the rootfs and mounted on, never outside it."""
    import shutil
    root = bundle.path / "rootfs"
    shutil.copytree(rootfs, root, symlinks=True)
    bundle.config["root"] = {"path": str(root), "readonly": False}
    (root / "mnt" / "abs").symlink_to("/mnt/made/abs")
    (root / "mnt" / "rel").symlink_to("made/rel")
    bundle.add_mount("/mnt/abs", "tmpfs", "tmpfs", ["size=1m"])
    bundle.add_mount("/mnt/rel/x", "tmpfs", "tmpfs", ["size=1m"])
    r = rt.run(bundle.args("report"))
    assert r.rc == 0, r
    assert mount_at(r.report(), "/mnt/made/abs")["fstype"] == "tmpfs"
    assert mount_at(r.report(), "/mnt/made/rel/x")["fstype"] == "tmpfs"
    assert (root / "mnt" / "made" / "abs").is_dir() and (root / "mnt" / "made" / "rel" / "x").is_dir()


def test_bind_source_only_root_can_reach(rt, bundle, tmp_path):
    """A bind source the runtime can open but the container's user
    namespace cannot reach (a 0700 directory of the host's root) is opened
    before the container enters its namespace, as runc does."""
    if os.geteuid() != 0:
        pytest.skip("needs a runtime run by root")
    bundle.linux["namespaces"].append({"type": "user"})
    bundle.linux["uidMappings"] = [{"containerID": 0, "hostID": 200000, "size": 65536}]
    bundle.linux["gidMappings"] = [{"containerID": 0, "hostID": 200000, "size": 65536}]
    private = tmp_path / "private"
    (private / "src").mkdir(parents=True)
    (private / "src" / "f").write_text("root only")
    (private / "src" / "f").chmod(0o644)
    private.chmod(0o700)
    bundle.add_mount("/mnt/a", "bind", private / "src", ["rbind", "ro"])
    r = rt.run(bundle.args("read=/mnt/a/f", "write=/mnt/a/g", "report"))
    assert r.rc == 0, r
    assert r.step("read")["data"] == "root only"
    assert r.step("write")["errno"] == 30, "the ro option still applies"  # EROFS
    assert "ro" in mount_at(r.report(), "/mnt/a")["opts"].split(",")


def _idmap_capable(path):
    """tmpfs takes idmapped mounts only from Linux 6.3 (the VM lane's 6.1
    has none): there the test has nothing to compare."""
    fs = subprocess.run(["stat", "-f", "-c", "%T", str(path)], capture_output=True, text=True).stdout.strip()
    major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    if fs == "tmpfs" and (major, minor) < (6, 3):
        pytest.skip(f"{fs} takes no idmapped mounts on Linux {major}.{minor}")


@pytest.mark.parametrize("option, own_maps", [("idmap", True), ("ridmap", False)])
def test_idmapped_bind(rt, bundle, tmp_path, option, own_maps):
    """An idmapped bind: files the host's root owns show as the container's
    root, who may write them, through the mount's uidMappings/gidMappings
    or, without them, the container's user namespace maps."""
    if os.geteuid() != 0:
        pytest.skip("idmapped mounts need a runtime run by root")
    _idmap_capable(tmp_path)
    bundle.linux["namespaces"].append({"type": "user"})
    bundle.linux["uidMappings"] = [{"containerID": 0, "hostID": 200000, "size": 65536}]
    bundle.linux["gidMappings"] = [{"containerID": 0, "hostID": 200000, "size": 65536}]
    src = tmp_path / "src"
    src.mkdir()
    src.chmod(0o755)
    (src / "f").write_text("host root's")
    bundle.add_mount("/mnt/a", "bind", src, ["rbind", option])
    if own_maps:
        bundle.config["mounts"][-1]["uidMappings"] = [{"containerID": 0, "hostID": 200000, "size": 65536}]
        bundle.config["mounts"][-1]["gidMappings"] = [{"containerID": 0, "hostID": 200000, "size": 65536}]
    bundle.add_mount("/mnt/b", "bind", src, ["rbind"])
    r = rt.run(bundle.args("stat=/mnt/a/f", "stat=/mnt/b/f", "write=/mnt/a/new", "write=/mnt/b/other"))
    assert r.rc == 0, r
    assert (r.step("stat", "/mnt/a/f")["uid"], r.step("stat", "/mnt/a/f")["gid"]) == (0, 0)
    assert r.step("stat", "/mnt/b/f")["uid"] == 65534, "the plain bind is not idmapped"
    assert r.step("write", "/mnt/a/new")["ok"], r
    assert (src / "new").stat().st_uid == 0, "written as the host's root through the idmapping"
    assert not r.step("write", "/mnt/b/other")["ok"]


def test_device_rules_on_a_bound_node(rt, bundle):
    """linux.resources.devices governs a device node bound in from the host:
    allowed, it reads; denied, opening it fails (runc and crun: a device
    cgroup program; kiwi-run: the bind is nodev)."""
    node = "/dev/cpu_dma_latency"
    if not os.path.exists(node):
        pytest.skip(f"no {node} here")
    minor = os.minor(os.stat(node).st_rdev)
    bundle.add_mount("/mnt/file", "bind", node, ["bind"])
    bundle.linux["resources"] = {"devices": [{"allow": True, "access": "rwm"}]}
    r = rt.run(bundle.args("read=/mnt/file"))
    assert r.rc == 0 and r.step("read")["ok"], r
    bundle.linux["resources"]["devices"].append(
        {"allow": False, "type": "c", "major": 10, "minor": minor, "access": "rw"})
    r = rt.run(bundle.args("read=/mnt/file"))
    assert r.rc == 0, r
    assert not r.step("read")["ok"] and r.step("read")["errno"] in (1, 13), r  # EPERM, EACCES


def test_linux_devices_created(rt, bundle):
    """linux.devices: the node made with its type, numbers, mode and owner,
    and usable (here a char node with /dev/null's numbers, and a fifo)."""
    bundle.linux["devices"] = [
        {"path": "/dev/kiwi-null", "type": "c", "major": 1, "minor": 3, "fileMode": 0o622,
         "uid": 5, "gid": 6},
        {"path": "/dev/sub/kiwi-fifo", "type": "p", "fileMode": 0o600},
    ]
    r = rt.run(bundle.args("stat=/dev/kiwi-null", "write=/dev/kiwi-null", "stat=/dev/sub/kiwi-fifo"))
    assert r.rc == 0, r
    st = r.step("stat", "/dev/kiwi-null")
    assert (st["type"], st["major"], st["minor"]) == ("char", 1, 3), st
    assert (st["mode"], st["uid"], st["gid"]) == (0o622, 5, 6), st
    assert r.step("write")["ok"], r
    fifo = r.step("stat", "/dev/sub/kiwi-fifo")
    assert (fifo["type"], fifo["mode"]) == ("fifo", 0o600), fifo
