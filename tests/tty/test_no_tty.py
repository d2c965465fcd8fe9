# SPDX-License-Identifier: Apache-2.0
"""Attack: a sandbox started without --tty from a terminal (stdin, stdout
and stderr all the caller's terminal) must reach that terminal through no
fd of its own, no fd of another process (/proc/*/fd), not /dev/tty, not
/dev/pts, and push nothing into it (TIOCSTI), with or without the seccomp
filter. With --tty, the only terminal in reach is the sandbox's own pty.

kiwi-ttyscan (this directory) does the looking from inside and writes what
it found to a bound file; the pane then shows how many bytes wait in the
caller's terminal input queue, where pushed input would sit."""
import json
import os

import pytest

from conftest import TTYSCAN, assert_cooked


def scan(kiwi, pane, *opts, tty=False):
    out = kiwi.workdir()
    argv = [*kiwi.prefix, kiwi.binary, "run", *(["--tty"] if tty else []), "--rootfs", kiwi.rootfs,
            "--bind", f"{out}:/out", *opts, "--", TTYSCAN, "/out/scan.jsonl"]
    pane.start(argv)
    status, queued = assert_cooked(pane)
    assert status == 0, pane.screen()
    found = [json.loads(l) for l in (out / "scan.jsonl").read_text().splitlines()]
    return found, queued


def ttys(found):
    return [f for f in found if f.get("tty")]


def host_tty_dev(pane):
    st = os.stat(pane.tty())
    return f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"


@pytest.mark.parametrize("seccomp", ["default", "unconfined"])
def test_no_terminal_within_reach(kiwi, pane, seccomp):
    opts = ["--seccomp", "unconfined"] if seccomp == "unconfined" else []
    found, queued = scan(kiwi, pane, *opts)
    assert any(f["where"] == "fd 0" for f in found), found  # the scan ran and saw its stdio
    assert ttys(found) == [], f"a terminal within reach: {ttys(found)}"
    dev_tty = [f for f in found if f["where"] == "/dev/tty"]
    assert dev_tty and "open" in dev_tty[0], dev_tty  # no controlling terminal
    assert [f for f in found if f["where"].startswith("/dev/pts/")] == [], found
    # pid 1 is not dumpable: none of its fds opens for the command
    init_fds = [f for f in found if f["where"].startswith("/proc/1/fd")]
    assert init_fds and all("open" in f for f in init_fds), init_fds
    sctty = [f for f in found if f["where"] == "tiocsctty"][0]
    assert not sctty["ok"], sctty
    assert queued == 0, f"{queued} bytes were pushed into the caller's terminal"


def test_control_the_scan_finds_the_terminal_outside(kiwi, pane, ttyscan_binary, scratch):
    """Run on the pane directly (no sandbox) the same program finds the
    terminal and pushes its line: the detector works."""
    try:
        with open("/proc/sys/dev/tty/legacy_tiocsti") as f:
            legacy = f.read().strip() == "1"
    except FileNotFoundError:
        legacy = True
    out = scratch / f"control-{os.getpid()}-{kiwi.mode}.jsonl"
    pane.start([ttyscan_binary, out, "--own-fds"])  # never the host's other terminals
    status, queued, _, _, _ = pane.finished()
    found = [json.loads(l) for l in out.read_text().splitlines()]
    assert any(f["where"] == "fd 0" for f in ttys(found)), found
    if legacy:
        assert queued > 0, pane.screen()


def test_with_tty_only_its_own_terminal(kiwi, pane):
    """--tty: stdio is the sandbox's own /dev/pts/N (a devpts other than the
    caller's), TIOCSTI stays refused by the filter, and nothing reaches the
    caller's input queue."""
    found, queued = scan(kiwi, pane, tty=True)
    own = ttys(found)
    assert {"fd 0", "fd 1", "fd 2"} <= {f["where"] for f in own}, found
    # pts slaves, and /dev/tty (5:0), which is the controlling terminal: the same pty
    assert all(f["rdev"].startswith("136:") or f["where"] == "/dev/tty" for f in own), own
    assert host_tty_dev(pane) not in {f["dev"] for f in own}, (host_tty_dev(pane), own)
    assert all(f["sti"] != 0 for f in own), own  # the default profile refuses TIOCSTI
    assert queued == 0
