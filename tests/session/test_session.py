# SPDX-License-Identifier: Apache-2.0
"""kiwi-run session (kiwi-run-session(1)), root and rootless: one sandbox
across many execs, each with a verdict of its own; what an exec starts ends
with it; destroy proves a clean end; nobody else reaches a session."""
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import OTHER_USER, Session, explain

RUN_KEYS = {"version", "exit_code", "signal", "started", "started_at", "wall_ms", "cpu_user_ms",
            "cpu_sys_ms", "timed_out", "killed_by", "stdout_bytes", "stderr_bytes", "stdout_truncated",
            "stderr_truncated", "output_limit_hit", "disk_full", "oom_killed", "peak_memory_kib",
            "pids_limit_hit", "cgroup", "network", "error", "cleanup_error"}


def one_error_line(r, *words):
    assert r.returncode == 125, explain(r)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kiwi-run: "), explain(r)
    for w in words:
        assert w in lines[0], explain(r)


def test_state_persists_across_execs(session):
    s = session()
    assert s.sh("echo made-by-one > /tmp/state; mkdir -p /tmp/d && touch /tmp/d/f").returncode == 0
    r = s.sh("cat /tmp/state; ls /tmp/d")
    assert r.returncode == 0 and r.stdout == "made-by-one\nf\n", explain(r)
    assert s.listed(), "the session is not in `session list`"


def test_each_exec_has_its_own_verdict(session):
    s = session()
    p, v = s.exec_verdict("/bin/sh", "-c", "echo out; echo err >&2; exit 7")
    assert p.returncode == 7 and p.stdout == "out\n" and p.stderr == "err\n", explain(p)
    assert RUN_KEYS <= set(v), sorted(RUN_KEYS - set(v))
    assert v["exit_code"] == 7 and v["started"] and v["stdout_bytes"] == 4 and v["stderr_bytes"] == 4
    p, v = s.exec_verdict("/bin/sh", "-c", "kill -TERM $$")
    assert p.returncode == 128 + signal.SIGTERM and v["signal"] == signal.SIGTERM, explain(p)
    r = s.exec("/nonexistent/program")
    assert r.returncode == 127, explain(r)


def test_timeout_kills_the_exec_tree_not_the_session(session):
    s = session()
    t = time.monotonic()
    p, v = s.exec_verdict("/bin/sh", "-c", "sleep 300 & sleep 200 & sleep 100", opts=["--timeout", "1s"])
    assert time.monotonic() - t < 60, "the timeout did not end the exec"
    assert p.returncode == 137 and v["timed_out"] and v["killed_by"] == "timeout", explain(p)
    r = s.exec("ps", "-o", "pid,comm")
    assert r.returncode == 0 and "sleep" not in r.stdout, f"the timed-out exec left: {r.stdout}"
    assert s.exec("true").returncode == 0, "the session did not survive its exec's timeout"


def test_an_exec_whose_leader_is_killed_ends_with_its_tree(session):
    """The command runs as the session's user and may kill its own leader
    (its parent): the leader then reports nothing, and the exec's client
    ends the command and what it started itself (the exec's cgroup) instead
    of leaving that to the session: nothing of the exec is left after it,
    and the session takes the next exec."""
    s = session()
    if not s.exec_verdict("true")[1]["cgroup"]:
        pytest.skip("this session's execs have no cgroup of their own here: nothing ends a command "
                    "whose leader is gone but the command itself (kiwi-run-session(1), BUGS)")
    # After its start is reported (a leader killed before that makes the
    # exec a failed start, 126, its tree ended the same way).
    p, v = s.exec_verdict("/bin/sh", "-c", "sleep 304 & sleep 0.5; kill -9 $PPID; sleep 305")
    assert p.returncode == 137 and v["signal"] == 9 and not v["timed_out"], explain(p)
    r = s.exec("ps", "-o", "comm,args")
    assert r.returncode == 0 and "sleep 30" not in r.stdout, f"the exec left: {r.stdout}"
    assert s.exec("true").returncode == 0


def test_background_processes_end_with_their_exec_unless_kept(session):
    s = session()
    r = s.sh("nohup sleep 301 >/dev/null 2>&1 & setsid sleep 302 >/dev/null 2>&1 & echo started")
    assert r.returncode == 0 and r.stdout == "started\n", explain(r)
    r = s.exec("ps", "-o", "comm,args")
    assert "sleep 301" not in r.stdout and "sleep 302" not in r.stdout, r.stdout
    r = s.sh("sleep 303 >/dev/null 2>&1 &", opts=["--keep-background"])
    assert r.returncode == 0, explain(r)
    r = s.exec("ps", "-o", "comm,args")
    assert "sleep 303" in r.stdout, f"--keep-background did not keep it: {r.stdout}"


def test_env_per_exec_and_credentials(session, kiwi):
    s = session("--env", "BASE=from-create")
    r = s.sh('echo "$BASE $EXTRA ${KIWI_CANARY-unset}"', opts=["--env", "EXTRA=from-exec"])
    assert r.returncode == 0 and r.stdout == "from-create from-exec unset\n", explain(r)
    one_error_line(s.exec("true", opts=["--env", "OPENAI_API_KEY=sk-test"]), "OPENAI_API_KEY", "model-provider")
    env = kiwi.env({"ANTHROPIC_API_KEY": "sk-ant-test", "SAFE_VAR": "passed"})
    one_error_line(s.exec("true", opts=["--pass-env", "ANTHROPIC_API_KEY"], env=env), "ANTHROPIC_API_KEY")
    r = s.sh('echo "$SAFE_VAR"', opts=["--pass-env", "SAFE_VAR"], env=env)
    assert r.returncode == 0 and r.stdout == "passed\n", explain(r)
    r = subprocess.run(kiwi.raw_argv(["session", "create", "--rootfs", kiwi.rootfs, "--env", "OPENAI_API_KEY=x"]),
                       capture_output=True, text=True, env=kiwi.env(), timeout=30)
    one_error_line(r, "OPENAI_API_KEY")


def test_destroy_prints_a_clean_end(session, kiwi):
    s = session()
    assert s.sh("sleep 304 >/dev/null 2>&1 &", opts=["--keep-background"]).returncode == 0
    r = s.destroy()
    assert r.returncode == 0, explain(r)
    ev = json.loads(r.stdout)
    assert ev["id"] == s.id and ev["clean"] and ev["ended_by"] == "destroy", ev
    assert ev["processes_left"] == 0 and ev["mount_namespace_users"] == 0 and ev["socket_removed"], ev
    assert ev["cgroup_removed"] in (True, None), ev
    assert not s.listed()
    one_error_line(s.exec("true"), s.id)
    one_error_line(s.raw("session", "destroy", s.id), s.id)


def test_an_exec_running_when_the_session_is_destroyed_is_reported_killed(session, tmp_path):
    """The exec's verdict says its command was killed from outside (137,
    SIGKILL, killed_by external, its real wall time), not that kiwi-run
    failed (126, no time)."""
    s = session()
    ready = tmp_path / "ready"
    r_fd, w_fd = os.pipe()
    p = subprocess.Popen(s.kiwi.raw_argv(["session", "exec", s.id, "--verdict-fd", str(w_fd), "--",
                                          "/bin/sh", "-c", "echo up; exec sleep 305"]),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=s.kiwi.env(),
                         stdin=subprocess.DEVNULL, pass_fds=(w_fd,))
    os.close(w_fd)
    try:
        assert p.stdout.readline() == "up\n"
        time.sleep(0.3)
        assert s.destroy().returncode == 0
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    with os.fdopen(r_fd) as f:
        v = json.loads(f.read())
    assert p.returncode == 137, err
    assert v["signal"] == 9 and v["killed_by"] == "external" and v["started"], v
    assert v["wall_ms"] >= 300, v
    assert err == "", err


def test_destroy_reports_an_outside_process_in_its_mount_namespace(session, kiwi):
    """The evidence is no formality: a host process that joined the
    session's mount namespace (root's nsenter, for a rootless session too)
    keeps it alive, and destroy says so instead of calling the end clean:
    root counts it, a rootless supervisor cannot read whose namespace a
    process is in and says -1."""
    s = session()
    pid1 = s.listed()[0]["pid"]
    holder = subprocess.Popen(["nsenter", "-t", str(pid1), "-m", "sleep", "60"])
    try:
        deadline = time.monotonic() + 10
        while os.readlink(f"/proc/{holder.pid}/ns/mnt") != os.readlink(f"/proc/{pid1}/ns/mnt"):
            assert time.monotonic() < deadline, "nsenter never joined"
            time.sleep(0.05)
        r = s.destroy()
    finally:
        holder.kill()
        holder.wait()
    assert r.returncode == 125, explain(r)
    ev = json.loads(r.stdout)
    users = 1 if kiwi.mode == "root" else -1
    assert not ev["clean"] and ev["mount_namespace_users"] == users and ev["processes_left"] == 0, ev


def test_bad_input_one_line(session, kiwi):
    s = session()
    one_error_line(s.raw("session", "exec", "0123456789ab", "--", "true"), "0123456789ab")
    one_error_line(s.raw("session", "exec", "not-hex", "--", "true"))
    one_error_line(s.exec("true", opts=["--memory", "1G"]), "--memory")
    for flag, value in (("--disk-backend", "loop"), ("--disk-dir", "/var/tmp")):
        one_error_line(s.exec("true", opts=[flag, value]), flag)
    one_error_line(s.raw("session", "exec", s.id, "--rootfs", kiwi.rootfs, "--", "true"))
    one_error_line(s.raw("session", "create", "--rootfs", kiwi.rootfs, "--", "true"), "session exec")
    one_error_line(s.raw("session", "create", "--rootfs", "/nonexistent"), "/nonexistent")
    one_error_line(s.raw("session", "frobnicate"), "frobnicate")
    assert s.exec("true").returncode == 0


def test_a_whole_id_and_a_prefix_reach_the_same_session(session, kiwi):
    """A whole id goes straight to its registry entry and its socket (no
    listing read); a prefix is looked up in the listing. Both reach the
    session they name and no other, and neither reaches it once it is
    gone; a run's id is no session's."""
    s, other = session(), session()
    assert s.sh("echo mine > /tmp/who").returncode == 0
    assert other.sh("echo other > /tmp/who").returncode == 0
    for name in (s.id, s.id[:6]):
        r = s.raw("session", "exec", name, "--", "cat", "/tmp/who")
        assert r.returncode == 0 and r.stdout == "mine\n", explain(r)
    r = s.raw("session", "destroy", s.id[:6])
    s.destroyed = True
    assert r.returncode == 0 and json.loads(r.stdout)["id"] == s.id, explain(r)
    for name in (s.id, s.id[:6]):
        one_error_line(s.raw("session", "exec", name, "--", "true"), name)
        one_error_line(s.raw("session", "destroy", name), name)
    r = other.raw("session", "destroy", other.id)
    other.destroyed = True
    assert r.returncode == 0 and json.loads(r.stdout)["clean"], explain(r)
    run = subprocess.Popen(kiwi.raw_argv(["run", "--rootfs", kiwi.rootfs, "--", "sleep", "30"]),
                           env=kiwi.env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        run_id = None
        for _ in range(100):
            r = s.raw("list", "--json")
            ids = [e["id"] for e in json.loads(r.stdout or "[]") if e["supervisor_pid"] == run.pid]
            if ids:
                run_id = ids[0]
                break
            time.sleep(0.05)
        assert run_id, "the run never showed in `kiwi-run list`"
        one_error_line(s.raw("session", "destroy", run_id), run_id, "a run")
    finally:
        run.kill()
        run.wait()


@pytest.mark.parametrize("verb", ["create", "exec", "cp", "snapshot", "list", "destroy"])
def test_every_verb_answers_help(kiwi, verb):
    """What the usage errors point to (`see kiwi-run session VERB --help`)
    must exist: usage on stdout, exit 0, nothing on stderr."""
    r = subprocess.run(kiwi.raw_argv(["session", verb, "--help"]), capture_output=True, text=True,
                       env=kiwi.env(), timeout=30, stdin=subprocess.DEVNULL)
    assert r.returncode == 0 and r.stderr == "", explain(r)
    assert r.stdout.startswith("usage: kiwi-run session " + verb) or \
        f"kiwi-run session {verb}" in r.stdout.split("\n\n")[0], explain(r)


def test_another_user_cannot_reach_the_session(session, kiwi):
    s = session()
    base = [kiwi.binary]
    for args in (["session", "exec", s.id, "--", "true"], ["session", "destroy", s.id]):
        r = subprocess.run([*OTHER_USER, *base, *args], capture_output=True, text=True, timeout=30,
                           env={"PATH": "/usr/bin:/bin"})
        one_error_line(r, s.id)
    r = subprocess.run([*OTHER_USER, *base, "session", "list", "--json"], capture_output=True, text=True,
                       timeout=30, env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 0 and s.id not in r.stdout, explain(r)
    assert s.exec("true").returncode == 0


def test_idle_timeout_ends_the_session(session):
    s = session("--idle-timeout", "1s")
    assert s.exec("true").returncode == 0
    deadline = time.monotonic() + 30
    while s.listed() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not s.listed(), "the idle session is still there"
    s.destroyed = True


def test_busy_session_outlives_its_idle_timeout(session):
    s = session("--idle-timeout", "1s")
    r = s.exec("sleep", "3")
    assert r.returncode == 0, explain(r)
    assert s.exec("true").returncode == 0


def test_killed_supervisor_then_gc_leaves_nothing(session, kiwi):
    s = session()
    assert s.sh("sleep 305 >/dev/null 2>&1 &", opts=["--keep-background"]).returncode == 0
    entry = s.listed()[0]
    os.kill(entry["supervisor_pid"], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while s.listed() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not s.listed()
    # pid 1 goes with its supervisor, but on a loaded machine it may still
    # hold the session's socket a moment: gc collects what nobody holds,
    # so it runs once pid 1 is gone (a bound, not a claim about speed)
    while time.monotonic() < deadline and gone_or_zombie(entry["pid"]) is False:
        time.sleep(0.1)
    assert gone_or_zombie(entry["pid"]), "pid 1 outlived its supervisor"
    r = s.raw("gc")
    assert r.returncode == 0, explain(r)
    r = s.raw("session", "exec", s.id, "--", "true")
    assert r.returncode == 125
    assert not any(p.name.startswith(s.id) for p in registry_dirs(kiwi)), "gc left the session's files"
    if entry["cgroup"]:
        assert not os.path.exists("/sys/fs/cgroup/unified" + entry["cgroup"]) and \
            not os.path.exists("/sys/fs/cgroup" + entry["cgroup"]), "gc left the session's cgroup"
    s.destroyed = True


def test_killed_keeper_ends_the_session_by_itself(session, kiwi):
    """kill -9 of the session's pid 1 (the keeper inside the sandbox): the
    pid namespace ends with it, and the supervisor tears the rest down
    with no gc: registry entry, socket, cgroup."""
    s = session()
    assert s.sh("sleep 305 >/dev/null 2>&1 &", opts=["--keep-background"]).returncode == 0
    entry = s.listed()[0]
    os.kill(entry["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 20
    while (s.listed() or any(p.name.startswith(s.id) for p in registry_dirs(kiwi))) and \
            time.monotonic() < deadline:
        time.sleep(0.1)
    assert not s.listed()
    assert not any(p.name.startswith(s.id) for p in registry_dirs(kiwi)), "the session's files outlived it"
    r = s.raw("session", "exec", s.id, "--", "true")
    one_error_line(r, s.id)
    if entry["cgroup"]:
        assert not os.path.exists("/sys/fs/cgroup/unified" + entry["cgroup"]) and \
            not os.path.exists("/sys/fs/cgroup" + entry["cgroup"]), "the session's cgroup outlived it"
    s.destroyed = True


def test_gc_spares_the_socket_of_a_session_being_created(session, kiwi):
    """A session listens before it is registered: gc, run by anyone at
    that moment, must not take its socket (the session would live on,
    unreachable). A socket nobody listens on is still collected."""
    if kiwi.mode != "root":
        pytest.skip("the registry directory is root's; rootless runs the same code")
    import socket
    s = session()
    d = next(p.parent for p in registry_dirs(kiwi) if p.name == s.id + ".sock")
    live, dead = (socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) for _ in range(2))
    paths = [d / (os.urandom(6).hex() + ".sock") for _ in range(2)]
    try:
        live.bind(str(paths[0]))
        live.listen(4)
        dead.bind(str(paths[1]))
        dead.close()
        r = s.raw("gc")
        assert r.returncode == 0, explain(r)
        assert paths[0].exists(), "gc took the socket of a session not registered yet"
        assert not paths[1].exists(), "gc left a socket nobody listens on"
    finally:
        live.close()
        for p in paths:
            p.unlink(missing_ok=True)


FIXED_RANDOM = r"""
#include <string.h>
#include <sys/types.h>
/* kiwi-run's ids (6 bytes) and cgroup names (8), asked with no flags,
 * come out the same every time; glibc's own asks pass flags. */
ssize_t getrandom(void *buf, size_t len, unsigned int flags)
{
	if (flags || (len != 6 && len != 8))
		return -1;
	memset(buf, 0x6b, len);
	return (ssize_t)len;
}
"""


def test_create_whose_socket_path_is_taken_fails_and_leaves_it(kiwi, tmp_path):
    """The supervisor makes the session's socket once pid 1 is cloned.
    When that path is taken (here a file of someone else's, by an id made
    to repeat), create fails with one line, kills what it started, writes
    no registry entry, removes its cgroup, and leaves the file alone."""
    if kiwi.mode != "root":
        pytest.skip("the registry directory is root's; rootless runs the same code")
    src, so = tmp_path / "fixed.c", tmp_path / "fixed.so"
    src.write_text(FIXED_RANDOM)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    sid, cg = "6b" * 6, "kiwi-" + "6b" * 8
    regdir = Path("/run/kiwi/sandboxes")
    regdir.mkdir(parents=True, exist_ok=True)
    taken = regdir / (sid + ".sock")
    assert not taken.exists() and not (regdir / (sid + ".json")).exists(), "a session with the test's id exists"
    taken.write_text("not a socket\n")
    try:
        env = kiwi.env({"LD_PRELOAD": str(so),
                        "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"})
        r = subprocess.run(kiwi.raw_argv(["session", "create", "--rootfs", kiwi.rootfs]), capture_output=True,
                           text=True, env=env, timeout=60, stdin=subprocess.DEVNULL)
        one_error_line(r, "listen", sid + ".sock")
        assert taken.read_text() == "not a socket\n", "create removed or changed a path it did not make"
        assert not (regdir / (sid + ".json")).exists(), "a failed create left its registry entry"
        mount = cgroup2_mount()
        if mount:
            left = [str(p) for p in Path(mount).glob(f"**/{cg}")]
            assert not left, f"a failed create left its cgroup: {left}"
    finally:
        taken.unlink(missing_ok=True)


def traced_env(kiwi):
    """kiwi's environment for a run under strace: LeakSanitizer (the ASan
    lane) cannot run under ptrace, so it is off for that run alone."""
    untraced = os.environ.get("ASAN_OPTIONS", "")
    return kiwi.env({"ASAN_OPTIONS": f"{untraced}:detect_leaks=0".lstrip(":")})


def gone_or_zombie(pid):
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def registry_dirs(kiwi):
    """The entries of the mode's registry directories that exist."""
    out = []
    for d in ("/run/kiwi/sandboxes", f"/tmp/kiwi-run-{kiwi.uid}"):
        if os.path.isdir(d):
            out.extend(p for p in __import__("pathlib").Path(d).iterdir())
    return out


def test_many_cycles_leave_nothing(kiwi):
    if kiwi.mode != "root":
        pytest.skip("one mode is enough for the count; rootless runs the same code")
    ids = set()
    for i in range(200):
        s = Session(kiwi)
        ids.add(s.id)
        r = s.exec("true")
        assert r.returncode == 0, explain(r)
        r = s.destroy()
        assert r.returncode == 0 and json.loads(r.stdout)["clean"], explain(r)
    # Others may run sandboxes meanwhile: only our ids count.
    left = {p.name for p in registry_dirs(kiwi) if p.name[:12] in ids}
    assert not left, left


def workspace(kiwi):
    """An empty directory the mode's user owns, where it can reach it."""
    import tempfile
    ws = __import__("pathlib").Path(tempfile.mkdtemp(prefix="ws-", dir=kiwi.scratch))
    ws.chmod(0o755)
    os.chown(ws, kiwi.uid, kiwi.gid)
    return ws


def test_workspace_is_bounded_and_lands_at_the_end(session, kiwi):
    ws = workspace(kiwi)
    (ws / "kept").write_text("host\n")
    os.chown(ws / "kept", kiwi.uid, kiwi.gid)
    s = session("--workspace", ws, "--disk", "8M")
    r = s.sh("echo changed > kept; echo new > made")
    assert r.returncode == 0, explain(r)
    assert (ws / "kept").read_text() == "host\n" and not (ws / "made").exists(), \
        "the workspace was written in place, not in the session's layer"
    p, v = s.exec_verdict("/bin/sh", "-c", "head -c 12000000 /dev/zero > big; echo $? >&2")
    assert p.stderr.strip() != "0" and v["disk_full"], explain(p)
    assert s.exec("rm", "big").returncode == 0
    r = s.destroy()
    ev = json.loads(r.stdout)
    assert r.returncode == 0 and ev["workspace"] == "landed" and ev["clean"], explain(r)
    assert (ws / "kept").read_text() == "changed\n" and (ws / "made").read_text() == "new\n"
    assert not (ws / "big").exists()


def test_workspace_discarded(session, kiwi):
    ws = workspace(kiwi)
    s = session("--workspace", ws, "--workspace-mode", "discard")
    assert s.sh("echo gone > made").returncode == 0
    r = s.destroy()
    assert r.returncode == 0 and json.loads(r.stdout)["workspace"] == "discarded", explain(r)
    assert list(ws.iterdir()) == []


def test_cp_in_and_out(session, kiwi):
    ws = workspace(kiwi)
    src = ws / "patch.diff"
    src.write_text("a patch\n")
    src.chmod(0o755)
    os.chown(src, kiwi.uid, kiwi.gid)
    s = session()
    r = s.raw("session", "cp", src, f"{s.id}:/tmp/")
    assert r.returncode == 0, explain(r)
    r = s.sh("cat /tmp/patch.diff; stat -c %a /tmp/patch.diff; echo result > /tmp/out.xml")
    assert r.returncode == 0 and r.stdout == "a patch\n755\n", explain(r)
    r = s.raw("session", "cp", f"{s.id}:/tmp/out.xml", ws)
    assert r.returncode == 0 and (ws / "out.xml").read_text() == "result\n", explain(r)


def test_cp_that_does_not_fit_leaves_nothing(session, kiwi):
    ws = workspace(kiwi)
    big = ws / "big"
    big.write_bytes(os.urandom(12 << 20))
    os.chown(big, kiwi.uid, kiwi.gid)
    s = session("--disk", "8M")
    one_error_line(s.raw("session", "cp", big, f"{s.id}:/tmp/big"), "No space left")
    r = s.exec("ls", "-a", "/tmp")
    assert r.returncode == 0 and r.stdout.split() == [".", ".."], f"a half copy was left: {r.stdout}"


def test_cp_through_stdin_and_stdout(session, kiwi):
    """`-` is the bytes of one file: stdin into the session, stdout out of
    it; from stdin, a copy that does not fit leaves nothing either."""
    s = session("--disk", "8M")
    data = os.urandom(3 << 20)

    def cp(*args, stdin=None):
        return subprocess.run(s.kiwi.raw_argv(["session", "cp", *args]), input=stdin, capture_output=True,
                              env=s.kiwi.env(), timeout=60)
    r = cp("-", f"{s.id}:/tmp/in.bin", stdin=data)
    assert r.returncode == 0, r.stderr
    r = s.sh("stat -c %s:%a /tmp/in.bin")
    assert r.stdout == f"{len(data)}:644\n", explain(r)
    r = cp(f"{s.id}:/tmp/in.bin", "-")
    assert r.returncode == 0 and r.stdout == data, r.stderr
    r = cp("-", f"{s.id}:/tmp/", stdin=b"x")
    assert r.returncode == 125 and b"needs a file name" in r.stderr and r.stderr.count(b"\n") == 1, r.stderr
    r = cp("-", f"{s.id}:/tmp/big", stdin=os.urandom(12 << 20))
    assert r.returncode == 125 and b"No space left" in r.stderr, r.stderr
    r = s.exec("ls", "-a", "/tmp")
    assert r.returncode == 0 and r.stdout.split() == [".", "..", "in.bin"], f"a half copy was left: {r.stdout}"


def test_cp_never_leaves_the_sandbox(session, kiwi):
    ws = workspace(kiwi)
    s = session()
    assert s.sh("ln -s /etc/shadow /tmp/link; ln -s / /tmp/rootdir").returncode == 0
    for inside in ("/tmp/link", "/proc/self/root/etc/passwd", "/proc/1/root/etc/passwd"):
        one_error_line(s.raw("session", "cp", f"{s.id}:{inside}", ws / "got"), inside)
    assert not (ws / "got").exists()
    # A symlink on the way resolves inside the session's root, not the host's.
    r = s.raw("session", "cp", f"{s.id}:/tmp/rootdir/etc/passwd", ws / "passwd")
    assert r.returncode == 0, explain(r)
    assert (ws / "passwd").read_text() == (Path(kiwi.rootfs) / "etc/passwd").read_text()
    # A link planted at the host destination is replaced, never written through.
    victim = ws / "victim"
    victim.write_text("untouched\n")
    (ws / "planted").symlink_to(victim)
    assert s.sh("echo evil > /tmp/evil").returncode == 0
    r = s.raw("session", "cp", f"{s.id}:/tmp/evil", ws / "planted")
    assert r.returncode == 0, explain(r)
    assert victim.read_text() == "untouched\n" and not (ws / "planted").is_symlink()
    one_error_line(s.raw("session", "cp", ws / "victim", f"{s.id}:relative"), "relative")
    one_error_line(s.raw("session", "cp", ws / "victim", ws / "other"), "ID:/path")


def test_exec_tty_is_the_sessions_own_terminal(session, kiwi):
    """--tty under a terminal (a pty of the test's): the command's stdin,
    stdout and stderr are a pty of the session's devpts, its controlling
    terminal, and what is typed reaches it."""
    import pty
    import select
    s = session()
    argv = kiwi.raw_argv(["session", "exec", s.id, "--tty", "--", "/bin/sh", "-c",
                          "tty; read line; echo got:$line; test -t 0 && test -t 2 && echo both"])
    pid, fd = pty.fork()
    if pid == 0:
        os.execvpe(argv[0], argv, kiwi.env({"TERM": "xterm"}))
    out = b""
    sent = False
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 0.5)
        if r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        if not sent and b"/dev/pts/" in out:
            os.write(fd, b"hello\r")
            sent = True
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    text = out.decode(errors="replace")
    assert os.WEXITSTATUS(status) == 0, text
    assert "/dev/pts/" in text and "got:hello" in text and "both" in text, text


def cgroup2_mount():
    """The host's cgroup2 mount point (the unified hierarchy), or None."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            pre, _, post = line.partition(" - ")
            if post.split()[0] == "cgroup2":
                return pre.split()[4]
    return None


def exec_cgroup_or_skip(v):
    if v["cgroup"] is None:
        pytest.skip("this session's execs have no cgroup of their own here (no cgroup2 the caller may "
                    "write, or kiwi-helper's): nothing to be born in")
    return v["cgroup"]


def test_exec_leader_is_born_in_its_own_cgroup(session):
    """Issue 14: pid 1 starts the exec's leader with clone3(CLONE_INTO_CGROUP)
    in the exec's cgroup, made before the leader is asked for, instead of
    the client moving it in afterwards through cgroup.procs. The command
    reads its own cgroup; --debug says which way the leader got there."""
    s = session()
    p, v = s.exec_verdict("/bin/sh", "-c", "cat /proc/self/cgroup; cat /proc/1/cgroup", opts=["--debug"])
    assert p.returncode == 0, explain(p)
    name = exec_cgroup_or_skip(v)
    leaf = name.rsplit("/", 1)[1]
    assert leaf.startswith("exec-"), v
    # The session's cgroup namespace is rooted at the session's cgroup
    # (pid 1 in its leaf, keeper), so that the exec's is inside it.
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("0::")]
    assert lines == ["0::/" + leaf, "0::/keeper"], explain(p)
    lines = [ln for ln in p.stderr.splitlines() if " exec-cgroup " in ln]
    assert any(f"leader born in {name} (clone3 CLONE_INTO_CGROUP)" in ln for ln in lines), explain(p)
    assert not any("through cgroup.procs" in ln for ln in lines), explain(p)


def test_exec_born_in_its_cgroup_starts_without_go(session, tmp_path):
    """A leader born in its exec's cgroup has nothing to wait for: the
    client asks it (KIWI_EXEC_GO_IF_MOVED) to start the command right after
    READY, and sends no GO (kiwi/keeper.h): a round trip less per exec.
    strace counts what the client sends on the session's socket: its op
    and its request, no third message; --debug says so."""
    s = session()
    _, v = s.exec_verdict("true")
    exec_cgroup_or_skip(v)
    if not shutil.which("strace"):
        pytest.skip("strace is not installed")
    log = tmp_path / "sendmsg.log"
    argv = ["strace", "-o", str(log), "-e", "trace=sendmsg,sendto",
            *s.kiwi.raw_argv(["session", "exec", s.id, "--debug", "--", "/bin/echo", "ran"])]
    p = subprocess.run(argv, capture_output=True, text=True, env=traced_env(s.kiwi), timeout=60,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0 and p.stdout == "ran\n", explain(p)
    assert "(clone3 CLONE_INTO_CGROUP), command started without GO" in p.stderr, explain(p)
    sent = [ln for ln in log.read_text().splitlines() if ln.startswith(("sendmsg(", "sendto("))]
    assert len(sent) == 2, "\n".join(sent)


def test_create_does_not_wait_for_the_cgroupns_child_before_its_mounts(kiwi, tmp_path):
    """Pid 1 makes its cgroup namespace at the session's cgroup through a
    child cloned there (init.c, cgroupns_at). Waiting for that child to be
    scheduled and exit held up every create; it is reaped once the
    sandbox is built, just before pid 1 says it is ready (the session's
    cgroup must be empty before its controllers are handed down). strace
    -f of the whole session, ended by destroy: pid 1's wait for the child
    comes after its pivot_root, not before."""
    if kiwi.mode != "root":
        pytest.skip("strace -f of a rootless session's tree")
    if not shutil.which("strace"):
        pytest.skip("strace is not installed")
    log, out = tmp_path / "strace.log", tmp_path / "id"
    with open(out, "w") as o:
        tracer = subprocess.Popen(["strace", "-f", "-o", str(log), "-e", "trace=setns,pivot_root,waitid,wait4",
                                   *kiwi.raw_argv(["session", "create", "--rootfs", kiwi.rootfs])],
                                  stdout=o, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                  env=traced_env(kiwi))
    try:
        for _ in range(600):  # a bound against a hang: create prints the id, strace lives on
            if out.read_text().endswith("\n") or tracer.poll() is not None:
                break
            time.sleep(0.05)
        sid = out.read_text().strip()
        assert sid, "no id from session create"
        r = subprocess.run(kiwi.raw_argv(["session", "destroy", sid]), capture_output=True, text=True,
                           env=kiwi.env(), timeout=60)
        assert r.returncode == 0, explain(r)
        tracer.wait(timeout=60)
    finally:
        if tracer.poll() is None:
            tracer.kill()
            tracer.wait()
    calls = {}
    for line in log.read_text().splitlines():
        pid, _, call = line.partition(" ")
        calls.setdefault(pid, []).append(call.strip())
    pid1 = [c for c in calls.values() if any(x.startswith("setns(") and "CLONE_NEWCGROUP" in x for x in c)]
    if not pid1:
        pytest.skip("this session has no cgroup of its own here: no cgroup namespace child to wait for")
    c = pid1[0]
    pivot = next(i for i, x in enumerate(c) if x.startswith("pivot_root("))
    waits = [i for i, x in enumerate(c) if x.startswith(("wait4(", "waitid("))]
    assert waits and waits[0] > pivot, "\n".join(c)


def test_exec_cgroup_fallback_names_the_refusal(session, kiwi):
    """Where pid 1 may not clone into the exec's cgroup (here: the session's
    cgroup.procs taken back from it, as a map the caller cannot delegate
    to would leave it), the client moves the leader in, and --debug names
    clone3's errno: the exec still has its own cgroup, and an EACCES is
    never silent."""
    if kiwi.mode != "root":
        pytest.skip("takes back a delegation only a root session's supervisor makes")
    s = session()
    p, v = s.exec_verdict("true")
    session_cg = Path(cgroup2_mount() + exec_cgroup_or_skip(v)).parent
    os.chown(session_cg / "cgroup.procs", 0, -1)
    p, v = s.exec_verdict("cat", "/proc/self/cgroup", opts=["--debug"])
    assert p.returncode == 0, explain(p)
    leaf = v["cgroup"].rsplit("/", 1)[1]
    assert "0::/" + leaf + "\n" in p.stdout, explain(p)
    want = f"leader moved into {v['cgroup']} through cgroup.procs (clone3 into it: {os.strerror(errno.EACCES)})"
    assert want in p.stderr, explain(p)


def keep_sleeping(s):
    """A sleep left running by a kept exec, in that exec's cgroup: (host
    pid, the cgroup's directory on the host)."""
    p, v = s.exec_verdict("/bin/sh", "-c", "sleep 300 >/dev/null 2>&1 &", opts=["--keep-background"])
    assert p.returncode == 0, explain(p)
    d = Path(cgroup2_mount() + exec_cgroup_or_skip(v))
    # The verdict comes once the shell's exit is known; its background
    # child may still be between fork and exec then, and the shell not yet
    # gone from the listing. Look again until the sleep alone is there (a
    # bound against a hang, not a claim about speed).
    for _ in range(200):
        pids = (d / "cgroup.procs").read_text().split()
        comms = [comm_of(p) for p in pids]
        if comms == ["sleep"]:
            break
        time.sleep(0.05)
    assert comms == ["sleep"], (pids, comms)
    return int(pids[0]), d


def comm_of(pid):
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def test_delegated_cgroup_procs_keeps_moves_inside_the_session(session, kiwi):
    """Attack: pid 1's host uid may write the session's cgroup.procs and
    each exec's (the delegation clone3 into an exec's cgroup needs). A
    process with that uid and a full view of the host's cgroup tree (more
    than a command has: inside, no cgroup2 is mounted nor mountable)
    still moves nothing out of its session or into another one: the kernel
    asks for the common ancestor's cgroup.procs too, which is root's."""
    if kiwi.mode != "root":
        pytest.skip("the attacker takes the uid of a root session's pid 1 (kiwi's range)")
    if os.environ.get("KIWI_HOST_ROOT_MAP") == "1":  # as kiwi-run reads it
        pytest.skip("KIWI_HOST_ROOT_MAP: pid 1 is the host's root, to whom nothing is delegated")
    a, b = session(), session()
    r = a.sh("mkdir -p /tmp/cg && mount -t cgroup2 none /tmp/cg && echo MOUNTED; "
             "grep -c ' - cgroup2 ' /proc/self/mountinfo")
    assert "MOUNTED" not in r.stdout and r.stdout.strip().endswith("0"), explain(r)
    pid_a, cg_a = keep_sleeping(a)
    pid_a2, cg_a2 = keep_sleeping(a)
    pid_b, cg_b = keep_sleeping(b)
    owner = os.stat(cg_b / "cgroup.procs").st_uid
    assert owner != 0 and owner == os.stat(cg_a / "cgroup.procs").st_uid, "nothing was delegated"
    assert os.stat(cg_b.parent / "cgroup.procs").st_uid == owner
    for f in ("memory.max", "pids.max", "cgroup.subtree_control", "cgroup.kill"):
        if (cg_b / f).exists():
            assert os.stat(cg_b / f).st_uid == 0, f"{f} was delegated too"

    def move(pid, cg):
        """The errno of writing pid into cg's cgroup.procs as owner (0: moved)."""
        script = ("import os, sys\n"
                  "os.setgroups([]); os.setresgid(*[int(sys.argv[1])] * 3); os.setresuid(*[int(sys.argv[1])] * 3)\n"
                  "try:\n"
                  "    fd = os.open(sys.argv[3] + '/cgroup.procs', os.O_WRONLY); os.write(fd, sys.argv[2].encode())\n"
                  "except OSError as e:\n"
                  "    sys.exit(e.errno)\n")
        return subprocess.run([sys.executable, "-c", script, str(owner), str(pid), str(cg)],
                              capture_output=True, text=True, timeout=30).returncode
    escapes = [(pid_a, cg_b), (pid_b, cg_a), (pid_a, cg_b.parent), (pid_a, cg_a.parent.parent),
               (pid_a, cg_a.parent / "keeper"), (pid_a, Path(cgroup2_mount()))]
    for pid, dest in escapes:
        got = move(pid, dest)
        assert got == errno.EACCES, f"moving {pid} into {dest}: {os.strerror(got) if got else 'moved'}"
    assert (cg_a / "cgroup.procs").read_text().split() == [str(pid_a)]
    assert (cg_b / "cgroup.procs").read_text().split() == [str(pid_b)]
    # The control: within its own session the same writer moves (so the
    # refusals above are the kernel's common-ancestor check, not a file
    # the uid could not open).
    assert move(pid_a, cg_a2) == 0, "the writer could not move within its own session"
    assert sorted((cg_a2 / "cgroup.procs").read_text().split()) == sorted([str(pid_a), str(pid_a2)])


def started_ahead(s):
    """The host pids of the leader pid 1 started ahead for the first exec,
    and of the command process that leader made ahead: (leader, command),
    once both are there (they are started after create has returned), or
    None after 2 s (a session whose execs have no cgroup of their own)."""
    pid1 = s.listed()[0]["pid"]
    for _ in range(200):
        kids = [int(c) for t in Path(f"/proc/{pid1}/task").iterdir() for c in (t / "children").read_text().split()]
        for k in kids:
            grand = [int(c) for t in Path(f"/proc/{k}/task").iterdir() for c in (t / "children").read_text().split()]
            if grand:
                return k, grand[0]
        time.sleep(0.01)
    return None


def sched_slice(pid="self"):
    """se.slice of /proc/PID/sched in ns, or None (no such line here)."""
    try:
        text = Path(f"/proc/{pid}/sched").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("se.slice"):
            return int(line.split(":")[1])
    return None


def test_the_sessions_own_processes_ask_for_a_short_slice_its_commands_do_not(session):
    """The supervisor, pid 1 and each exec's leader pass an exec's request
    on: they ask for the shortest scheduler slice (0.1 ms, Linux 6.12's
    custom slice) so that a busy process on their CPU does not hold each
    wake-up for its own slice; the commands get the default back, the
    first exec's (made ahead) as much as a later one's."""
    major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    if (major, minor) < (6, 12):
        pytest.skip("custom slices came in Linux 6.12")
    default = sched_slice()
    if default is None:
        pytest.skip("/proc/PID/sched shows no se.slice here")
    s = session()
    started_ahead(s)
    entry = s.listed()[0]
    for who in ("supervisor_pid", "pid"):
        assert sched_slice(entry[who]) == 100000, f"{who}: se.slice {sched_slice(entry[who])}"
    script = "sed -n 's/^se.slice *: *//p' /proc/self/sched"
    for n in ("first", "later"):
        r = s.exec("/bin/sh", "-c", script)
        assert r.returncode == 0, explain(r)
        assert int(r.stdout.split()[0]) == default, f"the {n} exec's command kept slice {r.stdout.strip()}"


def test_the_short_slice_keeps_the_callers_nice_value(kiwi):
    """The slice is asked for alone: a session created under `nice` keeps
    the caller's nice value in its supervisor, its pid 1 and its commands
    (as root, a request that named nice 0 would have raised them)."""
    if sched_slice() is None:
        pytest.skip("/proc/PID/sched shows no se.slice here")
    r = subprocess.run(["nice", "-n", "7", *kiwi.raw_argv(["session", "create", "--rootfs", kiwi.rootfs])],
                       capture_output=True, text=True, env=kiwi.env(), timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, explain(r)
    sid = r.stdout.strip()
    s = Session.__new__(Session)
    s.kiwi, s.id, s.destroyed = kiwi, sid, False
    try:
        entry = s.listed()[0]
        for who in ("supervisor_pid", "pid"):
            nice = int(Path(f"/proc/{entry[who]}/stat").read_text().rsplit(")", 1)[1].split()[16])
            assert nice == 7, f"{who} runs at nice {nice}"
        e = s.exec("/bin/sh", "-c", "cut -d' ' -f19 /proc/self/stat")
        assert e.returncode == 0 and e.stdout.strip() == "7", explain(e)
    finally:
        s.destroy()


def test_the_first_exec_finds_its_leader_and_command_started_ahead(session):
    """Issue 14's create+exec+destroy: once the session is ready, its
    supervisor makes the first exec's cgroup and pid 1 starts that exec's
    leader in it, which forks the command's process and loads the built-in
    seccomp filter there; the exec only hands over its request. The later
    execs get a cgroup made when they come. Either way the command runs
    under one filter (not two stacked), in its own cgroup."""
    s = session()
    started_ahead(s)
    script = "grep -E '^Seccomp(_filters)?:' /proc/self/status; cat /proc/self/cgroup | grep '^0::'"
    firsts = []
    for _ in range(2):
        p = s.raw("session", "exec", s.id, "--debug", "--", "/bin/sh", "-c", script)
        assert p.returncode == 0, explain(p)
        firsts.append(p)
        lines = p.stdout.splitlines()
        assert "Seccomp:\t2" in lines and "Seccomp_filters:\t1" in lines, explain(p)
    if "none of its own" in firsts[0].stderr:
        pytest.skip("this session's execs have no cgroup of their own here: nothing is started ahead")
    assert "its leader started ahead in it" in firsts[0].stderr, explain(firsts[0])
    assert "made for it" in firsts[1].stderr and "started ahead" not in firsts[1].stderr, explain(firsts[1])
    leaves = [p.stdout.splitlines()[-1] for p in firsts]
    assert all(x.startswith("0::/exec-") for x in leaves) and leaves[0] != leaves[1], leaves


def test_a_custom_seccomp_profile_is_loaded_last_by_the_command_made_ahead(session, kiwi):
    """Only the built-in profile is known to allow what the command's
    process does before its exec: with any other the process made ahead
    loads it last, and it rules the command as it would a cold exec's."""
    base = json.loads((Path(__file__).resolve().parents[2] / "seccomp-profiles/default.json").read_text())
    for rule in base["syscalls"]:
        rule["names"] = [n for n in rule["names"] if n not in ("mkdir", "mkdirat")]
    base["syscalls"] = [r for r in base["syscalls"] if r["names"]]
    prof = kiwi.workdir() / "profile.json"
    prof.write_text(json.dumps(base))
    kiwi.chown(prof)
    s = session("--seccomp", str(prof))
    started_ahead(s)
    for _ in range(2):  # the first exec's command was made ahead, the second's was not
        r = s.sh("mkdir /tmp/denied; echo $?; grep '^Seccomp_filters:' /proc/self/status")
        assert r.returncode == 0 and r.stdout.splitlines() == ["1", "Seccomp_filters:\t1"], explain(r)
        assert "Operation not permitted" in r.stderr, explain(r)


@pytest.mark.parametrize("victim", ["command", "leader"])
def test_what_was_started_ahead_killed_costs_no_exec(session, kiwi, victim):
    """The leader and command made ahead run as the session's user: a
    command may kill them. The exec then starts a command (or a leader in
    its cgroup) as it would without them, and runs as usual."""
    if kiwi.mode != "root":
        pytest.skip("kills processes of the session from the host as root")
    s = session()
    ahead = started_ahead(s)
    if not ahead:
        pytest.skip("this session's execs have no cgroup of their own here: nothing is started ahead")
    leader, command = ahead
    os.kill(command if victim == "command" else leader, signal.SIGKILL)
    time.sleep(0.1)
    p, v = s.exec_verdict("/bin/sh", "-c", "echo ran")
    assert p.returncode == 0 and p.stdout == "ran\n" and v["exit_code"] == 0, explain(p)
    assert s.exec("true").returncode == 0
    r = s.destroy()
    assert r.returncode == 0 and json.loads(r.stdout)["clean"], explain(r)


def exec_cgroups_left(cgdir):
    """The session's exec cgroups, once its supervisor has had 2 s to
    remove those whose leader pid 1 reaped (the client does not wait)."""
    mounts = [ln.split()[4] for ln in Path("/proc/self/mountinfo").read_text().splitlines() if " - cgroup2 " in ln]
    for _ in range(40):
        left = [d for m in mounts for d in Path(m + str(cgdir)).glob("exec-*")]
        if not left:
            break
        time.sleep(0.05)
    return left


def test_concurrent_execs_keep_their_cgroups_until_each_ends(session):
    """The supervisor removes an exec's cgroup once pid 1 says that exec's
    leader is gone, never another's: execs started while others end each
    run in a cgroup of their own to the end, and none is left after."""
    s = session()
    v0 = s.exec_verdict("true")[1]
    if not v0["cgroup"]:
        pytest.skip("this session's execs have no cgroup of their own here")
    cgdir = Path(s.listed()[0]["cgroup"])
    procs = []
    for i in range(12):
        argv = s.kiwi.raw_argv(["session", "exec", s.id, "--", "/bin/sh", "-c",
                                f"sleep 0.{i % 4}; cat /proc/self/cgroup"])
        procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      env=s.kiwi.env(), stdin=subprocess.DEVNULL))
        time.sleep(0.03)
    seen = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, f"an exec failed: {err}"
        seen.append([ln for ln in out.splitlines() if ln.startswith("0::")][0])
    assert all(x.startswith("0::/exec-") for x in seen) and len(set(seen)) == len(seen), seen
    assert exec_cgroups_left(cgdir) == [], exec_cgroups_left(cgdir)


def test_an_unused_first_exec_leader_goes_after_two_seconds(session, kiwi):
    """What is started ahead serves a caller that execs as soon as create
    returns: unused for 2 s, the leader, its command process and their
    cgroup go (an idle session costs the host two processes less), and
    the first exec starts its own as any later one does."""
    s = session()
    ahead = started_ahead(s)
    if not ahead:
        pytest.skip("this session's execs have no cgroup of their own here: nothing is started ahead")
    cgdir = Path(s.listed()[0]["cgroup"])
    for _ in range(100):
        if not any(Path(f"/proc/{p}").exists() for p in ahead):
            break
        time.sleep(0.05)
    assert not any(Path(f"/proc/{p}").exists() for p in ahead), f"{ahead} still there 5 s after they were seen"
    # Nor does pid 1 hold the removed cgroup's directory (KIWI_SYNC_EXEC_COOL),
    # where its fds can be read (root: the same user).
    fd_dir = Path(f"/proc/{s.listed()[0]['pid']}/fd")
    held = []
    for _ in range(40):
        try:
            held = [os.readlink(fd) for fd in fd_dir.iterdir() if "exec-" in os.readlink(fd)]
        except (PermissionError, FileNotFoundError):
            held = []
        if not held:
            break
        time.sleep(0.05)
    assert held == [], f"pid 1 still holds {held}"
    p = s.raw("session", "exec", s.id, "--debug", "--", "/bin/true")
    assert p.returncode == 0 and "made for it" in p.stderr, explain(p)
    assert exec_cgroups_left(cgdir) == [], exec_cgroups_left(cgdir)
