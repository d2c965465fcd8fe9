# SPDX-License-Identifier: Apache-2.0
"""Harness of the OCI conformance suite: one test, every runtime.

Each test takes the `rt` fixture, parametrized over the runtimes under test,
writes a config.json (builder: `oci.Bundle`) and drives the runtime's OCI
command line (create/start/state/kill/delete/run/exec/...). The container
process is the static `oci-probe` (probe.c), which prints what it sees as
JSON, so the assertions are about what the kernel shows inside, not about
what the runtime says it did.

Inputs (environment):
  KIWI_OCI_RUNTIMES  "name=/path,name=/path" (default: kiwi=$KIWI_RUN,
                     crun=/usr/bin/crun, runc=/usr/sbin/runc, those present)
  KIWI_OCI_PROBE     the oci-probe binary (default: compiled here, cc -static)
  KIWI_OCI_ROOTFS    a busybox rootfs with the probe in /usr/local/bin
                     (default: built here with rootfs-tools/busybox-rootfs.sh)
  KIWI_OCI_RESULTS   write every (test, runtime) outcome here as JSON, for
                     report.py (RESULTS.md)
  KIWI_OCI_EXPECT    the CI mode: a file of tests kiwi-run must pass (one
                     `module::test` a line). Those are asserted for `kiwi`;
                     every other outcome (kiwi's other tests, all of crun's
                     and runc's) is informational: a failure is reported as
                     xfail, and counted as a failure in the results file.

crun refuses every container on a hybrid-cgroup host and runc would create
cgroup v1 groups there, which these machines forbid: on such a host both
are reported "n/a" and only kiwi-run runs; the comparison runs in the VM
lane (vm.sh), which has a pure cgroup v2 hierarchy.
"""
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

import oci

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
# kiwi/ holds kiwi-run's own OCI tests, with their own conftest and meson test.
collect_ignore = ["kiwi"]


def _runtimes():
    spec = os.environ.get("KIWI_OCI_RUNTIMES")
    if spec:
        out = []
        for item in spec.split(","):
            name, _, path = item.partition("=")
            if not name or not path:
                raise pytest.UsageError(f"KIWI_OCI_RUNTIMES: `{item}` is not name=/path")
            out.append((name.strip(), path.strip()))
        return out
    out = []
    kiwi = os.environ.get("KIWI_RUN", str(REPO / "build" / "src" / "kiwi-run"))
    for name, path in (("kiwi", kiwi), ("crun", "/usr/bin/crun"), ("runc", "/usr/sbin/runc")):
        if os.access(path, os.X_OK):
            out.append((name, path))
    return out


RUNTIMES = _runtimes()


def pytest_generate_tests(metafunc):
    if "rt_name" in metafunc.fixturenames:
        names = [n for n, _ in RUNTIMES]
        metafunc.parametrize("rt_name", names, ids=names, scope="session")


# ---------------------------------------------------------------------------
# session: the probe and the rootfs every bundle points at


@pytest.fixture(scope="session")
def session_dir():
    d = Path(tempfile.mkdtemp(prefix="kiwi-oci-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    with open("/proc/self/mountinfo") as f:
        leaked = [line for line in f if f" {d}/" in line]
    if not leaked:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def probe(session_dir):
    given = os.environ.get("KIWI_OCI_PROBE")
    if given:
        return Path(given)
    out = session_dir / "oci-probe"
    subprocess.run(["cc", "-O2", "-static", "-o", str(out), str(HERE / "probe.c")], check=True)
    return out


@pytest.fixture(scope="session")
def rootfs(session_dir, probe):
    """A private copy of the busybox rootfs (on tmpfs in the VM), with the
    probe and every mount point the tests use. Bundles share it read-only
    (root.readonly); a test that writes to the root gets its own copy."""
    src = os.environ.get("KIWI_OCI_ROOTFS")
    if not src:
        src = str(session_dir / "busybox")
        subprocess.run(["sh", str(REPO / "rootfs-tools" / "busybox-rootfs.sh"), src, str(probe)],
                       check=True)
    dest = session_dir / "rootfs"
    shutil.copytree(os.path.realpath(src), dest, symlinks=True)
    shutil.copy2(probe, dest / "usr/local/bin/oci-probe")
    for d in oci.MOUNT_POINTS:
        (dest / d.lstrip("/")).mkdir(parents=True, exist_ok=True)
    for f in oci.FILE_MOUNT_POINTS:
        (dest / f.lstrip("/")).touch()
    return dest


@pytest.fixture
def rt(rt_name, session_dir, tmp_path):
    """The runtime under test, with its own state dir; every container a
    test made is force-deleted afterwards."""
    path = dict(RUNTIMES)[rt_name]
    if rt_name != "kiwi" and not oci.host_runs_peers():
        pytest.skip(f"n/a: {rt_name} cannot run on a hybrid-cgroup host (use the VM lane)")
    state = session_dir / f"state-{rt_name}"
    state.mkdir(exist_ok=True)
    runtime = oci.Runtime(rt_name, path, state, tmp_path)
    yield runtime
    runtime.cleanup()


@pytest.fixture
def bundle(rt, rootfs, session_dir, tmp_path):
    """A bundle in the session dir (mode 0711 down to it, as containerd
    makes its bundles), so that a container's mapped root in a user
    namespace can traverse to it; pytest's own tmp dirs are 0700."""
    d = Path(tempfile.mkdtemp(prefix=f"{rt.name}-", dir=_bundles(session_dir)))
    d.chmod(0o711)
    return oci.Bundle(d, rootfs)


def _bundles(session_dir):
    d = session_dir / "bundles"
    d.mkdir(mode=0o711, exist_ok=True)
    return d


# ---------------------------------------------------------------------------
# outcomes: the results file and the CI mode's expected list

_results = {}


def _expected():
    path = os.environ.get("KIWI_OCI_EXPECT")
    if not path:
        return None
    lines = Path(path).read_text().splitlines()
    return {line.strip() for line in lines if line.strip() and not line.startswith("#")}


EXPECTED = _expected()


def test_key(item):
    return f"{Path(item.fspath).name}::{item.originalname}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    name = getattr(getattr(item, "callspec", None), "params", {}).get("rt_name")
    if name is None:
        return
    key = test_key(item)
    if rep.when == "setup" and rep.skipped:
        _results[(key, name)] = "n/a" if "n/a:" in str(rep.longrepr) else "skip"
    elif rep.when == "setup" and rep.failed:
        _results[(key, name)] = "fail"
    elif rep.when == "call":
        _results[(key, name)] = "pass" if rep.passed else "skip" if rep.skipped else "fail"
    if EXPECTED is None or not rep.failed or rep.when == "teardown":
        return
    if name == "kiwi" and key in EXPECTED:
        return
    why = "not yet in tests/oci/expected-kiwi.txt" if name == "kiwi" else "informational"
    rep.outcome = "skipped"
    rep.wasxfail = f"{name}: {why}"


def pytest_configure(config):
    config.addinivalue_line("markers", "vm: needs the VM lane (pure cgroup v2); CI runs only "
                            "these there, the rest on the host")


def pytest_sessionstart(session):
    if EXPECTED is not None and "kiwi" not in dict(RUNTIMES):
        raise pytest.UsageError("KIWI_OCI_EXPECT is set but no `kiwi` runtime is under test")


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("KIWI_OCI_RESULTS")
    if not path:
        return
    versions = {name: oci.version_line(p) for name, p in RUNTIMES}
    rows = [{"test": k, "runtime": n, "result": r} for (k, n), r in sorted(_results.items())]
    Path(path).write_text(json.dumps({"runtimes": versions, "kernel": os.uname().release,
                                      "vm": os.environ.get("KIWI_VM") == "1",
                                      "results": rows}, indent=1) + "\n")
