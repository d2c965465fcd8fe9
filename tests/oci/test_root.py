# SPDX-License-Identifier: Apache-2.0
"""runtime-spec config.md "Root": path (absolute or relative to the bundle)
and readonly."""
import shutil


def private_rootfs(rootfs, bundle):
    """A copy of the rootfs inside the bundle, for tests that write to it."""
    dest = bundle.path / "rootfs"
    shutil.copytree(rootfs, dest, symlinks=True)
    return dest


def test_readonly_root(rt, bundle):
    bundle.config["root"]["readonly"] = True
    r = rt.run(bundle.args("write=/probe-was-here", "write=/tmp/ok"))
    assert r.rc == 0, r
    assert r.step("write", "/probe-was-here")["errno"] == 30  # EROFS
    assert r.step("write", "/tmp/ok")["ok"], "a tmpfs mount stays writable"


def test_writable_root(rt, bundle, rootfs):
    root = private_rootfs(rootfs, bundle)
    bundle.config["root"] = {"path": str(root), "readonly": False}
    r = rt.run(bundle.args("write=/probe-was-here"))
    assert r.rc == 0, r
    assert r.step("write")["ok"], r
    assert (root / "probe-was-here").read_text() == "1"


def test_relative_root_path(rt, bundle, rootfs):
    private_rootfs(rootfs, bundle)
    bundle.config["root"] = {"path": "rootfs", "readonly": True}
    r = rt.run(bundle.args("report"))
    assert r.rc == 0, r
    assert r.report()["pid"] == 1


def test_root_is_pivoted(rt, bundle):
    """The host's root is gone: no mount of the host's / remains visible."""
    r = rt.run(bundle.args("report", "stat=/usr/bin/python3", "stat=/etc/os-release"))
    assert r.rc == 0, r
    assert not r.step("stat", "/usr/bin/python3")["ok"]
    assert not r.step("stat", "/etc/os-release")["ok"]
    assert r.report()["mounts"][0]["target"] == "/"
