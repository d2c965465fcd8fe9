# SPDX-License-Identifier: Apache-2.0
"""Harness for the interactive tests: `kiwi-run shell` and `run --tty` in a
tmux pane, typed at and read back from the screen, as a person would.

It borrows the integration harness (tests/integration/conftest.py, through
tests/integration/harness.py, as tests/attacks does): the session
directory, the test user, the subreaper, the leftover-process check and
the per-mode `Kiwi` runner (root, and rootless through setpriv). Its own:
a busybox rootfs with kiwi-ttyscan inside, and `Pane`, one tmux server on
a socket of its own (`-L kiwi-tty-<pid>-<n>`), killed by that socket.

Inputs (environment):
  KIWI_RUN      the kiwi-run binary (default <repo>/build/src/kiwi-run)
  KIWI_TTYSCAN  the kiwi-ttyscan binary (default: compiled here, cc -static)
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
TTYSCAN = "/usr/local/bin/kiwi-ttyscan"  # where busybox-rootfs.sh puts it
WAIT = 30  # seconds a screen may take to show what is expected (a loaded host)

sys.path.insert(0, str(HERE.parent / "integration"))
from harness import (it, kiwi, kiwi_rootfs, no_leftover_processes, scratch,  # noqa: E402,F401
                     session_dir, subreaper, test_user)


@pytest.fixture(scope="session", autouse=True)
def have_tmux():
    if not shutil.which("tmux"):
        pytest.skip("tmux is not installed (apt-get install tmux)")


@pytest.fixture(scope="session")
def ttyscan_binary(session_dir):
    out = session_dir / "kiwi-ttyscan"
    env = os.environ.get("KIWI_TTYSCAN")
    if env:
        shutil.copy2(env, out)
    else:
        cc = shutil.which("cc") or shutil.which("gcc")
        if not cc:
            pytest.exit("no KIWI_TTYSCAN and no C compiler to build it", 2)
        r = subprocess.run([cc, "-std=gnu11", "-D_GNU_SOURCE", "-O2", "-Wall", "-Wextra", "-Werror",
                            "-static", "-o", str(out), str(HERE / "kiwi-ttyscan.c")],
                           capture_output=True, text=True)
        if r.returncode != 0:
            pytest.exit(f"building kiwi-ttyscan failed:\n{r.stderr}", 2)
    out.chmod(0o755)
    return out


@pytest.fixture(scope="session")
def binaries(session_dir, ttyscan_binary):
    src = Path(os.environ.get("KIWI_RUN", REPO / "build" / "src" / "kiwi-run"))
    if not src.is_file():
        pytest.exit(f"kiwi-run binary {src} is missing: build it or set KIWI_RUN", 2)
    dest = session_dir / "kiwi-run"
    shutil.copy2(src, dest)
    dest.chmod(0o755)
    return dest, ttyscan_binary


@pytest.fixture(scope="session")
def rootfs(session_dir, ttyscan_binary):
    """A busybox rootfs with kiwi-ttyscan, this session's own."""
    if not Path("/bin/busybox").exists():
        pytest.skip("busybox-static is not installed (apt-get install busybox-static)")
    dest = session_dir / "rootfs"
    old = os.umask(0o022)
    try:
        r = subprocess.run(["sh", str(REPO / "rootfs-tools" / "busybox-rootfs.sh"), str(dest),
                            str(ttyscan_binary)], capture_output=True, text=True)
    finally:
        os.umask(old)
    if r.returncode != 0:
        pytest.exit(f"busybox-rootfs.sh failed:\n{r.stdout}{r.stderr}", 2)
    for mount_point in ("out", "workspace"):
        (dest / mount_point).mkdir(mode=0o755, exist_ok=True)
    return dest


# What the pane runs after kiwi-run: its status, how many bytes wait in the
# terminal's input queue (pushed there by TIOCSTI, say), and the terminal's
# mode, then nothing until the server is killed.
_AFTER = ("echo KIWI-EXIT=$?; "
          "python3 -c 'import fcntl, struct, termios; print(\"KIWI-QUEUED=%d\" % struct.unpack("
          "\"i\", fcntl.ioctl(0, termios.FIONREAD, b\"0000\"))[0])'; "
          "echo KIWI-AFTER=$(stty -g); echo KIWI-MODE $(stty -a | tr ';' '\\n' | tr -s ' ' '\\n' "
          "| grep -x -e -*icanon -e -*echo -e -*isig -e -*opost -e -*icrnl) KIWI-MODE-END; "
          "exec sleep 100000")

_panes = 0


class Pane:
    """One tmux server with one window, on a socket of its own."""

    def __init__(self, env, tmpdir):
        global _panes
        _panes += 1
        self.socket = f"kiwi-tty-{os.getpid()}-{_panes}"
        # tmux leaves its socket file behind: keep it in the session's
        # directory, which goes at the end, not in /tmp/tmux-UID.
        self.env = {**env, "TERM": "xterm", "TMUX_TMPDIR": str(tmpdir)}
        self.pid = None

    def tmux(self, *args):
        return subprocess.run(["tmux", "-L", self.socket, "-f", "/dev/null", *map(str, args)],
                              capture_output=True, text=True, env=self.env, timeout=WAIT)

    def start(self, argv, width=100, height=30):
        """Runs argv in the pane, then _AFTER. Before it, the terminal's
        mode (stty -g) is shown as KIWI-BEFORE=."""
        script = f"echo KIWI-BEFORE=$(stty -g); {shlex.join(map(str, argv))}; {_AFTER}"
        r = self.tmux("new-session", "-d", "-x", width, "-y", height, "sh", "-c", script)
        assert r.returncode == 0, f"tmux new-session: {r.stderr}"
        self.tmux("set-option", "-g", "status", "off")
        self.pid = int(self.tmux("display-message", "-p", "#{pane_pid}").stdout.strip())

    def screen(self):
        """The whole pane, history included, wrapped lines joined."""
        return self.tmux("capture-pane", "-p", "-J", "-S", "-").stdout

    def size(self):
        rows, cols = self.tmux("display-message", "-p", "#{pane_height} #{pane_width}").stdout.split()
        return int(rows), int(cols)

    def tty(self):
        return self.tmux("display-message", "-p", "#{pane_tty}").stdout.strip()

    def cooked(self):
        """Whether the pane's terminal is in canonical mode with echo now,
        as seen from outside (root may open any terminal)."""
        fd = os.open(self.tty(), os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
        try:
            lflag = termios.tcgetattr(fd)[3]
        finally:
            os.close(fd)
        return bool(lflag & termios.ICANON) and bool(lflag & termios.ECHO)

    def wait_mode(self, cooked):
        deadline = time.monotonic() + WAIT
        while self.cooked() != cooked:
            if time.monotonic() > deadline:
                pytest.fail(f"the terminal never became {'cooked' if cooked else 'raw'}")
            time.sleep(0.05)

    def keys(self, *keys):
        r = self.tmux("send-keys", *keys)
        assert r.returncode == 0, r.stderr

    def type(self, line):
        """Types LINE and Enter (literally: no key names in it)."""
        self.keys("-l", line)
        self.keys("Enter")

    def wait_for(self, pattern, after=0):
        """Waits until PATTERN (a regex) shows on the screen at or after
        offset AFTER; returns the match. Fails with the screen if it never
        does: a wait, not a timing assertion."""
        deadline = time.monotonic() + WAIT
        while True:
            text = self.screen()
            m = re.compile(pattern, re.M).search(text, after)
            if m:
                return m
            if time.monotonic() > deadline:
                pytest.fail(f"never showed {pattern!r}; the screen:\n{text}")
            time.sleep(0.05)

    def run_line(self, line, expect):
        """Types LINE and waits for EXPECT after where the screen was."""
        start = len(self.screen().rstrip())
        self.type(line)
        return self.wait_for(expect, start)

    def kiwi_pid(self):
        """The pane's kiwi-run (setpriv execs it: the pane shell's child)."""
        with open(f"/proc/{self.pid}/task/{self.pid}/children") as f:
            for pid in f.read().split():
                with open(f"/proc/{pid}/comm") as c:
                    if c.read().strip() == "kiwi-run":
                        return int(pid)
        return None

    def ctrl_d(self, after=0):
        """^D once the shell shows its prompt again: its line editor then has
        the terminal raw and reads ^D itself (sent while the terminal is
        still cooked, ^D would become a NUL when the editor switches)."""
        deadline = time.monotonic() + WAIT
        while not ((t := self.screen().rstrip()).endswith("#") and len(t) > after):
            if time.monotonic() > deadline:
                pytest.fail(f"no prompt; the screen:\n{self.screen()}")
            time.sleep(0.05)
        self.keys("C-d")

    def wait_foreground(self, name):
        """Waits until a process called NAME under kiwi-run leads the
        foreground process group of its terminal: only then is a ^C or ^Z
        a signal to it (typed earlier, while the shell's line editor still
        has the terminal raw, it would be a plain byte, for a person too)."""
        top = self.kiwi_pid()
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            procs = {}
            for d in os.listdir("/proc"):
                if not d.isdigit():
                    continue
                try:
                    with open(f"/proc/{d}/stat") as f:
                        comm_end = (stat := f.read()).rindex(")")
                except (OSError, ValueError):
                    continue
                fields = stat[comm_end + 2:].split()
                procs[int(d)] = (stat[stat.index("(") + 1:comm_end], int(fields[1]), int(fields[2]),
                                 int(fields[5]))  # comm, ppid, pgrp, tpgid
            for pid, (comm, _, pgrp, tpgid) in procs.items():
                up = pid
                while up in procs and up != top:
                    up = procs[up][1]
                if comm == name and up == top and pgrp == tpgid:
                    return pid
            time.sleep(0.05)
        pytest.fail(f"no {name} in the foreground under kiwi-run; the screen:\n{self.screen()}")

    def finished(self):
        """(kiwi-run's exit status, bytes queued in the terminal, the
        terminal's mode flags, mode before, mode after) once it ended."""
        m = self.wait_for(r"KIWI-MODE (.*) KIWI-MODE-END")
        text = self.screen()
        status = int(re.search(r"KIWI-EXIT=(\d+)", text).group(1))
        queued = int(re.search(r"KIWI-QUEUED=(\d+)", text).group(1))
        before = re.search(r"KIWI-BEFORE=(\S+)", text).group(1)
        after = re.search(r"KIWI-AFTER=(\S+)", text).group(1)
        return status, queued, set(m.group(1).split()), before, after

    def kill(self):
        self.tmux("kill-server")
        sock = Path(self.env["TMUX_TMPDIR"]) / f"tmux-{os.geteuid()}" / self.socket
        sock.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def tmux_dir(session_dir):
    d = session_dir / "tmux"
    d.mkdir(mode=0o700)
    return d


@pytest.fixture
def pane(kiwi, tmux_dir):
    env = kiwi.env()
    if kiwi.mode == "rootless":
        # A registry of its own (kiwi-run list), not the test user's shared
        # /tmp/kiwi-run-UID that tests/ops watches empty itself while the
        # suites run side by side.
        env["XDG_RUNTIME_DIR"] = str(kiwi.workdir())
    p = Pane(env, tmux_dir)
    yield p
    p.kill()


def assert_cooked(pane, status_expected=None):
    """kiwi-run ended and left the terminal as it found it: cooked, echoing."""
    status, queued, flags, before, after = pane.finished()
    if status_expected is not None:
        assert status == status_expected, pane.screen()
    assert {"icanon", "echo", "isig", "opost", "icrnl"} <= flags, (flags, pane.screen())
    assert before == after, pane.screen()
    return status, queued
