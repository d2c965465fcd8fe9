# SPDX-License-Identifier: Apache-2.0
"""`kiwi-run doctor`: checks of the real host, as root and as kiwi-test."""
import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import explain

CHECKS = ["userns.sysctl", "userns.clone", "userns.range", "seccomp", "cgroup.mode", "cgroup.root",
          "cgroup.user", "nftables", "overlayfs", "layer.tmpfs", "layer.loop", "layer.quota", "landlock", "helper"]
REQUIRED = {"userns.sysctl", "userns.clone", "userns.range", "seccomp", "overlayfs"}


def host_cgroup_mode():
    if os.statvfs("/sys/fs/cgroup") and Path("/sys/fs/cgroup/cgroup.controllers").exists():
        return "unified"
    with open("/proc/self/mountinfo") as f:
        return "hybrid" if " - cgroup2 " in f.read() else "legacy"


def doctor(kiwi, *args):
    return kiwi.raw(["doctor", *args], timeout=60)


def test_json_parses_and_matches_the_text(kiwi):
    r = doctor(kiwi, "--json")
    assert r.returncode in (0, 1), explain(r)
    lines = r.stdout.splitlines()
    assert len(lines) == 1, "one JSON object on one line"
    d = json.loads(lines[0])
    assert [c["name"] for c in d["checks"]] == CHECKS
    for c in d["checks"]:
        assert c["status"] in ("ok", "warn", "fail")
        assert c["required"] == (c["name"] in REQUIRED)
        assert c["detail"]
        # what does not work says how to fix it; a warning is never required
        assert (c["fix"] is None) == (c["status"] == "ok") or c["name"] == "helper", c
        assert c["status"] != "fail" or c["required"]
    assert d["ok"] == all(c["status"] != "fail" for c in d["checks"])
    assert r.returncode == (0 if d["ok"] else 1)
    # the text form: one line per check, same verdicts, then a summary line
    t = doctor(kiwi)
    assert t.returncode == r.returncode, explain(t)
    text = t.stdout.splitlines()
    assert len(text) == len(CHECKS) + 1, t.stdout
    for line, c in zip(text, d["checks"]):
        status, name = line.split()[:2]
        assert (status, name) == (c["status"], c["name"])
        assert ("; fix: " in line) == (c["fix"] is not None)


def test_this_host_runs_the_default_sandbox(kiwi):
    """The suite itself runs sandboxes here, so doctor must agree: exit 0,
    and the real trials (clone3, seccomp, nftables and overlayfs in fresh
    namespaces) all pass on this kernel."""
    r = doctor(kiwi, "--json")
    d = json.loads(r.stdout)
    by = {c["name"]: c for c in d["checks"]}
    assert r.returncode == 0 and d["ok"], explain(r)
    for name in ("userns.clone", "seccomp", "nftables", "overlayfs"):
        assert by[name]["status"] == "ok", by[name]


def test_cgroup_mode_is_named_with_the_fix(kiwi):
    by = {c["name"]: c for c in json.loads(doctor(kiwi, "--json").stdout)["checks"]}
    mode = host_cgroup_mode()
    c = by["cgroup.mode"]
    assert c["detail"].startswith(mode + ":"), c
    if mode == "unified":
        assert c["status"] == "ok"
    else:
        assert c["status"] == "warn" and "systemd.unified_cgroup_hierarchy=1" in c["fix"], c
        # and the limits that cannot work here are named
        assert "--memory" in c["detail"]
        assert by["cgroup.root"]["status"] == "warn" and "memory" in by["cgroup.root"]["detail"]


def test_layer_backends_are_named(kiwi):
    """Which writable-layer backends this host offers, one line each, and
    whether the memory-backed one is charged to a memory cgroup (not on a
    hybrid host)."""
    by = {c["name"]: c for c in json.loads(doctor(kiwi, "--json").stdout)["checks"]}
    c = by["layer.tmpfs"]
    assert c["detail"].startswith("offered (memory-backed, the default, 1024 MiB"), c
    kernel = tuple(int(x) for x in os.uname().release.split("-")[0].split(".")[:2])
    assert (c["status"] == "ok") == (host_cgroup_mode() == "unified" and kernel >= (6, 6)), c
    assert ("holds no user xattrs" in c["detail"]) == (kernel < (6, 6)), c
    # the loop backend: a real trial as root, refused with the reason otherwise
    loop = by["layer.loop"]
    if kiwi.mode == "root" and os.path.exists("/dev/loop-control"):
        assert loop["status"] == "ok" and loop["detail"].startswith("offered"), loop
    elif kiwi.mode == "rootless":  # through kiwi-helper, which this suite does not install
        assert loop["status"] == "warn" and "not root, and kiwi-helper" in loop["detail"], loop
        assert "max_disk" in loop["fix"], loop
    # project quotas: never offered by this kiwi-run; the host's state named
    q = by["layer.quota"]
    assert q["status"] == "warn" and q["detail"].startswith("not offered by this kiwi-run"), q


def test_the_calling_users_delegation_is_checked(kiwi):
    c = {c["name"]: c for c in json.loads(doctor(kiwi, "--json").stdout)["checks"]}["cgroup.user"]
    if kiwi.mode == "root":
        assert c["status"] == "ok" and "root" in c["detail"]
    else:
        assert f"uid {kiwi.uid}" in c["detail"], c
        if host_cgroup_mode() != "unified":
            assert c["status"] == "warn" and "Delegate=yes" in c["fix"]


def test_helper_found_by_path_and_mode(kiwi, scratch):
    """A kiwi-helper that is not setuid root is reported with the fix."""
    fake = scratch / "kiwi-helper"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    env = kiwi.env({"KIWI_HELPER": str(fake)})
    r = subprocess.run(kiwi.raw_argv(["doctor", "--json"]), capture_output=True, text=True,
                       env=env, timeout=60)
    c = {c["name"]: c for c in json.loads(r.stdout)["checks"]}["helper"]
    assert c["status"] == "warn" and str(fake) in c["detail"], c
    assert "chmod 4755" in c["fix"]


def test_bad_usage_is_one_line_125(kiwi):
    for args in (["--bogus"], ["extra"]):
        r = doctor(kiwi, *args)
        assert r.returncode == 125 and len(r.stderr.splitlines()) == 1, explain(r)
        assert r.stdout == ""


def with_subids(kiwi, d, args):
    """kiwi-run ARGS as root in a private mount namespace whose
    /etc/subuid and /etc/subgid are d/subuid and d/subgid."""
    script = 'mount --bind "$0" /etc/subuid && mount --bind "$1" /etc/subgid && shift && exec "$@"'
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
                           str(d / "subuid"), str(d / "subgid"), *kiwi.raw_argv(args)],
                          capture_output=True, text=True, timeout=60, env=kiwi.env())


def test_fix_adds_kiwis_range_past_every_other_once(kiwi, scratch):
    """userns.range fails without kiwi's range, names --fix; --fix adds it
    (65536-aligned, past the ranges there, above 2^30), and a second run
    changes nothing."""
    if kiwi.mode != "root":
        pytest.skip("--fix writes /etc/subuid: root's")
    d = scratch / "subids"
    d.mkdir(exist_ok=True)
    (d / "subuid").write_text("alice:100000:65536\nbig:1073741824:70000")
    (d / "subgid").write_text("")
    r = with_subids(kiwi, d, ["doctor", "--json"])
    c = {c["name"]: c for c in json.loads(r.stdout)["checks"]}["userns.range"]
    assert r.returncode == 1 and c["status"] == "fail" and "doctor --fix" in c["fix"], explain(r)
    for run in range(2):
        r = with_subids(kiwi, d, ["doctor", "--fix"])
        assert "ok    userns.range" in r.stdout, explain(r)
    start = 1073741824 + 131072   # past big's 70000 ids, 65536-aligned
    assert (d / "subuid").read_text() == f"alice:100000:65536\nbig:1073741824:70000\nkiwi:{start}:65536\n"
    assert (d / "subgid").read_text() == "kiwi:1073741824:65536\n"


def test_fix_as_a_user_is_refused(kiwi):
    if kiwi.mode == "root":
        pytest.skip("the refusal is for callers that are not root")
    r = doctor(kiwi, "--fix")
    assert r.returncode == 125 and len(r.stderr.splitlines()) == 1 and "root" in r.stderr, explain(r)
