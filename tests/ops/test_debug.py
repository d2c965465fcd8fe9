# SPDX-License-Identifier: Apache-2.0
"""`--debug`: each setup step, with its timing, on stderr."""
import re

from conftest import explain

LINE = re.compile(r"^kiwi-run: debug: \+(\d+\.\d{3})ms (run|init) ([a-z0-9-]+) (\d+\.\d{3}ms|-)( .*)?$")
RUN_STEPS = ["args", "seccomp", "check", "clone3", "maps", "started", "exit"]
INIT_STEPS = ["wait-maps", "close-fds", "uts-net", "mount", "caps", "exec"]


def steps(stderr):
    """[(offset ms, who, step, detail)] of the debug lines; every other
    line is returned apart."""
    out, other = [], []
    for l in stderr.splitlines():
        m = LINE.match(l)
        if m:
            out.append((float(m[1]), m[2], m[3], (m[5] or "").strip()))
        else:
            other.append(l)
    return out, other


def test_debug_prints_the_steps_in_order(kiwi):
    r = kiwi.run(["echo", "payload"], ["--debug"])
    assert r.returncode == 0 and r.stdout == "payload\n", explain(r)
    s, other = steps(r.stderr)
    assert other == [], explain(r)
    # root: kiwi's id range, the binds' idmapped trees made before clone,
    # the rootfs's through the sandbox's own map once it is written
    run_steps = RUN_STEPS
    if kiwi.mode == "root":
        run_steps = RUN_STEPS[:3] + ["idmap", "clone3", "maps", "idmap-rootfs"] + RUN_STEPS[5:]
    for who, want in (("run", run_steps), ("init", INIT_STEPS)):
        mine = [x for x in s if x[1] == who]
        # the registry entry comes 100 ms in, if the command still runs
        assert [x[2] for x in mine if x[2] != "registry"] == want, explain(r)
        # each side writes its lines as its steps end, on one clock
        assert [x[0] for x in mine] == sorted(x[0] for x in mine), explain(r)
    at = {(who, step): off for off, who, step, _ in s}
    # what the sync socket orders: clone before init runs, the maps before
    # init goes on, init's exec before kiwi-run hears of it
    assert at["run", "clone3"] <= at["init", "wait-maps"]
    assert at["run", "maps"] <= at["init", "wait-maps"]
    assert at["init", "exec"] <= at["run", "started"] <= at["run", "exit"]
    detail = {step: d for _, _, step, d in s}
    assert detail["clone3"].startswith("ns=user,mnt,pid,net,uts,ipc,cgroup pid=")
    assert detail["exec"].startswith("echo ")


def test_debug_shows_the_registry_entry_of_a_longer_run(kiwi):
    """The entry for `kiwi-run list` is made once the sandbox has lived
    100 ms (a shorter one is not worth its cost at start)."""
    r = kiwi.run(["sleep", "0.5"], ["--debug"])
    assert r.returncode == 0, explain(r)
    s, other = steps(r.stderr)
    reg = [(off, d) for off, who, step, d in s if step == "registry"]
    assert other == [] and len(reg) == 1, explain(r)
    assert re.fullmatch(r"id=[0-9a-f]{12} .*", reg[0][1])
    at = {step: off for off, who, step, _ in s}
    assert at["maps"] + 100 <= reg[0][0] <= at["exit"], explain(r)


def test_without_debug_stderr_is_silent(kiwi):
    r = kiwi.run(["true"])
    assert r.returncode == 0 and r.stderr == "", explain(r)


def test_debug_on_a_failing_start_ends_with_the_error(kiwi):
    r = kiwi.run(["/no/such/program"], ["--debug"])
    assert r.returncode == 127, explain(r)
    s, other = steps(r.stderr)
    assert [x[2] for x in s if x[1] == "init"][-1] == "caps", explain(r)
    assert "started" not in [x[2] for x in s]
    assert len(other) == 1 and other[0].startswith("kiwi-run: exec: "), explain(r)
