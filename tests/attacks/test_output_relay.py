# SPDX-License-Identifier: Apache-2.0
"""A reader that stops reading kiwi-run's output (a hung orchestrator, a
terminal paused with ^S, `| sleep 30`) must not stop kiwi-run itself: the
timeout, forwarded signals and the verdict go on acting (issue 20, item 4).
Root and rootless: as root the relay writes through its own non-blocking
opening of the pipe; the test user cannot open root's pipe again, so
there it makes the shared fd non-blocking and puts it back.

The reader here is a pipe whose read end the test holds and never reads:
`kiwi-run ... | sleep 30`. The only time bound asserted is a generous one
that proves kiwi-run did not wait for the reader (30 s)."""
import fcntl
import json
import select
import os
import signal
import struct
import subprocess
import termios
import time

import pytest

from conftest import explain, it

READER_GONE_AFTER = 30  # the stalled reader "is" sleep 30
F_GETPIPE_SZ = 1032


def _stalled_run(kiwi, cmd, opts, verdict):
    """kiwi-run with its stdout into a pipe nobody reads; returns
    (returncode, stderr) once kiwi-run ended by itself, or fails."""
    r, w = os.pipe()
    try:
        p = subprocess.Popen(kiwi.argv(cmd, [*opts, "--verdict", verdict]), stdout=w,
                             stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                             env=kiwi.env(), preexec_fn=it.default_signal_state)
        os.close(w)
        w = -1
        try:
            _, err = p.communicate(timeout=READER_GONE_AFTER)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            pytest.fail(f"kiwi-run waited {READER_GONE_AFTER}s for a reader that never reads")
        return p.returncode, err
    finally:
        if w >= 0:
            os.close(w)
        os.close(r)


def _wait_full(fd):
    """Until the pipe holds all it can: from then on a write blocks."""
    size = fcntl.fcntl(fd, F_GETPIPE_SZ)
    deadline = time.monotonic() + READER_GONE_AFTER
    while _queued(fd) < size:
        assert time.monotonic() < deadline, "the command never filled the pipe"
        time.sleep(0.05)


def _queued(fd):
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0]


def _verdict(path):
    with open(path) as f:
        return json.load(f)


def test_timeout_acts_while_the_reader_stalls(kiwi):
    """`kiwi-run run --timeout 2s -- sh -c yes | sleep 30`: ends at the
    timeout, says so, and says the reader stalled."""
    verdict = kiwi.workdir() / "verdict.json"
    code, err = _stalled_run(kiwi, ["/bin/sh", "-c", "yes"], ["--timeout", "2s"], verdict)
    v = _verdict(verdict)
    assert code == 137, err
    assert v["timed_out"] is True and v["killed_by"] == "timeout", v
    assert v["output_stalled"] is True, v
    assert v["output_stalled_ms"] > 0, v
    # the pipe (and our buffer) held what the reader never took
    assert v["output_dropped_bytes"] > 0, v
    assert v["stdout_bytes"] >= v["output_dropped_bytes"], v


def test_a_signal_ends_a_run_whose_reader_stalled(kiwi):
    """No timeout: the command is paused on its full pipe, and SIGTERM to
    kiwi-run still reaches the sandbox and ends the run."""
    verdict = kiwi.workdir() / "verdict.json"
    r, w = os.pipe()
    p = subprocess.Popen(kiwi.argv(["/bin/sh", "-c", "echo ready >&2; exec yes"],
                                   ["--verdict", verdict]),
                         stdout=w, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                         env=kiwi.env(), preexec_fn=it.default_signal_state)
    os.close(w)
    try:
        # relayed by kiwi-run beside the stalled stdout: a relay that
        # blocks on stdout never passes it
        ready, _, _ = select.select([p.stderr], [], [], READER_GONE_AFTER)
        assert ready and p.stderr.readline() == "ready\n", "kiwi-run stopped relaying stderr"
        _wait_full(r)
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=READER_GONE_AFTER)
        except subprocess.TimeoutExpired:
            pytest.fail("kiwi-run ignored SIGTERM while its reader stalled")
    finally:
        if p.poll() is None:
            p.kill()
        p.communicate()
        os.close(r)
    v = _verdict(verdict)
    assert v["signal"] == signal.SIGTERM, v
    assert v["timed_out"] is False, v


def test_a_slow_reader_gets_every_byte(kiwi):
    """The control: a reader that only starts late is paused for, never
    dropped: it gets the whole output, and the verdict says it stalled."""
    verdict = kiwi.workdir() / "verdict.json"
    script = "i=0; while [ $i -lt 40 ]; do seq 1 2000; i=$((i+1)); done"
    want = subprocess.run(["sh", "-c", script], capture_output=True).stdout
    assert len(want) > 256 * 1024 + 64 * 1024  # more than the pipe and the buffer hold
    argv = kiwi.argv(["/bin/sh", "-c", script], ["--verdict", verdict])
    # the reader sleeps before it reads anything
    r = subprocess.run(["sh", "-c", '"$@" | { sleep 2; cat; }', "sh", *argv], capture_output=True,
                       env=kiwi.env(), stdin=subprocess.DEVNULL, timeout=60)
    assert r.returncode == 0, explain(r)
    assert r.stdout == want
    v = _verdict(verdict)
    assert v["exit_code"] == 0 and v["output_stalled"] is True, v
    assert v["output_dropped_bytes"] == 0, v
