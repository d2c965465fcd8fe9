# SPDX-License-Identifier: Apache-2.0
"""The bind operation (issue 15): for a caller whose sandbox maps a range
the helper allotted, a clone of a tree the caller owns, idmapped so its
owner is the sandbox's root. Checked on the fd the caller sent, never a
path; everything else is refused in one line."""
import os
from pathlib import Path

import pytest

from conftest import refused

def idmappable(path):
    """Whether this kernel idmaps path's filesystem: tmpfs only from Linux
    6.3 (the VM lane's guest is 6.1, its /var/tmp a tmpfs)."""
    kernel = tuple(int(x) for x in os.uname().release.split("-")[0].split(".")[:2])
    return kernel >= (6, 3) or not _is_tmpfs(path)


def _is_tmpfs(path):
    best, fstype = "", ""
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, mnt, typ = line.split()[:3]
        if (str(path) + "/").startswith(mnt.rstrip("/") + "/") and len(mnt) >= len(best):
            best, fstype = mnt, typ
    return fstype == "tmpfs"


RANGE_MAP = {"op": "idmap", "uid_map": [[0, 200000, 65536]], "gid_map": [[0, 200000, 65536]]}


def bind_rules(users, ops=("idmap", "bind")):
    return [{"user": "kiwi-test", "operations": list(ops), "uids": [[200000, 65536]], "gids": [[200000, 65536]],
             "max_sandboxes": 3},
            {"user": users["kiwi-test2"].pw_uid, "operations": ["idmap"], "max_sandboxes": 2}]


@pytest.fixture
def bind_config(config, users):
    config.write(bind_rules(users))
    return config


def own_dir(install_dir, name, pw):
    d = install_dir / name
    d.mkdir(mode=0o755, exist_ok=True)
    os.chown(d, pw.pw_uid, pw.pw_gid)
    (d / "mine").write_text("x")
    os.chown(d / "mine", pw.pw_uid, pw.pw_gid)
    (d / "roots").write_text("r")
    return d


def mapped_sandbox(c):
    c.start()
    sb = c.call("sandbox")
    assert c.request(RANGE_MAP, [{"sandbox": sb["id"]}]) == {"ok": True}
    return sb


def test_the_callers_tree_is_the_sandbox_roots(clients, bind_config, install_dir, users):
    """The clone shows the caller's files as the sandbox root's host id
    (200000: 0 inside), and every other owner as unmapped (65534)."""
    d = own_dir(install_dir, "bind-own", users["kiwi-test"])
    c = clients()
    sb = mapped_sandbox(c)
    ans = c.call("request_keep_fd", req={"op": "bind"}, fds=[{"sandbox": sb["id"]}, {"path": str(d)}], name="tree")
    if not idmappable(d):   # refused in one line, nothing half-made
        refused(ans, "cannot be idmapped")
        return
    assert ans == {"ok": True, "with_fd": True}, ans
    assert c.call("stat_at", name="tree") == {"uid": 200000, "gid": 200000}
    assert c.call("stat_at", name="tree", path="mine") == {"uid": 200000, "gid": 200000}
    assert c.call("stat_at", name="tree", path="roots") == {"uid": 65534, "gid": 65534}


@pytest.mark.parametrize("source,words", [
    ("/etc", ["not yours", "owner 0"]),
    ("/etc/hostname", ["not yours"]),
    ("/dev/null", ["not a directory or a regular file"]),
])
def test_a_source_not_the_callers_is_refused(clients, bind_config, source, words):
    c = clients()
    sb = mapped_sandbox(c)
    refused(c.request({"op": "bind"}, [{"sandbox": sb["id"]}, {"path": source}]), *words)


def test_before_the_maps_is_refused(clients, bind_config, install_dir, users):
    d = own_dir(install_dir, "bind-early", users["kiwi-test"])
    c = clients()
    c.start()
    sb = c.call("sandbox")
    refused(c.request({"op": "bind"}, [{"sandbox": sb["id"]}, {"path": str(d)}]), "maps no root")


def test_another_users_sandbox_is_refused(clients, bind_config, install_dir, users):
    d = own_dir(install_dir, "bind-other", users["kiwi-test"])
    theirs = clients("kiwi-test2").call("sandbox")
    c = clients()
    c.start()
    refused(c.request({"op": "bind"}, [{"pid": theirs["pid"]}, {"path": str(d)}]), "not yours")


def test_without_the_operation_or_the_fds(clients, bind_config, install_dir, users):
    d = own_dir(install_dir, "bind-noop", users["kiwi-test"])
    c = clients()
    sb = mapped_sandbox(c)
    refused(c.request({"op": "bind"}, [{"sandbox": sb["id"]}]), "two fds")
    refused(c.request({"op": "bind", "path": "/etc"}, [{"sandbox": sb["id"]}, {"path": str(d)}]), "unknown key")
    bind_config.write(bind_rules(users, ops=("idmap",)))
    c2 = clients()
    sb2 = mapped_sandbox(c2)
    a = c2.request({"op": "bind"}, [{"sandbox": sb2["id"]}, {"path": str(d)}])
    refused(a, "bind is not allowed")
    assert a["step"] == "not_in_rule", a   # what kiwi-run reads to bind as before


def test_kiwi_run_binds_the_callers_workspace_idmapped(kiwi_run, helper, bind_config, install_dir, users):
    """kiwi-run on the helper's range: the caller's own workspace is root's
    inside, writable, and what the sandbox writes there is the caller's on
    the host; a bind the caller does not own stays as it is."""
    from test_run_idmap import RANGE, assert_nothing_left, explain, refused as run_refused, run_as
    pw = users["kiwi-test"]
    d = own_dir(install_dir, "bind-run", pw)
    r = run_as("kiwi-test", kiwi_run, helper, [*RANGE, "--bind", f"{d}:/ws", "--bind", "/etc:/hostetc:ro"],
               ["/bin/sh", "-c", "stat -c %u:%g /ws /ws/mine /ws/roots /hostetc; echo made > /ws/made; "
                                 "mkdir /ws/sub && touch /ws/sub/f"])
    if not idmappable(d):
        run_refused(r, "kiwi-helper refused", str(d), "cannot be idmapped")
        assert_nothing_left("kiwi-test", kiwi_run, helper)
        return
    assert r.returncode == 0, explain(r)
    assert r.stdout.split() == ["0:0", "0:0", "65534:65534", "65534:65534"], explain(r)
    for p in (d / "made", d / "sub", d / "sub" / "f"):
        st = p.stat()
        assert (st.st_uid, st.st_gid) == (pw.pw_uid, pw.pw_gid), p
    assert_nothing_left("kiwi-test", kiwi_run, helper)


def test_kiwi_run_without_the_operation_binds_as_before(kiwi_run, helper, bind_config, install_dir, users):
    """A rule with idmap alone: the caller's workspace is bound as it was
    before the operation existed (nobody's inside), not refused."""
    from test_run_idmap import RANGE, assert_nothing_left, explain, run_as
    bind_config.write(bind_rules(users, ops=("idmap",)))
    d = own_dir(install_dir, "bind-run-noop", users["kiwi-test"])
    r = run_as("kiwi-test", kiwi_run, helper, [*RANGE, "--bind", f"{d}:/ws"],
               ["/bin/sh", "-c", "stat -c %u:%g /ws; touch /ws/made || echo refused"])
    assert r.returncode == 0, explain(r)
    assert r.stdout.split() == ["65534:65534", "refused"], explain(r)
    assert not (d / "made").exists()
    assert_nothing_left("kiwi-test", kiwi_run, helper)


def test_cap_sys_admin_is_held_but_never_effective(clients, bind_config, install_dir, users):
    from test_hardening import CAP_SETGID, CAP_SETUID, status_of
    held = (1 << CAP_SETGID) | (1 << CAP_SETUID) | (1 << 21)
    c = clients()
    pid = c.start()
    assert c.request({"op": "nothing"})["ok"] is False   # serving: the drop is done
    sb = c.call("sandbox")
    assert c.request(RANGE_MAP, [{"sandbox": sb["id"]}]) == {"ok": True}
    d = own_dir(install_dir, "bind-caps", users["kiwi-test"])
    c.request({"op": "bind"}, [{"sandbox": sb["id"]}, {"path": str(d)}])
    st = status_of(pid)
    assert int(st["CapPrm"][0], 16) == held and int(st["CapBnd"][0], 16) == held, st
    assert int(st["CapEff"][0], 16) == held & ~(1 << 21), st


def test_the_last_bind_ends_the_operation_and_cap_sys_admin(clients, bind_config, install_dir, users):
    """A bind the caller marks last is done for good: the helper drops
    CAP_SYS_ADMIN (and refuses any further bind), as for every operation
    done once."""
    from test_hardening import status_of
    c = clients()
    pid = c.start()
    sb = c.call("sandbox")
    assert c.request(RANGE_MAP, [{"sandbox": sb["id"]}]) == {"ok": True}
    d = own_dir(install_dir, "bind-last", users["kiwi-test"])
    refused(c.request({"op": "bind", "last": 1}, [{"sandbox": sb["id"]}, {"path": str(d)}]), "not a boolean")
    assert (int(status_of(pid)["CapPrm"][0], 16) >> 21) & 1   # not yet: the refusal did nothing
    ans = c.request({"op": "bind", "last": True}, [{"sandbox": sb["id"]}, {"path": str(d)}])
    if not idmappable(d):
        refused(ans, "cannot be idmapped")
        return
    assert ans == {"ok": True}, ans
    st = status_of(pid)
    assert int(st["CapPrm"][0], 16) == 0, st   # idmap and bind done: nothing is left to do
    assert int(st["CapEff"][0], 16) == 0, st
    refused(c.request({"op": "bind"}, [{"sandbox": sb["id"]}, {"path": str(d)}]), "bind was done already")


def test_kiwi_run_leaves_the_helper_no_cap_sys_admin_after_its_binds(kiwi_run, helper, bind_config, install_dir,
                                                                     users, tmp_path):
    """While the command runs, the helper serving a run with two binds of
    the caller's holds CAP_SYS_ADMIN no more."""
    import subprocess
    import time
    from test_run_idmap import RANGE, assert_nothing_left, helper_processes
    pw = users["kiwi-test"]
    d1, d2 = own_dir(install_dir, "bind-caps1", pw), own_dir(install_dir, "bind-caps2", pw)
    if not idmappable(d1):
        pytest.skip("this kernel cannot idmap the test's directories")
    before = set(helper_processes(helper))
    kr, rootfs = kiwi_run
    go = d1 / "go"
    p = subprocess.Popen(["setpriv", "--reuid=kiwi-test", "--regid=kiwi-test", "--init-groups", "env", "-i",
                          "PATH=/usr/bin:/bin", f"KIWI_HELPER={helper}", str(kr), "run", "--rootfs", str(rootfs),
                          *RANGE, "--bind", f"{d1}:/a", "--bind", f"{d2}:/b", "--",
                          "/bin/sh", "-c", "touch /a/ready; while [ ! -e /a/go ]; do sleep 0.1; done"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(400):
            if (d1 / "ready").exists() or p.poll() is not None:
                break
            time.sleep(0.05)
        assert (d1 / "ready").exists(), p.communicate()
        ours = set(helper_processes(helper)) - before
        assert len(ours) == 1, ours
        from test_hardening import status_of
        st = status_of(ours.pop())
        assert not (int(st["CapPrm"][0], 16) >> 21) & 1, st
    finally:
        go.touch()
        out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert_nothing_left("kiwi-test", kiwi_run, helper)
