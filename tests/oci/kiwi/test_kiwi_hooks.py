# SPDX-License-Identifier: Apache-2.0
"""Hooks at their moments and in their namespaces, with the state on stdin;
the io.kiwi annotations that map the phase policy onto the network."""
import json
import os

import pytest

from conftest import reap
from test_kiwi_lifecycle import wait_status

# Each hook appends: its kind, the uts name it sees (which tells the
# runtime's namespaces from the container's), and the state it was given.
HOOK = 'read -r s; echo "$0 $(cat /proc/sys/kernel/hostname) $s" >> "$1"'


def hook(kind, log, sh="/bin/sh"):
    # argv[0] "sh": busybox picks its applet by it.
    return {"path": sh, "args": ["sh", "-c", HOOK, kind, str(log)], "env": ["PATH=/usr/bin:/bin"]}


def test_hooks_order_namespaces_and_state(oci):
    logdir = oci.work / "hooklog"
    logdir.mkdir()
    os.chown(logdir, *oci.ids)
    host_log = logdir / "log"
    cfg = oci.spec(["true"])
    cfg["mounts"].append({"destination": "/hooklog", "type": "bind", "source": str(logdir),
                          "options": ["rbind", "rw"]})
    cfg["hooks"] = {
        "prestart": [hook("prestart", host_log)],
        "createRuntime": [hook("createRuntime", host_log)],
        "createContainer": [hook("createContainer", host_log)],
        # Resolved in the container, after pivot_root: its own sh and path.
        "startContainer": [hook("startContainer", "/hooklog/log")],
        "poststart": [hook("poststart", host_log)],
        "poststop": [hook("poststop", host_log)],
    }
    b = oci.bundle(cfg)
    oci.cli("create", "-b", str(b), "h1", check=True)
    pid = oci.state("h1")["pid"]
    oci.cli("start", "h1", check=True)
    wait_status(oci, "h1", "stopped")
    oci.cli("delete", "h1", check=True)
    lines = [l.split(" ", 2) for l in host_log.read_text().splitlines()]
    kinds = [l[0] for l in lines]
    assert kinds == ["prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop"] or \
        kinds == ["prestart", "createRuntime", "createContainer", "poststart", "startContainer", "poststop"], kinds
    host = open("/proc/sys/kernel/hostname").read().strip()
    seen = {l[0]: l for l in lines}
    for k in ("prestart", "createRuntime", "poststart", "poststop"):
        assert seen[k][1] == host, f"{k} runs in the runtime's namespaces: {seen[k]}"
    for k in ("createContainer", "startContainer"):
        assert seen[k][1] == "kiwi", f"{k} runs in the container's namespaces: {seen[k]}"
    states = {k: json.loads(seen[k][2]) for k in seen}
    for k, st in states.items():
        assert st["id"] == "h1" and st["bundle"] == str(b), (k, st)
    assert states["createRuntime"]["pid"] == pid and states["createRuntime"]["status"] == "creating"
    assert states["poststart"]["status"] == "running"
    assert states["poststop"]["status"] == "stopped"


def test_failing_create_hook_fails_create(oci):
    cfg = oci.spec(["true"])
    cfg["hooks"] = {"createRuntime": [{"path": "/bin/sh", "args": ["sh", "-c", "exit 3"]}]}
    b = oci.bundle(cfg)
    r = oci.cli("create", "-b", str(b), "h2")
    assert r.returncode == 1 and "createRuntime hook" in r.stderr and "status 3" in r.stderr, r.stderr
    assert not list(oci.root.iterdir())


def test_failing_poststop_hook_is_a_warning(oci):
    cfg = oci.spec(["true"])
    cfg["hooks"] = {"poststop": [{"path": "/bin/false"}]}
    b = oci.bundle(cfg)
    log = oci.work / "log.json"
    r = oci.cli("--log", str(log), "--log-format", "json", "run", "-b", str(b), "h3")
    assert r.returncode == 0, r.stderr
    warn = [json.loads(l) for l in log.read_text().splitlines()]
    assert any(w["level"] == "warning" and "poststop" in w["msg"] for w in warn), warn
    assert not list(oci.root.iterdir())


def links(oci, cfg, cid):
    b = oci.bundle(cfg)
    r = oci.cli("run", "-b", str(b), cid)
    assert r.returncode == 0, r.stderr
    return sorted(l.split(":")[0].strip() for l in r.stdout.splitlines()[2:])


def test_verify_phase_has_no_network(oci):
    """The config joins the host's network (or has none of its own): with
    io.kiwi.phase=verify the container still sees only lo, and lo is up."""
    cfg = oci.spec(["cat", "/proc/net/dev"])
    cfg["linux"]["namespaces"] = [n for n in cfg["linux"]["namespaces"] if n["type"] != "network"]
    host = links(oci, cfg, "n0")
    if len(host) == 1:
        pytest.skip("the host has only lo (the VM lane): nothing to take away")
    cfg["annotations"] = {"io.kiwi.phase": "verify"}
    assert links(oci, cfg, "n1") == ["lo"]
    if oci.mode == "root":
        cfg["linux"]["namespaces"].append({"type": "network", "path": "/proc/1/ns/net"})
        assert links(oci, cfg, "n2") == ["lo"]
    cfg = oci.spec(["sh", "-c", "grep -c UP /proc/net/if_inet6 >/dev/null; ip link show lo 2>/dev/null || "
                         "cat /sys/class/net/lo/operstate"], annotations={"io.kiwi.phase": "verify"})
    b = oci.bundle(cfg)
    r = oci.cli("run", "-b", str(b), "n3")
    assert "UP" in r.stdout or "unknown" in r.stdout, r.stdout


def test_install_phase_keeps_the_network_only_as_root(oci):
    cfg = oci.spec(["cat", "/proc/net/dev"], annotations={"io.kiwi.phase": "install"})
    cfg["linux"]["namespaces"] = [n for n in cfg["linux"]["namespaces"] if n["type"] != "network"]
    got = links(oci, cfg, "i1")
    with open("/proc/net/dev") as f:
        host_links = len(f.read().splitlines()[2:])
    if oci.mode == "root":
        assert len(got) == host_links, got
    else:
        assert got == ["lo"], "rootless install gets no network"
    cfg["annotations"] = {"io.kiwi.phase": "install", "io.kiwi.egress": "none"}
    assert links(oci, cfg, "i2") == ["lo"]


@pytest.mark.parametrize("ann,want", [
    ({"io.kiwi.phase": "build"}, "neither install nor verify"),
    ({"io.kiwi.egress": "public_internet"}, "not applied by the OCI runtime"),
    ({"io.kiwi.phase": "verify", "io.kiwi.egress": "pod"}, "contradicts"),
    ({"io.kiwi.fase": "verify"}, "unknown annotation"),
])
def test_bad_annotations_are_refused(oci, ann, want):
    cfg = oci.spec(["true"], annotations=ann)
    b = oci.bundle(cfg)
    r = oci.cli("create", "-b", str(b), "bad")
    assert r.returncode == 1 and want in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert not list(oci.root.iterdir())
