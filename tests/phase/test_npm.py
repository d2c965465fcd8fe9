# SPDX-License-Identifier: Apache-2.0
"""The two phases with a real package manager: a Debian 12 rootfs with
nodejs and npm (node-rootfs.sh, built once and cached), a repository that
depends on one package, and a fake npm registry in the fake upstream
network namespace of tests/net (never the real internet). Root only: the
egress network of install needs root (or kiwi-helper)."""
import base64
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from conftest import REPO, explain

sys.path.insert(0, str(REPO / "tests" / "net"))
from fakenet import World, leftovers  # noqa: E402

HERE = Path(__file__).resolve().parent
REGISTRY = "203.0.113.20"
PORT = 4873
URL = f"http://{REGISTRY}:{PORT}"
EGRESS = ("--allow-cidr", f"{REGISTRY}/32", "--allow-port", str(PORT))

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="install's egress needs root")


@pytest.fixture(scope="module")
def node_rootfs():
    dest = Path(os.environ.get("KIWI_NODE_ROOTFS", "/var/cache/kiwi-run-tests/node-rootfs"))
    r = subprocess.run(["sh", str(HERE / "node-rootfs.sh"), str(dest)], capture_output=True, text=True,
                       timeout=1800)
    assert r.returncode == 0, f"node-rootfs.sh: {r.stderr}"
    return dest


def package_tarball(name, version, code):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for fname, text in (("package.json", json.dumps({"name": name, "version": version, "main": "index.js"})),
                            ("index.js", code)):
            data = text.encode()
            info = tarfile.TarInfo(f"package/{fname}")
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """The fake world of tests/net plus a registry holding leftpad-kiwi."""
    root = tmp_path_factory.mktemp("registry")
    name, version = "leftpad-kiwi", "1.0.0"
    tgz = package_tarball(name, version,
                          "module.exports = (s, n) => ' '.repeat(Math.max(0, n - s.length)) + s;\n")
    integrity = "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode()
    tarball = f"{URL}/{name}/-/{name}-{version}.tgz"
    (root / name / "-").mkdir(parents=True)
    (root / name / "-" / f"{name}-{version}.tgz").write_bytes(tgz)
    (root / name / "index.json").write_text(json.dumps({
        "name": name, "dist-tags": {"latest": version},
        "versions": {version: {"name": name, "version": version,
                               "dist": {"tarball": tarball, "integrity": integrity}}}}))
    world = World(f"kph{os.getpid() % 100000}")
    with world:
        subprocess.run(["ip", "-n", world.inet, "addr", "add", f"{REGISTRY}/32", "dev", "lo"], check=True)
        server = subprocess.Popen(["ip", "netns", "exec", world.inet, sys.executable, "-u",
                                   str(HERE / "registry.py"), str(root), REGISTRY, str(PORT)],
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout.readline() == "ready\n"
            yield world, {"name": name, "version": version, "resolved": tarball, "integrity": integrity}
        finally:
            server.kill()
            server.wait()
        veths, tables = leftovers(world.host)
        assert not veths and not tables, f"left behind: {veths} {tables}"


def app_workspace(phase, pkg):
    lock = {"name": "app", "version": "1.0.0", "lockfileVersion": 3, "requires": True,
            "packages": {"": {"name": "app", "version": "1.0.0", "dependencies": {pkg["name"]: pkg["version"]}},
                         f"node_modules/{pkg['name']}": {"version": pkg["version"], "resolved": pkg["resolved"],
                                                         "integrity": pkg["integrity"]}}}
    return phase.workspace({
        "package.json": json.dumps({"name": "app", "version": "1.0.0",
                                    "dependencies": {pkg["name"]: pkg["version"]},
                                    "scripts": {"test": "node test.js"}}),
        "package-lock.json": json.dumps(lock),
        ".npmrc": f"registry={URL}/\naudit=false\nfund=false\nupdate-notifier=false\n"
                  "fetch-retries=0\nfetch-timeout=20000\n",
        "test.js": f"const pad = require('{pkg['name']}');\n"
                   "if (pad('a', 3) !== '  a') process.exit(1);\nconsole.log('tests pass');\n",
    })


@pytest.fixture
def root_phase(phase):
    if phase.kiwi.mode != "root":
        pytest.skip("install's egress needs root")
    return phase


def test_install_fetches_from_the_registry_then_verify_runs_offline(root_phase, node_rootfs, registry):
    world, pkg = registry
    ws = app_workspace(root_phase, pkg)
    r = root_phase("install", ws, EGRESS, rootfs=node_rootfs, prefix=world.hx(), timeout=300)
    assert r.returncode == 0, explain(r)
    v = r.verdict
    assert v["reason"] is None and v["network"] == "egress", v
    assert v["plan"]["steps"] == [["npm", "ci"]], v["plan"]
    # egress and the audit together: what install reached, allowed, and the
    # audit's fields over the same attempts
    assert any(a["dst"] == REGISTRY and a["port"] == PORT and a["rule"] == "allowed:cidr"
               for a in v["egress_allowed"]), v["egress_allowed"]
    assert v["network_attempted"] is True, v
    assert any(a["dst"] == REGISTRY and a["port"] == PORT for a in v["network_attempts"]), v["network_attempts"]
    assert (ws / "node_modules" / pkg["name"] / "index.js").is_file()

    r = root_phase("verify", ws, (), ["npm", "test"], rootfs=node_rootfs, prefix=world.hx(), timeout=120)
    assert r.returncode == 0, explain(r)
    assert "tests pass" in r.stdout
    assert r.verdict["network"] == "audit" and r.verdict["phase"] == "verify"
    assert r.verdict["network_attempted"] is False  # npm test ran offline, tried nothing


def test_the_policy_file_opens_the_registry_as_the_flags_do(root_phase, node_rootfs, registry):
    world, pkg = registry
    ws = app_workspace(root_phase, pkg)
    policy = root_phase.kiwi._fresh("policy") / "kiwi.json"
    policy.write_text(json.dumps({"version": 1, "install": {
        "network": "egress",
        "egress": {"mode": "public_internet", "allow_cidr": [f"{REGISTRY}/32"], "allow_port": [str(PORT)]},
        "limits": {"timeout": "120s"}}}))  # cgroup limits: the VM lane (hybrid host)
    r = root_phase("install", ws, ("--policy", policy), rootfs=node_rootfs, prefix=world.hx(), timeout=300)
    assert r.returncode == 0, explain(r)
    assert (ws / "node_modules" / pkg["name"] / "index.js").is_file()


def test_verify_that_needs_the_network_fails_cleanly(root_phase, node_rootfs, registry):
    world, pkg = registry
    ws = app_workspace(root_phase, pkg)
    script = (f"fetch('{URL}/{pkg['name']}').then(() => process.exit(0), "
              "e => { console.error('offline: ' + e.cause?.code); process.exit(7); })")
    r = root_phase("verify", ws, (), ["node", "-e", script], rootfs=node_rootfs, prefix=world.hx(), timeout=120)
    assert r.returncode == 7, explain(r)
    assert r.verdict["reason"] == "verify_failed"
    assert "offline" in r.verdict["output_tail"]["stderr"]
    assert r.verdict["network_attempted"] is True
    assert any(a["dst"] == REGISTRY and a["port"] == PORT for a in r.verdict["network_attempts"])


def test_install_outside_the_policy_is_blocked_and_reported(root_phase, node_rootfs, registry):
    world, pkg = registry
    ws = app_workspace(root_phase, pkg)
    # no --allow-cidr: documentation addresses are closed under public_internet
    r = root_phase("install", ws, ("--allow-port", str(PORT), "--timeout", "60s"), rootfs=node_rootfs,
                   prefix=world.hx(), timeout=300)
    assert r.returncode != 0, explain(r)
    v = r.verdict
    assert v["reason"] in ("install_failed", "install_timed_out"), v
    assert any(b["dst"] == REGISTRY and b["port"] == PORT and b["rule"] == "not_allowed:documentation"
               for b in v["egress_blocked"]), v["egress_blocked"]
    assert v["network_attempted"] is True, v
    assert not (ws / "node_modules" / pkg["name"] / "index.js").exists()
