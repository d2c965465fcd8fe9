# SPDX-License-Identifier: Apache-2.0
"""`--landlock`: the filesystem rules of kiwi_landlock_restrict() (src/
landlock.c) over a real sandbox. Landlock must refuse a write even where
the mounts allow it: procfs is mounted read-write, yet under Landlock only
/tmp, /dev/shm, the writable binds and the /dev nodes take writes (and the
root, with --rw-root). Skipped, with the reason, where kiwi-run lacks the
flag or the kernel lacks Landlock."""
import ctypes
import errno
import subprocess

import pytest

from conftest import attack, succeeded

SYS_landlock_create_ruleset = 444
LANDLOCK_CREATE_RULESET_VERSION = 1


def _landlock_abi():
    libc = ctypes.CDLL(None, use_errno=True)
    abi = libc.syscall(SYS_landlock_create_ruleset, None, 0, LANDLOCK_CREATE_RULESET_VERSION)
    return max(abi, 0)


@pytest.fixture
def landlock(kiwi_binary):
    help_text = subprocess.run([str(kiwi_binary), "run", "--help"], capture_output=True,
                               text=True).stdout
    if "--landlock" not in help_text:
        pytest.skip("kiwi-run has no --landlock option yet")
    if not _landlock_abi():
        pytest.skip("the kernel has no Landlock (not built, or not in lsm=)")
    return ["--landlock"]


def _targets(kiwi):
    rw, ro = kiwi.workdir(), kiwi.workdir()
    binds = ["--bind", f"{rw}:/workspace", "--bind", f"{ro}:/ro:ro"]
    return binds, ["/tmp/kiwi-ll", "/dev/shm/kiwi-ll", "/workspace/kiwi-ll", "/ro/kiwi-ll",
                   "/etc/kiwi-ll", *PROC_WRITABLE]


# procfs is mounted read-write: these open for writing without Landlock
# (a process's own files, and pid 1's, whose owner the command is when
# kiwi-run runs as root: pid 1 never execs, so its files belong to the
# host's root).
PROC_WRITABLE = ["/proc/self/comm", "/proc/self/oom_score_adj", "/proc/1/oom_score_adj",
                 "/proc/1/coredump_filter"]


def test_landlock_refuses_writes_the_mounts_allow(kiwi, landlock):
    """Without --rw-root the mounts leave /proc writable; Landlock does
    not. Opened for writing only, nothing is written."""
    binds, paths = _targets(kiwi)
    steps = attack(kiwi, "create", *paths, opts=[*landlock, *binds])
    assert succeeded(steps) == ["/dev/shm/kiwi-ll", "/tmp/kiwi-ll", "/workspace/kiwi-ll"], steps
    for p in PROC_WRITABLE:
        assert steps[p]["errno"] == errno.EACCES, steps
    for p in ("/ro/kiwi-ll", "/etc/kiwi-ll"):
        assert steps[p]["errno"] in (errno.EACCES, errno.EROFS), steps


def test_landlock_control_without_it(kiwi, landlock):
    """The same opens without --landlock: procfs takes them, so the test
    above sees Landlock's refusal and not the mount's."""
    binds, paths = _targets(kiwi)
    steps = attack(kiwi, "create", *paths, opts=binds)
    # Pid 1's files are the host root's (a fork of kiwi-run): only a
    # sandbox whose root is the host's (--host-root-map) may write them.
    writable = [p for p in PROC_WRITABLE if p.startswith("/proc/self")]
    assert [p for p in writable if not steps[p]["ok"]] == [], steps


def test_landlock_with_rw_root(kiwi, landlock):
    """--rw-root asks for a writable root, and Landlock grants it
    (kiwi-run(1)); the rest of the rules stay."""
    copy = kiwi.rootfs_copy()
    binds, paths = _targets(kiwi)
    steps = attack(kiwi, "create", *paths, opts=["--rw-root", *landlock, *binds], rootfs=copy)
    assert steps["/etc/kiwi-ll"]["ok"], steps
    assert not (copy / "etc/kiwi-ll").exists()  # into the layer, not the rootfs
    assert not steps["/ro/kiwi-ll"]["ok"], steps


def test_ordinary_work_under_landlock(kiwi, landlock):
    """A shell redirecting to /dev/null and to /dev/stdout (a pipe reopened
    through /proc), listing /, reading /etc, running programs, writing
    /tmp: all still work."""
    r = kiwi.sh("echo ok >/dev/null && echo piped >/dev/stdout && ls / >/tmp/ls && "
                "grep -q root /etc/passwd && mkdir /tmp/d && mv /tmp/ls /tmp/d/ && cat /tmp/d/ls",
                opts=landlock)
    assert r.returncode == 0, r.stderr
    assert "piped" in r.stdout and "etc" in r.stdout


@pytest.mark.parametrize("name", ["ro-root", "proc-write", "exe"])
def test_attacks_still_fail_under_landlock(kiwi, landlock, name):
    steps = attack(kiwi, name, opts=landlock)
    assert [s for s in succeeded(steps) if not s.startswith(("exe-", "root-", "cwd-"))
            or "write" in s or s.endswith("-1")] == [], steps
