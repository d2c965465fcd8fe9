# SPDX-License-Identifier: Apache-2.0
"""Harness of the network egress suite.

The session builds one fake world (fakenet.py): a "host" network namespace
in which the egress module's host side runs, linked only to an "internet"
namespace with the servers. Every namespace, veth and /etc/netns entry it
makes is removed at the end, also when a test fails.

Inputs (environment): KIWI_EGRESSTOOL, KIWI_NETPROBE, KIWI_RUN (built by
meson; defaults under <repo>/build). Skips (exit 77 under meson) when not
root or when ip/nft are missing.
"""
import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from fakenet import World, leftovers

HERE = Path(__file__).resolve().parent
BUILD = HERE.parent.parent / "build"


def _binary(env, default):
    path = Path(os.environ.get(env, BUILD / default))
    if not path.is_file():
        pytest.exit(f"{path} is missing: build it or set {env}", 2)
    return path


def pytest_sessionstart(session):
    reason = None
    if os.geteuid() != 0:
        reason = "the network suite needs root (veths, namespaces, nftables)"
    elif not shutil.which("ip") or not shutil.which("nft"):
        reason = "the network suite needs iproute2 and nftables (test tooling): apt-get install iproute2 nftables"
    if reason:
        print(f"SKIP: {reason}")
        os._exit(77)


@pytest.fixture(scope="session")
def tools():
    return {
        "egresstool": str(_binary("KIWI_EGRESSTOOL", "tests/net/egresstool")),
        "netprobe": str(_binary("KIWI_NETPROBE", "tests/net/netprobe")),
    }


@pytest.fixture(scope="session")
def world():
    w = World(f"kwt{os.getpid() % 100000}")
    with w:
        yield w


@pytest.fixture
def scratch(tmp_path):
    return tmp_path


@pytest.fixture(autouse=True)
def nothing_left(request, world):
    """Every test leaves no kiwi veth, table or pool lock behind."""
    yield
    veths, tables = leftovers(world.host)
    assert not veths and not tables, f"left behind: veths {veths}, tables {tables}"


class Egress:
    """Runs a command under egresstool in the fake host."""

    def __init__(self, world, tools, scratch):
        self.world, self.tools, self.scratch = world, tools, scratch

    def run(self, opts, cmd, timeout=30):
        report = self.scratch / f"report-{uuid.uuid4().hex}.json"
        argv = self.world.hx(self.tools["egresstool"], "run", "--report", str(report),
                             *map(str, opts), "--", *map(str, cmd))
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        rep = json.loads(report.read_text()) if report.exists() else None
        return r, rep

    def probe(self, opts, *args):
        """One netprobe call in a fresh sandbox: (probe result, report)."""
        r, rep = self.run(opts, [self.tools["netprobe"], *args])
        assert r.returncode == 0, f"egresstool: {r.returncode} {r.stderr}"
        return json.loads(r.stdout), rep

    def probes(self, opts, calls, timeout=30):
        """Several netprobe calls in one sandbox: ([results], report)."""
        script = "; ".join(" ".join([self.tools["netprobe"], *map(str, c)]) for c in calls)
        r, rep = self.run(opts, ["/bin/sh", "-c", script], timeout)
        assert r.returncode == 0, f"egresstool: {r.returncode} {r.stderr}"
        return [json.loads(l) for l in r.stdout.splitlines()], rep


@pytest.fixture
def egress(world, tools, scratch):
    return Egress(world, tools, scratch)
