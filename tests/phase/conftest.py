# SPDX-License-Identifier: Apache-2.0
"""Harness of the phase suite (`kiwi-run phase install|verify`, issue 6).

It borrows the integration harness (tests/integration/conftest.py, through
tests/integration/harness.py): the session directory, test user, subreaper,
leftover-process check, the busybox rootfs with kiwi-probe and the per-mode
`Kiwi` runner (root and rootless). Its own: `Phase`, which runs a phase and parses its verdict, and
workspaces made from small fixtures.

Inputs (environment): KIWI_RUN (default <repo>/build/src/kiwi-run).
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

sys.path.insert(0, str(HERE.parent / "integration"))
from harness import (CANARY, binaries, explain, it, kiwi,  # noqa: E402,F401
                     no_leftover_processes, pytest_runtest_logreport, pytest_sessionfinish,
                     rootfs, scratch, session_dir, subreaper, test_user)


class Phase:
    """kiwi-run phase PHASE over a workspace, in one of the kiwi modes."""

    def __init__(self, kiwi, scratch):
        self.kiwi, self.scratch = kiwi, scratch

    def workspace(self, files=None):
        ws = self.kiwi.workdir()
        for name, text in (files or {}).items():
            p = ws / name
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        self.kiwi.chown(ws)
        return ws

    def __call__(self, phase, ws, opts=(), cmd=None, env=None, rootfs=None, timeout=60,
                 prefix=()):
        verdict = Path(self.kiwi._fresh("verdict")) / "v.json"
        self.kiwi.chown(verdict.parent)
        argv = [*prefix, *self.kiwi.prefix, self.kiwi.binary, "phase", phase,
                "--rootfs", str(rootfs or self.kiwi.rootfs), "--workspace", str(ws),
                "--verdict", str(verdict), *map(str, opts)]
        if cmd is not None:
            argv += ["--", *map(str, cmd)]
        r = subprocess.run(argv, capture_output=True, text=True, errors="replace", env=self.kiwi.env(env),
                           timeout=timeout, stdin=subprocess.DEVNULL)
        r.verdict = None
        if verdict.exists() and verdict.stat().st_size:
            r.verdict = json.loads(verdict.read_text())
        return r


@pytest.fixture
def phase(kiwi, scratch):
    return Phase(kiwi, scratch)
