#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The guest half of `vm-session` (tests/session/vm.sh), in the VM lane's
pure cgroup v2: a session under --memory and --pids, as root and as the
unprivileged test user, where each exec has a cgroup of its own. An exec
that the OOM killer ends is reported as such, alone: the session and the
next exec live on, and that exec's verdict is its own. Plain Python (pytest
costs ~15 s to import under emulation). One `ok`/`not ok` line per check."""
import json
import os
import pwd
import signal
import subprocess
import sys
import traceback
from pathlib import Path

CGROOT = Path("/sys/fs/cgroup")
SCRATCH = Path("/tmp/kiwi-vm-session")
AS_USER = "/kiwi/as-user"
KIWI = os.environ.get("KIWI_RUN", "")


def kiwi(args, mode, timeout=180):
    argv = [KIWI, *map(str, args)]
    if mode == "rootless":
        argv = [AS_USER, *argv]
    return subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=timeout,
                          stdin=subprocess.DEVNULL)


def explain(r):
    return f"exit {r.returncode}\n--- stdout\n{r.stdout[-2000:]}\n--- stderr\n{r.stderr[-2000:]}"


def exec_verdict(mode, sid, cmd, opts=()):
    v = SCRATCH / f"v-{mode}-{os.urandom(4).hex()}.json"
    r = kiwi(["session", "exec", sid, "--verdict", v, *opts, "--", *cmd], mode)
    verdict = json.loads(v.read_text()) if v.exists() and v.stat().st_size else None
    return r, verdict


def check_exec_cgroup_path(mode, sid):
    """The command runs in its exec's cgroup, its leader born there (pid 1's
    clone3 CLONE_INTO_CGROUP, kiwi-run-session(1)) under nsdelegate too:
    the session's cgroup namespace is rooted at the session's cgroup, so
    the exec's is inside it; --debug says which way the leader went."""
    r, v = exec_verdict(mode, sid, ["cat", "/proc/self/cgroup"], ["--debug"])
    assert r.returncode == 0 and v and v["cgroup"], explain(r)
    name = v["cgroup"]
    assert r.stdout == "0::/" + name.rsplit("/", 1)[1] + "\n", explain(r)
    lines = [ln for ln in r.stderr.splitlines() if " exec-cgroup " in ln]
    print(f"#   {mode}: " + "\n#   ".join(ln.split(" exec-cgroup ", 1)[1] for ln in lines))
    born = any(f"leader born in {name} (clone3" in ln for ln in lines)
    moved = any(f"leader moved into {name} through cgroup.procs (clone3 into it: " in ln for ln in lines)
    assert born and not moved, explain(r)


def check_exec_oom_is_its_own(mode, rootfs):
    r = kiwi(["session", "create", "--rootfs", rootfs, "--memory", "64M", "--pids", "64"], mode)
    assert r.returncode == 0, explain(r)
    sid = r.stdout.strip()
    try:
        check_exec_cgroup_path(mode, sid)
        r, v = exec_verdict(mode, sid, ["/bin/sh", "-c", "echo keep > /tmp/kept"])
        assert r.returncode == 0 and v, explain(r)
        r, v = exec_verdict(mode, sid, ["/bin/sh", "-c", "dd if=/dev/zero of=/dev/null bs=200M count=1"])
        print(f"#   {mode}: OOM exec: exit {r.returncode}, killed_by {v and v['killed_by']}, "
              f"oom_killed {v and v['oom_killed']}, cgroup {v and v['cgroup']}")
        assert v and r.returncode == 128 + signal.SIGKILL, explain(r)
        assert v["oom_killed"] is True and v["killed_by"] == "oom", v
        assert "/exec-" in v["cgroup"], v["cgroup"]
        assert not (CGROOT / v["cgroup"].lstrip("/")).exists(), "the exec's cgroup outlived it"
        r, v2 = exec_verdict(mode, sid, ["/bin/sh", "-c", "cat /tmp/kept; head -c 8000000 /dev/zero | cat >/dev/null"])
        print(f"#   {mode}: next exec: exit {r.returncode}, oom_killed {v2 and v2['oom_killed']}, "
              f"peak_memory_kib {v2 and v2['peak_memory_kib']}")
        assert r.returncode == 0 and r.stdout == "keep\n", explain(r)
        assert v2["oom_killed"] is False and v2["killed_by"] is None, v2
        assert isinstance(v2["peak_memory_kib"], int) and v2["peak_memory_kib"] > 0, v2
        assert v2["cgroup"] != v["cgroup"], "two execs shared a cgroup"
        r, v3 = exec_verdict(mode, sid, ["/bin/sh", "-c", "sleep 300 & sleep 200"], ["--timeout", "2s"])
        assert r.returncode == 137 and v3["timed_out"], explain(r)
        r = kiwi(["session", "exec", sid, "--", "ps", "-o", "comm"], mode)
        assert r.returncode == 0 and "sleep" not in r.stdout, explain(r)
        session_cg = None
        r = kiwi(["session", "list", "--json"], mode)
        for e in json.loads(r.stdout):
            if e["id"] == sid:
                session_cg = e["cgroup"]
        assert session_cg and (CGROOT / session_cg.lstrip("/")).is_dir(), session_cg
    finally:
        r = kiwi(["session", "destroy", sid], mode)
    ev = json.loads(r.stdout)
    assert r.returncode == 0 and ev["clean"] and ev["cgroup_removed"] is True, explain(r)
    assert not (CGROOT / session_cg.lstrip("/")).exists(), "the session's cgroup outlived it"


def main():
    if os.environ.get("KIWI_VM") != "1":
        print("SKIP: needs the VM lane (tests/session/vm.sh)")
        return 77
    subprocess.run(["rm", "-rf", str(SCRATCH)], check=True)
    SCRATCH.mkdir(mode=0o777)
    SCRATCH.chmod(0o1777)
    rootfs = SCRATCH / "rootfs"
    rootfs.mkdir(mode=0o755)
    subprocess.run(["tar", "-C", str(rootfs), "-xf", os.environ["KIWI_VM_SESSION_ROOTFS"]], check=True)
    pwd.getpwnam(os.environ.get("KIWI_VM_USER", "kiwitest"))
    failed = []
    for mode in ("root", "rootless"):
        name = f"{mode}: an exec's OOM kill is its own"
        try:
            check_exec_oom_is_its_own(mode, str(rootfs))
            print(f"ok - {name}")
        except Exception:
            failed.append(name)
            print(f"not ok - {name}")
            print("#   " + traceback.format_exc().replace("\n", "\n#   "))
    print(f"# {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
