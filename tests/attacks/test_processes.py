# SPDX-License-Identifier: Apache-2.0
"""Reaching out of the sandbox through other processes: ptrace, the
/proc/<pid>/exe overwrite (runc CVE-2019-5736), file descriptors leaked by
the caller and working directories of the form /proc/self/fd/N (runc
CVE-2024-21626), and input pushed into the caller's terminal (TIOCSTI)."""
import json
import os
import shutil
import subprocess

import pytest

from conftest import ATTACK, attack, explain, parse_attack, run_on_a_pty, succeeded

SECRET = "KIWI-LEAKED-SECRET"


# -- ptrace


@pytest.fixture
def host_process(kiwi):
    """A process on the host owned by the same uid as the sandbox's root
    (so that, were it reachable, nothing but the sandbox would stop a
    ptrace), ended by pid afterwards."""
    p = subprocess.Popen([*kiwi.prefix, "sleep", "60"])
    yield p
    p.kill()
    p.wait()


def _tracer_and_state(pid):
    with open(f"/proc/{pid}/status") as f:
        fields = dict(l.split(":", 1) for l in f.read().splitlines() if ":" in l)
    return fields["TracerPid"].strip(), fields["State"].split()[0]


def _hostile(steps):
    """Successes other than on our own child, and than signal 0 to pid 1
    (which only asks whether it may be signalled: the kernel drops every
    signal from inside that pid 1 does not handle)."""
    return [s for s in succeeded(steps) if "own-child" not in s and s != "kill-init"]


def test_ptrace_of_init_and_of_a_host_pid(kiwi, host_process):
    """pid 1 is non-dumpable and the host pid lies outside the sandbox's
    pid namespace; the profile refuses ptrace and pidfd_getfd anyway."""
    steps = attack(kiwi, "ptrace", str(host_process.pid))
    assert _hostile(steps) == [], steps
    assert not steps[f"kill-pid-{host_process.pid}"]["ok"], steps
    assert _tracer_and_state(host_process.pid) == ("0", "S")


def test_ptrace_control_without_seccomp(kiwi, host_process):
    """With the filter off the program can trace its own child (so it
    would notice a success), yet still neither pid 1 nor the host pid:
    dumpability and the pid namespace hold on their own."""
    steps = attack(kiwi, "ptrace", str(host_process.pid), seccomp="unconfined")
    assert steps["attach-own-child"]["ok"], steps
    assert _hostile(steps) == [], steps
    assert _tracer_and_state(host_process.pid) == ("0", "S")


# -- /proc/<pid>/exe: kiwi-run's own binary


@pytest.mark.parametrize("variant", ["default", "rw-root", "unconfined"])
def test_exe_of_every_visible_process(kiwi, variant):
    """Pid 1 is a fork of kiwi-run: its /proc/1/exe is kiwi-run's binary on
    the host. It is non-dumpable, so neither its exe nor root nor cwd
    opens; the command's own exe and a sibling's are reachable but cannot
    be opened for writing (running text, read-only root). The binary's
    digest is compared by host_unchanged."""
    opts, rootfs = [], None
    if variant == "rw-root":
        opts, rootfs = ["--rw-root"], kiwi.rootfs_copy()
    steps = attack(kiwi, "exe", opts=opts, rootfs=rootfs,
                   seccomp="unconfined" if variant == "unconfined" else None)
    assert steps["exe-self-path"]["ok"], f"control: our own exe is reachable: {steps}"
    assert [s for s in succeeded(steps) if "write" in s] == [], steps
    assert [s for s, r in steps.items() if s.endswith("-1-path") or s.endswith("-1")
            if r["ok"]] == [], steps
    for rec in steps.values():
        assert "kiwi-run" not in rec["note"] and str(kiwi.scratch) not in rec["note"], steps


# -- file descriptors of the caller


@pytest.fixture
def leaked_fds(session_dir):
    """A file and a directory of the host, opened without close-on-exec in
    the test (so kiwi-run inherits them at fds 50 and 51)."""
    d = session_dir / "leaked"
    d.mkdir(exist_ok=True, mode=0o755)
    (d / "secret").write_text(SECRET + "\n")
    shutil.copy2(session_dir / "kiwi-attack", d / "kiwi-attack")
    f = os.open(d / "secret", os.O_RDONLY)
    dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    os.dup2(f, 50)
    os.dup2(dfd, 51)
    os.close(f)
    os.close(dfd)
    yield (50, 51)
    os.close(50)
    os.close(51)


def test_leaked_fds_are_unreachable(kiwi, leaked_fds):
    r = kiwi.run([ATTACK, "fds"], pass_fds=leaked_fds)
    assert r.returncode == 0, explain(r)
    steps = parse_attack(r)
    assert [s for s in steps if s.startswith("own-fd")] == [], steps
    assert [s for s in succeeded(steps) if s.startswith("init-fd")] == [], steps
    assert SECRET not in r.stdout


def test_leaked_fds_control_preserve_fd(kiwi, leaked_fds):
    """--preserve-fd passes an fd on purpose: the attack then finds it and
    reads the secret, which shows that it would find a leaked one. (Only
    the file: a directory fd may well be refused, see below.)"""
    r = kiwi.run([ATTACK, "fds"], opts=["--preserve-fd", "50"], pass_fds=leaked_fds)
    assert r.returncode == 0, explain(r)
    steps = parse_attack(r)
    assert SECRET in steps["own-fd-50-content"]["note"], steps
    assert "own-fd-51" not in steps, steps


def test_preserved_directory_fd_stays_below_itself(kiwi, leaked_fds, canary):
    """A caller passing a directory on purpose means that directory, not
    the host's tree above it."""
    r = kiwi.run(["/bin/cat", f"/proc/self/fd/51/../{canary.name}/canary"],
                 opts=["--preserve-fd", "51"], pass_fds=leaked_fds)
    assert "KIWI-HOST-CANARY" not in r.stdout, explain(r)
    assert r.returncode in (1, 125), explain(r)


@pytest.mark.parametrize("cwd", ["/proc/self/fd/51", "/proc/1/fd/51", "/proc/self/fd/51/..",
                                 "/proc/thread-self/fd/51"])
def test_cwd_through_a_leaked_fd(kiwi, leaked_fds, cwd):
    """runc CVE-2024-21626: a working directory naming an fd that is still
    open at chdir time lands in the host's tree. Here no caller fd is open
    by then: kiwi-run refuses the directory (125), or it is the sandbox's."""
    r = kiwi.run([ATTACK, "cwd"], opts=["--cwd", cwd], pass_fds=leaked_fds)
    assert SECRET not in r.stdout + r.stderr, explain(r)
    if r.returncode == 0:
        steps = parse_attack(r)
        assert not steps["read-secret-here"]["ok"], steps
    else:
        assert r.returncode == 125, explain(r)
        assert "cwd" in r.stderr, explain(r)


@pytest.mark.parametrize("program", ["/proc/self/fd/51/kiwi-attack", "/proc/1/fd/51/kiwi-attack",
                                     "/proc/self/fd/50"])
def test_command_through_a_leaked_fd(kiwi, leaked_fds, program):
    """The command itself named through a caller's fd: not found."""
    r = kiwi.run([program, "whoami"], pass_fds=leaked_fds)
    assert r.returncode in (126, 127), explain(r)
    assert "CapEff" not in r.stdout


# -- TIOCSTI into the caller's terminal


def test_tiocsti_reaches_no_terminal(kiwi):
    """The command runs in a session of its own (no controlling terminal),
    gets /dev/null for a terminal stdin and pipes for stdout and stderr,
    and the profile refuses TIOCSTI: nothing reaches the caller's input."""
    rc, queued, out = run_on_a_pty(kiwi.argv([ATTACK, "tiocsti"]), kiwi.env())
    assert rc == 0, out
    steps = {s["step"]: s for s in map(json.loads, (l for l in out.splitlines() if l.startswith("{")))}
    assert "tiocsti-fd0" in steps, out
    assert [s for s in succeeded(steps) if s.startswith(("tiocsti", "tiocsctty"))] == [], out
    assert queued == "", f"input was pushed into the caller's terminal: {queued!r}\n{out}"


def test_tiocsti_unconfined_reaches_no_terminal(kiwi):
    """Without the filter the session of its own is the wall: TIOCSTI on a
    terminal that is not one's controlling terminal needs CAP_SYS_ADMIN,
    and so does stealing it (TIOCSCTTY)."""
    rc, queued, out = run_on_a_pty(kiwi.argv([ATTACK, "tiocsti"], ["--seccomp", "unconfined"]),
                                    kiwi.env())
    assert rc == 0, out
    assert queued == "", f"input was pushed into the caller's terminal: {queued!r}\n{out}"


def test_tiocsti_control_outside_a_sandbox(attack_binary):
    """The same program run directly on the pty does push the line, when
    the host allows TIOCSTI at all: the detector above works."""
    try:
        with open("/proc/sys/dev/tty/legacy_tiocsti") as f:
            if f.read().strip() != "1":
                pytest.skip("dev.tty.legacy_tiocsti=0: TIOCSTI is refused host-wide")
    except FileNotFoundError:
        pass  # kernels before 6.2 always allow it
    rc, queued, out = run_on_a_pty([str(attack_binary), "tiocsti"], {"PATH": "/usr/bin:/bin"})
    assert rc == 0, out
    assert "kiwi-injected" in queued, out


# -- pid 1's arguments


def test_pid1_cmdline_shows_none_of_kiwi_runs_arguments(kiwi):
    """/proc/1/cmdline as the command reads it before its main(): pid 1
    blanked the arguments it inherited from kiwi-run (host paths, --env
    values) before it forked anything, so no moment shows them."""
    work = kiwi.workdir()
    opts = ["--env", "KIWI_SECRET=cmdline-canary-6f1d", "--hostname", "cmdline-host-canary",
            "--bind", f"{work}:/workspace"]
    seen = attack(kiwi, "cmdline", opts=opts)["pid1-cmdline"]
    assert seen["ok"], seen
    assert seen["note"].strip() == "kiwi-init", seen
    for arg in kiwi.argv([ATTACK, "cmdline"], opts):
        if len(arg) > 3:
            assert arg not in seen["note"], (arg, seen)
