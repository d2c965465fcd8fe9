# SPDX-License-Identifier: Apache-2.0
"""Process bookkeeping shared by conftest.py and leftovers.py: which
processes are our children (as a child subreaper, that includes every
orphan of what we started), what they are, and ending them by pid."""
import ctypes
import os
import signal

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def children_of_self():
    pids = set()
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as f:
                pids.update(int(p) for p in f.read().split())
        except FileNotFoundError:
            pass
    return sorted(pids)


def describe_pid(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return f"{pid} [{state}] {cmd}"
    except OSError:
        return f"{pid} (gone)"


def reap_zombies(pids):
    """Reaps those of PIDS (our children) that are dead; returns the rest."""
    alive = []
    for pid in pids:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue
        if done == 0:
            alive.append(pid)
    return alive


def kill_and_reap(pids):
    """SIGKILL and reap each of PIDS, which must be our children."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for pid in pids:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
