# SPDX-License-Identifier: Apache-2.0
"""The sandbox's one writable layer (kiwi/fslayer.h, issue 15): one bound
over /tmp, /dev/shm, --rw-root and the layered workspace; changes landed or
dropped at the end; mount points made in the layer; no host path in the
mount table."""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import explain, manifest

MIB = 1 << 20


def tree_bytes(root):
    """Bytes the files below ROOT occupy on disk."""
    total = 0
    for dirpath, dirs, files in os.walk(root):
        for name in files:
            total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
    return total


def run_v(kiwi, script, opts=(), rootfs=None, timeout=30):
    out = kiwi.workdir() / "verdict.json"
    r = kiwi.sh(script, opts=["--verdict", out, *opts], rootfs=rootfs, timeout=timeout)
    assert out.exists(), f"no verdict: {explain(r)}"
    return r, json.loads(out.read_text())


def workspace(kiwi):
    ws = kiwi.workdir()
    (ws / "keep").mkdir()
    (ws / "keep" / "a").write_text("a\n")
    (ws / "old").write_text("old\n")
    kiwi.chown(ws)
    return ws


def test_one_bound_over_workspace_and_tmp(kiwi):
    """--disk 16M: 10 MiB into the workspace, then 10 MiB into /tmp: the
    second meets ENOSPC (one bound, not one each), the command goes on."""
    ws = workspace(kiwi)
    r, v = run_v(kiwi, "dd if=/dev/zero of=/ws/big bs=1M count=10 && echo first-ok; "
                 "dd if=/dev/zero of=/tmp/big bs=1M count=10 || echo second-failed; echo still-running",
                 opts=["--disk", "16M", "--bind", f"{ws}:/ws:layer"])
    assert r.returncode == 0, explain(r)
    assert "first-ok" in r.stdout and "second-failed" in r.stdout and "still-running" in r.stdout, explain(r)
    assert "No space left on device" in r.stderr, explain(r)
    assert v["disk_full"] is True, v
    assert 15 * 1024 <= v["disk_used_kib"] <= 16 * 1024, v
    assert v["bounds"]["workspace_in_place"] is False, v  # this kernel's tmpfs holds user xattrs
    # the workspace's part landed on the host
    assert (ws / "big").stat().st_size == 10 * MIB


@pytest.mark.parametrize("where", ["rw-root", "workspace", "dev-shm", "tmp"])
def test_enospc_past_the_bound(kiwi, where):
    ws = workspace(kiwi)
    path = {"rw-root": "/big", "workspace": "/ws/big", "dev-shm": "/dev/shm/big", "tmp": "/tmp/big"}[where]
    opts = ["--disk", "4M", "--bind", f"{ws}:/ws:layer"] + (["--rw-root"] if where == "rw-root" else [])
    rootfs = kiwi.rootfs_copy() if where == "rw-root" else None
    before = tree_bytes(ws)
    r, v = run_v(kiwi, f"dd if=/dev/zero of={path} bs=1M count=8; echo dd=$?", opts=opts, rootfs=rootfs)
    assert "No space left on device" in r.stderr and "dd=1" in r.stdout, explain(r)
    assert v["disk_full"] is True and v["disk_used_kib"] >= 4000, v
    # the host directory grew by at most the bound
    assert tree_bytes(ws) - before <= 4 * MIB


def test_within_the_bound_is_not_full(kiwi):
    r, v = run_v(kiwi, "dd if=/dev/zero of=/tmp/x bs=1M count=2", opts=["--disk", "16M"])
    assert r.returncode == 0, explain(r)
    assert v["disk_full"] is False and 2048 <= v["disk_used_kib"] < 4096, v


def test_default_size(kiwi):
    """No --disk: every writable place shares the documented 1 GiB."""
    r = kiwi.sh("df -k /tmp /dev/shm /ws", opts=["--bind", f"{workspace(kiwi)}:/ws:layer"])
    assert r.returncode == 0, explain(r)
    sizes = [int(l.split()[1]) for l in r.stdout.splitlines()[1:]]
    assert sizes == [1 << 20] * 3, explain(r)


def test_changes_land(kiwi):
    ws = workspace(kiwi)
    (ws / "link").symlink_to("/etc/passwd")
    r = kiwi.sh("cd /ws && echo new > old && echo made > made && mkdir -p d/e && echo deep > d/e/f && "
                "rm -rf keep && mkdir keep && echo b > keep/b && rm link && ln -s made link2 && "
                "mkdir ro && echo r > ro/f && chmod 555 ro && chmod 640 made && touch -d @1000000000 made",
                opts=["--bind", f"{ws}:/ws:layer"])
    assert r.returncode == 0, explain(r)
    assert (ws / "old").read_text() == "new\n"
    assert (ws / "made").read_text() == "made\n"
    assert (ws / "d/e/f").read_text() == "deep\n"
    assert sorted(os.listdir(ws / "keep")) == ["b"]  # the opaque directory replaced the old
    assert not os.path.lexists(ws / "link") and os.readlink(ws / "link2") == "made"
    for p in (ws / "made", ws / "d/e/f", ws / "keep/b"):
        st = p.lstat()
        assert (st.st_uid, st.st_gid) == (kiwi.uid, kiwi.gid), p
    assert not [n for n in os.listdir(ws) if n.startswith(".kiwi-land")]
    # modes and times come along, a read-only directory with its entries
    assert (ws / "made").stat().st_mode & 0o7777 == 0o640 and (ws / "made").stat().st_mtime == 1000000000
    assert (ws / "ro").stat().st_mode & 0o7777 == 0o555 and (ws / "ro/f").read_text() == "r\n"


def test_discard(kiwi):
    ws = workspace(kiwi)
    before = manifest(ws)
    r = kiwi.sh("cd /ws && echo new > old && rm -rf keep && echo x > y && cat old",
                opts=["--bind", f"{ws}:/ws:layer", "--workspace-mode", "discard"])
    assert r.returncode == 0 and r.stdout == "new\n", explain(r)
    assert manifest(ws) == before and (ws / "old").read_text() == "old\n"


def test_killed_mid_write_leaves_workspace_untouched(kiwi):
    """kiwi-run killed (SIGKILL) while the sandbox writes: nothing has
    landed, the workspace is as it was before the run (kiwi-run(1))."""
    ws = workspace(kiwi)
    before = manifest(ws)
    p = kiwi.popen(["/bin/sh", "-c", "echo new > /ws/old; rm -rf /ws/keep; echo ready; "
                    "while :; do dd if=/dev/zero of=/ws/grow bs=64k count=16 2>/dev/null; done"],
                   opts=["--bind", f"{ws}:/ws:layer"])
    try:
        assert p.stdout.readline() == "ready\n"
        p.send_signal(signal.SIGKILL)
        p.communicate(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    time.sleep(0.2)  # pid 1 dies of its parent-death signal
    assert manifest(ws) == before


def test_missing_mount_point_made_in_the_layer(kiwi):
    """A bind destination the image lacks is made in the sandbox's layer:
    the shared rootfs is never written, and a rootless run works on a
    rootfs it cannot write."""
    src = kiwi.workdir()
    (src / "f").write_text("hello\n")
    kiwi.chown(src)
    before = manifest(kiwi.rootfs)
    r = kiwi.sh("cat /kiwi-new/dir/f && cat /etc/kiwi-hosts",
                opts=["--bind", f"{src}:/kiwi-new/dir:ro", "--bind", f"{src}/f:/etc/kiwi-hosts:ro"])
    assert r.returncode == 0 and r.stdout == "hello\nhello\n", explain(r)
    assert manifest(kiwi.rootfs) == before


def test_mountinfo_names_no_host_path(kiwi):
    ws = workspace(kiwi)
    r = kiwi.sh("cat /proc/self/mountinfo", opts=["--bind", f"{ws}:/ws:layer", "--rw-root"])
    assert r.returncode == 0, explain(r)
    for host in (str(kiwi.rootfs), str(ws), "/var/tmp"):
        assert host not in r.stdout, (host, r.stdout)
    first = r.stdout.splitlines()[0].split()
    assert first[3] == "/" and first[4] == "/", r.stdout


# ---------------------------------------------------------------------------
# bounded by default: processes in a phase, fields the host cannot know

BOMB = """n=0
while [ $n -lt 400 ]; do
  sleep 30 &
  [ $? -eq 0 ] || break
  n=$((n+1))
done
echo spawned=$n
"""


def pids_controller_offered():
    try:
        with open("/sys/fs/cgroup/cgroup.controllers") as f:
            return "pids" in f.read().split()
    except OSError:
        return False


def phase_verify(kiwi, script, opts=()):
    ws = workspace(kiwi)
    (ws / "run.sh").write_text(script)
    kiwi.chown(ws)
    out = kiwi.workdir() / "verdict.json"
    r = kiwi.raw(["phase", "verify", "--rootfs", kiwi.rootfs, "--workspace", ws, "--verdict", out,
                  *opts, "--", "/bin/sh", "/workspace/run.sh"], timeout=60)
    assert out.exists(), explain(r)
    return r, json.loads(out.read_text())


def test_fork_bomb_in_a_phase_stops_at_the_rlimit(kiwi):
    """No cgroup v2 pids controller (this hybrid host): RLIMIT_NPROC holds
    the phase, and the verdict says so, root's too: its sandbox's root is
    kiwi's unprivileged range, which the kernel does not exempt."""
    if pids_controller_offered():
        pytest.skip("the host offers the pids controller: the cgroup holds (VM lane)")
    r, v = phase_verify(kiwi, BOMB, opts=["--pids", "64"])
    spawned = int(r.stdout.split("spawned=")[1]) if "spawned=" in r.stdout else 0
    assert "can't fork" in r.stderr and spawned < 64, explain(r)
    assert v["bounds"]["pids"] == "rlimit" and v["pids_limit_hit"] is None, v


def test_fork_bomb_as_host_root_has_no_process_bound(kiwi):
    """--host-root-map: the host's root is exempt from RLIMIT_NPROC, so the
    verdict reports null, never a bound it lacks."""
    if kiwi.mode != "root":
        pytest.skip("--host-root-map is root's")
    if pids_controller_offered():
        pytest.skip("the host offers the pids controller: the cgroup holds (VM lane)")
    r, v = phase_verify(kiwi, BOMB, opts=["--pids", "64", "--host-root-map"])
    assert "spawned=400" in r.stdout and v["bounds"]["pids"] is None, (explain(r), v)


def test_phase_default_process_bound(kiwi):
    """Without --pids or a policy, 1024 (kiwi-run-phase(1))."""
    r, v = phase_verify(kiwi, "ulimit -u")
    assert r.stdout.strip() == "1024", explain(r)
    assert v["bounds"]["pids"] in ("rlimit", "cgroup"), v


def test_unknowable_fields_are_null(kiwi):
    """A phase always has a witness cgroup where the host gives one; on a
    hybrid host its memory and pids controllers are off, so whether the OOM
    killer struck or a fork hit pids.max is unknown: null, never false."""
    if pids_controller_offered():
        pytest.skip("the host's cgroup v2 has the controllers")
    r, v = phase_verify(kiwi, "true")
    assert v["oom_killed"] is None and v["pids_limit_hit"] is None, v
    assert v["bounds"]["memory"] is None and v["bounds"]["disk"] == "tmpfs", v
