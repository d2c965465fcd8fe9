# SPDX-License-Identifier: Apache-2.0
"""The cgroup module (src/sandbox/cgroup.c) against the guest's real cgroup v2,
through the cgtool driver: limits, CLONE_INTO_CGROUP, stats, destroy, gc."""
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import (CGROOT, cgtool, cgtool_path, events, kiwi_cgroups, pids_with_arg,
                      wait_for)

# A script for the command inside the cgroup: prints "file=value" for each
# interface file, then the parent's subtree_control and our own cgroup.
SHOW_FILES = r'''
for f in memory.max memory.swap.max memory.oom.group pids.max cpu.max io.weight; do
  printf '%s=%s\n' "$f" "$(tr '\n' ' ' < "$KIWI_CGROUP_PATH/$f" | sed 's/ $//')"
done
printf 'parent=%s\n' "$(cat "$KIWI_CGROUP_PATH/../cgroup.subtree_control")"
printf 'self=%s\n' "$(cat /proc/self/cgroup)"
'''


def kv(stdout):
    return dict(l.split("=", 1) for l in stdout.splitlines() if "=" in l and not l.startswith("{"))


def test_limits_written_exactly(no_leftovers):
    r, ev = cgtool("run", "--memory", "64M", "--pids", "50", "--cpus", "0.5",
                   "--io-weight", "200", "--", "sh", "-c", SHOW_FILES)
    assert r.returncode == 0, r.stderr
    path = ev["created"]["path"]
    assert path.startswith("/sys/fs/cgroup/kiwi.slice/kiwi-"), path
    got = kv(r.stdout)
    assert got["memory.max"] == str(64 << 20)
    assert got["memory.swap.max"] == "0", "swap is off unless asked"
    assert got["memory.oom.group"] == "1"
    assert got["pids.max"] == "50"
    assert got["cpu.max"] == "50000 100000"
    assert got["io.weight"] == "default 200"
    assert set(got["parent"].split()) >= {"cpu", "io", "memory", "pids"}, got["parent"]
    # The child's first view of itself: already inside (CLONE_INTO_CGROUP).
    assert got["self"] == "0::" + path[len("/sys/fs/cgroup"):]
    assert not os.path.exists(path), "destroy removed it"


def test_only_needed_controllers_and_max_values(no_leftovers):
    r, ev = cgtool("run", "--parent", "/kiwi-test-only", "--pids", "max", "--swap", "1M",
                   "--", "sh", "-c", SHOW_FILES)
    try:
        assert r.returncode == 0, r.stderr
        got = kv(r.stdout)
        assert got["pids.max"] == "max"
        assert got["memory.swap.max"] == str(1 << 20)
        assert got["memory.max"] == "max", "memory.max untouched when only swap is set"
        assert set(got["parent"].split()) == {"memory", "pids"}, got["parent"]
    finally:
        os.rmdir(CGROOT / "kiwi-test-only")


def test_swap_explicit_and_cpus_max():
    r, _ = cgtool("run", "--parent", "/kiwi-test-cpumax", "--cpus", "max", "--", "sh", "-c", SHOW_FILES)
    os.rmdir(CGROOT / "kiwi-test-cpumax")
    assert r.returncode == 0, r.stderr
    assert kv(r.stdout)["cpu.max"] == "max 100000"


def test_cgroup_namespace_root_is_the_sandbox_cgroup(no_leftovers):
    """clone3(CLONE_INTO_CGROUP | CLONE_NEWCGROUP): the new namespace is
    rooted at the target cgroup, not at the parent's."""
    r, _ = cgtool("run", "--pids", "10", "--cgroupns", "--", "cat", "/proc/self/cgroup")
    assert r.returncode == 0, r.stderr
    assert "0::/\n" in r.stdout


def test_memory_max_kills_a_200mb_writer(no_leftovers):
    # dd fills a 200 MB buffer from /dev/zero: it touches every page.
    r, ev = cgtool("run", "--memory", "64M", "--", "dd", "if=/dev/zero", "of=/dev/null",
                   "bs=200M", "count=1")
    assert r.returncode == 0, r.stderr
    x = ev["exited"]
    assert x["signal"] == signal.SIGKILL, x
    assert x["oom_killed"] and x["oom_kills"] >= 1, x
    assert x["peak_known"], "6.1 has memory.peak"
    assert 32 * 1024 < x["peak_memory_kib"] <= 64 * 1024 + 64, x


def test_no_oom_under_the_limit(no_leftovers):
    r, ev = cgtool("run", "--memory", "64M", "--", "dd", "if=/dev/zero", "of=/dev/null",
                   "bs=8M", "count=4")
    assert r.returncode == 0, r.stderr
    x = ev["exited"]
    assert x["exit_code"] == 0 and not x["oom_killed"] and x["oom_kills"] == 0, x
    assert 8 * 1024 <= x["peak_memory_kib"] < 64 * 1024, x


def test_pids_max_stops_a_fork_loop(no_leftovers):
    script = ('(for i in $(seq 100); do sleep 1004 & done) 2>/dev/null; '
              'echo "current=$(cat "$KIWI_CGROUP_PATH/pids.current")"')
    r, ev = cgtool("run", "--pids", "20", "--", "sh", "-c", script)
    assert r.returncode == 0, r.stderr
    assert ev["exited"]["pids_limit_hit"], ev["exited"]
    assert int(kv(r.stdout)["current"]) <= 20
    assert wait_for(lambda: not pids_with_arg("1004"), 5), "destroy killed the sleepers"


def test_pids_limit_not_hit_below(no_leftovers):
    r, ev = cgtool("run", "--pids", "20", "--", "sh", "-c", "sleep 0 & wait")
    assert r.returncode == 0, r.stderr
    assert not ev["exited"]["pids_limit_hit"]


def spin_usage(cpus, seconds=4):
    """cpu.stat usage of a busy loop under --cpus, over its wall time."""
    script = (f'timeout {seconds} sh -c "while :; do :; done"; '
              'cat "$KIWI_CGROUP_PATH/cpu.stat"')
    args = ["--cpus", cpus] if cpus else ["--pids", "max"]
    r, ev = cgtool("run", *args, "--", "sh", "-c", script)
    assert r.returncode == 0, r.stderr
    stat = {k: int(v) for k, v in (l.split() for l in r.stdout.splitlines() if len(l.split()) == 2)}
    return ev["exited"]["cpu_usage_us"] / (seconds * 1e6), stat


def test_cpu_max_half_a_core(no_leftovers):
    share, stat = spin_usage("0.5")
    # Per active 100 ms period the group may run 50 ms: the tight measure.
    per_period = stat["usage_usec"] / (stat["nr_periods"] * 100000)
    assert 0.3 <= per_period <= 0.6, f"{per_period:.2f} of each period under --cpus 0.5: {stat}"
    assert stat["nr_throttled"] > 0, stat
    # Over wall time the emulated CPUs add slack; a busy host only lowers it.
    assert 0.2 <= share <= 0.8, f"spinner used {share:.2f} of a core under --cpus 0.5"
    free, _ = spin_usage(None)
    assert free > share, f"unlimited {free:.2f} <= limited {share:.2f}"


def test_destroy_kills_daemons_and_nested_cgroups(no_leftovers):
    script = ('mkdir "$KIWI_CGROUP_PATH/inner"; '
              'sh -c \'echo $$ > "$KIWI_CGROUP_PATH/inner/cgroup.procs"; exec sleep 1005\' & '
              'setsid sleep 1006 < /dev/null > /dev/null 2>&1 & '
              'sleep 0.2; echo started')
    r, ev = cgtool("run", "--pids", "20", "--", "sh", "-c", script)
    assert r.returncode == 0, r.stderr
    assert "started" in r.stdout
    assert ev["destroyed"]
    assert not os.path.exists(ev["created"]["path"])
    assert not pids_with_arg("1005") and not pids_with_arg("1006")


def start_owner(marker, *extra):
    p = subprocess.Popen([cgtool_path(), "run", "--pids", "20", *extra, "--", "sleep", marker],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    created = events(line).get("created")
    assert created, f"no created event: {line!r} {p.stderr.read() if p.poll() is not None else ''}"
    assert wait_for(lambda: pids_with_arg(marker)), "the command started"
    return p, created["path"]


def test_gc_after_kill9_of_the_owner(no_leftovers):
    p, path = start_owner("1007")
    p.kill()
    p.wait()
    p.stdout.close()
    p.stderr.close()
    assert os.path.isdir(path) and pids_with_arg("1007"), "the orphan and its cgroup outlive the owner"
    r, ev = cgtool("gc")
    assert r.returncode == 0, r.stderr
    assert ev["gc"]["removed"] == 1
    assert not os.path.exists(path)
    assert not pids_with_arg("1007")


def test_gc_spares_a_live_owner(no_leftovers):
    p, path = start_owner("1008")
    try:
        r, ev = cgtool("gc")
        assert r.returncode == 0, r.stderr
        assert ev["gc"]["removed"] == 0
        assert os.path.isdir(path) and pids_with_arg("1008")
    finally:
        for pid in pids_with_arg("1008"):
            os.kill(pid, signal.SIGKILL)
        out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert events(out)["exited"]["signal"] == signal.SIGKILL
    assert not os.path.exists(path)


def test_gc_with_nothing_to_do():
    r, ev = cgtool("gc", "--parent", "/kiwi-test-never-made")
    assert r.returncode == 0, r.stderr
    assert ev["gc"]["removed"] == 0
    assert not (CGROOT / "kiwi-test-never-made").exists(), "gc creates nothing"


def test_500_cycles_leave_nothing():
    before = kiwi_cgroups()
    start = time.monotonic()
    r, ev = cgtool("cycles", "--memory", "64M", "--pids", "100", "--cpus", "1", "500", timeout=600)
    assert r.returncode == 0, r.stderr
    assert ev["cycles"]["cycles"] == 500
    assert kiwi_cgroups() == before
    print(f"500 cycles in {time.monotonic() - start:.1f} s")


# ---- rootless: the subtree the guest delegates to kiwitest ----


def test_rootless_default_parent_beside_own_cgroup(no_leftovers):
    r, ev = cgtool("run", "--pids", "7", "--memory", "32M", "--", "sh", "-c",
                   'cat /proc/self/cgroup; cat "$KIWI_CGROUP_PATH/pids.max"', user=True)
    assert r.returncode == 0, r.stderr
    path = ev["created"]["path"]
    assert path.startswith("/sys/fs/cgroup/kiwitest/kiwi/kiwi-"), path
    assert "0::/kiwitest/kiwi/kiwi-" in r.stdout and "\n7\n" in r.stdout, r.stdout
    assert not os.path.exists(path)


def test_rootless_gc_after_kill9(no_leftovers):
    p = subprocess.Popen(["/kiwi/as-user", cgtool_path(), "run", "--pids", "5", "--",
                          "sleep", "1009"], stdout=subprocess.PIPE, text=True)
    path = events(p.stdout.readline())["created"]["path"]
    assert wait_for(lambda: pids_with_arg("1009"))
    p.kill()
    p.wait()
    p.stdout.close()
    r, ev = cgtool("gc", user=True)
    assert r.returncode == 0, r.stderr
    assert ev["gc"]["removed"] == 1 and not os.path.exists(path)
    assert not pids_with_arg("1009")


def test_rootless_without_delegation_says_what_is_missing(no_leftovers):
    r = subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
                        cgtool_path(), "run", "--pids", "5", "--", "true"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 125
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "delegated to uid 65534" in lines[0] and "not writable" in lines[0], lines[0]


def test_bad_parent_and_bad_limits_leave_nothing(no_leftovers):
    r, _ = cgtool("run", "--parent", "/a/../b", "--pids", "5", "--", "true")
    assert r.returncode == 125 and "no . or .. components" in r.stderr, r.stderr
    r, _ = cgtool("run", "--io-max", "8:0 speed=1", "--", "true")
    assert r.returncode == 125 and "--io-max" in r.stderr and "speed=1" in r.stderr, r.stderr
    r, _ = cgtool("run", "--memory", "12X", "--", "true")
    assert r.returncode == 125 and "--memory" in r.stderr and "`12X`" in r.stderr, r.stderr


def test_io_max_on_a_loop_device(tmp_path, no_leftovers):
    img = tmp_path / "img"
    with open(img, "wb") as f:
        f.truncate(8 << 20)
    dev = subprocess.run(["losetup", "--find", "--show", str(img)], capture_output=True,
                         text=True)
    if dev.returncode != 0:
        pytest.skip(f"no loop device: {dev.stderr.strip()}")
    dev = dev.stdout.strip()
    try:
        majmin = Path(f"/sys/class/block/{Path(dev).name}/dev").read_text().strip()
        r, _ = cgtool("run", "--io-max", f"{majmin} wbps=1048576 riops=max", "--",
                      "sh", "-c", 'cat "$KIWI_CGROUP_PATH/io.max"')
        assert r.returncode == 0, r.stderr
        assert f"{majmin} rbps=max wbps=1048576 riops=max wiops=max" in r.stdout, r.stdout
    finally:
        subprocess.run(["losetup", "-d", dev])
