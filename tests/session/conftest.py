# SPDX-License-Identifier: Apache-2.0
"""Harness for the session suite (kiwi-run-session(1)): it borrows the
integration harness (tests/integration/harness.py) for the test user, the
busybox rootfs, the leftover-process check and the per-mode runner, and
adds `Session`, which creates one session and always destroys it."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

sys.path.insert(0, str(HERE.parent / "integration"))
from harness import (binaries, default_signal_state, explain, it, kiwi, kiwi_rootfs,  # noqa: E402,F401
                     no_leftover_processes, rootfs, scratch, session_dir, subreaper,
                     test_user)

OTHER_USER = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


class Session:
    """`session create` on the fixture's rootfs; destroy() at the end."""

    def __init__(self, kiwi, opts=(), rootfs=True):
        self.kiwi = kiwi
        r = self.raw("session", "create", *(["--rootfs", kiwi.rootfs] if rootfs else []), *opts)
        assert r.returncode == 0, explain(r)
        self.id = r.stdout.strip()
        assert len(self.id) == 12 and r.stdout == self.id + "\n", f"create printed {r.stdout!r}"
        self.destroyed = False

    def raw(self, *args, timeout=60, env=None):
        return subprocess.run(self.kiwi.raw_argv(args), capture_output=True, text=True,
                              env=env or self.kiwi.env(), timeout=timeout,
                              stdin=subprocess.DEVNULL)

    def exec(self, *cmd, opts=(), timeout=60, env=None):
        return self.raw("session", "exec", self.id, *opts, "--", *cmd, timeout=timeout, env=env)

    def sh(self, script, opts=(), **kw):
        return self.exec("/bin/sh", "-c", script, opts=opts, **kw)

    def exec_verdict(self, *cmd, opts=(), **kw):
        """(result, verdict) of one exec with --verdict-fd 3."""
        r_fd, w_fd = os.pipe()
        try:
            p = subprocess.run(self.kiwi.raw_argv(["session", "exec", self.id, "--verdict-fd", str(w_fd),
                                                   *opts, "--", *cmd]),
                               capture_output=True, text=True, env=self.kiwi.env(), timeout=kw.get("timeout", 60),
                               stdin=subprocess.DEVNULL, pass_fds=(w_fd,), preexec_fn=default_signal_state)
        finally:
            os.close(w_fd)
        with os.fdopen(r_fd) as f:
            text = f.read()
        return p, json.loads(text)

    def listed(self):
        r = self.raw("session", "list", "--json")
        assert r.returncode == 0, explain(r)
        return [e for e in json.loads(r.stdout) if e["id"] == self.id]

    def destroy(self):
        r = self.raw("session", "destroy", self.id)
        self.destroyed = True
        return r


@pytest.fixture
def session(kiwi):
    made = []

    def make(*opts, rootfs=True):
        s = Session(kiwi, opts, rootfs)
        made.append(s)
        return s
    yield make
    for s in made:
        if not s.destroyed:
            s.destroy()
