# SPDX-License-Identifier: Apache-2.0
"""`kiwi-run list` and `kiwi-run kill`: the registry of running sandboxes."""
import json
import os
import re
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import OTHER_USER, Sandbox, explain


def registry_dir(kiwi, env):
    """Where kiwi-run keeps the state files of KIWI's user under ENV."""
    if kiwi.mode == "root":
        return Path("/run/kiwi/sandboxes")
    xdg = env.get("XDG_RUNTIME_DIR")
    if xdg and os.stat(xdg).st_uid == kiwi.uid:
        return Path(xdg) / "kiwi" / "sandboxes"
    return Path(f"/tmp/kiwi-run-{kiwi.uid}")


def no_xdg(kiwi):
    env = kiwi.env()
    env.pop("XDG_RUNTIME_DIR", None)
    return env


def one_error_line(r, *words):
    assert r.returncode == 125, explain(r)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kiwi-run: "), explain(r)
    for w in words:
        assert w in lines[0], explain(r)


def test_list_shows_a_running_sandbox(kiwi, sandbox):
    s = sandbox(env=no_xdg(kiwi))
    e = s.wait_listed()
    assert re.fullmatch(r"[0-9a-f]{12}", e["id"]), e
    assert e["uid"] == kiwi.uid
    assert e["phase"] is None and e["cgroup"] is None and e["network"] == "none"
    assert e["command"] == "sleep 1000"
    assert 0 <= e["age_s"] < 3600
    # pid is the sandbox's init: a child of kiwi-run, pid 1 of its namespace
    status = Path(f"/proc/{e['pid']}/status").read_text()
    assert f"PPid:\t{s.proc.pid}\n" in status
    assert re.search(r"^NSpid:\t\d+\t1$", status, re.M), status
    # the table names the same sandbox, one line under the header
    r = s.ops("list")
    assert r.returncode == 0, explain(r)
    header, *rows = r.stdout.splitlines()
    assert header.split() == ["ID", "PID", "PHASE", "CGROUP", "NETWORK", "AGE", "COMMAND"]
    row = [l.split() for l in rows if l.startswith(e["id"])]
    assert row and row[0][:5] == [e["id"], str(e["pid"]), "-", "-", "none"], r.stdout
    assert row[0][6:] == ["sleep", "1000"]
    # the state file, closed to others
    f = registry_dir(kiwi, s.env) / f"{e['id']}.json"
    st = f.stat()
    assert st.st_uid == kiwi.uid and st.st_mode & 0o077 == 0
    assert f.parent.stat().st_mode & 0o077 == 0


@pytest.mark.parametrize("sig,status", [(None, 128 + 15), ("KILL", 128 + 9), ("INT", 128 + 2),
                                        ("SIGHUP", 128 + 1), ("15", 128 + 15)])
def test_kill_ends_it_and_kiwi_run_reports_the_signal(kiwi, sandbox, sig, status):
    s = sandbox(env=no_xdg(kiwi))
    e = s.wait_listed()
    r = s.ops("kill", e["id"][:6], *([sig] if sig else []))
    assert r.returncode == 0 and r.stderr == "", explain(r)
    code, out, err = s.finish()
    assert code == status, err
    assert s.listed() is None
    assert not (registry_dir(kiwi, s.env) / f"{e['id']}.json").exists()


def test_kill_unknown_id_bad_id_bad_signal(kiwi, sandbox):
    s = sandbox(env=no_xdg(kiwi))
    e = s.wait_listed()
    one_error_line(s.ops("kill", "0123456789ab" if e["id"] != "0123456789ab" else "ba9876543210"),
                   "kill", "no running sandbox")
    one_error_line(s.ops("kill", "not-an-id"), "kill", "not a sandbox id")
    one_error_line(s.ops("kill", e["id"], "STOP"), "kill", "STOP")
    one_error_line(s.ops("kill", e["id"], "TERM", "extra"), "kill", "extra")
    one_error_line(s.ops("kill"), "kill", "no sandbox id")
    one_error_line(s.ops("list", "--bogus"), "list", "--bogus")
    assert s.proc.poll() is None, "a refused kill ended the sandbox"


def test_entry_removed_on_every_path(kiwi, scratch):
    """Success, a command that fails, one that cannot be found, a setup
    failure before clone: the private registry is empty after each."""
    env = kiwi.env()
    xdg = Path(tempfile.mkdtemp(prefix="xdg-", dir=scratch))
    xdg.chmod(0o700)
    os.chown(xdg, kiwi.uid, kiwi.gid)
    if kiwi.mode == "root":
        return entry_removed_on_every_path_as_root(kiwi)
    env["XDG_RUNTIME_DIR"] = str(xdg)
    reg = xdg / "kiwi" / "sandboxes"
    # (the entry is made 100 ms in: the sleeps make sure it was)
    for cmd, want in ((["true"], 0), (["sh", "-c", "sleep 0.3"], 0), (["sh", "-c", "sleep 0.3; exit 3"], 3),
                      (["/no/such/program"], 127), (["sh", "-c", "sleep 0.3; kill -9 $$"], 137)):
        r = subprocess.run(kiwi.argv(cmd), capture_output=True, text=True, env=env, timeout=10,
                           stdin=subprocess.DEVNULL)
        assert r.returncode == want, explain(r)
        assert not reg.exists() or list(reg.iterdir()) == [], (cmd, list(reg.iterdir()))
    assert reg.is_dir()
    r = subprocess.run(kiwi.argv(["true"], rootfs="/no/such/rootfs"), capture_output=True,
                       text=True, env=env, timeout=10)
    assert r.returncode == 125 and list(reg.iterdir()) == []
    # while one runs, its entry is in this directory (XDG_RUNTIME_DIR is used)
    s = Sandbox(kiwi, env=env)
    try:
        e = s.wait_listed()
        assert [p.name for p in reg.iterdir()] == [f"{e['id']}.json"]
        assert s.ops("kill", e["id"]).returncode == 0
        assert s.finish()[0] == 128 + 15
    finally:
        s.close()
    assert list(reg.iterdir()) == []


ROOT_PATHS = r"""
set -u
mount -t tmpfs kiwi-ops-test /run/kiwi
for cmd in true "sleep 0.3" "sh -c 'sleep 0.3; exit 3'" /no/such/program; do
    eval "\"\$KIWI\" run --rootfs \"\$ROOTFS\" -- $cmd"; echo "status $?"; ls -A /run/kiwi/sandboxes
done
"$KIWI" run --rootfs /no/such/rootfs -- true 2>/dev/null; echo "status $?"; ls -A /run/kiwi/sandboxes
ls -d /run/kiwi/sandboxes
"""


def entry_removed_on_every_path_as_root(kiwi):
    """Root's registry is shared with every root kiwi-run of the host: look
    at a fresh one, a tmpfs over /run/kiwi in a private mount namespace
    (which also takes the path that makes the directory)."""
    env = dict(kiwi.env(), KIWI=kiwi.binary, ROOTFS=kiwi.rootfs)
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", ROOT_PATHS],
                       capture_output=True, text=True, env=env, timeout=60, stdin=subprocess.DEVNULL)
    # `ls -A` prints nothing for an empty (or, before the first entry was
    # ever made, missing) directory; the sleeps make sure one was made
    assert r.stdout.splitlines() == ["status 0", "status 0", "status 3", "status 127", "status 125",
                                     "/run/kiwi/sandboxes"], explain(r)


TMP_FALLBACK = r"""
set -u
mount -t tmpfs kiwi-ops-test /tmp
$AS $KIWI run --rootfs "$ROOTFS" -- sleep 1000 &
i=0
until ls /tmp/kiwi-run-$OWNER/*.json >/dev/null 2>&1 || [ $i -ge 200 ]; do sleep 0.05; i=$((i+1)); done
stat -c '%a %U' /tmp/kiwi-run-$OWNER
$AS $KIWI kill "$(basename /tmp/kiwi-run-$OWNER/*.json .json)"
wait $!; echo "status $?"
ls -A /tmp
"""


def test_tmp_fallback_is_removed_when_empty(kiwi):
    """Without XDG_RUNTIME_DIR, the registry is a 0700 /tmp/kiwi-run-UID,
    gone again with its last entry. Other sessions on this host run
    sandboxes as the same test user, so look at a /tmp of our own."""
    if kiwi.mode == "root":
        pytest.skip("root always uses /run/kiwi/sandboxes")
    if os.geteuid() != 0:
        pytest.skip("a private /tmp needs root")
    env = dict(no_xdg(kiwi), KIWI=kiwi.binary, ROOTFS=kiwi.rootfs, OWNER=str(kiwi.uid),
               AS=" ".join(kiwi.prefix))
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", TMP_FALLBACK],
                       capture_output=True, text=True, env=env, timeout=60, stdin=subprocess.DEVNULL)
    assert r.stdout.splitlines() == ["700 kiwi-test", "status 143"], explain(r)


SQUATTED = r"""
set -u
mount -t tmpfs kiwi-ops-test /tmp
# another local user takes the name first
$OTHER mkdir -m $MODE /tmp/kiwi-run-$OWNER
$AS $KIWI run --rootfs "$ROOTFS" -- sleep 1000 &
i=0; id=
until [ -n "$id" ] || [ $i -ge 200 ]; do
  id=$($AS $KIWI list --json | grep -o '"id":"[0-9a-f]*"' | cut -d'"' -f4)
  [ -n "$id" ] || sleep 0.05; i=$((i+1))
done
echo "listed ${id:+yes}"
stat -c '%a %U' /tmp/kiwi-run-$OWNER.*
$AS $KIWI kill "$id" || kill $!
wait $!; echo "status $?"
stat -c '%U' /tmp/kiwi-run-$OWNER
ls -A /tmp
"""


@pytest.mark.parametrize("mode", ["0755", "0700"])
def test_a_squatted_tmp_name_breaks_neither_list_nor_kill(kiwi, mode):
    """Issue 20: another local user creates /tmp/kiwi-run-UID first. The
    registry moves to a /tmp/kiwi-run-UID.XXXXXX of the owner's, found by
    owner and mode, so list and kill still work, and the squatter's
    directory is left alone (0700: the owner cannot even open it). A /tmp
    of our own, as above."""
    if kiwi.mode == "root":
        pytest.skip("root always uses /run/kiwi/sandboxes")
    if os.geteuid() != 0:
        pytest.skip("a private /tmp and a second user need root")
    env = dict(no_xdg(kiwi), KIWI=kiwi.binary, ROOTFS=kiwi.rootfs, OWNER=str(kiwi.uid),
               AS=" ".join(kiwi.prefix), OTHER=" ".join(OTHER_USER), MODE=mode)
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", SQUATTED],
                       capture_output=True, text=True, env=env, timeout=60, stdin=subprocess.DEVNULL)
    assert r.stdout.splitlines() == ["listed yes", "700 kiwi-test", "status 143", "nobody",
                                     f"kiwi-run-{kiwi.uid}"], explain(r)


def test_sigkill_of_kiwi_run_leaves_a_stale_entry_that_gc_removes(kiwi, sandbox):
    s = sandbox(env=no_xdg(kiwi))
    e = s.wait_listed()
    f = registry_dir(kiwi, s.env) / f"{e['id']}.json"
    s.proc.kill()
    s.finish()
    assert f.exists(), "the entry should outlive a SIGKILLed kiwi-run"
    # stale: not listed, and kill does not reach anything through it
    assert e["id"] not in s.ops("list").stdout
    assert e["id"] not in [x["id"] for x in json.loads(s.ops("list", "--json").stdout)]
    one_error_line(s.ops("kill", e["id"], "KILL"), "no running sandbox")
    r = s.ops("gc")
    assert r.returncode == 0, explain(r)  # rootless: nothing of the network to collect, and no error
    assert json.loads(r.stdout)["registry_removed"] >= 1
    assert not f.exists()


def as_other(kiwi):
    """A user who is neither root nor the owner of KIWI's sandboxes."""
    if kiwi.mode == "root":
        return ["setpriv", "--reuid=kiwi-test", "--regid=kiwi-test", "--init-groups"]
    return OTHER_USER


def test_another_user_cannot_list_or_kill(kiwi, sandbox):
    s = sandbox(env=no_xdg(kiwi))
    e = s.wait_listed()
    other = as_other(kiwi)
    env = no_xdg(kiwi)
    r = subprocess.run([*other, kiwi.binary, "list", "--json"], capture_output=True, text=True,
                       env=env, timeout=10)
    assert r.returncode == 0, explain(r)
    assert e["id"] not in r.stdout
    for sig in ("TERM", "KILL"):
        r = subprocess.run([*other, kiwi.binary, "kill", e["id"], sig], capture_output=True,
                           text=True, env=env, timeout=10)
        one_error_line(r, "no running sandbox")
    assert s.proc.poll() is None and s.listed() is not None


FORGER = r"""
import fcntl, json, os, sys
d, entry, holder = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
if holder == "forger":
    entry["supervisor_pid"] = os.getpid()
os.makedirs(d, mode=0o700, exist_ok=True)
fd = os.open(os.path.join(d, entry["id"] + ".json"), os.O_CREAT | os.O_RDWR, 0o600)
os.write(fd, json.dumps(entry).encode())
fcntl.flock(fd, fcntl.LOCK_EX)
print("ready", flush=True)
sys.stdin.read()
"""


@pytest.mark.parametrize("holder", ["victim", "forger"])
def test_forged_entry_cannot_reach_another_users_sandbox(kiwi, sandbox, scratch, holder):
    """Another user writes an entry of their own naming the victim's init as
    pid and, as supervisor, the victim's kiwi-run or the forger's own
    process (which then holds the lock, as a real supervisor would), and
    holds its lock: kill must refuse, the victim live on."""
    s = sandbox(env=no_xdg(kiwi))
    e = s.wait_listed()
    other = as_other(kiwi)
    uid = int(subprocess.run([*other, "id", "-u"], capture_output=True, text=True).stdout)
    xdg = Path(tempfile.mkdtemp(prefix="forge-", dir=scratch))
    xdg.chmod(0o700)
    os.chown(xdg, uid, -1)
    env = no_xdg(kiwi)
    env["XDG_RUNTIME_DIR"] = str(xdg)
    forged = {k: v for k, v in e.items() if k not in ("age_s", "started")}
    forged.update(id="f0f0f0f0f0f0", started_ns=time.time_ns(), version=1)
    locker = subprocess.Popen([*other, "/usr/bin/python3", "-c", FORGER,
                               str(xdg / "kiwi" / "sandboxes"), json.dumps(forged), holder],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert locker.stdout.readline() == "ready\n"
        r = subprocess.run([*other, kiwi.binary, "list", "--json"], capture_output=True,
                           text=True, env=env, timeout=10)
        listed = [x["id"] for x in json.loads(r.stdout)]
        assert listed == ([] if holder == "victim" else ["f0f0f0f0f0f0"]), listed
        for sig in ("TERM", "KILL"):
            r = subprocess.run([*other, kiwi.binary, "kill", forged["id"], sig], capture_output=True,
                               text=True, env=env, timeout=10)
            # TERM to the forger's own locker is its own business; KILL to
            # the victim's init and anything to the victim's kiwi-run is not
            if holder == "victim" or sig == "KILL":
                assert r.returncode == 125, explain(r)
        assert s.proc.poll() is None and s.listed() is not None
    finally:
        if locker.poll() is None:
            locker.stdin.close()
            locker.kill()
        locker.wait()


def test_kill_never_reaches_a_reused_pid(kiwi, sandbox):
    """A stale entry whose pids now belong to another process of the same
    user (what pid reuse looks like): kill must refuse, that process live
    on. The entry's kiwi-run no longer holds its lock, and that is what kill
    trusts, not the pid."""
    s = sandbox(env=no_xdg(kiwi))
    e = s.wait_listed()
    f = registry_dir(kiwi, s.env) / f"{e['id']}.json"
    s.proc.kill()
    s.finish()
    other = subprocess.Popen([*kiwi.prefix, "sleep", "1000"])
    try:
        state = json.loads(f.read_text())
        state.update(pid=other.pid, supervisor_pid=other.pid)
        f.write_text(json.dumps(state))
        for sig in ("TERM", "KILL"):
            one_error_line(s.ops("kill", e["id"], sig), "no running sandbox")
        assert other.poll() is None, "kill signalled a process that is not the sandbox"
        assert e["id"] not in s.ops("list").stdout
    finally:
        other.kill()
        other.wait()
        f.unlink(missing_ok=True)
