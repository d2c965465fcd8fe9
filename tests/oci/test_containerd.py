# SPDX-License-Identifier: Apache-2.0
"""containerd drives the runtime through its runc shim (io.containerd.runc.v2,
`ctr run --runc-binary RUNTIME`): an image imported from an oci-archive
that `kiwi-rootfs pack` made; start, exec, kill, delete, exit status.

containerd runs with a private config, root, state and socket, never the
system's. Its shims create cgroups, so this runs in the VM lane only (pure
cgroup v2): on this hybrid host they would land in the v1 hierarchies."""
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

import images
from oci import CMD_TIMEOUT, host_runs_peers, probe_lines, one, containerd_config, stop_daemon

pytestmark = [pytest.mark.vm,
              pytest.mark.skipif(not host_runs_peers() or not shutil.which("containerd"),
                                 reason="needs the VM lane (pure cgroup v2) and containerd")]
NS = "kiwi-oci"
SHIM = "io.containerd.runc.v2"

class Containerd:
    def __init__(self, d):
        self.dir = Path(d)
        self.sock = str(self.dir / "containerd.sock")
        (self.dir / "config.toml").write_text(containerd_config(self.dir, ["io.containerd.grpc.v1.cri"]))
        self.log = open(self.dir / "containerd.log", "w")
        self.proc = subprocess.Popen(["containerd", "--config", str(self.dir / "config.toml")],
                                     stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        deadline = time.monotonic() + CMD_TIMEOUT
        while self.ctr("version").returncode != 0:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("containerd did not start: "
                                   + (self.dir / "containerd.log").read_text()[-2000:])
            time.sleep(0.2)

    def ctr(self, *args, timeout=CMD_TIMEOUT):
        return subprocess.run(["ctr", "-a", self.sock, "-n", NS, *map(str, args)],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout)

    def stop(self):
        stop_daemon(self.proc, self.log)


@pytest.fixture(scope="module")
def containerd(session_dir, rootfs):
    # Fresh per runtime: pytest rebuilds module fixtures for each rt_name.
    d = Path(tempfile.mkdtemp(prefix="containerd-", dir=session_dir))
    c = Containerd(d)
    try:
        archive = images.oci_archive(rootfs, d)
        r = c.ctr("images", "import", "--base-name", images.IMAGE.split(":")[0], archive)
        assert r.returncode == 0, r.stderr
        yield c
    finally:
        c.stop()


def remove(c, cid):
    c.ctr("task", "kill", "-s", "SIGKILL", cid)
    c.ctr("task", "delete", "--force", cid)
    c.ctr("containers", "delete", cid)


def test_ctr_run_exit_status(rt, containerd):
    cid = rt.new_id()
    r = containerd.ctr("run", "--rm", "--runtime", SHIM, "--runc-binary", rt.path,
                       images.IMAGE, cid, "/usr/local/bin/oci-probe", "report", "exit=3")
    assert r.returncode == 3, (r.stdout[-2000:], r.stderr)
    rep = one(probe_lines(r.stdout), "report")
    assert rep["pid"] == 1
    assert rep["cwd"] == "/"
    assert containerd.ctr("containers", "info", cid).returncode != 0, "--rm removed it"


def test_ctr_start_exec_kill_delete(rt, containerd):
    cid = rt.new_id()
    r = containerd.ctr("run", "-d", "--runtime", SHIM, "--runc-binary", rt.path,
                       images.IMAGE, cid, "/usr/local/bin/oci-probe", "wait-signal")
    try:
        assert r.returncode == 0, r.stderr
        tasks = containerd.ctr("task", "ls")
        line = next(l for l in tasks.stdout.splitlines() if l.startswith(cid))
        pid = int(line.split()[1])
        assert line.split()[2] == "RUNNING", line

        r = containerd.ctr("task", "exec", "--exec-id", "probe1", cid,
                           "/usr/local/bin/oci-probe", "report")
        assert r.returncode == 0, r.stderr
        rep = one(probe_lines(r.stdout), "report")
        for ns in ("pid", "mnt", "net", "uts", "ipc"):
            assert rep["ns"][ns] == os.readlink(f"/proc/{pid}/ns/{ns}"), ns
        r = containerd.ctr("task", "exec", "--exec-id", "probe2", cid,
                           "/usr/local/bin/oci-probe", "exit=4")
        assert r.returncode == 4, r.stderr

        r = containerd.ctr("task", "kill", "-s", "SIGKILL", cid)
        assert r.returncode == 0, r.stderr
        # `task delete` reports a non-zero exit status (137: SIGKILL).
        deadline = time.monotonic() + CMD_TIMEOUT
        while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
            time.sleep(0.05)
        r = containerd.ctr("task", "delete", cid)
        assert r.returncode == 0, r.stderr
        assert "137" in r.stdout + r.stderr, (r.stdout, r.stderr)
        r = containerd.ctr("containers", "delete", cid)
        assert r.returncode == 0, r.stderr
        assert cid not in containerd.ctr("task", "ls").stdout
        left = Path(f"/run/containerd/runc/{NS}/{cid}")
        assert not left.exists(), "the runtime's state for the container is gone"
    finally:
        remove(containerd, cid)
