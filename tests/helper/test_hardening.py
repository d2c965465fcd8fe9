# SPDX-License-Identifier: Apache-2.0
"""The helper process itself under attack from its caller: the
environment (loader, allocator, locale, temp dir) changes nothing, and the
caller can neither ptrace it, read its memory or environment, nor kill it,
at each stage of a session."""
import errno
import subprocess
from pathlib import Path

import pytest

from conftest import idmap, maps_of

EVIL_C = r"""
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void evil(void)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/loaded-%d-uid%d-euid%d", MARKER_DIR, (int)getpid(), (int)getuid(), (int)geteuid());
	close(open(path, O_WRONLY | O_CREAT, 0666));
}
"""


@pytest.fixture(scope="module")
def evil(install_dir):
    """A library that leaves a file behind wherever it is loaded, as an
    LD_PRELOAD, as libmnl.so.0 on LD_LIBRARY_PATH, and as a gconv module."""
    d = install_dir / "evil"
    markers = d / "markers"
    markers.mkdir(parents=True, exist_ok=True)
    markers.chmod(0o777)
    d.chmod(0o755)
    src = d / "evil.c"
    src.write_text(EVIL_C)
    so = d / "evil.so"
    r = subprocess.run(["cc", "-shared", "-fPIC", f'-DMARKER_DIR="{markers}"', "-o", str(so), str(src)],
                       capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"cannot build the test library: {r.stderr}")
    (d / "libmnl.so.0").write_bytes(so.read_bytes())
    (d / "gconv-modules").write_text(f"module INTERNAL EVIL// {d}/evil 1\nmodule EVIL// INTERNAL {d}/evil 1\n")
    (d / "evil.so").chmod(0o755)
    return d, markers


def hostile_env(d):
    return {
        "LD_PRELOAD": f"{d}/evil.so", "LD_LIBRARY_PATH": str(d), "LD_AUDIT": f"{d}/evil.so",
        "GCONV_PATH": str(d), "CHARSET": "EVIL", "LANGUAGE": "fr", "LC_ALL": "fr_FR.UTF-8", "LOCPATH": str(d),
        "NLSPATH": f"{d}/%N", "MALLOC_CHECK_": "3", "MALLOC_PERTURB_": "165", "MALLOC_ARENA_MAX": "1",
        "MALLOC_TOP_PAD_": "1", "GLIBC_TUNABLES": "glibc.malloc.check=3:glibc.malloc.perturb=165",
        "TMPDIR": str(d), "HOSTALIASES": f"{d}/hosts", "RES_OPTIONS": "debug", "LOCALDOMAIN": "evil",
        "KIWI_HELPER_CONFIG": f"{d}/helper.json", "PATH": str(d), "IFS": "x",
    }


def test_the_environment_changes_nothing(clients, users, evil):
    d, markers = evil
    answers = []
    for env in (None, hostile_env(d)):
        c = clients()
        c.start(env=env)
        sb = c.call("sandbox")
        refusal = c.request(idmap(users, uid_map=[[1, 0, 1]]), [{"sandbox": sb["id"]}])
        ok = c.request(idmap(users), [{"sandbox": sb["id"]}])
        answers.append((refusal, ok, maps_of(sb["pid"])))
        c.call("close")
    assert answers[0] == answers[1]
    assert answers[1][1] == {"ok": True}
    assert not list(markers.iterdir()), f"the test library was loaded: {list(markers.iterdir())}"
    # the same library is loaded when nothing is setuid: the test can fail
    r = subprocess.run(["/bin/true"], env={"LD_PRELOAD": f"{d}/evil.so"})
    assert r.returncode == 0 and list(markers.iterdir())
    for m in markers.iterdir():
        m.unlink()


def assert_untouchable(c, pid):
    """Every way in from the caller's uid fails, and the helper lives."""
    out = c.call("ptrace", pid=pid)
    assert out["attach"] == errno.EPERM and out["seize"] == errno.EPERM, out
    for f in ("mem", "environ", "ns/user"):
        assert out[f] in (errno.EACCES, errno.EPERM), (f, out)
    assert out["kill"] == errno.EPERM, out
    assert Path(f"/proc/{pid}").exists()


def test_no_ptrace_no_mem_no_kill_at_each_stage(clients, users):
    c = clients()
    pid = c.start()
    # waiting for its first request (the refusal shows it got that far)
    assert c.request({"op": "nothing"})["ok"] is False
    assert_untouchable(c, pid)
    # bound to a sandbox
    sb = c.call("sandbox")
    assert c.request(idmap(users), [{"sandbox": sb["id"]}]) == {"ok": True}
    assert_untouchable(c, pid)
    # a refused config: the helper stops before serving
    assert c.call("close") == {"status": 0}


def test_a_caller_ptracing_before_exec_gets_no_privilege(clients, users, helper):
    """Attached before the exec (its own child), the caller would see the
    exec: the kernel then runs the helper without its setuid bit, and the
    helper says so instead of serving."""
    r = subprocess.run(["setpriv", "--reuid=kiwi-test", "--regid=kiwi-test", "--init-groups",
                        "strace", "-f", "-o", "/dev/null", str(helper)], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL)
    if "No such file" in r.stderr and "strace" in r.stderr:
        pytest.skip("strace is not installed")
    assert r.returncode != 0
    assert "not running as root" in r.stderr, r.stderr


def status_of(pid):
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        fields[k] = v.split()
    return fields


CAP_SETGID, CAP_SETUID, CAP_NET_ADMIN = 6, 7, 12


@pytest.mark.parametrize("user,caps", [
    ("kiwi-test", (1 << CAP_SETGID) | (1 << CAP_SETUID) | (1 << CAP_NET_ADMIN)),   # idmap and egress
    ("kiwi-test2", (1 << CAP_SETGID) | (1 << CAP_SETUID)),                         # idmap only
])
def test_only_the_capabilities_its_operations_need(clients, users, user, caps):
    c = clients(user)
    pid = c.start()
    assert c.request({"op": "nothing"})["ok"] is False   # serving: the drop is done
    st = status_of(pid)
    uid = str(users[user].pw_uid)
    assert st["Uid"] == ["0", uid, "0", uid], st["Uid"]   # real, effective, saved, fs
    assert st["NoNewPrivs"] == ["1"]
    for s in ("CapPrm", "CapEff", "CapBnd"):
        assert int(st[s][0], 16) == caps, (s, st[s])
    assert int(st["CapInh"][0], 16) == 0 and int(st["CapAmb"][0], 16) == 0
    # the map is written once: CAP_SETGID goes with it
    sb = c.call("sandbox")
    assert c.request(idmap(users, user), [{"sandbox": sb["id"]}]) == {"ok": True}
    st = status_of(pid)
    # (CAP_SETUID stays with egress: the way back from euid 0 needs it)
    left = caps & ~(1 << CAP_SETGID) if caps & (1 << CAP_NET_ADMIN) else 0
    assert int(st["CapPrm"][0], 16) == left and int(st["CapEff"][0], 16) == left, st["CapPrm"]
    ans = c.request(idmap(users, user), [{"sandbox": sb["id"]}])
    assert ans["ok"] is False and "done already" in ans["error"], ans


def test_before_the_drop_no_ptrace_no_mem(clients, users, config):
    """A helper that refused to start waits for its caller's first request
    still as it was exec'd (real uid the caller's, effective 0): the stage
    before the drop. Its memory stays out of reach; a kill is allowed there
    (the real uid is the caller's) and harmless: it holds nothing."""
    config.write([{"user": "kiwi-test", "operations": ["idmap"], "max_sandboxes": 0}])
    c = clients()
    pid = c.start()
    uid = str(users["kiwi-test"].pw_uid)
    st = None
    for _ in range(2000):   # until it sleeps: past its checks, waiting to answer the refusal
        st = status_of(pid)
        if st["State"][0] == "S":
            break
    assert st["Uid"] == [uid, "0", "0", "0"], st["Uid"]
    out = c.call("ptrace", pid=pid)
    assert out["attach"] == errno.EPERM and out["seize"] == errno.EPERM, out
    for f in ("mem", "environ"):
        assert out[f] in (errno.EACCES, errno.EPERM), (f, out)
    assert out["kill"] == 0, out
