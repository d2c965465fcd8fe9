# SPDX-License-Identifier: Apache-2.0
"""The disk-backed writable layer (--disk-backend loop, kiwi/loopfs.h,
issue 15): an ext4 image of --disk's size on a loop device that clears
itself. The bound holds over the workspace, /tmp, /dev/shm and --rw-root;
nothing is left (image, loop device) after a normal end or kill -9 of
kiwi-run; bad values fail in one line with 125.

Each test gives kiwi-run an image directory of its own (--disk-dir) and
counts only the loop devices whose backing file lies in it: other work on
this host uses loop devices too."""
import glob
import json
import os
import time

import pytest

from conftest import explain
from test_layer import MIB, run_v, workspace


def root_only(kiwi):
    if kiwi.mode != "root":
        pytest.skip("the loop backend needs root (rootless refusal: test_rootless_is_refused)")
    if not os.path.exists("/dev/loop-control"):
        pytest.skip("no /dev/loop-control on this host")


def our_loops(image_dir):
    """The loop devices backed by a file of image_dir: {name: (backing, bytes)}."""
    found = {}
    for d in glob.glob("/sys/block/loop*/loop/backing_file"):
        try:
            with open(d) as f:
                backing = f.read().strip()
        except OSError:
            continue  # cleared meanwhile
        if backing.startswith(f"{image_dir}/"):
            name = d.split("/")[3]
            with open(f"/sys/block/{name}/size") as f:
                found[name] = (backing, int(f.read()) * 512)
    return found


def wait_for_no_loops(image_dir, limit=20.0):
    """The kernel clears an autoclear device once the last mount of its
    filesystem goes with the sandbox's mount namespace: not at once."""
    deadline = time.monotonic() + limit
    while our_loops(image_dir) and time.monotonic() < deadline:
        time.sleep(0.05)
    return our_loops(image_dir)


def loop_opts(kiwi, size="16M"):
    d = kiwi.workdir()
    return d, ["--disk", size, "--disk-backend", "loop", "--disk-dir", d]


def test_one_bound_over_workspace_and_tmp(kiwi):
    """--disk 16M on the loop backend: 10 MiB into the workspace, then 10
    MiB into /tmp: the second meets ENOSPC, the command goes on, the
    verdict says full, and the workspace's part lands on the host."""
    root_only(kiwi)
    ws = workspace(kiwi)
    images, opts = loop_opts(kiwi)
    r, v = run_v(kiwi, "dd if=/dev/zero of=/ws/big bs=1M count=10 && echo first-ok; "
                 "dd if=/dev/zero of=/tmp/big bs=1M count=10 || echo second-failed; echo still-running",
                 opts=[*opts, "--bind", f"{ws}:/ws:layer"])
    assert r.returncode == 0, explain(r)
    assert "first-ok" in r.stdout and "second-failed" in r.stdout and "still-running" in r.stdout, explain(r)
    assert "No space left on device" in r.stderr, explain(r)
    assert v["disk_full"] is True and v["bounds"]["disk"] == "loop", v
    assert 14 * 1024 <= v["disk_used_kib"] <= 16 * 1024, v
    assert (ws / "big").stat().st_size == 10 * MIB
    assert wait_for_no_loops(images) == {} and os.listdir(images) == []


@pytest.mark.parametrize("where", ["rw-root", "dev-shm"])
def test_enospc_past_the_bound(kiwi, where):
    root_only(kiwi)
    path = {"rw-root": "/big", "dev-shm": "/dev/shm/big"}[where]
    images, opts = loop_opts(kiwi, "4M")
    rootfs = kiwi.rootfs_copy() if where == "rw-root" else None
    r, v = run_v(kiwi, f"dd if=/dev/zero of={path} bs=1M count=8; echo dd=$?",
                 opts=[*opts, *(["--rw-root"] if where == "rw-root" else [])], rootfs=rootfs)
    assert "No space left on device" in r.stderr and "dd=1" in r.stdout, explain(r)
    assert v["disk_full"] is True and v["disk_used_kib"] >= 2048, v
    assert v["bounds"]["disk"] == "loop", v


def test_within_the_bound_is_not_full(kiwi):
    root_only(kiwi)
    images, opts = loop_opts(kiwi)
    r, v = run_v(kiwi, "dd if=/dev/zero of=/tmp/x bs=1M count=2 && sync", opts=opts)
    assert r.returncode == 0, explain(r)
    assert v["disk_full"] is False and 2048 <= v["disk_used_kib"] < 4096, v
    assert v["bounds"]["disk"] == "loop", v


def test_host_holds_at_most_the_bound(kiwi):
    """While the sandbox runs, its one loop device is backed by an unnamed
    file of --disk-dir and is exactly --disk long: the host's filesystem
    can hold no more than that for it, however much the sandbox writes."""
    root_only(kiwi)
    images, opts = loop_opts(kiwi)
    p = kiwi.popen(["/bin/sh", "-c", "dd if=/dev/zero of=/tmp/big bs=1M count=64 2>/dev/null; "
                    "echo ready; sleep 30"], opts=opts)
    try:
        assert p.stdout.readline() == "ready\n", p.stderr.read()
        loops = our_loops(images)
        assert len(loops) == 1, loops
        (backing, size), = loops.values()
        assert size == 16 * MIB, loops
        assert backing.endswith("(deleted)"), backing  # never had a name to leave behind
        assert os.listdir(images) == []
    finally:
        p.kill()
        p.communicate()
    assert wait_for_no_loops(images) == {}


def test_nothing_left_after_a_normal_end(kiwi):
    root_only(kiwi)
    images, opts = loop_opts(kiwi)
    ws = workspace(kiwi)
    r = kiwi.sh("echo x > /ws/new && echo y > /tmp/y", opts=[*opts, "--bind", f"{ws}:/ws:layer"])
    assert r.returncode == 0, explain(r)
    assert (ws / "new").read_text() == "x\n"
    assert wait_for_no_loops(images) == {}
    assert os.listdir(images) == []


def test_nothing_left_after_kill_9(kiwi):
    """kiwi-run killed with SIGKILL mid-write: its sandbox dies of its
    parent-death signal, the mount namespace with it, the filesystem is
    unmounted, the loop device clears itself and the unnamed image is
    freed. Nothing to collect."""
    root_only(kiwi)
    images, opts = loop_opts(kiwi)
    ws = workspace(kiwi)
    p = kiwi.popen(["/bin/sh", "-c", "echo ready; while :; do dd if=/dev/zero of=/ws/grow bs=64k count=16 "
                    "2>/dev/null; done"], opts=[*opts, "--bind", f"{ws}:/ws:layer"])
    try:
        assert p.stdout.readline() == "ready\n", p.stderr.read()
        assert len(our_loops(images)) == 1
    finally:
        p.kill()  # SIGKILL, the test's point
        p.communicate(timeout=10)
    assert wait_for_no_loops(images) == {}
    assert os.listdir(images) == []
    assert not (ws / "grow").exists()  # nothing landed


def test_changes_land_through_ext4(kiwi):
    """overlayfs keeps its whiteouts and opaque directories in ext4's user
    xattrs: a removed file, a replaced directory and a new file land."""
    root_only(kiwi)
    images, opts = loop_opts(kiwi)
    ws = workspace(kiwi)
    r, v = run_v(kiwi, "cd /ws && rm old && rm -rf keep && mkdir keep && echo b > keep/b && echo n > new",
                 opts=[*opts, "--bind", f"{ws}:/ws:layer"])
    assert r.returncode == 0, explain(r)
    assert v["bounds"]["disk"] == "loop", v
    assert not (ws / "old").exists() and sorted(os.listdir(ws / "keep")) == ["b"]
    assert (ws / "new").read_text() == "n\n"


def test_rootless_is_refused(kiwi):
    """Without kiwi-helper (this suite installs none), in one line; with
    it, tests/helper/test_disk.py."""
    if kiwi.mode != "rootless":
        pytest.skip("the refusal is a rootless caller's")
    r = kiwi.run(["/bin/true"], opts=["--disk-backend", "loop"])
    assert r.returncode == 125, explain(r)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and "needs root" in lines[0] and "kiwi-helper" in lines[0], explain(r)


@pytest.mark.parametrize("opts,words", [
    (["--disk-backend", "zfs"], "--disk-backend wants tmpfs or loop"),
    (["--disk-backend", ""], "--disk-backend wants tmpfs or loop"),
    (["--disk-dir", "/var/tmp"], "--disk-dir needs --disk-backend loop"),
    (["--disk-backend", "loop", "--disk", "512k"], "at least 1M"),
])
def test_bad_values(kiwi, opts, words):
    r = kiwi.run(["/bin/true"], opts=opts)
    assert r.returncode == 125, explain(r)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and words in lines[0], explain(r)


def test_missing_image_dir(kiwi):
    root_only(kiwi)
    missing = kiwi.workdir() / "absent"
    r = kiwi.run(["/bin/true"], opts=["--disk-backend", "loop", "--disk-dir", missing])
    assert r.returncode == 125, explain(r)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and str(missing) in lines[0], explain(r)
    assert not missing.exists()


def test_session_on_the_loop_backend(kiwi):
    """A session's layer on the loop backend: each exec's verdict names it,
    the bound holds across execs, and destroy leaves no loop device."""
    root_only(kiwi)
    images, opts = loop_opts(kiwi)
    r = kiwi.raw(["session", "create", "--rootfs", kiwi.rootfs, *opts])
    assert r.returncode == 0, explain(r)
    sid = r.stdout.strip()
    try:
        assert len(our_loops(images)) == 1
        verdict = kiwi.workdir() / "v.json"
        r = kiwi.raw(["session", "exec", sid, "--verdict", verdict, "--", "/bin/sh", "-c",
                      "dd if=/dev/zero of=/tmp/a bs=1M count=10 && dd if=/dev/zero of=/tmp/b bs=1M count=10"])
        assert r.returncode == 1 and "No space left on device" in r.stderr, explain(r)
        v = json.loads(verdict.read_text())
        assert v["disk_full"] is True and v["bounds"]["disk"] == "loop", v
    finally:
        d = kiwi.raw(["session", "destroy", sid])
    assert d.returncode == 0, explain(d)
    assert wait_for_no_loops(images) == {} and os.listdir(images) == []
