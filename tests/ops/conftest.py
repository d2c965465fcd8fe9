# SPDX-License-Identifier: Apache-2.0
"""Harness for the ops suite (`kiwi-run list`, `kill`, `doctor`, `--debug`).

It borrows the integration harness (tests/integration/conftest.py, through
tests/integration/harness.py): the session directory, the test user,
the busybox rootfs, the leftover-process check and the per-mode `Kiwi`
runner. What is its own: `Sandbox`, a `sleep` sandbox started in the
background and found again in `kiwi-run list`, and the runners for a second
unprivileged user (`nobody`) who must never reach the others' sandboxes.
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

sys.path.insert(0, str(HERE.parent / "integration"))
from harness import (binaries, default_signal_state, explain, it, kiwi,  # noqa: E402,F401
                     no_leftover_processes, rootfs, scratch, session_dir, subreaper,
                     test_user)

OTHER_USER = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
LIST_WAIT = 10  # seconds a started sandbox may take to show up in `list`


def json_lines(text):
    return [json.loads(l) for l in text.splitlines() if l.strip()]


class Sandbox:
    """kiwi-run running `sleep` in the background, and its `list` entry."""

    def __init__(self, kiwi, opts=(), cmd=("sleep", "1000"), env=None):
        self.kiwi = kiwi
        self.env = env or kiwi.env()
        self.proc = subprocess.Popen(kiwi.argv(list(cmd), opts), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                                     env=self.env, preexec_fn=default_signal_state)
        self.entry = None

    def ops(self, *args, env=None, timeout=10):
        """kiwi-run ARGS as the sandbox's owner."""
        return subprocess.run(self.kiwi.raw_argv(args), capture_output=True, text=True,
                              env=env or self.env, timeout=timeout)

    def listed(self):
        """Our entry in `list --json` (setpriv execs kiwi-run: the popen
        pid is kiwi-run's own), or None."""
        r = self.ops("list", "--json")
        assert r.returncode == 0, explain(r)
        mine = [e for e in json.loads(r.stdout) if e["supervisor_pid"] == self.proc.pid]
        assert len(mine) <= 1, mine
        return mine[0] if mine else None

    def wait_listed(self):
        deadline = time.monotonic() + LIST_WAIT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                out, err = self.proc.communicate()
                pytest.fail(f"kiwi-run ended early: exit {self.proc.returncode}\n{out}\n{err}")
            self.entry = self.listed()
            if self.entry:
                return self.entry
            time.sleep(0.02)
        pytest.fail(f"sandbox of kiwi-run {self.proc.pid} not listed after {LIST_WAIT}s")

    def finish(self, timeout=10):
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out, err

    def close(self):
        """Ends kiwi-run the clean way (SIGTERM, passed on to the command),
        so that no stale entry is left for the next test."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc.communicate()


@pytest.fixture
def sandbox(kiwi):
    """A factory of background sandboxes, all ended after the test."""
    made = []

    def make(**kw):
        s = Sandbox(kiwi, **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()
