# SPDX-License-Identifier: Apache-2.0
"""Harness for the attack suite: hostile programs run inside default
sandboxes, as root and as the unprivileged user, and the host checked
afterwards.

It borrows the integration harness (tests/integration/conftest.py, through
tests/integration/harness.py): its session directory, test user,
subreaper, leftover-process check and the per-mode `Kiwi` runner. What is
its own: the static attack program `kiwi-attack` (this directory) in a
busybox rootfs of its own, and `host_unchanged`, which fails any test
after which the host's mount table, /etc, a canary file or kiwi-run's own
binary changed.

Inputs (environment):
  KIWI_RUN     the kiwi-run binary (default <repo>/build/src/kiwi-run)
  KIWI_ATTACK  the kiwi-attack binary (default: compiled here, cc -static)
"""
import fcntl
import hashlib
import json
import os
import pty
import select
import shutil
import struct
import subprocess
import sys
import termios
import time
import tty
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
ATTACK = "/usr/local/bin/kiwi-attack"  # where busybox-rootfs.sh puts it

sys.path.insert(0, str(HERE.parent / "integration"))
# Fixtures taken as they are (pytest finds them by name in this module;
# those that depend on others get this module's when it defines them).
from harness import (explain, it, no_leftover_processes, scratch,  # noqa: E402,F401
                     session_dir, subreaper, test_user)


@pytest.fixture(scope="session")
def attack_binary(session_dir):
    env = os.environ.get("KIWI_ATTACK")
    out = session_dir / "kiwi-attack"
    if env:
        shutil.copy2(env, out)
    else:
        cc = shutil.which("cc") or shutil.which("gcc")
        if not cc:
            pytest.exit("no KIWI_ATTACK and no C compiler to build it", 2)
        r = subprocess.run([cc, "-std=gnu11", "-D_GNU_SOURCE", "-O2", "-Wall", "-Wextra",
                            "-Werror", "-static", "-o", str(out), str(HERE / "kiwi-attack.c")],
                           capture_output=True, text=True)
        if r.returncode != 0:
            pytest.exit(f"building kiwi-attack failed:\n{r.stderr}", 2)
    out.chmod(0o755)
    return out


@pytest.fixture(scope="session")
def kiwi_binary(session_dir):
    """kiwi-run, copied where the test user can run it, and its digest."""
    src = Path(os.environ.get("KIWI_RUN", REPO / "build" / "src" / "kiwi-run"))
    if not src.is_file():
        pytest.exit(f"kiwi-run binary {src} is missing: build it or set KIWI_RUN", 2)
    dest = session_dir / "kiwi-run"
    shutil.copy2(src, dest)
    dest.chmod(0o755)
    return dest


@pytest.fixture(scope="session")
def rootfs(session_dir, attack_binary):
    """A busybox rootfs with kiwi-attack in /usr/local/bin, this session's own."""
    if not Path("/bin/busybox").exists():
        pytest.skip("busybox-static is not installed (apt-get install busybox-static)")
    dest = session_dir / "rootfs"
    old = os.umask(0o022)
    try:
        r = subprocess.run(["sh", str(REPO / "rootfs-tools" / "busybox-rootfs.sh"), str(dest),
                            str(attack_binary)], capture_output=True, text=True)
    finally:
        os.umask(old)
    if r.returncode != 0:
        pytest.exit(f"busybox-rootfs.sh failed:\n{r.stdout}{r.stderr}", 2)
    # The bind destinations the tests use exist, as in a real image: a
    # rootless caller cannot create them in this root-owned tree, and a
    # root-mode test creating one first must not decide whether rootless passes.
    for mount_point in ("ro", "workspace"):
        (dest / mount_point).mkdir(mode=0o755, exist_ok=True)
    return dest


@pytest.fixture(scope="session")
def binaries(kiwi_binary, attack_binary):
    """What the integration harness's `kiwi` fixture runs: kiwi-run, and
    the program inside (kiwi-attack here, in place of its probe)."""
    return kiwi_binary, attack_binary


# The per-mode runner, root and rootless, over this module's `binaries`
# and `rootfs`.
kiwi = it.kiwi


def parse_attack(r):
    """{step: {"ok", "errno", "note"}} from kiwi-attack's JSON lines."""
    steps = {}
    for line in r.stdout.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            pytest.fail(f"kiwi-attack printed a line that is not JSON: {line!r}\n{explain(r)}")
        steps[rec["step"]] = rec
    return steps


def attack(kiwi, name, *args, opts=(), rootfs=None, pass_fds=(), seccomp=None):
    """Runs `kiwi-attack NAME ARGS` in a sandbox; returns its steps.
    seccomp="unconfined" is the control: the same attack without the filter."""
    if seccomp:
        opts = (*opts, "--seccomp", seccomp)
    r = kiwi.run([ATTACK, name, *args], opts, rootfs, pass_fds=pass_fds)
    assert r.returncode == 0, f"kiwi-attack {name}: {explain(r)}"
    return parse_attack(r)


def succeeded(steps):
    return sorted(s for s, rec in steps.items() if rec["ok"])


def run_on_a_pty(argv, env, timeout=20):
    """Runs argv with a fresh pty as its controlling terminal, stdin,
    stdout and stderr, the way an interactive shell would. Returns
    (exit status, bytes left unread in the terminal's input queue after it
    ended, what it printed). Injected input would wait in that queue for
    the shell's next read."""
    rfd, wfd = os.pipe()
    pid, master = pty.fork()
    if pid == 0:  # the "shell": session leader, the pty is its terminal
        try:
            os.close(rfd)
            tty.setraw(0)  # every pushed byte counts, no line discipline
            rc = subprocess.run(argv, env=env, timeout=timeout).returncode
            time.sleep(0.05)
            n = struct.unpack("i", fcntl.ioctl(0, termios.FIONREAD, b"\0" * 4))[0]
            queued = os.read(0, n).decode(errors="replace") if n else ""
            os.write(wfd, json.dumps({"rc": rc, "queued": queued}).encode())
        finally:
            os._exit(0)
    os.close(wfd)
    out = b""
    deadline = time.monotonic() + timeout + 5
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the slave side is closed
                break
            if not chunk:
                break
            out += chunk
        elif os.waitpid(pid, os.WNOHANG)[0]:
            pid = 0
            break
    if pid:
        os.waitpid(pid, 0)
    os.close(master)
    with os.fdopen(rfd) as f:
        res = json.loads(f.read() or '{"rc": null, "queued": ""}')
    return res["rc"], res["queued"], out.decode(errors="replace")


# ---------------------------------------------------------------------------
# the host, before and after


def _watched_mounts(session):
    """Mounts whose place would betray an escape: the host's system
    directories and anything under this session's directory (other
    people's tests may mount elsewhere on this machine meanwhile)."""
    exact = {"/", "/etc", "/proc", "/sys", "/dev", "/tmp", "/var/tmp", "/usr", "/bin", "/root"}
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            mp = fields[4]
            if mp in exact or mp.startswith("/etc/") or mp.startswith(f"{session}/"):
                out.append(f"{mp} {fields[3]} {line.split(' - ', 1)[1].strip()}")
    return sorted(out)


# Names the attacks try to create. /etc is compared by these rather than
# as a whole: package installs elsewhere on the machine change it too.
MARKERS = ("kiwi", "newsub", "bound-marker")


def _etc_markers():
    return sorted(n for n in os.listdir("/etc") if n.startswith(MARKERS))


def _tree_state(path):
    st = os.stat(path)
    return sorted(os.listdir(path)), st.st_mtime_ns


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.fixture(scope="session")
def canary(session_dir):
    """A host file and directory that nothing in a sandbox may reach."""
    d = session_dir / "host-canary"
    d.mkdir(mode=0o755)
    (d / "canary").write_text("KIWI-HOST-CANARY\n")
    return d


@pytest.fixture(autouse=True)
def host_unchanged(session_dir, kiwi_binary, canary):
    before = (_watched_mounts(session_dir), _etc_markers(), _tree_state(canary),
              sha256(kiwi_binary), sha256(canary / "canary"))
    yield
    after = (_watched_mounts(session_dir), _etc_markers(), _tree_state(canary),
             sha256(kiwi_binary), sha256(canary / "canary"))
    names = ("host mounts", "kiwi names in /etc", "the canary directory", "kiwi-run's binary", "the canary file")
    changed = [n for n, b, a in zip(names, before, after) if b != a]
    if changed:
        pytest.fail(f"the host changed: {changed}: before {before} after {after}")
