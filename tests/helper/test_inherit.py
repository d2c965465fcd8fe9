# SPDX-License-Identifier: Apache-2.0
"""What a caller sets before it execs kiwi-helper (issue 19): resource
limits, scheduling, nice, a seccomp filter. None of it may end or starve
the helper before its teardown, and nothing it made (veth, table, quota
slot) outlives the session. The attacks bind a real sandbox with egress
in the fake world of tests/net, then push the helper as the issue's
attack did: a stream of ~16 KiB malformed requests."""
import errno
import os
from pathlib import Path

import pytest

from conftest import CONFIG_DIR, PUBLIC, attach, in_world, quota_held, world  # noqa: F401 (fixtures)
from fakenet import leftovers

JUNK = "[" * 16000   # parsed and refused, a little CPU each
CONFIG_STATE = CONFIG_DIR / "state"


def limits_of(pid):
    """/proc/PID/limits as {name: (soft, hard)}."""
    out = {}
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines()[1:]:
        name, soft, hard = line[:26].strip(), *line[26:].split()[:2]
        out[name] = (soft, hard)
    return out


def sched_of(pid):
    """(policy, nice) of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return os.sched_getscheduler(pid), int(fields[16])


def flood(c, n=200):
    """n malformed requests; returns the answers until the helper stops
    answering (the budget's refusal is the last)."""
    answers = []
    for _ in range(n):
        ans = c.request(None, raw=JUNK)
        answers.append(ans)
        if ans.get("ok") is not False or ans.get("step") == "budget":
            break
    return answers


def assert_ended_by_itself(c, world, uid):
    """The helper ended by its own budget, tore down, and exited 0: not
    killed by a signal, nothing left, no quota slot held."""
    answers = flood(c)
    assert answers[-1].get("step") == "budget", answers[-3:]
    assert 60 <= len(answers) <= 70, len(answers)
    assert c.call("close") == {"status": 0}
    assert leftovers(world.host) == ([], [])
    assert quota_held("veths", uid) == 0 and quota_held("sandboxes", uid) == 0


def can_raise_hard_limits():
    """CAP_SYS_RESOURCE in our bounding set (so in the setuid helper's):
    some hosts' containers cut it. The VM lane has the full set: there
    the raising path must run, never the refusal."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapBnd:"):
            can = bool(int(line.split()[1], 16) >> 24 & 1)
            assert can or os.environ.get("KIWI_VM") != "1", "the VM lane lost CAP_SYS_RESOURCE"
            return can
    return False


ATTACKS = [
    ("cpu", {"CPU": [1, 1]}),
    ("fsize", {"FSIZE": [0, 0]}),      # egress-prepare writes the name files
    ("stack", {"STACK": [65536, 65536]}),
    ("nofile", {"NOFILE": [5, 5]}),    # 0-2, the socket, one for the loader
    ("as", {"AS": [64 << 20, 64 << 20]}),
]
# What the helper refuses each with where it cannot raise a hard limit.
NEEDS = {"CPU": "unlimited", "FSIZE": "unlimited", "STACK": "at least 1048576", "NOFILE": "at least 64",
         "AS": "at least 1073741824"}


def assert_own_limits(pid, hard_raised):
    lim = limits_of(pid)
    assert lim["Max cpu time"] == ("unlimited", "unlimited"), lim
    assert lim["Max file size"] == ("unlimited", "unlimited"), lim
    assert lim["Max core file size"] == ("0", "0"), lim
    if hard_raised:
        assert lim["Max stack size"] == ("8388608", "8388608"), lim
        assert lim["Max open files"] == ("1024", "1024"), lim
        assert lim["Max address space"] == ("unlimited", "unlimited"), lim


def assert_refused_at_start(c, words, world, uid):
    """The first request is answered with the refusal, the helper exits
    1 and holds nothing."""
    ans = c.request(PUBLIC)
    assert ans.get("ok") is False and words in ans["error"], ans
    assert c.call("close") == {"status": 1}
    assert leftovers(world.host) == ([], [])
    assert quota_held("veths", uid) == 0 and quota_held("sandboxes", uid) == 0


@pytest.mark.parametrize("what,rlimits", ATTACKS)
def test_resource_limits_soft_are_the_helpers_own(in_world, users, world, what, rlimits):
    """The soft limit at the attack's value, the hard one where it was:
    the helper raises it, on every host."""
    rlimits = {k: [soft, None] for k, (soft, _) in rlimits.items()}
    c = in_world()
    pid = c.start(rlimits=rlimits)
    attach(c, users)
    assert_own_limits(pid, can_raise_hard_limits())
    assert quota_held("veths", users["kiwi-test"].pw_uid) == 1
    assert_ended_by_itself(c, world, users["kiwi-test"].pw_uid)


@pytest.mark.parametrize("what,rlimits", ATTACKS)
def test_resource_limits_hard_are_the_helpers_own_or_refused(in_world, users, world, what, rlimits):
    """Hard limits too: raised where the helper holds CAP_SYS_RESOURCE
    (the VM lane), else the session is refused before anything is made:
    never killed or starved half-way."""
    c = in_world()
    pid = c.start(rlimits=rlimits)
    if can_raise_hard_limits():
        attach(c, users)
        assert_own_limits(pid, True)
        assert_ended_by_itself(c, world, users["kiwi-test"].pw_uid)
        return
    ((name, (_, hard)),) = rlimits.items()
    assert_refused_at_start(c, f"your hard RLIMIT_{name} is {hard} and the helper needs it {NEEDS[name]}: it cannot "
                            "raise it, CAP_SYS_RESOURCE is not in this host's capability bounding set; raise the "
                            "hard limit before starting kiwi-run", world, users["kiwi-test"].pw_uid)


def test_nofile_4_starts_nothing(in_world, users, world):
    """With fds 0-3 taken and a limit of 4, the loader cannot open the
    helper's libraries: it ends before main, holding nothing."""
    c = in_world()
    c.start(rlimits={"NOFILE": [4, 4]})
    ans = c.request(PUBLIC)
    assert ans.get("closed") or "send_error" in ans or ans.get("recv_error") == errno.ECONNRESET, ans
    assert c.call("close")["status"] != 0
    assert leftovers(world.host) == ([], [])
    assert quota_held("veths", users["kiwi-test"].pw_uid) == 0


def test_niced_and_idle_caller(in_world, users, world):
    c = in_world()
    pid = c.start(nice=19, sched_idle=True)
    attach(c, users)
    assert sched_of(pid) == (os.SCHED_OTHER, 0)
    st = Path(f"/proc/{pid}/status").read_text()
    assert "Cpus_allowed_list:\t" + Path("/sys/devices/system/cpu/online").read_text().strip() in st
    # its own session: the caller's terminal and process group are not its
    assert os.getsid(pid) == pid
    assert_ended_by_itself(c, world, users["kiwi-test"].pw_uid)


def test_caller_oom_score_adj_is_reset(in_world, users, world):
    if not can_raise_hard_limits():
        pytest.skip("lowering oom_score_adj needs CAP_SYS_RESOURCE, which this host's bounding set lacks")
    c = in_world()
    Path(f"/proc/{c.p.pid}/oom_score_adj").write_text("1000")   # the caller's, inherited
    pid = c.start()
    attach(c, users)
    assert Path(f"/proc/{pid}/oom_score_adj").read_text().strip() == "0"
    assert_ended_by_itself(c, world, users["kiwi-test"].pw_uid)


def test_seccomp_filter_needs_no_new_privs_so_no_root(in_world, users, world):
    """A filter that makes write(2) fail can only be loaded with
    no_new_privs, and then the exec makes no one root: the helper says
    so through the socket (write fails, send does not) and holds nothing."""
    c = in_world()
    c.start(seccomp_write=True)
    assert_refused_at_start(c, "not running as root", world, users["kiwi-test"].pw_uid)


def test_files_it_makes_are_root_root(in_world, users, world):
    c = in_world()
    c.start()
    prep, _ = attach(c, users)
    gid = users["kiwi-test"].pw_gid
    made = [CONFIG_STATE, *CONFIG_STATE.iterdir(), Path(prep["hosts"]), Path(prep["resolv"])]
    for p in made:
        st = p.stat()
        assert (st.st_uid, st.st_gid) == (0, 0), (p, st.st_uid, st.st_gid, gid)
    assert_ended_by_itself(c, world, users["kiwi-test"].pw_uid)

