# SPDX-License-Identifier: Apache-2.0
"""`kiwi-run plan --workspace DIR`: the JSON it prints and how it refuses."""
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
KIWI_RUN = os.environ.get("KIWI_RUN", str(HERE.parent.parent / "build" / "src" / "kiwi-run"))


def plan(*args):
    return subprocess.run([KIWI_RUN, "plan", *args], capture_output=True, text=True, timeout=30)


def evidence(j, file):
    return [e["why"] for e in j["evidence"] if e["file"] == file]


def test_packagemanager_decides_among_three_lockfiles():
    r = plan("--workspace", str(FIXTURES / "corepack-pnpm"))
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    j = json.loads(r.stdout)
    assert j["steps"] == [{"ecosystem": "node", "tool": "pnpm",
                           "argv": ["pnpm", "install", "--frozen-lockfile"], "cache": None}]
    assert j["command"] == ["pnpm", "install", "--frozen-lockfile"]
    assert j["skipped"] is None and j["refused"] is None
    assert "packageManager" in evidence(j, "pnpm-lock.yaml")[0]
    assert "not used" in evidence(j, "yarn.lock")[0]
    assert "not used" in evidence(j, "package-lock.json")[0]


def test_several_ecosystems_are_one_script():
    r = plan("--workspace", str(FIXTURES / "polyglot"), "--json")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert [s["tool"] for s in j["steps"]] == ["yarn", "pip", "pip", "go"]
    assert j["steps"][0]["argv"][-2:] == ["install", "--immutable"]
    assert j["steps"][2]["argv"][-4:] == ["-r", "requirements.txt", "-r", "requirements-dev.txt"]
    assert j["steps"][3]["cache"].startswith("$GOMODCACHE")
    assert j["command"][:2] == ["/bin/sh", "-c"]
    assert " && " in j["command"][2]
    assert "__metadata" in evidence(j, "yarn.lock")[0]


def test_nothing_declared_is_skipped(tmp_path):
    (tmp_path / "package.json").write_text('{"name": "x", "scripts": {"test": "true"}}')
    r = plan("--workspace", str(tmp_path))
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["steps"] == [] and j["command"] is None
    assert j["skipped"] == "no dependencies declared"


def test_unlocked_dependencies_are_refused_with_the_evidence(tmp_path):
    (tmp_path / "package.json").write_text('{"dependencies": {"left-pad": "1.3.0"}}')
    r = plan("--workspace", str(tmp_path))
    assert r.returncode == 125
    j = json.loads(r.stdout)
    assert "there is no lockfile of bun, pnpm, yarn or npm" in j["refused"]
    assert j["command"] is None
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("kiwi-run: plan: package.json declares")


def test_a_lockfile_symlinked_out_is_not_read(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    outside = tmp_path / "secret.lock"
    outside.write_text("__metadata:\n  version: 8\n")
    (ws / "package.json").write_text('{"dependencies": {"a": "1"}}')
    (ws / "yarn.lock").symlink_to(outside)
    r = plan("--workspace", str(ws))
    assert r.returncode == 125
    assert r.stdout == ""
    assert r.stderr == ("kiwi-run: plan: `yarn.lock` in the workspace is or passes through a symlink;"
                        " kiwi-run reads only regular files there\n")


@pytest.mark.parametrize("args, says", [
    (["--workspace", "/nonexistent/kiwi"], "cannot open workspace `/nonexistent/kiwi`"),
    (["--workspace", "/etc/passwd"], "cannot open workspace `/etc/passwd`"),
    (["--workspace"], "missing value"),
    ([], "--workspace DIR is required"),
    (["--frobnicate"], "unknown option"),
    (["--workspace", "/tmp", "extra"], "unexpected argument `extra`"),
])
def test_bad_invocations_fail_with_one_line(args, says):
    r = plan(*args)
    assert r.returncode == 125
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("kiwi-run: "), r.stderr
    assert says in r.stderr


def test_malformed_package_json(tmp_path):
    (tmp_path / "package.json").write_text('{"dependencies": ')
    r = plan("--workspace", str(tmp_path))
    assert r.returncode == 125 and r.stdout == ""
    assert r.stderr.startswith("kiwi-run: plan: package.json: malformed JSON")


def test_help():
    r = plan("--help")
    assert r.returncode == 0 and "kiwi-run plan --workspace DIR" in r.stdout
