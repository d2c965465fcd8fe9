# SPDX-License-Identifier: Apache-2.0
"""runtime-spec config-linux.md "Masked Paths" and "Readonly Paths"."""
import os

from oci import mount_at


def test_masked_file_reads_empty(rt, bundle):
    r = rt.run(bundle.args("read=/proc/kcore", "read=/proc/keys", "read=/proc/timer_list"))
    assert r.rc == 0, r
    for p in ("/proc/kcore", "/proc/keys", "/proc/timer_list"):
        got = r.step("read", p)
        assert not got["ok"] or got["bytes"] == 0, (p, got)


def test_masked_dir_is_empty(rt, bundle):
    r = rt.run(bundle.args("report", "stat=/sys/firmware", "write=/sys/firmware/x"))
    assert r.rc == 0, r
    m = mount_at(r.report(), "/sys/firmware")
    assert m is not None and m["fstype"] == "tmpfs"
    assert "ro" in m["opts"].split(",")
    assert not r.step("write")["ok"]


def test_masked_custom_path(rt, bundle, tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "secret").write_text("do not read")
    bundle.add_mount("/mnt/a", "bind", d, ["rbind"])
    bundle.linux["maskedPaths"].append("/mnt/a/secret")
    r = rt.run(bundle.args("read=/mnt/a/secret"))
    assert r.rc == 0, r
    got = r.step("read")
    assert not got["ok"] or got["bytes"] == 0, got


def test_masked_missing_path_ignored(rt, bundle):
    bundle.linux["maskedPaths"].append("/no/such/path")
    r = rt.run(bundle.args("report"))
    assert r.rc == 0, r


def test_readonly_paths(rt, bundle):
    r = rt.run(bundle.args("write=/proc/sys/kernel/domainname", "write=/proc/sysrq-trigger",
                           "read=/proc/sys/kernel/ostype"))
    assert r.rc == 0, r
    assert r.step("write", "/proc/sys/kernel/domainname")["errno"] == 30  # EROFS
    if os.path.exists("/proc/sysrq-trigger"):  # absent without CONFIG_MAGIC_SYSRQ
        assert r.step("write", "/proc/sysrq-trigger")["errno"] == 30
    assert r.step("read")["data"].strip() == "Linux", "still readable"


def test_readonly_custom_path(rt, bundle, tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    bundle.add_mount("/mnt/a", "bind", d, ["rbind", "rw"])
    (d / "sub").mkdir()
    bundle.linux["readonlyPaths"].append("/mnt/a/sub")
    r = rt.run(bundle.args("write=/mnt/a/sub/f", "write=/mnt/a/f"))
    assert r.rc == 0, r
    assert r.step("write", "/mnt/a/sub/f")["errno"] == 30
    assert r.step("write", "/mnt/a/f")["ok"]
