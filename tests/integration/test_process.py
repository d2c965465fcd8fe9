# SPDX-License-Identifier: Apache-2.0
"""Exit statuses, signal forwarding, and the end of every process in the
sandbox when the command exits."""
import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from conftest import PROBE, explain, signal_when_ready
from procs import describe_pid

# -- exit statuses


@pytest.mark.parametrize("code", [0, 1, 3, 42, 125, 255])
def test_exit_code_propagates(kiwi, code):
    r = kiwi.run(["kiwi-probe", "exit", code])
    assert r.returncode == code, explain(r)


def test_shell_exit_code(kiwi):
    r = kiwi.sh("exit 7")
    assert r.returncode == 7, explain(r)


@pytest.mark.parametrize("sig", ["KILL", "TERM", "INT", "USR1", "SEGV", "ABRT"])
def test_killed_by_signal_is_128_plus_n(kiwi, sig):
    """The command is pid 2, not its namespace's init: its own signals,
    SIGKILL and SIGTERM included, kill it."""
    r = kiwi.run(["kiwi-probe", "kill-self", sig])
    assert r.returncode == 128 + signal.Signals[f"SIG{sig}"], explain(r)


def test_shell_killed_by_signal(kiwi):
    r = kiwi.sh("kill -9 $$")
    assert r.returncode == 128 + 9, explain(r)


@pytest.mark.parametrize("cmd", [["/usr/bin/no-such-program"], ["no-such-program"]])
def test_not_found_is_127(kiwi, cmd):
    r = kiwi.run(cmd)
    assert r.returncode == 127, explain(r)


@pytest.mark.parametrize("cmd", [["/etc/passwd"], ["/etc"]])
def test_not_executable_is_126(kiwi, cmd):
    r = kiwi.run(cmd)
    assert r.returncode == 126, explain(r)


def test_not_executable_mode_is_126(kiwi):
    root = kiwi.rootfs_copy()
    script = root / "usr/local/bin/noexec"
    script.write_text("#!/bin/sh\necho should not run\n")
    script.chmod(0o644)
    kiwi.chown(script)
    r = kiwi.run(["/usr/local/bin/noexec"], rootfs=root)
    assert r.returncode == 126, explain(r)
    assert "should not run" not in r.stdout


def test_path_lookup(kiwi):
    r = kiwi.run(["kiwi-probe", "exit", "0"])
    assert r.returncode == 0, explain(r)
    r = kiwi.run(["ls", "/"], opts=["--env", "PATH=/nowhere"])
    assert r.returncode == 127, f"PATH from --env is not the one searched: {explain(r)}"


# -- signals


FORWARDED = ["INT", "TERM", "HUP", "QUIT", "USR1", "USR2"]


@pytest.mark.parametrize("sig", FORWARDED)
def test_signal_forwarded_to_command(kiwi, sig):
    signum = signal.Signals[f"SIG{sig}"]
    proc = kiwi.popen(["kiwi-probe", "wait-signal", "5"])
    code, out, err, _ = signal_when_ready(proc, signum)
    assert code == 0, f"exit {code}\n{out}\n{err}"
    assert json.loads(out)["signal"] == signum, out


@pytest.mark.parametrize("sig", ["TERM", "INT", "HUP"])
def test_forwarded_signal_kills_command_with_default_action(kiwi, sig):
    signum = signal.Signals[f"SIG{sig}"]
    # `ready` from the probe itself: a shell that got the signal before its
    # exec would handle it its own way (busybox sh goes on to the exec)
    proc = kiwi.popen(["kiwi-probe", "pause", "30"])
    code, out, err, took = signal_when_ready(proc, signum)
    assert code == 128 + signum, f"exit {code}\n{out}\n{err}"
    assert took < 5


def test_shell_trap_sees_forwarded_signal(kiwi):
    proc = kiwi.popen(["/bin/sh", "-c",
                       'trap "echo trapped; exit 42" USR1; echo ready; '
                       'while :; do sleep 0.05; done'])
    code, out, err, _ = signal_when_ready(proc, signal.SIGUSR1)
    assert code == 42, f"exit {code}\n{out}\n{err}"
    assert out == "trapped\n"


def caller_ignores_and_blocks():
    """The caller's state as nohup, or a non-interactive shell's background
    job, leaves it: signals ignored, and some blocked."""
    for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP, signal.SIGTERM, signal.SIGUSR1):
        signal.signal(sig, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2, signal.SIGALRM})


def test_caller_signal_state_not_inherited(kiwi):
    """Ignored dispositions and the blocked mask survive exec: kiwi-run must
    reset them, or the command ignores the very signals it forwards."""
    r = subprocess.run(kiwi.argv([PROBE, "status"]), capture_output=True, text=True,
                       env=kiwi.env(), timeout=10, stdin=subprocess.DEVNULL,
                       preexec_fn=caller_ignores_and_blocks)
    assert r.returncode == 0, explain(r)
    st = json.loads(r.stdout)
    assert st["SigIgn"] == "0000000000000000", f"caller's ignored signals inherited: {st}"
    assert st["SigBlk"] == "0000000000000000", f"caller's blocked signals inherited: {st}"


@pytest.mark.parametrize("sig", ["INT", "HUP"])
def test_forwarding_works_when_caller_ignores(kiwi, sig):
    signum = signal.Signals[f"SIG{sig}"]
    proc = kiwi.popen(["kiwi-probe", "pause", "30"], preexec_fn=caller_ignores_and_blocks)
    code, out, err, _ = signal_when_ready(proc, signum)
    assert code == 128 + signum, f"exit {code}\n{out}\n{err}"


def test_ignored_signal_does_not_end_kiwi_run(kiwi):
    """Forwarding means the command decides: one that ignores SIGTERM
    keeps running, and kiwi-run waits for its own exit status."""
    proc = kiwi.popen(["/bin/sh", "-c", 'trap "" TERM; echo ready; sleep 1; exit 5'])
    code, out, err, _ = signal_when_ready(proc, signal.SIGTERM)
    assert code == 5, f"exit {code}\n{out}\n{err}"


# -- every process ends with the command


def pidns_alive(ns):
    """Host pids of the living (not zombie) processes in pid namespace NS
    ("pid:[inode]")."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/ns/pid") != ns:
                    continue
                with open(f"/proc/{entry}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                        pids.append(int(entry))
            except (OSError, IndexError):
                pass
    return pids


def assert_daemon_gone(daemon, beat, within=5.0):
    """No process of the sandbox's pid namespace is left (waiting up to
    WITHIN seconds: a loaded machine may take a moment to tear it down),
    and the heartbeat has stopped."""
    assert daemon["daemon_pid"] > 2 and daemon["pidns"].startswith("pid:["), daemon
    assert beat.exists(), "the daemon never beat: the test proves nothing"
    deadline = time.monotonic() + within
    while left := pidns_alive(daemon["pidns"]):
        assert time.monotonic() < deadline, \
            f"processes of the sandbox alive {within}s after kiwi-run ended: " \
            f"{[describe_pid(p) for p in left]}"
        time.sleep(0.05)
    first = beat.read_text()
    time.sleep(0.1)
    assert beat.read_text() == first, "heartbeat goes on with the pid namespace empty"


def test_daemonised_grandchild_dies_with_command(kiwi):
    work = kiwi.workdir()
    args = ["run", "--rootfs", kiwi.rootfs, "--bind", f"{work}:/workspace", "--",
            "kiwi-probe", "daemonize", "/workspace/heartbeat"]
    start = time.monotonic()
    res = kiwi.leftovers(args)
    assert res["returncode"] == 0, res
    assert time.monotonic() - start < 10, "kiwi-run waited for the daemon"
    assert res["processes"] == [], res["processes"]
    assert_daemon_gone(json.loads(res["stdout"]), work / "heartbeat")


def test_daemonised_grandchild_dies_without_wrapper(kiwi):
    """The same, with kiwi-run started directly by the test (whose subreaper
    check sees any process that escapes the sandbox)."""
    work = kiwi.workdir()
    r = kiwi.run(["kiwi-probe", "daemonize", "/workspace/heartbeat"],
                 opts=["--bind", f"{work}:/workspace"])
    assert r.returncode == 0, explain(r)
    assert_daemon_gone(json.loads(r.stdout), work / "heartbeat")


def test_background_child_does_not_hold_kiwi_run(kiwi):
    start = time.monotonic()
    r = kiwi.sh("kiwi-probe sleep 30 & echo started")
    assert r.returncode == 0 and r.stdout == "started\n", explain(r)
    assert time.monotonic() - start < 10, "kiwi-run waited for a background child"


def test_orphans_are_reaped(kiwi):
    res = kiwi.probe("orphans", "5")
    assert res == {"orphans": 5, "zombies": 0}, res


def test_sandbox_dies_with_kiwi_run(kiwi):
    """SIGKILL to kiwi-run (which it cannot forward) still ends the sandbox,
    daemons included."""
    work = kiwi.workdir()
    proc = kiwi.popen(["/bin/sh", "-c",
                       "kiwi-probe daemonize /workspace/heartbeat >/workspace/daemon.json && "
                       "exec kiwi-probe pause 30"],
                      opts=["--bind", f"{work}:/workspace"])
    code, out, err, _ = signal_when_ready(proc, signal.SIGKILL)
    assert code == -signal.SIGKILL, f"exit {code}\n{out}\n{err}"
    daemon = json.loads((work / "daemon.json").read_text())
    assert_daemon_gone(daemon, work / "heartbeat")


def test_no_spin_while_pid1_exits(kiwi, tmp_path):
    """Once pid 1 has closed its end of the sync socket, it may still take
    a while to be gone (its pid namespace's last processes die first: here
    one that frees 128 MiB). kiwi-run waits for that on pid 1's pidfd, not
    by polling the socket at EOF again and again, which spins a CPU away
    from the very exit it waits for. Counted with strace: the one EOF
    while following, and one per pass of the last drain (which runs once
    more for each output pipe whose end comes in a later pass: at most
    three); spinning reads it hundreds of times here."""
    if not shutil.which("strace"):
        pytest.skip("strace is not installed")
    log = tmp_path / "recvmsg.log"
    argv = ["strace", "-o", str(log), "-e", "trace=recvmsg",
            *kiwi.argv(["/bin/sh", "-c",
                        "dd if=/dev/zero of=/dev/null bs=128M count=1000000 2>/dev/null & sleep 0.2"])]
    # LeakSanitizer cannot run under ptrace: off for this traced run alone
    untraced = os.environ.get("ASAN_OPTIONS", "")
    r = subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
                       env=kiwi.env({"ASAN_OPTIONS": f"{untraced}:detect_leaks=0".lstrip(":")}))
    assert r.returncode == 0, explain(r)
    eofs = [l for l in log.read_text().splitlines() if l.startswith("recvmsg(") and l.endswith("= 0")]
    assert len(eofs) <= 4, f"{len(eofs)} reads of EOF from pid 1's socket: kiwi-run spun while pid 1 exited"


def test_concurrent_sandboxes(kiwi):
    procs = [kiwi.popen(["kiwi-probe", "status"], opts=["--hostname", f"box{i}"])
             for i in range(8)]
    results = [(p.communicate(timeout=30), p.returncode) for p in procs]
    for (out, err), code in results:
        assert code == 0, f"exit {code}\n{out}\n{err}"
        assert json.loads(out)["pid"] == 2


def test_arguments_passed_exactly(kiwi):
    args = ["a b", "", "c'd", 'e"f', "-x", "--", "ü", "$HOME", "*"]
    r = kiwi.run(["/bin/sh", "-c", 'for a in "$@"; do printf "[%s]\\n" "$a"; done', "sh", *args])
    assert r.returncode == 0, explain(r)
    assert r.stdout == "".join(f"[{a}]\n" for a in args), explain(r)


def test_own_session_without_controlling_tty(kiwi):
    st = kiwi.probe("status")
    assert st["sid"] == 2, f"not a session leader: {st}"
    res = kiwi.probe("open-w", "/dev/tty")
    assert res["ok"] is False, f"has a controlling terminal: {res}"


def test_command_dies_of_sigpipe(kiwi):
    """The reader of kiwi-run's stdout goes away: the command gets SIGPIPE
    at its default action, as it would outside."""
    proc = kiwi.popen(["yes"])
    try:
        assert proc.stdout.readline() == "y\n"
        proc.stdout.close()
        proc.wait(timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()
    assert proc.returncode == 128 + signal.SIGPIPE, f"exit {proc.returncode}"


def test_output_passed_through_intact(kiwi):
    """900 kB of random bytes (under the default output limit) arrive on
    kiwi-run's stdout exactly as the command wrote them."""
    work = kiwi.workdir()
    r = subprocess.run(kiwi.argv(["/bin/sh", "-c", "head -c 900000 /dev/urandom > /workspace/data"
                                  " && cat /workspace/data"],
                                 opts=["--bind", f"{work}:/workspace"]),
                       capture_output=True, env=kiwi.env(), timeout=20, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    data = (work / "data").read_bytes()
    assert len(data) == 900000
    assert r.stdout == data, f"{len(r.stdout)} bytes arrived, differing from what was written"
