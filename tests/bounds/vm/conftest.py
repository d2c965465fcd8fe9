# SPDX-License-Identifier: Apache-2.0
"""Shared helpers of the VM-lane bounds tests (run inside the guest by
tests/bounds/vm.sh, as root, on a pure cgroup v2 hierarchy).

Inputs (environment): KIWI_CGTOOL (tests/bounds/cgtool), KIWI_RUN (kiwi-run),
KIWI_VM=1 (set by tests/vm/run.sh inside the guest).
"""
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

CGROOT = Path("/sys/fs/cgroup")
AS_USER = "/kiwi/as-user"


def pytest_collection_modifyitems(config, items):
    if os.environ.get("KIWI_VM") != "1":
        skip = pytest.mark.skip(reason="needs the pure cgroup v2 VM lane (run tests/bounds/vm.sh)")
        for item in items:
            item.add_marker(skip)


def pytest_sessionfinish(session, exitstatus):
    """Exit 77 (meson's skip) when every test skipped: never a silent pass."""
    stats = session.config.pluginmanager.get_plugin("terminalreporter").stats
    if exitstatus == 0 and stats.get("skipped") and not stats.get("passed"):
        session.exitstatus = 77


def cgtool_path():
    path = os.environ.get("KIWI_CGTOOL")
    if not path or not os.access(path, os.X_OK):
        pytest.fail(f"KIWI_CGTOOL={path!r} is not an executable cgtool")
    return path


def events(stdout):
    """cgtool's JSON lines, by event name (the command's own output is skipped)."""
    out = {}
    for line in stdout.splitlines():
        if line.startswith('{"event":'):
            e = json.loads(line)
            out[e["event"]] = e
    return out


def cgtool(*args, user=False, timeout=120):
    argv = [cgtool_path(), *map(str, args)]
    if user:
        argv = [AS_USER, *argv]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    return r, events(r.stdout)


def kiwi_cgroups():
    """Every kiwi-* cgroup anywhere in the hierarchy."""
    return sorted(str(p) for p in CGROOT.rglob("kiwi-*") if p.is_dir())


def pids_with_arg(marker):
    """The sleep processes whose argument is marker (a unique sleep length)."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[0].endswith(b"sleep") and marker.encode() in argv:
            found.append(int(d.name))
    return found


def wait_for(pred, timeout=10.0, step=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return pred()


@pytest.fixture
def no_leftovers():
    """Asserts the test left no kiwi cgroup and no new process behind."""
    before = kiwi_cgroups()
    yield
    after = kiwi_cgroups()
    assert after == before, f"kiwi cgroups left behind: {sorted(set(after) - set(before))}"
