# SPDX-License-Identifier: Apache-2.0
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(scope="session")
def kiwi_rootfs():
    path = os.environ.get("KIWI_ROOTFS")
    if not path or not os.access(path, os.X_OK):
        pytest.fail("KIWI_ROOTFS must name the kiwi-rootfs binary (meson sets it)")
    return path


@pytest.fixture
def run(kiwi_rootfs):
    # KIWI_TEST_HIDE_OPENAT2=1 runs every command with openat2 hidden by a
    # seccomp filter, so the same tests cover the userspace walk.
    hide = os.environ.get("KIWI_TEST_HIDE_OPENAT2") == "1"
    if hide:
        from ocilib import hide_openat2
        if os.uname().machine != "x86_64":
            pytest.skip("the openat2-hiding filter is written for x86_64")

    def _run(*args, check=None, **kw):
        if hide:
            kw.setdefault("preexec_fn", hide_openat2)
        p = subprocess.run([kiwi_rootfs, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, **kw)
        if check is not None:
            assert p.returncode == check, f"exit {p.returncode}, stderr: {p.stderr}"
        return p
    return _run
