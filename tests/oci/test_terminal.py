# SPDX-License-Identifier: Apache-2.0
"""runtime-spec config.md process.terminal and consoleSize, and runc's
--console-socket: the runtime sends the pty master over a unix socket as
SCM_RIGHTS; the test is the receiver."""
import os
import subprocess

from oci import (CMD_TIMEOUT, ConsoleSocket, control, probe_lines, one, read_until, wait_pid_gone,
                 wait_status)


def report_line(master):
    """Reads up to the end of the probe's report line: input is typed only
    after it, or the pty's echo of it would land inside the line."""
    text = read_until(master, '"mounts"')
    while '"mounts"' in text and "\n" not in text[text.index('"mounts"'):]:
        more = read_until(master, "\n")
        if not more:
            break
        text += more
    return text


def test_console_socket_create_start(rt, bundle, tmp_path):
    bundle.process["terminal"] = True
    bundle.process["consoleSize"] = {"height": 40, "width": 132}
    bundle.args("report", "stdin-line")
    sock = ConsoleSocket(tmp_path / "console.sock")
    cid = rt.new_id()
    bundle.write()
    creator = subprocess.Popen(rt.argv("create", "--bundle", bundle.path, "--console-socket",
                                       sock.path, cid),
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    try:
        master = sock.receive_master(creator)
    finally:
        out, err = creator.communicate(timeout=CMD_TIMEOUT)
        sock.close()
    try:
        assert creator.returncode == 0, err
        pid = rt.state(cid)["pid"]
        assert rt.cmd("start", cid).rc == 0
        text = report_line(master)
        os.write(master, b"typed line\n")
        text += read_until(master, "stdin-line")
        assert wait_pid_gone(pid)
        text += read_until(master, "\n", timeout=2)
    finally:
        os.close(master)
    rep = one(probe_lines(text), "report")
    assert rep["isatty"] == [True, True, True]
    assert rep["ttyname"].startswith("/dev/pts/")
    assert rep["winsize"] == {"rows": 40, "cols": 132}
    assert one(probe_lines(text), "stdin-line")["data"] == "typed line"
    assert wait_status(rt, cid, "stopped")["status"] == "stopped"


def test_console_socket_run(rt, bundle, tmp_path):
    bundle.process["terminal"] = True
    bundle.args("report")
    sock = ConsoleSocket(tmp_path / "console.sock")
    cid = rt.new_id()
    bundle.write()
    runner = subprocess.Popen(rt.argv("run", "--bundle", bundle.path, "--console-socket",
                                      sock.path, cid),
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    try:
        master = sock.receive_master(runner)
        text = read_until(master, '"mounts"')
        text += read_until(master, "\n", timeout=2)
    finally:
        sock.close()
    out, err = runner.communicate(timeout=CMD_TIMEOUT)
    os.close(master)
    assert runner.returncode == 0, err
    rep = one(probe_lines(text), "report")
    assert rep["isatty"] == [True, True, True]


def test_terminal_without_socket_refused(rt, bundle):
    control(rt, bundle.args("report"))
    bundle.process["terminal"] = True
    cid = rt.new_id()
    r = rt.create(cid, bundle.args("report"))
    assert r.rc != 0 and r.err.strip(), r
    st = rt.state(cid)
    assert st is None or st["status"] == "stopped"


def test_no_terminal_means_no_tty(rt, bundle):
    r = rt.run(bundle.args("report"))
    assert r.rc == 0, r
    assert r.report()["isatty"] == [False, False, False]


def test_run_foreground_terminal_relayed(rt, bundle):
    """process.terminal with `run` in the foreground and no --console-socket:
    the runtime gives the process a pty of the container's and relays it to
    its own terminal (here a pty of the test's), input and output, and
    exits with the process's status."""
    import pty
    import struct
    import fcntl
    import termios
    bundle.process["terminal"] = True
    bundle.args("report", "stdin-line", "exit=3")
    bundle.write()
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 99, 0, 0))
    cid = rt.new_id()
    runner = subprocess.Popen(rt.argv("run", "--bundle", bundle.path, cid), stdin=slave, stdout=slave,
                              stderr=slave, start_new_session=True)
    os.close(slave)
    try:
        text = report_line(master)
        os.write(master, b"typed line\n")
        text += read_until(master, "stdin-line")
        assert runner.wait(timeout=CMD_TIMEOUT) == 3, text
        text += read_until(master, "\n", timeout=2)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
        os.close(master)
        rt.ids.remove(cid)
    rep = one(probe_lines(text), "report")
    assert rep["isatty"] == [True, True, True]
    assert rep["ttyname"].startswith("/dev/pts/")
    assert rep["winsize"] == {"rows": 33, "cols": 99}, "the caller's window size"
    assert one(probe_lines(text), "stdin-line")["data"] == "typed line"
    assert rt.state(cid) is None, "a foreground run deletes its container"
