# SPDX-License-Identifier: Apache-2.0
"""`kiwi-run run` under its bounds (issue 3), end to end inside the VM lane:
memory, pids, cpus, timeout, output and disk ceilings, the verdict fields,
and cleanup after 500 runs and after kill -9 of kiwi-run.

Tests of a flag kiwi-run does not have yet skip, naming the flag."""
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import kiwi_cgroups, pids_with_arg, wait_for

SPIN = 'while :; do :; done'


@pytest.fixture(scope="session")
def kiwi_run():
    path = os.environ.get("KIWI_RUN")
    if not path or not os.access(path, os.X_OK):
        pytest.fail(f"KIWI_RUN={path!r} is not an executable kiwi-run")
    return path


@pytest.fixture(scope="session")
def run_help(kiwi_run):
    return subprocess.run([kiwi_run, "run", "--help"], capture_output=True, text=True).stdout


@pytest.fixture(scope="session")
def rootfs(tmp_path_factory):
    """The busybox rootfs vm.sh built on the host, copied onto the guest's
    tmpfs (a 9p lower layer is slow and not what users run on)."""
    src = os.environ.get("KIWI_BOUNDS_ROOTFS")
    if not src or not os.path.isfile(os.path.join(src, "bin", "busybox")):
        pytest.fail(f"KIWI_BOUNDS_ROOTFS={src!r} holds no busybox rootfs")
    dest = tmp_path_factory.mktemp("rootfs") / "r"
    # cp, not shutil.copytree: one process instead of a Python loop under TCG.
    # realpath: busybox-rootfs.sh makes the path a symlink to its current version.
    subprocess.run(["cp", "-a", os.path.realpath(src), str(dest)], check=True)
    return str(dest)


def need(run_help, *flags):
    missing = [f for f in flags if f not in run_help]
    if missing:
        pytest.skip(f"kiwi-run has no {' '.join(missing)} yet")


class Run:
    def __init__(self, proc, verdict, wall):
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.verdict = verdict
        self.wall = wall


def run(kiwi_run, rootfs, tmp_path, flags, script, timeout=120):
    vpath = tmp_path / f"verdict-{time.monotonic_ns()}.json"
    argv = [kiwi_run, "run", "--rootfs", rootfs, "--verdict", str(vpath), *flags,
            "--", "/bin/sh", "-c", script]
    start = time.monotonic()
    p = subprocess.run(argv, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    wall = time.monotonic() - start
    verdict = json.loads(vpath.read_text()) if vpath.exists() else None
    assert verdict is not None, f"no verdict; exit {p.returncode}; stderr {p.stderr[-2000:]!r}"
    return Run(p, verdict, wall)


def assert_consistent(v, killed_by):
    """One field never contradicts another: the bound that ended the run is
    named once, and its flag agrees."""
    assert v["killed_by"] == killed_by, v
    flags = {"timeout": v["timed_out"], "output_limit": v["output_limit_hit"],
             "oom": v["oom_killed"]}
    for name, flag in flags.items():
        if name == killed_by:
            assert flag is True, v
    if v["cgroup"] is None:
        assert v["oom_killed"] is None and v["peak_memory_kib"] is None, v
        assert v["pids_limit_hit"] is None, v


# ---- no cgroup needed ----


def test_timeout_kills_a_daemonised_term_ignorer(kiwi_run, rootfs, tmp_path, no_leftovers):
    script = ('trap "" TERM; '
              'setsid sh -c \'trap "" TERM; exec sleep 1021\' </dev/null >/dev/null 2>&1 & '
              'sleep 1022')
    r = run(kiwi_run, rootfs, tmp_path, ["--timeout", "2s", "--kill-grace", "500ms"], script)
    v = r.verdict
    assert v["timed_out"] is True, v
    assert r.returncode == 128 + signal.SIGKILL, (r.returncode, v)
    assert r.wall < 2 + 0.5 + 5, f"took {r.wall:.1f} s"
    assert not pids_with_arg("1021") and not pids_with_arg("1022"), "everything is gone"
    assert_consistent(v, "timeout")


def test_output_flood_yields_exactly_the_limit(kiwi_run, rootfs, tmp_path, no_leftovers):
    r = run(kiwi_run, rootfs, tmp_path, ["--output-limit", "1M"],
            'dd if=/dev/zero bs=1M count=100 2>/dev/null; echo done >&2')
    v = r.verdict
    assert len(r.stdout) == 1 << 20 and r.stdout == b"\0" * (1 << 20)
    assert v["stdout_truncated"] is True and v["stderr_truncated"] is False, v
    assert r.stderr == b"done\n", "the command kept running past the ceiling"
    assert r.returncode == 0 and v["output_limit_hit"] is False, v
    assert_consistent(v, None)


def test_output_limit_kill_keeps_what_came_before(kiwi_run, rootfs, tmp_path, no_leftovers):
    r = run(kiwi_run, rootfs, tmp_path, ["--output-limit", "64k", "--output-limit-kill"],
            'echo first >&2; yes | head -c 10000000; echo never >&2')
    v = r.verdict
    assert len(r.stdout) == 64 << 10 and v["stdout_truncated"], v
    assert v["output_limit_hit"] is True, v
    assert r.stderr == b"first\n", r.stderr
    assert_consistent(v, "output_limit")


def test_disk_filler_hits_enospc_at_the_ceiling(kiwi_run, rootfs, tmp_path, no_leftovers):
    r = run(kiwi_run, rootfs, tmp_path, ["--disk", "8M"],
            'dd if=/dev/zero of=/tmp/fill bs=1M count=50; ls -ln /tmp/fill')
    v = r.verdict
    assert b"No space left on device" in r.stderr, r.stderr
    size = int(r.stdout.split()[4])
    assert 7 << 20 <= size <= 8 << 20, size
    assert v["disk_full"] is True, v
    assert_consistent(v, None)


# ---- cgroup limits ----


def test_memory_bomb_is_oom_killed_with_output_intact(kiwi_run, run_help, rootfs, tmp_path,
                                                      no_leftovers):
    need(run_help, "--memory")
    r = run(kiwi_run, rootfs, tmp_path, ["--memory", "64M"],
            'echo before; echo to-stderr >&2; dd if=/dev/zero of=/dev/null bs=200M count=1; echo after')
    v = r.verdict
    assert v["oom_killed"] is True, v
    assert r.stdout == b"before\n", r.stdout
    assert r.stderr.startswith(b"to-stderr\n"), r.stderr
    assert 32 * 1024 <= v["peak_memory_kib"] <= 64 * 1024 + 64, v
    assert v["cgroup"] and v["cgroup"].startswith("/kiwi.slice/kiwi-"), v
    assert r.returncode == 128 + signal.SIGKILL, r.returncode
    assert_consistent(v, "oom")


def test_fork_bomb_stops_at_pids_max_and_the_host_answers(kiwi_run, run_help, rootfs, tmp_path,
                                                          no_leftovers):
    need(run_help, "--pids", "--timeout")
    vpath = tmp_path / "v.json"
    argv = [kiwi_run, "run", "--rootfs", rootfs, "--verdict", str(vpath), "--pids", "64",
            "--timeout", "6s", "--", "/bin/sh", "-c", "f() { f | f & }; f; sleep 100"]
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.5)
    # The host (the guest's root cgroup) still starts processes promptly.
    slowest = 0.0
    for _ in range(5):
        t = time.monotonic()
        subprocess.run(["/bin/true"], check=True, timeout=10)
        slowest = max(slowest, time.monotonic() - t)
    p.wait(timeout=60)
    v = json.loads(vpath.read_text())
    assert slowest < 2.0, f"/bin/true took {slowest:.2f} s during the fork bomb"
    assert v["pids_limit_hit"] is True, v
    assert v["timed_out"] is True, v
    assert_consistent(v, "timeout")


def test_cpus_half_a_core(kiwi_run, run_help, rootfs, tmp_path, no_leftovers):
    need(run_help, "--cpus")
    r = run(kiwi_run, rootfs, tmp_path, ["--cpus", "0.5"], f'timeout 4 sh -c "{SPIN}"; true')
    assert_consistent(r.verdict, None)
    share = r.verdict["cpu_usage_ms"] / 4000
    assert 0.2 <= share <= 0.8, f"{share:.2f} of a core under --cpus 0.5: {r.verdict}"
    free = run(kiwi_run, rootfs, tmp_path, [], f'timeout 4 sh -c "{SPIN}"; true')
    assert free.verdict["cpu_usage_ms"] / 4000 > share, free.verdict


def test_timeout_kills_the_whole_cgroup(kiwi_run, run_help, rootfs, tmp_path, no_leftovers):
    need(run_help, "--pids")
    script = ('trap "" TERM; setsid sh -c \'trap "" TERM; exec sleep 1023\' '
              '</dev/null >/dev/null 2>&1 & sleep 1024')
    r = run(kiwi_run, rootfs, tmp_path, ["--pids", "32", "--timeout", "1s"], script)
    assert r.verdict["timed_out"] is True and not r.verdict["oom_killed"], r.verdict
    assert_consistent(r.verdict, "timeout")
    assert not pids_with_arg("1023") and not pids_with_arg("1024")


def test_500_sequential_runs_leave_no_cgroup(kiwi_run, run_help, rootfs, tmp_path):
    need(run_help, "--memory", "--pids")
    before = kiwi_cgroups()
    start = time.monotonic()
    for i in range(500):
        p = subprocess.run([kiwi_run, "run", "--rootfs", rootfs, "--memory", "64M", "--pids", "32",
                            "--", "/bin/true"], capture_output=True, timeout=60)
        assert p.returncode == 0, f"run {i}: {p.stderr!r}"
    print(f"500 runs in {time.monotonic() - start:.1f} s")
    assert kiwi_cgroups() == before


def test_kill9_of_kiwi_run_then_gc_leaves_nothing(kiwi_run, run_help, rootfs, tmp_path):
    need(run_help, "--memory")
    gc = subprocess.run([kiwi_run, "gc", "--help"], capture_output=True, text=True)
    if gc.returncode != 0:
        pytest.skip("kiwi-run has no gc command yet")
    before = kiwi_cgroups()
    p = subprocess.Popen([kiwi_run, "run", "--rootfs", rootfs, "--memory", "64M", "--",
                          "/bin/sleep", "1025"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert wait_for(lambda: pids_with_arg("1025")), "the sandbox started"
    p.send_signal(signal.SIGKILL)
    p.wait()
    # Whatever kiwi-run left (its cgroup, processes in it) gc must remove.
    r = subprocess.run([kiwi_run, "gc"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert kiwi_cgroups() == before
    assert wait_for(lambda: not pids_with_arg("1025"), 5)


def test_rootless_run_in_the_delegated_subtree(kiwi_run, run_help, rootfs, tmp_path):
    """As the guest's unprivileged kiwitest: the sandbox's cgroup lands in
    the subtree delegated to it, the limit holds, the sandbox sees its own
    cgroup as / (cgroup namespace), and nothing is left behind."""
    need(run_help, "--memory", "--pids")
    shared = Path("/tmp/kiwi-bounds-rootless")
    subprocess.run(["rm", "-rf", str(shared)], check=True)
    shared.mkdir(mode=0o755)
    subprocess.run(["cp", "-a", rootfs, str(shared / "r")], check=True)
    verdict = shared / "v.json"
    # kiwitest makes it: kiwi-run writes over no file but its caller's own
    shared.chmod(0o1777)
    before = kiwi_cgroups()
    try:
        p = subprocess.run(["/kiwi/as-user", kiwi_run, "run", "--rootfs", str(shared / "r"),
                            "--verdict", str(verdict), "--memory", "32M", "--pids", "16", "--",
                            "/bin/sh", "-c", "cat /proc/self/cgroup; "
                            "dd if=/dev/zero of=/dev/null bs=100M count=1"],
                           capture_output=True, timeout=120)
        text = verdict.read_text() if verdict.exists() else ""
        assert text, f"no verdict: exit {p.returncode}, stderr {p.stderr!r}"
        v = json.loads(text)
        assert v["cgroup"] and v["cgroup"].startswith("/kiwitest/kiwi/kiwi-"), (v, p.stderr)
        assert p.stdout.startswith(b"0::/\n"), p.stdout
        assert v["oom_killed"] is True, v
        assert_consistent(v, "oom")
        assert kiwi_cgroups() == before
    finally:
        subprocess.run(["rm", "-rf", str(shared)])
