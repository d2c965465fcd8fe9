# SPDX-License-Identifier: Apache-2.0
"""`kiwi-run shell` and `run --tty` at a terminal (tmux), as a person uses
them: typing, resizing, ^C, job control, ^D, and the terminal given back
cooked on every way out."""
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import REPO, assert_cooked


def shell(kiwi, *opts):
    return [*kiwi.prefix, kiwi.binary, "shell", "--rootfs", kiwi.rootfs, *opts]


def run_tty(kiwi, cmd, *opts):
    return [*kiwi.prefix, kiwi.binary, "run", "--tty", "--rootfs", kiwi.rootfs, *opts, "--", *cmd]


def started(pane, argv):
    """Starts argv in the pane and waits for a shell that answers."""
    pane.start(argv)
    pane.run_line("echo up-$((6*7))", r"^up-42")


def test_typing_and_own_terminal(kiwi, pane):
    """Echo works; the terminal is /dev/pts/N of the sandbox's own devpts,
    which holds nothing else; the shell's ^D exits with the last status."""
    started(pane, shell(kiwi))
    assert not pane.cooked(), "the caller's terminal is not raw during the session"
    pane.run_line("echo hello-$((1+2))", r"^hello-3")
    pane.run_line("tty; ls /dev/pts | tr '\\n' ' '; echo", r"^/dev/pts/(\d+)\s*\n0 ptmx\s*$")
    pane.run_line("[ -t 0 ] && [ -t 1 ] && [ -t 2 ] && echo all-$((2*3))-ttys", r"^all-6-ttys")
    pane.run_line("echo TERM=$TERM", r"^TERM=\S+")
    start = len(pane.screen().rstrip())
    pane.type("(exit 3)")
    pane.ctrl_d(after=start + len(" (exit 3)"))
    assert_cooked(pane, 3)


def test_window_size_follows(kiwi, pane):
    """Set at start and forwarded on SIGWINCH (tmux resizing the window)."""
    started(pane, shell(kiwi))
    rows, cols = pane.size()
    pane.run_line("stty size", rf"^{rows} {cols}\s*$")
    pane.tmux("resize-window", "-x", 123, "-y", 41)
    rows2, cols2 = pane.size()
    assert (rows2, cols2) != (rows, cols)
    pane.run_line("stty size", rf"^{rows2} {cols2}\s*$")
    pane.ctrl_d()
    assert_cooked(pane, 0)


def test_ctrl_c_reaches_the_program_not_kiwi_run(kiwi, pane):
    """^C ends the foreground program inside; the shell and kiwi-run go on."""
    started(pane, shell(kiwi))
    pid = pane.kiwi_pid()
    assert pid
    start = len(pane.screen().rstrip())
    pane.type("sleep 100")
    pane.wait_foreground("sleep")
    pane.keys("C-c")
    pane.wait_for(r"\^C", start)
    pane.run_line("echo back-$((5*5))", r"^back-25")
    assert pane.kiwi_pid() == pid
    pane.run_line("exit 0", r"KIWI-EXIT=")
    assert_cooked(pane, 0)


def test_job_control(kiwi, pane):
    """A session leader with the pty as its controlling terminal: jobs,
    fg, ^Z and bg work in the shell inside."""
    started(pane, shell(kiwi))
    pane.run_line("sleep 100 & echo started-$((2*4))", r"^started-8")
    pane.run_line("jobs", r"\[1\]\+\s+Running\s+sleep 100")
    start = len(pane.screen().rstrip())
    pane.type("fg")
    pane.wait_for(r"^sleep 100\s*$", start)
    pane.wait_foreground("sleep")
    pane.keys("C-z")
    pane.wait_for(r"\[1\]\+\s+Stopped\s+sleep 100", start)
    pane.run_line("jobs", r"\[1\]\+\s+Stopped\s+sleep 100")
    pane.run_line("bg", r"\[1\] sleep 100")
    # ash marks the job running only once it has seen it continue: ask
    # until it has (each answer ends with its own marker line)
    for n in range(100):
        start = len(pane.screen().rstrip())
        m = pane.run_line(f"jobs; echo asked-{n}-$((1+1))", rf"^asked-{n}-2")
        if re.search(r"\[1\]\+?\s+Running\s+sleep 100", pane.screen()[start:m.start()]):
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"jobs never showed sleep 100 running again:\n{pane.screen()}")
    pane.run_line("kill %1; wait; echo reaped-$((3*3))", r"^reaped-9")
    pane.ctrl_d()
    assert_cooked(pane, 0)


def test_sigterm_to_kiwi_run_restores_the_terminal(kiwi, pane):
    """SIGTERM hangs the session up: the shell gets SIGHUP (129) and the
    caller's terminal comes back cooked."""
    started(pane, shell(kiwi))
    start = len(pane.screen().rstrip())
    pane.type("sleep 100")
    pane.wait_for(r"sleep 100\s*$", start)
    os.kill(pane.kiwi_pid(), signal.SIGTERM)
    assert_cooked(pane, 128 + signal.SIGHUP)


def test_other_fatal_signal_restores_the_terminal(kiwi, pane):
    """A signal kiwi-run does not forward and that kills it (SIGALRM here)
    still gives the terminal back first."""
    started(pane, shell(kiwi))
    os.kill(pane.kiwi_pid(), signal.SIGALRM)
    assert_cooked(pane, 128 + signal.SIGALRM)


def _state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def test_stopped_kiwi_run_leaves_the_terminal_cooked(kiwi, pane):
    """SIGTSTP from outside stops kiwi-run with the terminal cooked, and
    SIGCONT makes it raw again and the session goes on."""
    started(pane, shell(kiwi))
    pid = pane.kiwi_pid()
    os.kill(pid, signal.SIGTSTP)
    deadline = time.monotonic() + 30
    while _state(pid) != "T":
        assert time.monotonic() < deadline, "kiwi-run never stopped"
        time.sleep(0.05)
    assert pane.cooked()
    os.kill(pid, signal.SIGCONT)
    pane.wait_mode(cooked=False)
    pane.run_line("echo still-$((7*7))", r"^still-49")
    pane.ctrl_d()
    assert_cooked(pane, 0)


def test_command_killed_restores_the_terminal(kiwi, pane):
    started(pane, shell(kiwi))
    pane.type("kill -9 $$")
    assert_cooked(pane, 128 + signal.SIGKILL)


def test_timeout_restores_the_terminal(kiwi, pane):
    started(pane, shell(kiwi, "--timeout", "3s"))
    assert_cooked(pane, 128 + signal.SIGKILL)


def test_exec_failure_restores_the_terminal(kiwi, pane):
    pane.start(run_tty(kiwi, ["/no/such/program"]))
    assert_cooked(pane, 127)
    assert re.search(r"kiwi-run: exec: cannot execute `/no/such/program`", pane.screen())


def test_run_tty_gives_any_command_a_terminal(kiwi, pane):
    pane.start(run_tty(kiwi, ["/bin/sh", "-c", "tty; stty size; exit 4"]))
    status, _ = assert_cooked(pane, 4)
    rows, cols = pane.size()
    assert re.search(rf"^/dev/pts/\d+\s*\n{rows} {cols}\s*$", pane.screen(), re.M), pane.screen()


def test_workspace_is_bound_and_the_start(kiwi, pane):
    work = kiwi.workdir()
    (work / "in-host").write_text("from the host\n")
    kiwi.chown(work / "in-host")
    started(pane, shell(kiwi, "--workspace", work))
    pane.run_line("pwd; cat in-host", r"^/workspace\s*\nfrom the host")
    pane.run_line("echo made-inside > made && echo wrote-$((4*4))", r"^wrote-16")
    pane.ctrl_d()
    assert_cooked(pane, 0)
    assert (work / "made").read_text() == "made-inside\n"


def test_shell_refuses_a_stdin_that_is_not_a_terminal(kiwi):
    r = kiwi.raw(["shell", "--rootfs", kiwi.rootfs], input="echo hi\n")
    assert r.returncode == 125, r
    assert r.stderr.count("\n") == 1 and "stdin is not a terminal" in r.stderr, r.stderr


def _pack(kiwi_rootfs, rootfs, out, *entrypoint):
    args = [a for e in entrypoint for a in ("--entrypoint", e)]
    r = subprocess.run([str(kiwi_rootfs), "pack", str(rootfs), f"{out}:t", *args],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for root, dirs, files in os.walk(out):
        for name in dirs + files:
            os.chmod(os.path.join(root, name), 0o755 if name in dirs else 0o644)
    out.chmod(0o755)
    return out


@pytest.mark.parametrize("entrypoint, shell_inside", [
    (["/bin/ash"], "/bin/ash"),                   # a shell alone: the image's
    (["/bin/echo", "not-a-shell"], "/bin/sh"),    # anything else: /bin/sh
])
def test_image_shell(kiwi, pane, kiwi_rootfs, rootfs, session_dir, entrypoint, shell_inside):
    layout = session_dir / f"layout-{entrypoint[-1].strip('/').replace('/', '-')}"
    if not layout.exists():
        _pack(kiwi_rootfs, rootfs, layout, *entrypoint)
    cache = kiwi.workdir()
    started(pane, [*kiwi.prefix, kiwi.binary, "shell", "--image", f"{layout}:t",
                   "--image-cache", cache])
    pane.run_line("echo shell=$0", rf"^shell={shell_inside}\s*$")
    pane.ctrl_d()
    assert_cooked(pane, 0)


def test_output_limit_bounds_the_terminal_as_one_stream(kiwi):
    """--tty: stdout and stderr are one stream through the terminal,
    bounded by --output-limit and counted as stdout in the verdict. A
    stdin that is not a terminal gives the command a terminal all the same."""
    work = kiwi.workdir()
    script = "[ -t 0 ] && [ -t 1 ] && [ -t 2 ] && head -c 3000 /dev/zero | tr '\\0' o >&2; echo; echo end"
    r = kiwi.raw(["run", "--tty", "--rootfs", kiwi.rootfs, "--output-limit", "1k",
                  "--verdict", work / "v.json", "--", "/bin/sh", "-c", script], input="")
    assert r.returncode == 0, r
    assert r.stdout == "o" * 1024 and r.stderr == "", r
    v = json.loads((work / "v.json").read_text())
    assert v["stdout_truncated"] and v["stdout_bytes"] >= 3000 + len("\r\nend\r\n"), v
    assert v["stderr_bytes"] == 0 and not v["stderr_truncated"], v
