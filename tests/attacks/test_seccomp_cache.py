# SPDX-License-Identifier: Apache-2.0
"""The compiled seccomp filter cache cannot be used to switch the filter off
for later runs (issue 20, item 5). A sandbox given the cache directory
writable (--workspace ~ holds ~/.cache/kiwi-run/seccomp) rewrites every
entry to RET ALLOW; a later run of the same profile, without that bind,
must still load the real filter: Seccomp_filters says one is loaded, and
the syscall the profile blocks stays blocked. Root and rootless."""
import json
import os
import subprocess

import pytest

from conftest import ATTACK, explain, parse_attack

# Everything allowed but mkdir(2), which fails with EPERM.
PROFILE = {
    "defaultAction": "SCMP_ACT_ALLOW",
    "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}],
}
PROBE = "grep Seccomp_filters /proc/self/status; mkdir /tmp/d && echo MKDIR-WORKED; true"


def _run(kiwi, cache, cmd, opts=()):
    argv = kiwi.argv(cmd, ["--seccomp", kiwi.profile, *opts])
    return subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60,
                          env=kiwi.env({"KIWI_SECCOMP_CACHE_DIR": str(cache)}))


def _check_filtered(r):
    assert r.returncode == 0, explain(r)
    assert "MKDIR-WORKED" not in r.stdout, f"mkdir ran: the filter was switched off\n{explain(r)}"
    assert "Operation not permitted" in r.stderr, explain(r)
    filters = [l for l in r.stdout.splitlines() if l.startswith("Seccomp_filters:")]
    assert filters and int(filters[0].split()[1]) >= 1, explain(r)


@pytest.fixture
def profiled(kiwi):
    d = kiwi.workdir()
    prof = d / "profile.json"
    prof.write_text(json.dumps(PROFILE))
    kiwi.profile = str(prof)
    cache = d / "cache"
    cache.mkdir(mode=0o700)
    kiwi.chown(cache)
    return cache


def test_a_sandbox_cannot_rewrite_a_later_runs_filter(kiwi, profiled):
    cache = profiled
    # 1: compiled and cached; the filter holds
    _check_filtered(_run(kiwi, cache, ["/bin/sh", "-c", PROBE]))
    entries = [n for n in os.listdir(cache) if n.endswith(".bpf")]
    assert entries, "the run cached nothing: the attack below would prove nothing"
    # 2: a sandbox with the cache bound writable rewrites every entry
    r = _run(kiwi, cache, [ATTACK, "forge-seccomp-cache", "/workspace"],
             ["--bind", f"{cache}:/workspace"])
    assert r.returncode == 0, explain(r)
    steps = parse_attack(r)
    assert steps and all(rec["ok"] for rec in steps.values()), steps
    # 3: a later run of the same profile, without the bind
    _check_filtered(_run(kiwi, cache, ["/bin/sh", "-c", PROBE]))


def test_a_run_that_reaches_the_cache_does_not_use_it(kiwi, profiled):
    """Binding the cache's parent: that run neither reads nor writes it."""
    cache = profiled
    r = _run(kiwi, cache, ["/bin/sh", "-c", PROBE], ["--bind", f"{cache.parent}:/workspace", "--debug"])
    _check_filtered(r)
    assert "not used" in r.stderr, explain(r)
    assert not [n for n in os.listdir(cache) if n.endswith(".bpf")]
