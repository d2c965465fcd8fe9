# SPDX-License-Identifier: Apache-2.0
"""`kiwi-run phase install|verify --session` (kiwi-run-phase(1)), root and
rootless, with no network (the egress half is tests/net/test_session.py and,
through kiwi-helper, tests/helper/test_egress.py): the phases' environment
rules hold for the session's execs, the switch to verify kills everything
the session runs but its pid 1, and the session refuses what it cannot
serve, with one line."""
import json
import re
import time

import pytest

from conftest import explain
from test_session import one_error_line

ENV = {"OPENAI_API_KEY": "sk-test", "SECRET_TOKEN": "s3cr3t", "SAFE_VAR": "passed"}


@pytest.fixture
def offline(session, kiwi):
    """A session whose install policy gives no network, and the policy."""
    d = kiwi.workdir()
    policy = d / "policy.json"
    policy.write_text(json.dumps({"version": 1, "install": {"network": "none"}}))
    kiwi.chown(d)
    return session("--policy", str(policy)), str(policy)


def phase(s, which, script, opts=(), env=None):
    return s.raw("phase", which, "--session", s.id, *opts, "--", "/bin/sh", "-c", script,
                 env=s.kiwi.env(env or {}))


def test_install_gets_an_empty_environment(offline):
    s, policy = offline
    r = phase(s, "install", "env", opts=["--policy", policy], env=ENV)
    assert r.returncode == 0, explain(r)
    names = {l.split("=", 1)[0] for l in r.stdout.splitlines()}
    assert names <= {"PATH", "HOME", "PWD", "SHLVL"}, names
    assert "HOME=/tmp" in r.stdout.splitlines(), r.stdout
    one_error_line(phase(s, "install", "true", opts=["--policy", policy, "--pass-env", "SAFE_VAR"], env=ENV),
                   "SAFE_VAR")


def test_verify_gets_only_what_is_named_never_a_model_key(offline):
    s, _ = offline
    r = phase(s, "verify", "env", opts=["--pass-env", "SAFE_VAR"], env=ENV)
    assert r.returncode == 0, explain(r)
    assert "SAFE_VAR=passed" in r.stdout.splitlines(), r.stdout
    assert "OPENAI_API_KEY" not in r.stdout and "SECRET_TOKEN" not in r.stdout, r.stdout
    one_error_line(phase(s, "verify", "true", opts=["--pass-env", "OPENAI_API_KEY"], env=ENV),
                   "OPENAI_API_KEY", "model-provider")
    one_error_line(phase(s, "verify", "true", opts=["--env", "ANTHROPIC_API_KEY=x"]), "ANTHROPIC_API_KEY")


def test_switch_to_verify_kills_what_install_left(offline):
    s, policy = offline
    r = s.sh("sleep 401 >/dev/null 2>&1 &", opts=["--keep-background"])
    assert r.returncode == 0, explain(r)
    r = phase(s, "install", "sleep 402 >/dev/null 2>&1 & setsid sleep 403 >/dev/null 2>&1 & echo ok",
              opts=["--policy", policy, "--keep-background"])
    assert r.returncode == 0 and r.stdout == "ok\n", explain(r)
    # `setsid sleep 403` may still be between its fork and its exec when
    # install returns: look again until all three run (a bound, not a
    # claim about speed).
    for _ in range(100):
        r = s.exec("ps", "-o", "comm,args")
        if all(f"sleep {n}" in r.stdout for n in (401, 402, 403)):
            break
        time.sleep(0.1)
    assert all(f"sleep {n}" in r.stdout for n in (401, 402, 403)), r.stdout
    r = phase(s, "verify", "ps -o comm,args", opts=["--debug"])
    assert r.returncode == 0, explain(r)
    assert "sleep" not in r.stdout, f"install's processes reached verify: {r.stdout}"
    killed = re.search(r"seal.*: (\d+) process\(es\) killed and reaped", r.stderr)
    assert killed and int(killed[1]) >= 3, explain(r)   # the three sleeps at least
    # and the session lives on
    assert s.sh("echo alive").stdout == "alive\n"


def test_the_session_refuses_what_it_cannot_serve(session, offline):
    s, policy = offline
    # the default install policy gives the network: this session has none
    one_error_line(phase(s, "install", "true"), "--network egress")
    one_error_line(phase(s, "install", "true", opts=["--workspace", "/tmp"]), "--workspace")
    one_error_line(s.raw("phase", "verify", "--session", s.id), "command")
    one_error_line(phase(s, "install", "true", opts=["--memory", "1G", "--policy", policy]), "--memory")
    one_error_line(s.raw("phase", "verify", "--session", "ffffffffffff", "--", "true"), "ffffffffffff")
    assert phase(s, "verify", "true").returncode == 0
    # refused by the session itself, whatever a check before it saw
    v = s.kiwi.workdir() / "refused.json"
    s.kiwi.chown(v.parent)
    one_error_line(phase(s, "install", "true", opts=["--policy", policy, "--verdict", str(v)]), "verify")
    assert json.loads(v.read_text())["reason"] == "session_refused"
    assert s.sh("echo after").stdout == "after\n"   # a plain exec still runs, offline
