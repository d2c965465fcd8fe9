# SPDX-License-Identifier: Apache-2.0
"""podman drives the runtime through conmon (`podman --runtime RUNTIME run`):
the same oci-archive image, loaded into a private store (--root, --runroot,
--tmpdir, vfs), run with --network none, and with -it through conmon's
console socket, driven from a pty.

VM lane only: podman's cgroupfs manager would create cgroups in this
hybrid host's v1 hierarchies."""
import os
import pty
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

import images
from oci import CMD_TIMEOUT, host_runs_peers, probe_lines, one

pytestmark = [pytest.mark.vm,
              pytest.mark.skipif(not host_runs_peers() or not shutil.which("podman"),
                                 reason="needs the VM lane (pure cgroup v2) and podman")]


class Podman:
    def __init__(self, d):
        self.dir = d
        # podman 4.3 unpacks an oci-archive under /var/tmp whatever TMPDIR
        # or containers.conf say; the VM's root is a throwaway tmpfs without it.
        if os.environ.get("KIWI_VM") == "1":
            os.makedirs("/var/tmp", mode=0o1777, exist_ok=True)
        self.env = dict(os.environ)
        self.base = ["podman", "--root", f"{d}/root", "--runroot", f"{d}/runroot",
                     "--tmpdir", f"{d}/tmp", "--storage-driver", "vfs",
                     "--cgroup-manager", "cgroupfs", "--events-backend", "file"]

    def argv(self, runtime, *args):
        return [*self.base, "--runtime", runtime, *map(str, args)]

    def run(self, runtime, *args, timeout=CMD_TIMEOUT):
        return subprocess.run(self.argv(runtime, *args), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=timeout, env=self.env)


@pytest.fixture(scope="module")
def podman(session_dir, rootfs):
    # Fresh per runtime: pytest rebuilds module fixtures for each rt_name.
    d = Path(tempfile.mkdtemp(prefix="podman-", dir=session_dir))
    p = Podman(d)
    archive = images.oci_archive(rootfs, d)
    r = subprocess.run([*p.base, "load", "-i", str(archive)], capture_output=True, text=True,
                       timeout=CMD_TIMEOUT, env=p.env)
    assert r.returncode == 0, r.stderr
    # The archive tags its image `latest` only: podman names it by that.
    name = r.stdout.strip().splitlines()[-1].split("Loaded image:")[-1].strip()
    p.image = name
    yield p
    subprocess.run([*p.base, "rm", "--all", "--force"], capture_output=True, timeout=CMD_TIMEOUT,
                   env=p.env)


def test_podman_run_network_none(rt, podman):
    r = podman.run(rt.path, "run", "--rm", "--network", "none", podman.image,
                   "report", "cat=/proc/net/dev", "exit=3")
    assert r.returncode == 3, (r.stdout[-2000:], r.stderr)
    lines = probe_lines(r.stdout)
    rep = one(lines, "report")
    assert rep["pid"] == 1
    devs = [l.split(":")[0].strip() for l in one(lines, "cat")["data"].splitlines()[2:]]
    assert devs == ["lo"]
    assert rep["ns"]["net"] != os.readlink("/proc/self/ns/net")


def test_podman_exec_and_stop(rt, podman):
    name = rt.new_id()
    r = podman.run(rt.path, "run", "-d", "--name", name, "--network", "none", podman.image,
                   "wait-signal")
    try:
        assert r.returncode == 0, r.stderr
        r = podman.run(rt.path, "exec", name, "/usr/local/bin/oci-probe", "report", "exit=4")
        assert r.returncode == 4, r.stderr
        assert one(probe_lines(r.stdout), "report")["pid"] != 1
        r = podman.run(rt.path, "kill", "--signal", "KILL", name)
        assert r.returncode == 0, r.stderr
        r = podman.run(rt.path, "wait", name)
        assert r.returncode == 0 and r.stdout.strip() == "137", (r.stdout, r.stderr)
        r = podman.run(rt.path, "rm", name)
        assert r.returncode == 0, r.stderr
    finally:
        podman.run(rt.path, "rm", "--force", name)


def test_podman_interactive_tty(rt, podman):
    """`podman run -it`: conmon receives the pty master on its console
    socket from the runtime; the test types into its own pty."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(podman.argv(rt.path, "run", "--rm", "-it", "--network", "none",
                                        podman.image, "report", "stdin-line", "exit=6"),
                            stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
                            env=podman.env)
    os.close(slave)
    text = b""
    typed = False
    deadline = time.monotonic() + CMD_TIMEOUT
    try:
        while time.monotonic() < deadline:
            if select.select([master], [], [], 0.1)[0]:
                try:
                    chunk = os.read(master, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                text += chunk
            # Type once the report line is complete, or the echo lands inside it.
            if not typed and b'"mounts"' in text and b"\n" in text[text.index(b'"mounts"'):]:
                os.write(master, b"typed line\r")
                typed = True
            if proc.poll() is not None and not select.select([master], [], [], 0.1)[0]:
                break
        rc = proc.wait(timeout=CMD_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    out = text.decode(errors="replace")
    assert rc == 6, out[-2000:]
    lines = probe_lines(out)
    rep = one(lines, "report")
    assert rep["isatty"] == [True, True, True]
    assert rep["ttyname"].startswith("/dev/pts/")
    assert one(lines, "stdin-line")["data"] == "typed line"
