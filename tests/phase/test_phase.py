# SPDX-License-Identifier: Apache-2.0
"""kiwi-run phase on a busybox rootfs: the credential rules, the plan's
outcomes, the reasons a phase gives, and what persists between phases."""
import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from conftest import CANARY, explain

NONE = ("--network", "none")  # install's default (egress) needs root and a fake upstream: test_npm.py


def environ_of_everything():
    """Every process's environment inside, as one text."""
    return ["/bin/sh", "-c", "cat /proc/[0-9]*/environ | tr '\\0' '\\n'"]


def test_install_with_nothing_declared_is_skipped(phase):
    ws = phase.workspace({"README.md": "no manifest here\n"})
    r = phase("install", ws, NONE)
    assert r.returncode == 0, explain(r)
    v = r.verdict
    assert v["phase"] == "install" and v["skipped"] == "no dependencies declared", v
    assert v["started"] is False and v["reason"] is None
    assert v["plan"]["steps"] == []


def test_install_env_is_empty_whatever_the_caller_has(phase):
    ws = phase.workspace()
    r = phase("install", ws, NONE, environ_of_everything())
    assert r.returncode == 0, explain(r)
    assert "leaked-from-the-caller" not in r.stdout and CANARY not in r.stdout
    names = {l.split("=", 1)[0] for l in r.stdout.splitlines() if "=" in l}
    assert names <= {"PATH", "HOME", "PWD", "SHLVL"}, names  # the last two are the shell's
    assert r.verdict["credentials"] == []


def test_install_refuses_pass_env_and_says_why(phase):
    ws = phase.workspace()
    r = phase("install", ws, (*NONE, "--pass-env", CANARY), ["true"])
    assert r.returncode == 125, explain(r)
    assert r.stderr.count("\n") == 1 and "install" in r.stderr, r.stderr
    assert r.verdict is None  # refused before anything ran


def test_verify_passes_only_what_is_named(phase):
    ws = phase.workspace()
    r = phase("verify", ws, (), environ_of_everything())
    assert r.returncode == 0, explain(r)
    assert "leaked-from-the-caller" not in r.stdout
    # the control: naming it is how it crosses, so the check above can fail
    r = phase("verify", ws, ("--pass-env", CANARY), environ_of_everything())
    assert r.returncode == 0, explain(r)
    assert f"{CANARY}=leaked-from-the-caller" in r.stdout
    assert r.verdict["credentials"] == [CANARY]
    fields = {k: v for k, v in r.verdict.items() if k != "output_tail"}  # the command's own output
    assert "leaked-from-the-caller" not in json.dumps(fields)  # names, never values


@pytest.mark.parametrize("key", ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"])
def test_a_model_key_is_refused_even_when_named(phase, key):
    ws = phase.workspace()
    r = phase("verify", ws, ("--pass-env", key), environ_of_everything(), env={key: "sk-secret"})
    assert r.returncode == 125, explain(r)
    assert key in r.stderr and r.stderr.count("\n") == 1, r.stderr
    r = phase("verify", ws, ("--env", f"{key}=sk-secret"), ["true"])
    assert r.returncode == 125, explain(r)


def test_a_long_name_cannot_hide_a_model_key(phase):
    ws = phase.workspace()
    name = "X" * 300 + "_ANTHROPIC_API_KEY"
    r = phase("verify", ws, ("--env", f"{name}=sk"), ["true"])
    assert r.returncode == 125, explain(r)


def test_test_credentials_opt_in_never_admits_a_model_key(phase, scratch):
    """allow_test_credentials admits named non-model test credentials; a
    model-provider key is refused in both phases whatever the policy says."""
    ws = phase.workspace()
    policy = phase.kiwi._fresh("policy") / "p.json"
    policy.write_text(json.dumps({"version": 1, "allow_test_credentials": True}))
    phase.kiwi.chown(policy.parent)
    env = {"OPENAI_API_KEY": "sk-test-only", "STRIPE_TEST_KEY": "sk_test_1"}
    r = phase("verify", ws, ("--policy", policy, "--pass-env", "OPENAI_API_KEY"),
              environ_of_everything(), env=env)
    assert r.returncode == 125 and "sk-test-only" not in r.stdout, explain(r)
    assert "model-provider key" in r.stderr and "whatever the policy says" in r.stderr, r.stderr
    r = phase("install", ws, ("--policy", policy, *NONE, "--pass-env", "OPENAI_API_KEY"),
              ["true"], env=env)
    assert r.returncode == 125, explain(r)
    r = phase("verify", ws, ("--policy", policy, "--pass-env", "STRIPE_TEST_KEY"),
              environ_of_everything(), env=env)
    assert r.returncode == 0, explain(r)
    assert "STRIPE_TEST_KEY=sk_test_1" in r.stdout and "OPENAI_API_KEY" not in r.stdout
    assert r.verdict["credentials"] == ["STRIPE_TEST_KEY"]


def test_unknown_policy_key_names_key_and_file(phase):
    ws = phase.workspace()
    policy = phase.kiwi._fresh("policy") / "bad.json"
    policy.write_text(json.dumps({"version": 1, "install": {"limts": {}}}))
    phase.kiwi.chown(policy.parent)
    r = phase("install", ws, ("--policy", policy, *NONE), ["true"])
    assert r.returncode == 125, explain(r)
    assert "limts" in r.stderr and "bad.json" in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_verify_never_has_a_network(phase):
    ws = phase.workspace()
    r = phase("verify", ws, ("--network", "egress"), ["true"])
    assert r.returncode == 125, explain(r)
    assert "verify" in r.stderr and "network" in r.stderr


def test_verify_reports_the_network_it_tried(phase):
    ws = phase.workspace()
    # kiwi-probe, static and without a resolver (busybox-static's wget
    # cannot be trusted with getaddrinfo), connects the way a test would
    r = phase("verify", ws, (), ["/bin/sh", "-c", "/usr/local/bin/kiwi-probe connect tcp 192.0.2.1 80; exit 1"])
    assert r.returncode == 1, explain(r)
    v = r.verdict
    assert v["reason"] == "verify_failed" and v["network_attempted"] is True, v
    assert any(a["dst"] == "192.0.2.1" and a["port"] == 80 for a in v["network_attempts"]), v
    # the control: a run that touches nothing says so
    r = phase("verify", ws, (), ["true"])
    assert r.verdict["network_attempted"] is False, r.verdict


def test_install_failure_has_reason_and_tail(phase):
    ws = phase.workspace()
    r = phase("install", ws, NONE, ["/bin/sh", "-c", "echo fetching; echo 'E404 no such package' >&2; exit 3"])
    assert r.returncode == 3, explain(r)
    v = r.verdict
    assert v["reason"] == "install_failed" and v["phase"] == "install"
    assert "E404 no such package" in v["output_tail"]["stderr"]
    assert "fetching" in v["output_tail"]["stdout"]


def test_install_timeout_kills_with_its_reason(phase):
    ws = phase.workspace()
    r = phase("install", ws, NONE, ["/bin/sh", "-c", "echo started; exec sleep 1000"],
              env={"KIWI_INSTALL_TIMEOUT": "1s"})
    assert r.verdict["reason"] == "install_timed_out", explain(r)
    assert r.verdict["timed_out"] is True and r.verdict["killed_by"] == "timeout"
    assert "started" in r.verdict["output_tail"]["stdout"]


def test_missing_package_manager_is_tool_missing(phase):
    ws = phase.workspace({"package.json": '{"name":"x","version":"1.0.0","dependencies":{"left-pad":"1.3.0"}}',
                          "package-lock.json": '{"name":"x","lockfileVersion":3,"requires":true,"packages":{}}'})
    r = phase("install", ws, NONE)
    v = r.verdict
    assert v is not None, explain(r)
    assert v["reason"] == "tool_missing", v
    assert v["plan"]["steps"] and v["plan"]["steps"][0][0] == "npm", v["plan"]


def test_the_output_tail_is_valid_json_whatever_was_printed(phase):
    ws = phase.workspace()
    r = phase("install", ws, NONE, ["/bin/sh", "-c", "printf '\\377\\376abc\\303'; exit 1"])
    assert r.verdict["output_tail"]["stdout"].endswith("abc?"), r.verdict["output_tail"]


def marker_processes(marker):
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if marker in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                found.append(pid)
        except OSError:
            pass
    return found


def test_nothing_started_in_install_survives_it(phase):
    ws = phase.workspace()
    secs = 100000 + uuid.uuid4().int % 100000   # a sleep no other process runs
    script = (f"setsid sleep {secs} </dev/null >/dev/null 2>&1 & "
              f"(sleep {secs + 1} </dev/null >/dev/null 2>&1 &) ; "
              f"nohup sleep {secs + 2} </dev/null >/dev/null 2>&1 & "
              "echo kept > /workspace/kept; echo gone > /tmp/gone; mkdir -p /tmp/x; exit 0")
    r = phase("install", ws, NONE, ["/bin/sh", "-c", script])
    assert r.returncode == 0, explain(r)
    assert marker_processes(f"sleep {secs}") == [], "a process of install outlived it"
    if phase.kiwi.mode == "root":
        assert r.verdict["cgroup"], "root gets a cgroup witness"
        assert r.verdict["cleanup_error"] is None
        assert not Path(r.verdict["cgroup"]).exists()
    r = phase("verify", ws, (), ["/bin/sh", "-c", "cat /workspace/kept; test ! -e /tmp/gone && echo no-tmp"])
    assert r.returncode == 0, explain(r)
    assert r.stdout.split() == ["kept", "no-tmp"]


def test_a_workspace_runs_one_phase_at_a_time(phase):
    ws = phase.workspace()
    argv = [*phase.kiwi.prefix, phase.kiwi.binary, "phase", "install", "--rootfs", phase.kiwi.rootfs,
            "--workspace", str(ws), *NONE, "--", "/bin/sh", "-c", "echo ready; exec sleep 30"]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         stdin=subprocess.DEVNULL)
    try:
        assert p.stdout.readline() == "ready\n"
        r = phase("verify", ws, (), ["true"])
        assert r.returncode == 125 and "in use" in r.stderr, explain(r)
    finally:
        p.kill()
        p.communicate()


def test_caches_are_writable_in_install_and_read_only_in_verify(phase):
    ws = phase.workspace()
    cache = phase.kiwi.workdir()
    r = phase("install", ws, (*NONE, "--cache", f"{cache}:/var/tmp"), ["/bin/sh", "-c", "echo c > /var/tmp/c"])
    assert r.returncode == 0, explain(r)
    assert (cache / "c").read_text() == "c\n"
    r = phase("verify", ws, ("--cache", f"{cache}:/var/tmp"), ["/bin/sh", "-c", "cat /var/tmp/c; echo d > /var/tmp/d"])
    assert r.returncode != 0 and r.stdout == "c\n", explain(r)
    assert not (cache / "d").exists()


def test_bad_phase_and_missing_workspace(phase, kiwi):
    r = kiwi.raw(["phase", "deploy"])
    assert r.returncode == 125 and r.stderr.count("\n") == 1, explain(r)
    r = kiwi.raw(["phase", "verify", "--rootfs", kiwi.rootfs, "--", "true"])
    assert r.returncode == 125 and "--workspace" in r.stderr, explain(r)
    r = kiwi.raw(["phase", "verify", "--rootfs", kiwi.rootfs, "--workspace", "/nonexistent/ws", "--", "true"])
    assert r.returncode == 125 and "/nonexistent/ws" in r.stderr, explain(r)


def test_the_sandbox_init_keeps_no_copy_of_the_callers_environment(phase):
    """pid 1 inside is a clone of kiwi-run: its memory held the caller's
    environment. Read from the host (as root, past non-dumpable), the
    environment of the sandbox's init must not show the canary."""
    if os.geteuid() != 0:
        pytest.skip("reading another process's environ needs root")
    ws = phase.workspace()
    argv = [*phase.kiwi.prefix, phase.kiwi.binary, "phase", "verify", "--rootfs", phase.kiwi.rootfs,
            "--workspace", str(ws), "--", "/bin/sh", "-c", "echo ready; exec sleep 30"]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         stdin=subprocess.DEVNULL, env=phase.kiwi.env())
    try:
        assert p.stdout.readline() == "ready\n"
        kiwi_pid = p.pid
        if phase.kiwi.prefix:  # setpriv execs kiwi-run: same pid
            pass
        children = Path(f"/proc/{kiwi_pid}/task/{kiwi_pid}/children").read_text().split()
        assert children, "kiwi-run has no child"
        init_env = Path(f"/proc/{children[0]}/environ").read_bytes()
        own_env = Path(f"/proc/{kiwi_pid}/environ").read_bytes()
        assert b"leaked-from-the-caller" in own_env  # the control: the caller did pass it
        assert b"leaked-from-the-caller" not in init_env
    finally:
        p.kill()
        p.communicate()


def test_list_shows_the_phase(phase):
    ws = phase.workspace()
    argv = [*phase.kiwi.prefix, phase.kiwi.binary, "phase", "verify", "--rootfs", phase.kiwi.rootfs,
            "--workspace", str(ws), "--", "/bin/sh", "-c", "echo ready; exec sleep 30"]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         stdin=subprocess.DEVNULL)
    try:
        assert p.stdout.readline() == "ready\n"
        # the entry is made 100 ms into a run (kiwi-run-list(1)): wait for it
        deadline = time.monotonic() + 10
        while True:
            r = phase.kiwi.raw(["list", "--json"])
            assert r.returncode == 0, explain(r)
            mine = [e for e in json.loads(r.stdout) if e["supervisor_pid"] == p.pid]
            if mine or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert len(mine) == 1, r.stdout
        assert mine[0]["phase"] == "verify" and mine[0]["network"] == "audit", mine
    finally:
        p.kill()
        p.communicate()


def test_flags_override_the_policy(phase):
    ws = phase.workspace()
    policy = phase.kiwi._fresh("policy") / "p.json"
    policy.write_text(json.dumps({"version": 1, "install": {"network": "none", "limits": {"timeout": "1s"},
                                                            "env": {"STAGE": "from-policy"}}}))
    phase.kiwi.chown(policy.parent)
    cmd = ["/bin/sh", "-c", "sleep 2; echo $STAGE"]
    r = phase("install", ws, ("--policy", policy), cmd)
    assert r.verdict["reason"] == "install_timed_out", explain(r)   # the policy's timeout applies
    r = phase("install", ws, ("--policy", policy, "--timeout", "60s", "--env", "STAGE=from-flag"), cmd)
    assert r.returncode == 0 and r.stdout == "from-flag\n", explain(r)


def test_dependencies_without_a_lockfile_are_refused_not_guessed(phase):
    ws = phase.workspace({"package.json": '{"name":"x","version":"1.0.0","dependencies":{"left-pad":"1.3.0"}}'})
    r = phase("install", ws, NONE)
    assert r.returncode == 125 and r.stderr.count("\n") == 1 and "lockfile" in r.stderr, explain(r)
    v = r.verdict
    assert v["reason"] == "plan_refused" and v["started"] is False, v
    assert v["plan"]["evidence"][0]["file"] == "package.json", v["plan"]
