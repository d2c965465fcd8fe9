# SPDX-License-Identifier: Apache-2.0
"""The sandbox's writable layer on a pure cgroup v2 host (issue 15): a
memory-backed layer is charged to the sandbox's memory cgroup, so filling
it counts against --memory; and the layered workspace works on the guest's
older kernel (Linux 6.1)."""
import os
import signal

from test_run_bounds import kiwi_run, rootfs, run  # noqa: F401 (fixtures)


def test_filling_the_layer_counts_against_memory(kiwi_run, rootfs, tmp_path, no_leftovers):
    """--memory 64M, a 512M layer: 200 MB written into /tmp is charged to
    the sandbox's cgroup, which is OOM-killed long before the layer fills."""
    r = run(kiwi_run, rootfs, tmp_path, ["--memory", "64M", "--disk", "512M"],
            "echo before; dd if=/dev/zero of=/tmp/fill bs=1M count=200; echo after")
    v = r.verdict
    assert v["oom_killed"] is True and v["killed_by"] == "oom", v
    assert v["disk_full"] is False and v["bounds"]["memory"] == "cgroup", v
    assert r.returncode == 128 + signal.SIGKILL, r.returncode


def test_control_without_memory_the_layer_takes_it(kiwi_run, rootfs, tmp_path, no_leftovers):
    """The same write without --memory: the layer holds it, nothing is
    killed, and the peak is in the verdict."""
    r = run(kiwi_run, rootfs, tmp_path, ["--disk", "512M"],
            "dd if=/dev/zero of=/tmp/fill bs=1M count=200 && echo after")
    v = r.verdict
    assert r.returncode == 0 and r.stdout == b"after\n", r.stderr
    assert v["killed_by"] is None and v["disk_used_kib"] >= 200 * 1024, v


def kernel_at_least(major, minor):
    got = tuple(int(x) for x in os.uname().release.split("-")[0].split(".")[:2])
    return got >= (major, minor)


def test_layered_workspace_on_this_kernel(kiwi_run, rootfs, tmp_path, no_leftovers):
    """A workspace directory replaced inside (an opaque directory, as
    `rm -rf node_modules && npm ci` makes) lands on the host. Before Linux
    6.6 tmpfs holds no user xattrs, overlayfs could not record it (EIO), so
    the workspace is bound in place, and the verdict says so."""
    ws = tmp_path / "ws"
    (ws / "node_modules" / "old").mkdir(parents=True)
    (ws / "node_modules" / "old" / "f").write_text("old\n")
    r = run(kiwi_run, rootfs, tmp_path, ["--bind", f"{ws}:/ws:layer", "--disk", "16M"],
            "rm -rf /ws/node_modules && mkdir -p /ws/node_modules/new && echo new > /ws/node_modules/new/f")
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(ws / "node_modules")) == ["new"]
    assert (ws / "node_modules" / "new" / "f").read_text() == "new\n"
    assert r.verdict["bounds"]["workspace_in_place"] is (not kernel_at_least(6, 6)), r.verdict
