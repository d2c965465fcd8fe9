# SPDX-License-Identifier: Apache-2.0
"""The verdict JSON: --verdict FILE and --verdict-fd N."""
import errno
import json
import os
import re
import signal
import time
from datetime import datetime, timedelta, timezone

from conftest import explain, signal_when_ready

RFC3339_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|\+00:00)")
NUMBER_FIELDS = ("wall_ms", "cpu_user_ms", "cpu_sys_ms")


def check_shape(v):
    """The fields every verdict has, with their types."""
    assert isinstance(v, dict), v
    assert isinstance(v.get("exit_code"), int) and not isinstance(v["exit_code"], bool), v
    assert v.get("signal", "absent") is None or isinstance(v["signal"], int), v
    for k in NUMBER_FIELDS:
        assert isinstance(v.get(k), (int, float)) and not isinstance(v[k], bool), (k, v)
        assert v[k] >= 0, (k, v)
    assert "error" in v, v
    assert isinstance(v.get("started_at"), str) and RFC3339_UTC.fullmatch(v["started_at"]), v
    started = datetime.fromisoformat(v["started_at"].replace("Z", "+00:00"))
    now = datetime.now(timezone.utc)
    assert now - timedelta(minutes=2) < started <= now + timedelta(seconds=1), (started, now)


def run_with_verdict(kiwi, cmd, opts=(), rootfs=None):
    """Runs CMD with --verdict; checks the verdict's times against the
    host's clock around the run: started_at inside it, wall and CPU times
    no longer than it (a unit slip, µs for ms, shows here)."""
    out = kiwi.workdir() / "verdict.json"
    before = datetime.now(timezone.utc) - timedelta(milliseconds=50)
    t0 = time.monotonic()
    r = kiwi.run(cmd, opts=["--verdict", out, *opts], rootfs=rootfs)
    elapsed_ms = (time.monotonic() - t0) * 1000
    after = datetime.now(timezone.utc) + timedelta(milliseconds=50)
    assert out.exists(), f"no verdict written: {explain(r)}"
    text = out.read_text()
    try:
        v = json.loads(text)
    except ValueError:
        raise AssertionError(f"the verdict is not one JSON value: {text!r}")
    if isinstance(v.get("started_at"), str) and RFC3339_UTC.fullmatch(v["started_at"]):
        started = datetime.fromisoformat(v["started_at"].replace("Z", "+00:00"))
        assert before <= started <= after, f"started_at {started} outside the run {before}..{after}"
    if isinstance(v.get("wall_ms"), (int, float)):
        assert v["wall_ms"] <= elapsed_ms, f"wall_ms {v['wall_ms']} > the whole run {elapsed_ms}"
    cpu = [v.get(k) for k in ("cpu_user_ms", "cpu_sys_ms")]
    if all(isinstance(c, (int, float)) for c in cpu):
        assert sum(cpu) <= elapsed_ms * (os.cpu_count() or 1) + 20, f"CPU {cpu} ms in {elapsed_ms} ms"
    return r, v


def test_verdict_exit_code(kiwi):
    r, v = run_with_verdict(kiwi, ["kiwi-probe", "exit", "3"])
    assert r.returncode == 3, explain(r)
    check_shape(v)
    assert v["exit_code"] == 3 and v["signal"] is None and v["error"] is None, v


def test_verdict_success(kiwi):
    r, v = run_with_verdict(kiwi, ["true"])
    assert r.returncode == 0, explain(r)
    check_shape(v)
    assert v["exit_code"] == 0 and v["signal"] is None and v["error"] is None, v


def test_verdict_high_exit_code_is_not_a_signal(kiwi):
    r, v = run_with_verdict(kiwi, ["kiwi-probe", "exit", "137"])
    assert r.returncode == 137, explain(r)
    check_shape(v)
    assert v["exit_code"] == 137 and v["signal"] is None, v


def test_verdict_on_stdout_after_output(kiwi):
    """--verdict-fd 1: the command's output, then the verdict, last."""
    r = kiwi.run(["/bin/sh", "-c", "echo hello; echo oops >&2"], opts=["--verdict-fd", "1"])
    assert r.returncode == 0, explain(r)
    first, rest = r.stdout.split("\n", 1)
    assert first == "hello", explain(r)
    v = json.loads(rest)
    check_shape(v)
    assert v["exit_code"] == 0, v
    assert r.stderr == "oops\n", explain(r)


def test_verdict_signal(kiwi):
    r, v = run_with_verdict(kiwi, ["kiwi-probe", "kill-self", "KILL"])
    assert r.returncode == 137, explain(r)
    check_shape(v)
    assert v["signal"] == 9 and v["exit_code"] == 137 and v["error"] is None, v


def test_verdict_wall_time(kiwi):
    _, v = run_with_verdict(kiwi, ["kiwi-probe", "sleep", "0.3"])
    check_shape(v)
    assert 300 <= v["wall_ms"] < 10000, v
    assert v["cpu_user_ms"] < 250, f"sleeping counted as CPU: {v}"


def test_verdict_cpu_time_counts_the_sandbox(kiwi):
    """The command's own CPU time, not kiwi-run's, is in the verdict."""
    _, v = run_with_verdict(kiwi, ["kiwi-probe", "spin", "400"])
    check_shape(v)
    assert v["cpu_user_ms"] + v["cpu_sys_ms"] >= 350, v
    assert v["cpu_user_ms"] >= 200, v
    assert v["wall_ms"] >= 350, v


def test_verdict_cpu_time_includes_grandchildren(kiwi):
    _, v = run_with_verdict(kiwi, ["/bin/sh", "-c", "kiwi-probe spin 300; true"])
    check_shape(v)
    assert v["cpu_user_ms"] >= 200, v


def test_verdict_not_found(kiwi):
    r, v = run_with_verdict(kiwi, ["/usr/bin/no-such-program"])
    assert r.returncode == 127, explain(r)
    check_shape(v)
    assert v["exit_code"] == 127, v


def test_verdict_fd(kiwi):
    r_fd, w_fd = os.pipe()
    try:
        r = kiwi.run(["kiwi-probe", "exit", "5"], opts=["--verdict-fd", w_fd], pass_fds=[w_fd])
        os.close(w_fd)
        w_fd = -1
        data = b""
        while chunk := os.read(r_fd, 65536):
            data += chunk
    finally:
        os.close(r_fd)
        if w_fd >= 0:
            os.close(w_fd)
    assert r.returncode == 5, explain(r)
    v = json.loads(data)
    check_shape(v)
    assert v["exit_code"] == 5 and v["error"] is None, v


def test_verdict_fd_not_inherited_by_command(kiwi):
    r_fd, w_fd = os.pipe()
    try:
        r = kiwi.run(["kiwi-probe", "fds"], opts=["--verdict-fd", w_fd], pass_fds=[w_fd])
    finally:
        os.close(r_fd)
        os.close(w_fd)
    assert r.returncode == 0 and json.loads(r.stdout) == [0, 1, 2], explain(r)


def test_verdict_records_launch_failure(kiwi):
    missing = kiwi.scratch / "no-such-rootfs"
    out = kiwi.workdir() / "verdict.json"
    r = kiwi.run(["true"], opts=["--verdict", out], rootfs=missing)
    assert r.returncode == 125, explain(r)
    assert out.exists(), f"no verdict for a failed launch: {explain(r)}"
    v = json.loads(out.read_text())
    assert isinstance(v.get("exit_code"), int), v
    err = v.get("error")
    assert isinstance(err, dict), v
    assert isinstance(err.get("step"), str) and err["step"], v
    assert err.get("errno") == errno.ENOENT, v
    assert isinstance(err.get("message"), str) and err["message"], v


def test_verdict_and_verdict_fd_exclusive(kiwi):
    out = kiwi.workdir() / "verdict.json"
    r = kiwi.run(["true"], opts=["--verdict", out, "--verdict-fd", "1"])
    assert r.returncode == 125, explain(r)


def test_verdict_file_not_inherited_by_command(kiwi):
    out = kiwi.workdir() / "verdict.json"
    r = kiwi.run(["kiwi-probe", "fds"], opts=["--verdict", out])
    assert r.returncode == 0 and json.loads(r.stdout) == [0, 1, 2], explain(r)


def test_verdict_truncates_an_existing_file(kiwi):
    out = kiwi.workdir() / "verdict.json"
    out.write_text("x" * 10000)
    kiwi.chown(out)
    r = kiwi.run(["true"], opts=["--verdict", out])
    assert r.returncode == 0, explain(r)
    v = json.loads(out.read_text())  # trailing garbage would not parse
    check_shape(v)


def test_verdict_forwarded_signal(kiwi):
    out = kiwi.workdir() / "verdict.json"
    proc = kiwi.popen(["kiwi-probe", "pause", "30"], opts=["--verdict", out])
    code, stdout, err, _ = signal_when_ready(proc, signal.SIGTERM)
    assert code == 143, f"exit {code}\n{stdout}\n{err}"
    v = json.loads(out.read_text())
    check_shape(v)
    assert v["signal"] == 15 and v["exit_code"] == 143 and v["error"] is None, v


def test_verdict_path_swapped_by_the_sandbox(kiwi):
    """A command that can write where the verdict goes replaces the file by
    a symlink to a host file: the verdict must not follow it there (the
    file is opened before the sandbox starts, and written through that fd)."""
    work = kiwi.workdir()
    canary = kiwi.workdir() / "canary"
    canary.write_text("precious\n")
    verdict = work / "verdict.json"
    r = kiwi.sh(f"rm /workspace/verdict.json && ln -s {canary} /workspace/verdict.json",
                opts=["--bind", f"{work}:/workspace", "--verdict", verdict])
    assert r.returncode == 0, explain(r)
    assert verdict.is_symlink(), "the command did not swap the file: the test proves nothing"
    assert canary.read_text() == "precious\n", "kiwi-run wrote the verdict through the symlink"


def test_verdict_written_when_preparation_fails(kiwi):
    """Once --verdict names a file, every later failure is written there,
    not just printed: an unwritable --stdout fails before any sandbox."""
    bad = kiwi.workdir() / "no-such-dir" / "out.txt"
    r, v = run_with_verdict(kiwi, ["true"], opts=["--stdout", bad])
    assert r.returncode == 125, explain(r)
    check_shape(v)
    assert v["exit_code"] == 125 and v["started"] is False, v
    assert v["error"]["step"] == "output" and v["error"]["errno"] == errno.ENOENT, v
    assert str(bad) in v["error"]["message"], v
