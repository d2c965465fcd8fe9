# SPDX-License-Identifier: Apache-2.0
"""The disk operation (issue 15): a rootless kiwi-run with --disk-backend
loop gets its layer from the setuid helper, an ext4 image of root's on a
loop device, bounded by the rule's max_disk, idmapped to the sandbox's
user namespace. The bound holds over the workspace and /tmp together, the
host holds at most the bound, nothing is left after the run or after
kill -9 of kiwi-run, and a caller asking past its bound, without the
operation, or for another user's sandbox is refused in one line.

Our loop device is the one backed by the image file the test helper
process holds open (an unnamed file, "#<inode> (deleted)"): other work on
this host uses loop devices and the same image directory."""
import glob
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import idmap, refused as helper_refused
from test_run_idmap import RANGE, as_user, assert_nothing_left, explain, helper_processes, owned_dir, refused, run_as

MIB = 1 << 20
LAYERS = "/var/lib/kiwi-run/layers"


def disk_rules(users, max_disk="16M", ops=("idmap", "disk")):
    return [{"user": "kiwi-test", "operations": list(ops), "uids": [[200000, 65536]], "gids": [[200000, 65536]],
             "max_sandboxes": 3, **({"max_disk": max_disk} if max_disk else {})},
            {"user": users["kiwi-test2"].pw_uid, "operations": ["idmap"], "max_sandboxes": 2}]


@pytest.fixture
def disk_config(config, users):
    if not os.path.exists("/dev/loop-control"):
        pytest.skip("no /dev/loop-control on this host")
    # The VM lane's guest has no /var/lib (its root is a bare tmpfs); the
    # helper makes only its own directory in it, as root's kiwi-run does.
    os.makedirs("/var/lib", mode=0o755, exist_ok=True)
    config.write(disk_rules(users))
    return config


def loops():
    """{backing file: (loop name, bytes)} of every loop device now."""
    found = {}
    for d in glob.glob("/sys/block/loop*/loop/backing_file"):
        try:
            backing = Path(d).read_text().strip()
            name = d.split("/")[3]
            found[backing] = (name, int(Path(f"/sys/block/{name}/size").read_text()) * 512)
        except OSError:
            continue  # cleared meanwhile
    return found


def images_held(pid):
    """The image files (path as the kernel names it, st_blocks in bytes)
    the helper process pid holds open."""
    out = {}
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
            if target.startswith(LAYERS + "/"):
                out[target] = os.stat(fd).st_blocks * 512
        except OSError:
            continue
    return out


def wait_gone(backing, limit=20.0):
    deadline = time.monotonic() + limit
    while backing in loops() and time.monotonic() < deadline:
        time.sleep(0.05)
    return backing not in loops()


def verdict_of(path):
    return json.loads(Path(path).read_text())


def disk_opts(d, size="16M"):
    return ["--disk", size, "--disk-backend", "loop", "--verdict", str(d / "v.json")]


def test_one_bound_over_workspace_and_tmp(kiwi_run, helper, disk_config, install_dir, users):
    """The caller's own id at 0 (no map from the helper): 10 MiB into the
    layered workspace, then 10 MiB into /tmp: the second meets ENOSPC,
    the command goes on, the verdict says full and loop, and the
    workspace's part lands, the caller's own."""
    pw = users["kiwi-test"]
    d = owned_dir(install_dir, "work-disk", pw.pw_uid)
    ws = d / "ws"
    ws.mkdir()
    os.chown(ws, pw.pw_uid, pw.pw_gid)
    r = run_as("kiwi-test", kiwi_run, helper, [*disk_opts(d), "--bind", f"{ws}:/ws:layer"],
               ["/bin/sh", "-c", "dd if=/dev/zero of=/ws/big bs=1M count=10 && echo first-ok; "
                                 "dd if=/dev/zero of=/tmp/big bs=1M count=10 || echo second-failed; "
                                 "stat -c %u:%g /tmp/big; echo still-running"])
    assert r.returncode == 0, explain(r)
    assert "first-ok" in r.stdout and "second-failed" in r.stdout and "still-running" in r.stdout, explain(r)
    assert "0:0" in r.stdout, explain(r)    # the sandbox's root owns what it writes on the layer
    assert "No space left on device" in r.stderr, explain(r)
    v = verdict_of(d / "v.json")
    assert v["disk_full"] is True and v["bounds"]["disk"] == "loop", v
    assert 14 * 1024 <= v["disk_used_kib"] <= 16 * 1024, v
    st = (ws / "big").stat()
    assert st.st_size == 10 * MIB and st.st_uid == pw.pw_uid
    assert_nothing_left("kiwi-test", kiwi_run, helper)


def test_helper_range_owns_the_layer(kiwi_run, helper, disk_config):
    """With the helper's range as the map (0 is host 200000), the layer's
    root is the sandbox's root and a file made as uid 1000 inside is
    1000's there (rootless, the command holds no CAP_CHOWN to test more)."""
    r = run_as("kiwi-test", kiwi_run, helper, [*RANGE, "--user", "1000:1000", "--disk", "8M", "--disk-backend", "loop"],
               ["/bin/sh", "-c", "touch /tmp/f && stat -c %u:%g /tmp/f; stat -c %u:%g:%a /tmp; "
                                 "dd if=/dev/zero of=/tmp/big bs=1M count=16 2>&1; echo dd=$?"])
    assert r.returncode == 0, explain(r)
    lines = r.stdout.splitlines()
    assert lines[:2] == ["1000:1000", "0:0:1777"], explain(r)
    assert "No space left on device" in r.stdout and "dd=1" in r.stdout, explain(r)
    assert_nothing_left("kiwi-test", kiwi_run, helper)


def test_host_holds_at_most_the_bound_and_nothing_after_kill_9(kiwi_run, helper, disk_config, users):
    """While the sandbox writes far past its bound, its loop device (the
    one over the helper's image) is exactly the bound long and the image
    holds at most that on the host's filesystem; kiwi-run killed with
    SIGKILL: the helper sees its caller go, shuts the filesystem down and
    frees the image, the loop device clears itself, nothing is left."""
    kr, rootfs = kiwi_run
    argv = ["setpriv", "--reuid=kiwi-test", "--regid=kiwi-test", "--init-groups", "env", "-i",
            "PATH=/usr/bin:/bin", f"KIWI_HELPER={helper}", str(kr), "run", "--rootfs", str(rootfs),
            "--disk", "16M", "--disk-backend", "loop", "--",
            "/bin/sh", "-c", "dd if=/dev/zero of=/tmp/big bs=1M count=64 2>/dev/null; echo ready; sleep 60"]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "ready\n", p.stderr.read()
        helpers = helper_processes(helper)
        assert len(helpers) == 1, helpers
        held = images_held(helpers[0])
        assert len(held) == 1, held
        (image, blocks), = held.items()
        assert image.endswith("(deleted)"), image   # never had a name to leave behind
        assert blocks <= 16 * MIB, held
        name, size = loops()[image]
        assert size == 16 * MIB, (name, size)
        # setpriv and env exec: p.pid is kiwi-run's own
        assert os.readlink(f"/proc/{p.pid}/exe") == str(kr)
        os.kill(p.pid, signal.SIGKILL)
    finally:
        p.kill()
        p.communicate()
    deadline = time.monotonic() + 20
    while helper_processes(helper) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert wait_gone(image), loops().get(image)
    assert_nothing_left("kiwi-test", kiwi_run, helper)


def test_more_than_the_bound_is_refused(kiwi_run, helper, disk_config):
    r = run_as("kiwi-test", kiwi_run, helper, ["--disk", "32M", "--disk-backend", "loop"], ["true"])
    refused(r, "kiwi-helper refused", "max_disk", "32M", "16M")
    assert_nothing_left("kiwi-test", kiwi_run, helper)


def test_disk_not_allowed_by_the_config(kiwi_run, helper, disk_config, users):
    disk_config.write(disk_rules(users, max_disk=None, ops=("idmap",)))
    r = run_as("kiwi-test", kiwi_run, helper, ["--disk", "8M", "--disk-backend", "loop"], ["true"])
    refused(r, "kiwi-helper refused", "disk is not allowed")
    assert_nothing_left("kiwi-test", kiwi_run, helper)


def test_disk_dir_is_roots(kiwi_run, helper, disk_config, install_dir):
    r = run_as("kiwi-test", kiwi_run, helper, ["--disk", "8M", "--disk-backend", "loop", "--disk-dir",
                                                str(install_dir)], ["true"])
    refused(r, "--disk-dir")
    assert_nothing_left("kiwi-test", kiwi_run, helper)


def test_another_users_sandbox_is_refused(clients, disk_config):
    """kiwi-test names kiwi-test2's waiting process: refused before any
    image is made."""
    other = clients("kiwi-test2")
    theirs = other.call("sandbox")
    c = clients()
    c.start()
    before = set(loops())
    helper_refused(c.request({"op": "disk", "size": "8M"}, [{"pid": theirs["pid"]}]), "not yours")
    assert set(loops()) - before == set()


def test_a_bound_in_the_request_is_checked_before_anything(clients, disk_config):
    c = clients()
    c.start()
    sb = c.call("sandbox")
    before = set(loops())
    helper_refused(c.request({"op": "disk", "size": 16 * MIB + 1}, [{"sandbox": sb["id"]}]), "max_disk")
    helper_refused(c.request({"op": "disk", "size": 4096}, [{"sandbox": sb["id"]}]), "1M")
    helper_refused(c.request({"op": "disk", "size": "8M", "dir": "/tmp"}, [{"sandbox": sb["id"]}]), "unknown key")
    assert set(loops()) - before == set()


def test_a_mount_kept_past_the_session_takes_no_more(clients, disk_config, users):
    """A caller that keeps the disk's mount after its session (its own
    sandbox attached nothing: the fd alone) writes through it until the
    session ends; then the helper has shut the filesystem down, and a
    write fails (EIO): kept mounts cannot add up past the bounds."""
    c = clients()
    c.start()
    sb = c.call("sandbox")
    assert c.request(idmap(users), [{"sandbox": sb["id"]}]) == {"ok": True}
    ans = c.call("request_keep_fd", req={"op": "disk", "size": "8M"}, fds=[{"sandbox": sb["id"]}], name="disk")
    assert ans == {"ok": True, "with_fd": True}, ans
    assert c.call("create_at", name="disk", path="before") == {"errno": 0}
    assert c.call("close")["status"] == 0       # the session's end: the helper is gone
    assert c.call("create_at", name="disk", path="after") == {"errno": 5}   # EIO


def test_cap_sys_admin_is_never_effective_outside_its_steps(clients, disk_config, users):
    """The disk operation holds CAP_SYS_ADMIN but raises it only around
    the mount, the idmap and the final shutdown; once the disk is made,
    only it is left (for that shutdown), still not effective."""
    from test_hardening import CAP_SETGID, CAP_SETUID, status_of
    sys_admin = 1 << 21

    def caps(pid):
        st = status_of(pid)
        return int(st["CapPrm"][0], 16), int(st["CapEff"][0], 16), int(st["CapBnd"][0], 16)

    c = clients()
    pid = c.start()
    assert c.request({"op": "nothing"})["ok"] is False   # serving: the drop is done
    both = (1 << CAP_SETGID) | (1 << CAP_SETUID)
    assert caps(pid) == (both | sys_admin, both, both | sys_admin)
    sb = c.call("sandbox")
    assert c.request(idmap(users), [{"sandbox": sb["id"]}]) == {"ok": True}
    assert caps(pid)[:2] == ((1 << CAP_SETUID) | sys_admin, 1 << CAP_SETUID)
    assert c.request({"op": "disk", "size": "4M"}, [{"sandbox": sb["id"]}]) == {"ok": True}
    assert caps(pid)[:2] == (sys_admin, 0)
    ans = c.request({"op": "disk", "size": "4M"}, [{"sandbox": sb["id"]}])
    assert ans["ok"] is False and "done already" in ans["error"], ans


def test_a_session_on_the_helpers_disk(kiwi_run, helper, disk_config):
    """A rootless session keeps its helper, and so its disk, until it is
    destroyed: the bound holds across execs, and destroy leaves no loop
    device over the helper's image and no helper."""
    r = as_user("kiwi-test", kiwi_run[0], ["session", "create", "--rootfs", str(kiwi_run[1]), "--disk", "16M",
                                           "--disk-backend", "loop"], helper)
    assert r.returncode == 0, explain(r)
    sid = r.stdout.strip()
    try:
        helpers = helper_processes(helper)
        assert len(helpers) == 1, helpers
        (image, _), = images_held(helpers[0]).items()
        assert loops()[image][1] == 16 * MIB
        r = as_user("kiwi-test", kiwi_run[0], ["session", "exec", sid, "--", "/bin/sh", "-c",
                                               "dd if=/dev/zero of=/tmp/a bs=1M count=10 && echo a-ok"], helper)
        assert r.returncode == 0 and "a-ok" in r.stdout, explain(r)
        r = as_user("kiwi-test", kiwi_run[0], ["session", "exec", sid, "--", "/bin/sh", "-c",
                                               "dd if=/dev/zero of=/tmp/b bs=1M count=10"], helper)
        assert r.returncode == 1 and "No space left on device" in r.stderr, explain(r)
    finally:
        d = as_user("kiwi-test", kiwi_run[0], ["session", "destroy", sid], helper)
    assert d.returncode == 0, explain(d)
    deadline = time.monotonic() + 20
    while helper_processes(helper) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert wait_gone(image), loops().get(image)
    assert_nothing_left("kiwi-test", kiwi_run, helper)
