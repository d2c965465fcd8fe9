# SPDX-License-Identifier: Apache-2.0
"""kiwi-run as a user asking kiwi-helper for a multi-id map (issue 8):
--uidmap, --gidmap and --user end to end through the real setuid helper
(the maps the kernel shows inside, who owns on the host what the sandbox
writes), and every map not allotted refused in the helper's words, with
exit 125, one line, and nothing left behind."""
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import world  # noqa: F401 (fixture)
from fakenet import leftovers

RANGE = ["--uidmap", "0:200000:65536", "--gidmap", "0:200000:65536"]   # kiwi-test's, in default_rules
PROBE = "/usr/local/bin/netprobe"
EGRESS = ["--network", "egress", "--egress", "public_internet", "--allow-cidr", "203.0.113.0/24",
          "--dns", "192.0.2.53"]


def as_user(user, kr, args, helper, prefix=()):
    argv = [*prefix, "setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups",
            "env", "-i", "PATH=/usr/bin:/bin", f"KIWI_HELPER={helper}", str(kr), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def run_as(user, kiwi_run, helper, opts, cmd, prefix=()):
    kr, rootfs = kiwi_run
    return as_user(user, kr, ["run", "--rootfs", str(rootfs), *opts, "--", *cmd], helper, prefix)


def explain(r):
    return f"exit {r.returncode}\n--- stdout\n{r.stdout}--- stderr\n{r.stderr}"


def helper_processes(helper):
    """Live processes running the test helper's binary."""
    found = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if os.readlink(p / "exe") == str(helper):
                    found.append(int(p.name))
            except OSError:
                pass
    return found


def processes_of(uids):
    """Live (not zombie: a dead container's init waits for the host's init
    to reap it) processes of the given host uids."""
    found = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if p.stat().st_uid in uids and (p / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(p.name))
            except (OSError, IndexError):
                pass
    return found


def assert_nothing_left(user, kiwi_run, helper):
    assert helper_processes(helper) == []
    assert processes_of(range(200000, 200000 + 65536)) == []
    r = as_user(user, kiwi_run[0], ["list", "--json"], helper)
    assert r.returncode == 0, explain(r)
    listed = json.loads(r.stdout)
    listed = listed["sandboxes"] if isinstance(listed, dict) else listed
    assert [e for e in listed if ours(e, kiwi_run[0])] == [], r.stdout


def ours(entry, kiwi_run):
    """A sandbox this test's kiwi-run (its own copy) supervises, or one
    whose supervisor is gone: another run of the suite on a shared host
    lists its own as the same user."""
    try:
        return os.readlink(f"/proc/{entry['supervisor_pid']}/exe") == str(kiwi_run)
    except (OSError, KeyError, TypeError):
        return True


def owned_dir(install_dir, name, uid):
    d = install_dir / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(mode=0o755)
    os.chown(d, uid, uid)
    d.chmod(0o755)
    return d


def refused(r, *words):
    assert r.returncode == 125, explain(r)
    assert r.stdout == "" and r.stderr.count("\n") == 1 and r.stderr.startswith("kiwi-run: "), explain(r)
    for w in words:
        assert w in r.stderr, f"the message should say {w!r}: {explain(r)}"


def test_allotted_range_end_to_end(kiwi_run, helper, config, install_dir):
    d = owned_dir(install_dir, "work-idmap", 200000)
    r = run_as("kiwi-test", kiwi_run, helper, [*RANGE, "--bind", f"{d}:/workspace"],
               ["/bin/sh", "-c", "cat /proc/self/uid_map; cat /proc/self/gid_map; cat /proc/self/setgroups; "
                                 "id -u; touch /workspace/made; sleep 0.3"])
    assert r.returncode == 0, explain(r)
    assert [l.split() for l in r.stdout.splitlines()] == [
        ["0", "200000", "65536"], ["0", "200000", "65536"], ["deny"], ["0"]], explain(r)
    st = os.stat(d / "made")
    assert (st.st_uid, st.st_gid) == (200000, 200000)
    assert_nothing_left("kiwi-test", kiwi_run, helper)


def test_user_inside_the_allotted_range(kiwi_run, helper, config, install_dir):
    d = owned_dir(install_dir, "work-idmap-user", 201000)
    r = run_as("kiwi-test", kiwi_run, helper, [*RANGE, "--user", "1000:1000", "--bind", f"{d}:/workspace"],
               ["/bin/sh", "-c", "id -u; id -g; touch /workspace/made; grep -E '^Cap(Prm|Eff|Bnd)' /proc/self/status"])
    assert r.returncode == 0, explain(r)
    lines = r.stdout.splitlines()
    assert lines[:2] == ["1000", "1000"], explain(r)
    assert [l.split()[1] for l in lines[2:]] == ["0000000000000000"] * 3, explain(r)
    st = os.stat(d / "made")
    assert (st.st_uid, st.st_gid) == (201000, 201000)
    assert_nothing_left("kiwi-test", kiwi_run, helper)


def test_subids_of_the_caller_work_with_its_own_id(kiwi_run, helper, config, users):
    """kiwi-test2's rule allots its /etc/subuid range; its own ids may sit
    beside it, as newuidmap users map them."""
    pw = users["kiwi-test2"]
    opts = ["--uidmap", f"0:{pw.pw_uid}:1", "--uidmap", "1:300000:65536",
            "--gidmap", f"0:{pw.pw_gid}:1", "--gidmap", "1:300000:65536", "--user", "5:5"]
    r = run_as("kiwi-test2", kiwi_run, helper, opts, ["/bin/sh", "-c", "cat /proc/self/uid_map; id -u"])
    assert r.returncode == 0, explain(r)
    assert [l.split() for l in r.stdout.splitlines()] == [
        ["0", str(pw.pw_uid), "1"], ["1", "300000", "65536"], ["5"]], explain(r)
    assert_nothing_left("kiwi-test2", kiwi_run, helper)


@pytest.mark.parametrize("opts,words", [
    (["--uidmap", "0:0:1", "--gidmap", "0:200000:1"], ["kiwi-helper refused", "host root"]),
    (["--uidmap", "0:200000:1", "--gidmap", "0:0:65536"], ["kiwi-helper refused", "gid_map", "host root"]),
    (["--uidmap", "0:300000:10"], ["kiwi-helper refused", "not allotted"]),      # kiwi-test2's subids
    (["--uidmap", "0:200000:65537"], ["kiwi-helper refused", "not allotted"]),   # one past the range
])
def test_maps_not_allotted_are_refused(kiwi_run, helper, config, opts, words):
    r = run_as("kiwi-test", kiwi_run, helper, opts, ["true"])
    refused(r, *words)
    assert_nothing_left("kiwi-test", kiwi_run, helper)


def test_another_users_uid_is_refused(kiwi_run, helper, config, users):
    other = users["kiwi-test2"].pw_uid
    r = run_as("kiwi-test", kiwi_run, helper, ["--uidmap", f"0:{other}:1", "--gidmap", "0:200000:1"], ["true"])
    refused(r, "kiwi-helper refused", "not allotted", f"{other}..{other}")
    assert_nothing_left("kiwi-test", kiwi_run, helper)


def test_more_extents_than_allowed_are_refused(kiwi_run, helper, config):
    """The helper takes 5 extents per map; kiwi-run says so before it is asked."""
    opts = [x for i in range(6) for x in ("--uidmap", f"{i}:{200000 + i}:1")]
    r = run_as("kiwi-test", kiwi_run, helper, opts, ["true"])
    refused(r, "--uidmap", "at most 5 extents")
    assert_nothing_left("kiwi-test", kiwi_run, helper)


def test_op_not_allowed_by_the_config(kiwi_run, helper, config, users):
    rules = [{"user": "kiwi-test", "operations": ["egress"], "uids": [[200000, 65536]],
              "gids": [[200000, 65536]], "egress": ["public_internet"]}]
    config.write(rules)
    r = run_as("kiwi-test", kiwi_run, helper, RANGE, ["true"])
    refused(r, "kiwi-helper refused", "idmap is not allowed")
    assert_nothing_left("kiwi-test", kiwi_run, helper)


def test_helper_missing_is_said_plainly(kiwi_run, config):
    r = run_as("kiwi-test", kiwi_run, "/nonexistent/kiwi-helper", RANGE, ["true"])
    refused(r, "/nonexistent/kiwi-helper", "kiwi-helper")
    assert processes_of(range(200000, 200000 + 65536)) == []


def test_own_ids_need_no_helper(kiwi_run, config, users):
    """A map of the caller's own ids alone is written by kiwi-run itself."""
    pw = users["kiwi-test"]
    opts = ["--uidmap", f"1000:{pw.pw_uid}:1", "--gidmap", f"1000:{pw.pw_gid}:1", "--user", "1000:1000"]
    r = run_as("kiwi-test", kiwi_run, "/nonexistent/kiwi-helper", opts, ["/bin/sh", "-c", "cat /proc/self/uid_map; id -u"])
    assert r.returncode == 0, explain(r)
    assert [l.split() for l in r.stdout.splitlines()] == [["1000", str(pw.pw_uid), "1"], ["1000"]], explain(r)


def test_egress_and_idmap_share_one_helper(world, kiwi_run, helper, config):
    """One helper session: the maps first (binding it to the sandbox),
    then the veth into the same sandbox; the command, as uid 1000 of the
    allotted range, reaches the fake upstream."""
    r = run_as("kiwi-test", kiwi_run, helper, [*EGRESS, *RANGE, "--user", "1000:1000"],
               ["/bin/sh", "-c", f"cat /proc/self/uid_map; id -u; {PROBE} tcp 203.0.113.10 80"],
               prefix=world.hx())
    assert r.returncode == 0, explain(r)
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["0", "200000", "65536"] and lines[1] == "1000", explain(r)
    got = json.loads(lines[2])
    assert got["ok"] and got["reply"], explain(r)
    assert leftovers(world.host) == ([], [])
    assert_nothing_left("kiwi-test", kiwi_run, helper)


def test_kill_9_of_kiwi_run_leaves_nothing(kiwi_run, helper, config):
    """pid 1 runs as an id of the range (its parent-death signal armed
    again after the change): kiwi-run killed, the sandbox and the helper go."""
    kr, rootfs = kiwi_run
    argv = ["setpriv", "--reuid=kiwi-test", "--regid=kiwi-test", "--init-groups", "env", "-i",
            "PATH=/usr/bin:/bin", f"KIWI_HELPER={helper}", str(kr), "run", "--rootfs", str(rootfs),
            *RANGE, "--user", "1000:1000", "--", "/bin/sh", "-c", "echo up; sleep 600"]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    assert p.stdout.readline() == "up\n"
    assert processes_of([201000]), "the command should run as host uid 201000"
    p.kill()
    p.wait()
    # bounded by meson's timeout, not by a clock of ours
    while helper_processes(helper) or processes_of(range(200000, 200000 + 65536)):
        time.sleep(0.05)
    assert_nothing_left("kiwi-test", kiwi_run, helper)


def oci(user, kr, state, *args, helper, stdout=None):
    """kiwi-run as an OCI runtime. Files, not pipes: a created container's
    init holds the streams it inherited until it ends."""
    argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "env", "-i",
            "PATH=/usr/bin:/bin", f"KIWI_HELPER={helper}", str(kr), "--root", str(state), *args]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        r = subprocess.run(argv, stdout=stdout or out, stderr=err, stdin=subprocess.DEVNULL, timeout=120)
        out.seek(0)
        err.seek(0)
        r.stdout, r.stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    return r


def test_oci_create_asks_the_helper_for_a_map_beyond_the_callers_ids(kiwi_run, helper, config, install_dir, users):
    """kiwi-run as an OCI runtime, not root: linux.uidMappings of the
    allotted range come from kiwi-helper (preferred over newuidmap), and a
    range not allotted is refused in its words."""
    kr, rootfs = kiwi_run
    pw = users["kiwi-test"]
    work = install_dir / "oci-idmap"
    shutil.rmtree(work, ignore_errors=True)
    (work / "state").mkdir(parents=True)
    for d in (work, work / "state"):
        os.chown(d, pw.pw_uid, pw.pw_gid)
    r = oci("kiwi-test", kr, work / "state", "spec", "--bundle", str(work), "--rootless", helper=helper)
    assert r.returncode == 0, r.stderr
    cfg = json.loads((work / "config.json").read_text())
    cfg["process"].update(terminal=False, args=["/bin/sh", "-c", "cat /proc/self/uid_map /proc/self/gid_map; id -u"])
    cfg["root"]["path"] = str(rootfs)
    for key in ("uidMappings", "gidMappings"):
        cfg["linux"][key] = [{"containerID": 0, "hostID": 200000, "size": 65536}]
    (work / "config.json").write_text(json.dumps(cfg))
    out = work / "out"
    with open(out, "w") as f:
        os.chown(out, pw.pw_uid, pw.pw_gid)
        r = oci("kiwi-test", kr, work / "state", "create", "--bundle", str(work), "idm", helper=helper, stdout=f)
    assert r.returncode == 0, r.stderr
    assert helper_processes(helper) == [], "the helper's session ends with create"
    r = oci("kiwi-test", kr, work / "state", "start", "idm", helper=helper)
    assert r.returncode == 0, r.stderr
    # bounded by meson's timeout
    while json.loads(oci("kiwi-test", kr, work / "state", "state", "idm", helper=helper).stdout)["status"] != "stopped":
        time.sleep(0.05)
    assert oci("kiwi-test", kr, work / "state", "delete", "idm", helper=helper).returncode == 0
    assert [l.split() for l in out.read_text().splitlines()] == [
        ["0", "200000", "65536"], ["0", "200000", "65536"], ["0"]], out.read_text()

    for key in ("uidMappings", "gidMappings"):
        cfg["linux"][key] = [{"containerID": 0, "hostID": 300000, "size": 10}]   # kiwi-test2's subids
    (work / "config.json").write_text(json.dumps(cfg))
    r = oci("kiwi-test", kr, work / "state", "create", "--bundle", str(work), "idm2", helper=helper)
    assert r.returncode == 1, r.stderr   # an OCI runtime's failure, as runc's
    assert "kiwi-helper refused" in r.stderr and "not allotted" in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    assert list((work / "state").iterdir()) == []
    assert_nothing_left("kiwi-test", kiwi_run, helper)


def _pure_v2():
    try:
        return {"memory", "pids", "cpu"} <= set(Path("/sys/fs/cgroup/cgroup.controllers").read_text().split())
    except OSError:
        return False


CG_RULES = [{"user": "kiwi-test", "operations": ["idmap", "cgroup"], "uids": [[200000, 65536]],
             "gids": [[200000, 65536]], "max_pids": 64, "max_sandboxes": 2}]


@pytest.mark.skipif(not _pure_v2(), reason="needs pids in the unified hierarchy (the VM lane)")
def test_limits_and_idmap_share_one_helper(kiwi_run, helper, config, users, install_dir):
    """cgroup-prepare before clone, then the maps, then cgroup-attach, on
    one session: the command runs as uid 1000 of the range, in the
    helper's cgroup, under its pids limit."""
    config.write(CG_RULES)
    d = owned_dir(install_dir, "verdict-idmap", users["kiwi-test"].pw_uid)
    v = d / "v.json"
    r = run_as("kiwi-test", kiwi_run, helper, [*RANGE, "--user", "1000:1000", "--pids", "20", "--verdict", str(v)],
               ["/bin/sh", "-c", "cat /proc/self/uid_map; id -u; cat /proc/self/cgroup; "
                                 "for i in $(seq 30); do sleep 2 & done 2>/dev/null; wait"])
    # the shell's own exit (a fork it could not make) is not the point
    assert "kiwi-run:" not in r.stderr, explain(r)
    assert [l.split() for l in r.stdout.splitlines()] == [["0", "200000", "65536"], ["1000"], ["0::/"]], explain(r)
    verdict = json.loads(v.read_text())
    assert verdict["error"] is None and verdict["started"] is True, verdict
    assert verdict["cgroup"].startswith("/kiwi.slice/kiwi-"), verdict
    assert verdict["pids_limit_hit"] is True, verdict
    assert not Path("/sys/fs/cgroup", verdict["cgroup"].lstrip("/")).exists()
    assert_nothing_left("kiwi-test", kiwi_run, helper)


@pytest.mark.skipif(_pure_v2(), reason="the hybrid host's refusal")
def test_limits_refused_on_a_hybrid_host_with_a_map_asked(kiwi_run, helper, config):
    config.write(CG_RULES)
    r = run_as("kiwi-test", kiwi_run, helper, [*RANGE, "--pids", "20"], ["true"])
    refused(r, "hybrid")
    assert_nothing_left("kiwi-test", kiwi_run, helper)


def test_a_helper_that_never_answers_does_not_hang_kiwi_run(kiwi_run, install_dir, config):
    """Issue 20: kiwi_helper_exchange waited for the answer without a
    deadline, with kiwi-run's signals blocked. A helper that reads the
    request and never answers (it ends when its socket closes) now costs
    30 s and one plain line, exit 125."""
    mute = install_dir / "mute-helper"
    mute.write_text("#!/bin/sh\nexec cat <&3 >/dev/null\n")
    mute.chmod(0o755)
    r = run_as("kiwi-test", kiwi_run, mute, ["--uidmap", "0:200000:65536"], ["true"])
    assert r.returncode == 125, explain(r)
    assert r.stderr.count("\n") == 1 and "did not answer within 30 s" in r.stderr, explain(r)


def test_a_helper_killed_during_the_run_is_a_cleanup_error(kiwi_run, helper, config):
    """Root kills the run's kiwi-helper while the command runs: the run
    still ends with its command and its verdict, and then says in one line
    that the helper's cleanup did not end, instead of staying silent (the
    verdict is written before the helper is stopped: it never waits for
    the teardown)."""
    import signal
    vdir = Path(tempfile.mkdtemp(prefix="kiwi-helper-kill-", dir="/var/tmp"))
    vdir.chmod(0o777)
    verdict = vdir / "v.json"
    kr, rootfs = kiwi_run
    argv = ["setpriv", "--reuid=kiwi-test", "--regid=kiwi-test", "--init-groups", "env", "-i",
            "PATH=/usr/bin:/bin", f"KIWI_HELPER={helper}", str(kr), "run", "--rootfs", str(rootfs), *RANGE,
            "--verdict", str(verdict), "--", "/bin/sh", "-c", "sleep 3; echo done"]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        def ppid(pid):
            try:
                return int(Path(f"/proc/{pid}/status").read_text().split("PPid:")[1].split()[0])
            except OSError:
                return 0

        def below_the_run(pid):
            while pid > 1:
                pid = ppid(pid)
                if pid == p.pid:
                    return True
            return False

        def ours():
            return [h for h in helper_processes(helper) if below_the_run(h)]
        def command_runs():
            return any(below_the_run(q) and Path(f"/proc/{q}/comm").read_text().strip() == "sleep"
                       for q in processes_of(range(200000, 200000 + 65536)))
        mine = []
        for _ in range(500):  # the command runs: the helper's setup is over
            mine = ours()
            if mine and command_runs():
                break
            time.sleep(0.02)
        assert mine and command_runs(), "the run's helper or command never appeared"
        for h in mine:
            os.kill(h, signal.SIGKILL)
        out, err = p.communicate(timeout=60)
        assert out == "done\n", err
        v = json.loads(verdict.read_text())
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        shutil.rmtree(vdir)
    assert v["exit_code"] == 0 and v["error"] is None, v
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "kiwi-helper" in lines[0] and "signal 9" in lines[0], err
