# SPDX-License-Identifier: Apache-2.0
"""The OCI lifecycle as the containerd shim drives it: create, state, start,
kill, delete, run; the refused transitions; state that outlives kiwi-run;
nothing left behind."""
import fcntl
import json
import os
from pathlib import Path
import re
import signal
import socket
import time

import pytest


def wait_status(oci, cid, want, tries=1500):
    # Polling the kernel's view, not a timing assertion: the init's exit
    # is asynchronous to our kill. Bounded so a bug cannot hang the suite.
    for _ in range(tries):
        st = oci.state(cid)
        if st["status"] == want:
            return st
        time.sleep(0.02)
    raise AssertionError(f"{cid} never became {want}: {st}")


def test_version_spec_features(oci):
    r = oci.cli("--version", root=False)
    assert r.returncode == 0 and re.search(r"^spec: 1\.\d+\.\d+$", r.stdout, re.M), r.stdout
    f = oci.cli("features", root=False, check=True)
    feats = json.loads(f.stdout)
    assert feats["ociVersionMin"] == "1.0.0"
    assert "createRuntime" in feats["hooks"] and "rbind" in feats["mountOptions"]
    assert "CAP_SYS_ADMIN" in feats["linux"]["capabilities"]
    assert feats["linux"]["cgroup"]["systemd"] is False


def test_spec_refuses_to_overwrite(oci):
    b = oci.work / "specdir"
    b.mkdir()
    os.chown(b, *oci.ids)
    oci.cli("spec", "--bundle", str(b), root=False, check=True)
    cfg = json.loads((b / "config.json").read_text())
    assert cfg["ociVersion"].startswith("1.") and cfg["root"]["path"] == "rootfs"
    r = oci.cli("spec", "--bundle", str(b), root=False)
    assert r.returncode == 1 and "exists" in r.stderr


def test_create_start_state_kill_delete(oci):
    b = oci.bundle(oci.spec(["sleep", "1000"]))
    pidfile = oci.work / "pid"
    oci.cli("create", "--bundle", str(b), "--pid-file", str(pidfile), "c1", check=True)
    st = oci.state("c1")
    assert st["status"] == "created"
    assert st["id"] == "c1" and st["bundle"] == str(b) and st["rootfs"] == str(oci.rootfs)
    assert st["pid"] > 0 and int(pidfile.read_text()) == st["pid"]
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z$", st["created"])
    # The created init waits before the user's program: it is not running yet.
    with open(f"/proc/{st['pid']}/cmdline", "rb") as f:
        assert b"sleep" not in f.read()
    oci.cli("start", "c1", check=True)
    st = oci.state("c1")
    assert st["status"] == "running"
    with open(f"/proc/{st['pid']}/cmdline", "rb") as f:
        assert f.read().split(b"\0")[0] == b"sleep", "the init is the program itself"
    oci.cli("kill", "c1", "KILL", check=True)
    st = wait_status(oci, "c1", "stopped")
    assert st["pid"] == 0
    oci.cli("delete", "c1", check=True)
    r = oci.cli("state", "c1")
    assert r.returncode == 1 and "does not exist" in r.stderr
    assert not list(oci.root.iterdir())


def test_refused_transitions(oci):
    b = oci.bundle(oci.spec(["sleep", "1000"]))
    oci.cli("create", "-b", str(b), "c2", check=True)
    r = oci.cli("create", "-b", str(b), "c2")
    assert r.returncode == 1 and "already exists" in r.stderr
    oci.cli("start", "c2", check=True)
    r = oci.cli("start", "c2")
    assert r.returncode == 1 and "already running" in r.stderr
    r = oci.cli("delete", "c2")
    assert r.returncode == 1 and "not stopped" in r.stderr
    assert oci.state("c2")["status"] == "running", "a refused delete changes nothing"
    oci.cli("delete", "--force", "c2", check=True)
    assert not list(oci.root.iterdir())
    r = oci.cli("kill", "c2")
    assert r.returncode == 1 and "does not exist" in r.stderr
    r = oci.cli("delete", "--force", "c2")
    assert r.returncode == 0, "deleting what is gone with --force is no error (runc)"


def test_start_and_kill_of_stopped(oci):
    b = oci.bundle(oci.spec(["true"]))
    oci.cli("create", "-b", str(b), "c3", check=True)
    oci.cli("start", "c3", check=True)
    wait_status(oci, "c3", "stopped")
    r = oci.cli("start", "c3")
    assert r.returncode == 1 and "stopped" in r.stderr
    r = oci.cli("kill", "c3", "TERM")
    assert r.returncode == 1 and "not running" in r.stderr
    oci.cli("delete", "c3", check=True)


def test_delete_of_created_kills_the_init(oci):
    b = oci.bundle(oci.spec(["sleep", "1000"]))
    oci.cli("create", "-b", str(b), "c4", check=True)
    pid = oci.state("c4")["pid"]
    oci.cli("delete", "c4", check=True)
    with open(f"/proc/{pid}/stat") as f:
        assert f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")


def test_reused_pid_is_not_the_container(oci):
    """state.json keeps the init's start time: a different process behind
    the same pid is never signalled, the container counts as stopped."""
    b = oci.bundle(oci.spec(["sleep", "1000"]))
    oci.cli("create", "-b", str(b), "c5", check=True)
    path = oci.root / "c5" / "state.json"
    st = json.loads(path.read_text())
    real = st["kiwi"]["startTime"]
    with open(f"/proc/{st['pid']}/stat") as f:
        assert real == int(f.read().rsplit(")", 1)[1].split()[19]), "field 22: the start time"
    st["kiwi"]["startTime"] = real + 1
    path.write_text(json.dumps(st))
    assert oci.state("c5")["status"] == "stopped"
    r = oci.cli("kill", "c5", "KILL")
    assert r.returncode == 1
    with open(f"/proc/{st['pid']}/stat") as f:
        assert f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X"), "the pid was signalled"
    st["kiwi"]["startTime"] = real
    path.write_text(json.dumps(st))
    oci.cli("delete", "c5", check=True)


def test_run_exit_status_and_streams(oci):
    b = oci.bundle(oci.spec(["sh", "-c", "echo out; echo err >&2; exit 7"]))
    r = oci.cli("run", "--bundle", str(b), "r1")
    assert r.returncode == 7 and r.stdout == "out\n" and "err" in r.stderr
    assert not list(oci.root.iterdir()), "run deletes the container"
    b = oci.bundle(oci.spec(["sh", "-c", "kill -KILL $$"]))
    r = oci.cli("run", "--bundle", str(b), "r2")
    # The kernel drops a signal from inside a pid namespace to its init
    # when the init has no handler, SIGKILL included: the program is the
    # init (no kiwi process in between), so the shell lives on and exits 0.
    assert r.returncode == 0, r.stderr
    b = oci.bundle(oci.spec(["sleep", "1000"]))
    p = subprocess_popen(oci, ["run", "--bundle", str(b), "r3"])
    pid = None
    for _ in range(1500):
        if (oci.root / "r3" / "state.json").exists() and not (oci.root / "r3" / "exec.fifo").exists():
            pid = oci.state("r3")["pid"]
            break
        time.sleep(0.02)
    assert pid
    p.send_signal(signal.SIGTERM)  # forwarded; sleep as pid 1 has no handler: ignored
    oci.cli("kill", "r3", "KILL", check=True)
    assert p.wait(timeout=30) == 128 + signal.SIGKILL
    assert not list(oci.root.iterdir())


def subprocess_popen(oci, args):
    import subprocess
    return subprocess.Popen(oci.prefix() + [str(oci.kiwi), "--root", str(oci.root)] + args,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_run_detach_and_keep(oci):
    b = oci.bundle(oci.spec(["sleep", "1000"]))
    oci.cli("run", "-d", "--bundle", str(b), "d1", check=True)
    assert oci.state("d1")["status"] == "running"
    oci.cli("delete", "-f", "d1", check=True)
    b = oci.bundle(oci.spec(["true"]))
    oci.cli("run", "--keep", "--bundle", str(b), "k1", check=True)
    assert oci.state("k1")["status"] == "stopped"
    oci.cli("delete", "k1", check=True)


def test_missing_program_fails_create(oci):
    b = oci.bundle(oci.spec(["no-such-program"]))
    r = oci.cli("create", "-b", str(b), "m1")
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and "no-such-program" in r.stderr and "not found" in r.stderr
    assert not list(oci.root.iterdir()), "a failed create leaves nothing"


def test_bad_config_one_line_nothing_left(oci):
    cfg = oci.spec(["true"])
    cfg["process"]["rlimits"] = [{"type": "RLIMIT_NOFILE", "soft": 5, "hard": 4}]
    b = oci.bundle(cfg)
    r = oci.cli("create", "-b", str(b), "bad")
    assert r.returncode == 1 and r.stderr.count("\n") == 1
    assert "process.rlimits[0]" in r.stderr and "soft is above hard" in r.stderr
    assert not list(oci.root.iterdir())


def test_unknown_capability_is_a_warning(oci):
    """As runc: skipped, with one warning line naming it."""
    cfg = oci.spec(["true"])
    cfg["process"]["capabilities"]["bounding"].append("CAP_NOPE")
    r = oci.cli("run", "-b", str(oci.bundle(cfg)), "nope")
    assert r.returncode == 0, r.stderr
    assert "warning" in r.stderr and "CAP_NOPE" in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_log_json_lines(oci):
    log = oci.work / "log.json"
    r = oci.cli("--log", str(log), "--log-format", "json", "state", "nope")
    assert r.returncode == 1 and "does not exist" in r.stderr
    lines = [json.loads(l) for l in log.read_text().splitlines()]
    assert lines[-1]["level"] == "error" and "does not exist" in lines[-1]["msg"]
    assert re.match(r"\d{4}-.*Z$", lines[-1]["time"])
    r = oci.cli("--log", str(log), "--log-format", "yaml", "state", "nope")
    assert r.returncode == 1 and "neither json nor text" in r.stderr


def test_global_refusals(oci):
    r = oci.cli("--systemd-cgroup", "state", "x")
    assert r.returncode == 1 and "systemd" in r.stderr and r.stderr.count("\n") == 1
    b = oci.bundle(oci.spec(["true"]))
    r = oci.cli("create", "--no-pivot", "-b", str(b), "np")
    assert r.returncode == 1 and "--no-pivot" in r.stderr
    r = oci.cli("create", "--bogus", "-b", str(b), "np")
    assert r.returncode == 1 and "--bogus" in r.stderr
    assert not list(oci.root.iterdir())


def test_kiwi_run_own_run_is_untouched(oci):
    r = oci.cli("run", "--help", root=False)
    assert r.returncode == 0 and "--rootfs" in r.stdout


def _pipe_above(floor):
    fds = os.pipe()
    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, floor) for fd in fds]
    for fd in fds:
        os.close(fd)
    return moved


def test_preserve_fds(oci):
    # `[ -e ]` is a builtin: no directory fd of its own shows up.
    b = oci.bundle(oci.spec(["sh", "-c", "echo via-fd3 >&3; for i in $(seq 0 40); do "
                                         "[ -e /proc/self/fd/$i ] && echo $i; done; true"]))
    rd, wr = _pipe_above(10)
    # fd 3 may be pytest's own (its capture): set it aside and put it back.
    try:
        saved = os.dup(3)
    except OSError:
        saved = None
    os.dup2(wr, 3)
    os.close(wr)
    try:
        r = oci.cli("run", "--preserve-fds", "1", "-b", str(b), "pf", pass_fds=(3,))
    finally:
        if saved is None:
            os.close(3)
        else:
            os.dup2(saved, 3, inheritable=False)
            os.close(saved)
    assert r.returncode == 0, r.stderr
    assert os.read(rd, 100) == b"via-fd3\n"
    os.close(rd)
    fds = sorted(int(x) for x in r.stdout.split())
    assert fds == [0, 1, 2, 3], f"fds beyond the preserved ones reached the program: {fds}"


def test_console_socket_hands_over_a_pty(oci):
    cfg = oci.spec(["sh", "-c", "tty; stty size"])
    cfg["process"]["terminal"] = True
    cfg["process"]["consoleSize"] = {"height": 33, "width": 101}
    b = oci.bundle(cfg)
    sock_path = oci.work / "console.sock"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(sock_path))
    os.chown(sock_path, *oci.ids)
    srv.listen(1)
    r = oci.cli("create", "--console-socket", str(sock_path), "-b", str(b), "tty1")
    assert r.returncode == 0, r.stderr
    conn, _ = srv.accept()
    msg, fds, _, _ = socket.recv_fds(conn, 1024, 1)
    assert msg == b"/dev/ptmx" and len(fds) == 1
    oci.cli("start", "tty1", check=True)
    out = b""
    while True:
        try:
            chunk = os.read(fds[0], 1024)
        except OSError:  # EIO: the last slave closed
            break
        if not chunk:
            break
        out += chunk
    assert b"/dev/pts/0" in out and b"33 101" in out, out
    os.close(fds[0])
    conn.close()
    srv.close()
    wait_status(oci, "tty1", "stopped")
    oci.cli("delete", "tty1", check=True)
    r = oci.cli("create", "-b", str(b), "tty2")
    assert r.returncode == 1 and "--console-socket is required" in r.stderr


def test_ps_lists_the_namespace(oci):
    b = oci.bundle(oci.spec(["sh", "-c", "sleep 1000 & sleep 1000"]))
    oci.cli("run", "-d", "-b", str(b), "ps1", check=True)
    st = oci.state("ps1")
    for _ in range(200):
        pids = json.loads(oci.cli("ps", "--format", "json", "ps1", check=True).stdout)
        if len(pids) == 2:
            break
        time.sleep(0.02)
    assert st["pid"] in pids and len(pids) == 2, pids
    table = oci.cli("ps", "ps1", check=True).stdout.split()
    assert table[0] == "PID" and sorted(int(p) for p in table[1:]) == sorted(pids)
    oci.cli("kill", "--all", "ps1", "KILL", check=True)
    wait_status(oci, "ps1", "stopped")
    oci.cli("delete", "ps1", check=True)


def test_no_device_can_be_made(oci):
    """No device cgroup: CAP_MKNOD is never granted and the root is nodev."""
    cfg = oci.spec(["sh", "-c", "grep CapBnd /proc/self/status; mknod /tmp/sda b 8 0 && echo MADE; "
                          "cat /proc/self/mountinfo"])
    cfg["mounts"].append({"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["dev"]})
    for s in ("bounding", "effective", "permitted"):
        cfg["process"]["capabilities"][s].append("CAP_MKNOD")
    cfg["root"]["readonly"] = True
    b = oci.bundle(cfg)
    r = oci.cli("run", "-b", str(b), "dev1")
    assert "MADE" not in r.stdout, r.stdout
    bnd = int(r.stdout.split("CapBnd:")[1].split()[0], 16)
    assert not bnd & (1 << 27)
    root = [l.split() for l in r.stdout.splitlines() if len(l.split()) > 5 and l.split()[4] == "/"]
    assert root and "nodev" in root[-1][5].split(","), root


def test_create_killed_midway_leaves_nothing_after_delete_force(oci):
    """kill -9 of create while a createRuntime hook runs: its init ends (the
    sync socket closes), and delete --force removes the half-made state."""
    marker = oci.work / "hook-started"
    cfg = oci.spec(["true"])
    cfg["hooks"] = {"createRuntime": [{"path": "/bin/sh", "args": ["sh", "-c", f"touch {marker}; exec sleep 1000"]}]}
    # A cgroup with a parent create makes: both must go with the state.
    parent = f"kiwi-test-k9-{os.getpid()}"
    cfg["linux"]["cgroupsPath"] = f"/{parent}/k9"
    made = [Path(m) / parent for m in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified")]
    b = oci.bundle(cfg)
    p = subprocess_popen(oci, ["create", "-b", str(b), "k9"])
    for _ in range(1500):  # bounded wait for the hook
        if marker.exists():
            break
        time.sleep(0.02)
    assert marker.exists()
    create_pid = p.pid  # setpriv and the sealed re-exec both exec in place

    def cmdline(pid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                return f.read()
        except OSError:
            return b""

    # The hook touches the marker before it executes sleep: wait for the
    # sleep, or it would be read as "sh" and outlive the test.
    for _ in range(1500):
        init = [int(c) for c in open(f"/proc/{create_pid}/task/{create_pid}/children").read().split()]
        hook = [pid for pid in init if cmdline(pid).startswith(b"sleep")]
        if hook:
            break
        time.sleep(0.02)
    assert hook, "the createRuntime hook never reached its sleep"
    os.kill(create_pid, signal.SIGKILL)
    p.wait(timeout=30)
    for pid in hook:  # the hook (sleep) and the container's init were its children
        os.kill(pid, signal.SIGKILL)
    from conftest import reap
    for _ in range(500):
        reap()
        alive = [pid for pid in init if os.path.exists(f"/proc/{pid}")]
        if not alive:
            break
        time.sleep(0.02)
    assert not alive, "the init of a killed create must end"
    assert (oci.root / "k9").exists()
    r = oci.cli("state", "k9")
    assert r.returncode == 1
    if oci.mode == "root":
        assert any((m / "k9").is_dir() for m in made), "the test meant create to make a cgroup"
    oci.cli("delete", "--force", "k9", check=True)
    assert not list(oci.root.iterdir())
    assert not any(m.exists() for m in made), "the killed create's cgroup (or its parent) outlived delete"


def test_root_is_made_with_its_parents(oci):
    """The containerd shim passes --root /run/containerd/runc/NAMESPACE,
    whose parents may not exist yet: made as runc makes them."""
    b = oci.bundle(oci.spec(["true"]))
    deep = oci.root / "containerd" / "runc" / "default"
    r = oci.cli("--root", str(deep), "run", "-b", str(b), "deep", root=False)
    assert r.returncode == 0, r.stderr
    assert deep.is_dir() and not list(deep.iterdir())
    for d in (deep, deep.parent, deep.parent.parent):
        d.rmdir()


def test_checkpoint_restore_say_unsupported(oci):
    for cmd in ("checkpoint", "restore"):
        r = oci.cli(cmd, "anything")
        assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
        assert "checkpoint/restore is not supported" in r.stderr, r.stderr
    feats = json.loads(oci.cli("features", root=False, check=True).stdout)
    assert "org.opencontainers.runc.checkpoint.enabled" not in feats.get("annotations", {})


def test_rlimit_named_in_its_error(oci):
    """A limit the kernel refuses is named as the config names it."""
    cfg = oci.spec(["true"])
    cfg["process"]["rlimits"] = [{"type": "RLIMIT_NOFILE", "soft": 1 << 40, "hard": 1 << 40}]
    r = oci.cli("run", "-b", str(oci.bundle(cfg)), "rl")
    assert r.returncode != 0 and "RLIMIT_NOFILE" in r.stderr, r.stderr
    assert "rlimit 7" not in r.stderr


def test_device_rule_it_cannot_enforce_is_refused(oci):
    """Read or write alone on a bound device node needs a device cgroup
    program, which kiwi-run has not: one line, nothing left behind."""
    node = "/dev/cpu_dma_latency"
    if oci.mode == "rootless" or not os.path.exists(node):
        pytest.skip("needs root and a host node to bind")
    cfg = oci.spec(["true"])
    cfg["mounts"].append({"destination": "/mnt/dev", "type": "bind", "source": node, "options": ["bind"]})
    cfg["linux"]["resources"] = {"devices": [{"allow": True, "access": "rwm"}, {
        "allow": False, "type": "c", "major": 10, "minor": os.minor(os.stat(node).st_rdev), "access": "w"}]}
    r = oci.cli("run", "-b", str(oci.bundle(cfg)), "devw")
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
    assert "read only, which kiwi-run cannot enforce" in r.stderr, r.stderr
