# SPDX-License-Identifier: Apache-2.0
"""The cgroup operation of kiwi-helper (issue 8): a root-owned cgroup
under the admin's subtree with the caller's limits capped by its rule, the
caller's sandbox moved into it by the helper, then the cgroup delegated.

The policy refusals run on any host. What needs controllers runs where the
unified hierarchy has memory, pids and cpu (the VM lane, `vm-helper`):
there the test users' processes sit in a root-owned cgroup, so only the
helper can give them limits. On a hybrid host (this repository's build
machines) the operation must be refused with the plain hybrid message and
leave nothing behind."""
import errno
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import CONFIG_DIR, quota_held, refused, settle, stale_pidfd_of_a_reused_pid

CGROOT = Path("/sys/fs/cgroup")
CONFIG = str(CONFIG_DIR / "helper.json")
RULES = [
    {"user": "kiwi-test", "operations": ["idmap", "cgroup"], "max_memory": "256M", "max_pids": 64,
     "max_sandboxes": 2},
    {"user": "kiwi-test2", "operations": ["idmap"], "max_sandboxes": 2},
]


def _pure_v2():
    try:
        return {"memory", "pids", "cpu"} <= set((CGROOT / "cgroup.controllers").read_text().split())
    except OSError:
        return False


V2 = _pure_v2()
needs_v2 = pytest.mark.skipif(not V2, reason="needs memory, pids and cpu in the unified hierarchy (the VM lane)")
hybrid_only = pytest.mark.skipif(V2, reason="the hybrid host's refusal")


# The cgroups the running test made (cgdir() and sandbox_cgroup()
# record them): on a shared host another run's come and go meanwhile,
# so a test checks only its own.
MADE = []


@pytest.fixture
def cg(config, clients):
    """The rules above, and a check that no cgroup this test made is left."""
    config.write(RULES)
    MADE.clear()
    made = []

    def make(*args, **kw):
        made.append(clients(*args, **kw))
        return made[-1]

    yield make
    for c in made:
        c.finish()
    # a helper removes its cgroup once its caller's socket closes
    settle(lambda: not any(d.exists() for d in MADE))
    left = [str(d) for d in MADE if d.exists()]
    MADE.clear()
    assert not left, f"left behind: {left}"


def prepare(c, **kw):
    return c.request({"op": "cgroup-prepare", **kw})


def cgdir(ans):
    assert ans.get("ok") and ans["path"].startswith("/kiwi.slice/kiwi-"), ans
    MADE.append(CGROOT / ans["path"].lstrip("/"))
    return MADE[-1]


def sandbox_cgroup(pid):
    """The kiwi-* cgroup a process of a kiwi-run run is in (its
    sandbox's), recorded as made; None for the helper and kiwi-run."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        if line.startswith("0::/kiwi.slice/kiwi-"):
            MADE.append(CGROOT / line[3:].lstrip("/"))
            return MADE[-1]
    return None


def procs(d):
    return [int(x) for x in (d / "cgroup.procs").read_text().split()]


def ended(pid):
    """Gone, or a zombie nobody reaped yet."""
    try:
        return "State:\tZ" in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True


# ---- the policy: refused before any cgroup exists, on any host ----------------

def test_operation_not_in_the_rule(cg):
    c = cg("kiwi-test2")
    c.start()
    refused(prepare(c, memory="64M"), "cgroup-prepare is not allowed")
    refused(c.request({"op": "cgroup-attach"}), "not allowed")


@pytest.mark.parametrize("req, why", [
    ({"memory": "1G"}, f"memory 1G is over your max_memory 256M in {CONFIG}"),
    ({"memory": "max"}, "memory max is over your max_memory 256M"),
    ({"pids": 65}, "pids 65 is over your max_pids 64"),
    ({"parent": "/user.slice"}, "outside your cgroup subtree `/kiwi.slice`"),
    ({"parent": "/"}, "outside"),
    ({"parent": "/kiwi.slice/../user.slice"}, ".."),
    ({"parent": "/sys/fs/cgroup/kiwi.slice/../../init.scope"}, ".."),
    ({"parent": "/kiwi.slicex"}, "outside"),
    ({"parent": "/kiwi.slice//x"}, "plain"),
    ({"parent": "/kiwi.slice/kiwi-0123456789abcdef"}, "sandbox's cgroup"),
    ({"parent": "/kiwi.slice/not-made-by-the-admin"}, "does not exist"),
    ({"io_max": "8:0 rbps=1"}, "io_max"),
    ({"unified": {"memory.high": "1"}}, "unified"),
])
def test_over_a_cap_or_outside_the_subtree(cg, req, why):
    c = cg()
    c.start()
    refused(prepare(c, **req), why)


def test_attach_needs_a_prepared_cgroup(cg, users):
    c = cg()
    c.start()
    sb = c.call("sandbox")
    refused(c.request({"op": "cgroup-attach"}, [{"sandbox": sb["id"]}]), "before cgroup-prepare")


# ---- a hybrid host: the plain refusal ------------------------------------------

@hybrid_only
def test_hybrid_host_refuses_plainly(cg):
    c = cg()
    c.start()
    refused(prepare(c, memory="64M"), "hybrid", "cgroup_no_v1=all")


# ---- pure cgroup v2: the operation ------------------------------------------

@needs_v2
def test_the_cap_binds_and_only_the_caller_gets_the_cgroup(cg, users):
    c = cg()
    c.start()
    d = cgdir(prepare(c, io_weight=50))
    # not asked for: the caps are written anyway
    assert (d / "memory.max").read_text() == f"{256 << 20}\n"
    assert (d / "pids.max").read_text() == "64\n"
    st = d.stat()
    assert (st.st_uid, st.st_mode & 0o777) == (0, 0o755), "root's until the sandbox is in"
    refused(prepare(c), "done already")
    sb = c.call("sandbox")
    assert c.request({"op": "cgroup-attach"}, [{"sandbox": sb["id"]}]) == {"ok": True}
    assert procs(d) == [sb["pid"]]
    uid = users["kiwi-test"].pw_uid
    delegated = {"cgroup.procs", "cgroup.threads", "cgroup.subtree_control", "cgroup.kill"}
    delegated |= set(Path("/sys/kernel/cgroup/delegate").read_text().split())
    for f in d.iterdir():
        want = uid if f.name in delegated else 0
        assert f.stat().st_uid == want, f"{f.name} owned by {f.stat().st_uid}"
    assert d.stat().st_uid == uid
    refused(c.request({"op": "cgroup-attach"}, [{"sandbox": sb["id"]}]), "done already")
    # the sandbox ended: the cgroup stays for the verdict until the caller goes
    c.call("end_sandbox", sid=sb["id"])
    assert d.is_dir()
    c.finish()
    assert settle(lambda: not d.exists())


@needs_v2
def test_attacks_from_the_caller_fail(cg, users, tmp_path):
    """The caller owns its cgroup's structure files: it may not raise its
    limits, pull a stranger in, or take its sandbox out."""
    c = cg()
    c.start()
    d = cgdir(prepare(c, memory="64M", pids=16))
    sb = c.call("sandbox")
    assert c.request({"op": "cgroup-attach"}, [{"sandbox": sb["id"]}]) == {"ok": True}
    for f, v in (("memory.max", "max"), ("memory.max", str(1 << 30)), ("pids.max", "max"),
                 ("memory.swap.max", "max")):
        assert c.call("write", path=str(d / f), text=v)["errno"] != 0, f"{f} raised to {v}"
    assert (d / "memory.max").read_text() == f"{64 << 20}\n" and (d / "pids.max").read_text() == "16\n"
    root_sleep = subprocess.Popen(["sleep", "600"])
    other = subprocess.Popen(["setpriv", "--reuid=kiwi-test2", "--regid=kiwi-test2", "--init-groups",
                              "sleep", "600"])
    # a cgroup the caller owns elsewhere, as a user with Delegate=yes would
    own = CGROOT / f"kiwi-helper-test-own-{os.getpid()}"
    own.mkdir()
    try:
        for p in (own, own / "cgroup.procs"):
            os.chown(p, users["kiwi-test"].pw_uid, users["kiwi-test"].pw_gid)
        for stranger in (root_sleep.pid, other.pid):
            assert c.call("write", path=str(d / "cgroup.procs"), text=str(stranger))["errno"] != 0
        assert c.call("write", path=str(own / "cgroup.procs"), text=str(sb["pid"]))["errno"] != 0
        assert procs(d) == [sb["pid"]] and procs(own) == []
    finally:
        for p in (root_sleep, other):
            p.kill()
            p.wait()
        own.rmdir()


@needs_v2
def test_the_caller_cannot_nest_past_what_teardown_removes(cg):
    """A tree deeper than removal reaches would leak: the depth is bounded
    in a file the caller does not own, and teardown removes the rest."""
    c = cg()
    c.start()
    d = cgdir(prepare(c, memory="64M"))
    sb = c.call("sandbox")
    assert c.request({"op": "cgroup-attach"}, [{"sandbox": sb["id"]}]) == {"ok": True}
    assert c.call("write", path=str(d / "cgroup.max.depth"), text="max")["errno"] == errno.EACCES
    assert c.call("write", path=str(d / "cgroup.max.descendants"), text="max")["errno"] == errno.EACCES
    got = c.call("nest", path=str(d), depth=40)
    assert got == {"made": 31, "errno": errno.EAGAIN}, got
    c.finish()
    assert settle(lambda: not d.exists())


@needs_v2
@pytest.mark.parametrize("target", ["root", "kiwi-test2", "no-userns"])
def test_a_foreign_pidfd_is_refused(cg, users, target):
    c = cg()
    c.start()
    d = cgdir(prepare(c))
    p = None
    if target == "root":
        p = subprocess.Popen(["sleep", "600"])
        spec = {"pid": p.pid}
    elif target == "kiwi-test2":
        p = subprocess.Popen(["setpriv", "--reuid=kiwi-test2", "--regid=kiwi-test2", "--init-groups", "sleep", "600"])
        spec = {"pid": p.pid}
    else:
        spec = {"sandbox": c.call("sandbox", userns=False)["id"]}
    try:
        refused(c.request({"op": "cgroup-attach"}, [spec]), "sandbox")
        assert procs(d) == []
    finally:
        if p:
            p.kill()
            p.wait()


@needs_v2
def test_a_reused_pid_never_lands_in_the_cgroup(cg, users):
    """The caller's sandbox ends and a new process of the caller takes its
    pid (forced through ns_last_pid): the stale pidfd must not move it."""
    c = cg()
    c.start()
    d = cgdir(prepare(c))
    new = stale_pidfd_of_a_reused_pid(c)
    refused(c.request({"op": "cgroup-attach"}, [{"saved": "stale"}]), "gone")
    assert procs(d) == []
    assert "/kiwi.slice" not in Path(f"/proc/{new['pid']}/cgroup").read_text()


@needs_v2
def test_quota_of_sandboxes(cg):
    a, b, c = cg(), cg(), cg()
    for x in (a, b):
        x.start()
        cgdir(prepare(x))
    c.start()
    refused(prepare(c), "quota")


@needs_v2
def test_a_killed_helper_leaves_the_cgroup_to_gc(cg, kiwi_run):
    """root may kill -9 the helper (its caller may not): the cgroup stays,
    unlocked, and root's `kiwi-run gc` removes it."""
    c = cg()
    c.start()
    d = cgdir(prepare(c))
    sb = c.call("sandbox")
    assert c.request({"op": "cgroup-attach"}, [{"sandbox": sb["id"]}]) == {"ok": True}
    os.kill(c.helper_pid, signal.SIGKILL)
    c.call("close")
    assert d.is_dir()
    c.call("end_sandbox", sid=sb["id"])
    r = subprocess.run([str(kiwi_run[0]), "gc"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert not d.exists()


@needs_v2
def test_a_killed_helpers_sandbox_counts_until_it_ends_and_a_later_session_collects(cg, users):
    """Issue 19: the helper killed by root with its sandbox running in the
    cgroup. Its keeper holds the sandbox's quota slot and the cgroup's
    lock while the sandbox runs (max_sandboxes 2: one more session fits,
    not two); once the sandbox ends the slot is free, and the next
    session's cgroup-prepare removes the dead cgroup."""
    uid = users["kiwi-test"].pw_uid
    a = cg()
    a.start()
    d = cgdir(prepare(a))
    sb = a.call("sandbox")
    assert a.request({"op": "cgroup-attach"}, [{"sandbox": sb["id"]}]) == {"ok": True}
    os.kill(a.helper_pid, signal.SIGKILL)
    assert a.call("close")["status"] == -signal.SIGKILL
    assert procs(d) == [sb["pid"]] and quota_held("sandboxes", uid) == 1
    b = cg()
    b.start()
    cgdir(prepare(b))
    c = cg()
    c.start()
    refused(prepare(c), "quota")
    c.finish()
    assert d.is_dir(), "a live sandbox's cgroup is not collected"
    a.call("end_sandbox", sid=sb["id"])
    assert settle(lambda: quota_held("sandboxes", uid) == 1)   # b's alone
    b.finish()
    e = cg()
    e.start()
    cgdir(prepare(e))
    assert not d.exists()


# ---- kiwi-run as an unprivileged user --------------------------------------------

@pytest.fixture
def vdir(users):
    d = Path(tempfile.mkdtemp(prefix="kiwi-cg-", dir="/tmp"))
    os.chown(d, users["kiwi-test"].pw_uid, users["kiwi-test"].pw_gid)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def kiwi_as(kiwi_run, helper, opts, script, user="kiwi-test", popen=False):
    kr, rootfs = kiwi_run
    argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "env", f"KIWI_HELPER={helper}",
            str(kr), "run", "--rootfs", str(rootfs), "--network", "none", *opts, "--", "/bin/sh", "-c", script]
    if popen:
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL)
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


@hybrid_only
def test_kiwi_run_on_a_hybrid_host_says_why_once(cg, kiwi_run, helper):
    r = kiwi_as(kiwi_run, helper, ["--memory", "64M"], "true")
    assert r.returncode == 125 and r.stderr.count("\n") == 1, r.stderr
    assert "hybrid" in r.stderr, r.stderr


@needs_v2
def test_kiwi_run_oom_through_the_helper(cg, kiwi_run, helper, vdir):
    v = vdir / "v.json"
    r = kiwi_as(kiwi_run, helper, ["--memory", "64M", "--verdict", str(v)],
                "cat /proc/self/cgroup; dd if=/dev/zero of=/dev/null bs=200M count=1; echo after")
    verdict = json.loads(v.read_text())
    assert r.returncode == 137, (r.returncode, r.stderr, verdict)
    assert r.stdout.splitlines()[0] == "0::/", r.stdout
    assert verdict["killed_by"] == "oom" and verdict["oom_killed"] is True, verdict
    assert verdict["cgroup"].startswith("/kiwi.slice/kiwi-"), verdict
    assert not (CGROOT / verdict["cgroup"].lstrip("/")).exists()


@needs_v2
def test_kiwi_run_pids_bound_a_fork_bomb(cg, kiwi_run, helper, vdir):
    v = vdir / "v.json"
    r = kiwi_as(kiwi_run, helper, ["--pids", "20", "--verdict", str(v)],
                "n=0; for i in $(seq 40); do sleep 2 & n=$((n+1)); done 2>/dev/null; wait; echo done")
    verdict = json.loads(v.read_text())
    assert verdict["pids_limit_hit"] is True, (r.stderr, verdict)


@needs_v2
def test_kiwi_run_refusals(cg, kiwi_run, helper):
    r = kiwi_as(kiwi_run, helper, ["--memory", "1G"], "true")
    assert r.returncode == 125 and r.stderr.count("\n") == 1, r.stderr
    assert "memory 1G is over your max_memory 256M" in r.stderr, r.stderr
    r = kiwi_as(kiwi_run, helper, ["--pids", "10", "--cgroup-parent", "/user.slice"], "true")
    assert r.returncode == 125 and "outside your cgroup subtree" in r.stderr, r.stderr
    r = kiwi_as(kiwi_run, helper, ["--pids", "10"], "true", user="kiwi-test2")
    assert r.returncode == 125 and "not allowed" in r.stderr, r.stderr


def listed(kiwi_run):
    r = subprocess.run(["setpriv", "--reuid=kiwi-test", "--regid=kiwi-test", "--init-groups", str(kiwi_run[0]),
                        "list", "--json"], capture_output=True, text=True, timeout=60)
    return [e["cgroup"] for e in json.loads(r.stdout or "[]")]


@needs_v2
def test_kiwi_run_killed_leaves_nothing(cg, kiwi_run, helper):
    """The cap binds a run that asked only for pids; then a kill -9 of
    kiwi-run: the helper removes the cgroup and ends."""
    p = kiwi_as(kiwi_run, helper, ["--pids", "10"], "echo up; sleep 600", popen=True)
    assert p.stdout.readline() == "up\n"
    kids = [int(x) for x in Path(f"/proc/{p.pid}/task/{p.pid}/children").read_text().split()]
    (d,) = [d for d in map(sandbox_cgroup, kids) if d]
    assert (d / "memory.max").read_text() == f"{256 << 20}\n"
    assert (d / "pids.max").read_text() == "10\n"
    # `list` names the helper's cgroup like any other
    assert settle(lambda: "/" + str(d.relative_to(CGROOT)) in listed(kiwi_run)), listed(kiwi_run)
    helpers = [int(x) for x in os.popen(f"pgrep -P {p.pid} -x kiwi-helper").read().split()]
    assert len(helpers) == 1
    p.kill()
    p.wait()
    assert settle(lambda: not d.exists())
    assert settle(lambda: ended(helpers[0]))


def caps_of(pid):
    """(permitted, effective)"""
    got = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        got[k] = v.strip()
    return int(got["CapPrm"], 16), int(got["CapEff"], 16)


CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_SETUID, CAP_SYS_NICE = 0, 1, 7, 23


def test_capabilities_of_the_cgroup_operation(cg, config, users):
    """CAP_CHOWN to hand the cgroup over and CAP_SETUID for the way back
    from euid 0, each gone once its step is done; CAP_SYS_NICE (the move
    across cpusets) and CAP_DAC_OVERRIDE (the subtree in the hierarchy's
    0555 root, the teardown of a cgroup the caller owns) held but never
    effective outside the steps that need them."""
    config.write([{"user": "kiwi-test", "operations": ["cgroup"]}])
    c = cg()
    pid = c.start()
    refused(c.request({"op": "nothing"}), "unknown op")   # serving: the drop is done
    eff = (1 << CAP_SETUID) | (1 << CAP_CHOWN)
    held = eff | (1 << CAP_DAC_OVERRIDE) | (1 << CAP_SYS_NICE)
    assert caps_of(pid) == (held, eff)
    if not V2:
        return
    cgdir(prepare(c))
    assert caps_of(pid) == (held, eff)
    sb = c.call("sandbox")
    assert c.request({"op": "cgroup-attach"}, [{"sandbox": sb["id"]}]) == {"ok": True}
    assert caps_of(pid) == (1 << CAP_DAC_OVERRIDE, 0)


@needs_v2
def test_kiwi_run_timeout_kills_through_the_delegated_cgroup(cg, kiwi_run, helper, vdir):
    """The timeout writes cgroup.kill, which the helper handed over: the
    whole sandbox goes, pid 1 with it, and the cgroup after the run."""
    v = vdir / "v.json"
    r = kiwi_as(kiwi_run, helper, ["--pids", "10", "--timeout", "1s", "--verdict", str(v)],
                "sleep 600 & sleep 600")
    verdict = json.loads(v.read_text())
    assert r.returncode == 137, (r.stderr, verdict)
    assert verdict["timed_out"] is True and verdict["killed_by"] == "timeout", verdict
    assert not (CGROOT / verdict["cgroup"].lstrip("/")).exists()


def session_as(kiwi_run, helper, *args, user="kiwi-test"):
    kr, _ = kiwi_run
    argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "env", f"KIWI_HELPER={helper}",
            str(kr), "session", *map(str, args)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


def session_exec(kiwi_run, helper, sid, v, script):
    r = session_as(kiwi_run, helper, "exec", sid, "--verdict", v, "--", "/bin/sh", "-c", script)
    return r, json.loads(v.read_text()) if v.exists() and v.stat().st_size else None


@needs_v2
def test_a_session_through_the_helper_has_a_cgroup_per_exec(cg, kiwi_run, helper, vdir):
    """A rootless session whose cgroup kiwi-helper made ("session" in
    cgroup-prepare): the session's cgroup is no OOM group and hands its
    controllers on, its pid 1 sits in the root-owned leaf "keeper", and
    each exec gets a cgroup of its own below it: one exec's OOM kill is
    reported on that exec alone and the next exec works."""
    r = session_as(kiwi_run, helper, "create", "--rootfs", kiwi_run[1], "--network", "none", "--memory", "64M",
                   "--pids", "64")
    assert r.returncode == 0, r.stderr
    sid = r.stdout.strip()
    try:
        r = session_as(kiwi_run, helper, "list", "--json")
        (name,) = [e["cgroup"] for e in json.loads(r.stdout) if e["id"] == sid]
        d = CGROOT / name.lstrip("/")
        MADE.append(d)
        assert (d / "memory.oom.group").read_text() == "0\n"
        assert {"memory", "pids"} <= set((d / "cgroup.subtree_control").read_text().split())
        assert procs(d) == [] and len(procs(d / "keeper")) == 1 and (d / "keeper").stat().st_uid == 0
        assert (d / "memory.max").stat().st_uid == 0, "a limit file was handed to the caller"

        r, v1 = session_exec(kiwi_run, helper, sid, vdir / "v1.json", "echo keep > /tmp/kept")
        assert r.returncode == 0 and v1, r.stderr
        r, v2 = session_exec(kiwi_run, helper, sid, vdir / "v2.json", "dd if=/dev/zero of=/dev/null bs=200M count=1")
        assert r.returncode == 137 and v2, (r.returncode, r.stderr, v2)
        assert v2["oom_killed"] is True and v2["killed_by"] == "oom", v2
        assert v2["cgroup"].startswith(name + "/exec-"), v2
        assert not (CGROOT / v2["cgroup"].lstrip("/")).exists(), "the exec's cgroup outlived it"
        r, v3 = session_exec(kiwi_run, helper, sid, vdir / "v3.json",
                             "cat /tmp/kept; head -c 8000000 /dev/zero | cat >/dev/null")
        assert r.returncode == 0 and r.stdout == "keep\n", (r.stdout, r.stderr)
        assert v3["oom_killed"] is False and v3["killed_by"] is None, v3
        assert isinstance(v3["peak_memory_kib"], int) and v3["peak_memory_kib"] > 0, v3
        assert v3["cgroup"].startswith(name + "/exec-") and v3["cgroup"] != v2["cgroup"], v3
    finally:
        r = session_as(kiwi_run, helper, "destroy", sid)
    ev = json.loads(r.stdout)
    assert r.returncode == 0 and ev["clean"] and ev["cgroup_removed"] is True, (r.stdout, r.stderr)
