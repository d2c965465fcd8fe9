# SPDX-License-Identifier: Apache-2.0
"""A fake upstream made of two network namespaces, so that no test packet
can leave this machine:

  [sandbox] --veth-- [host netns: kiwi-run runs here] --veth-- [internet netns]

The host netns has one link, to the internet netns, and a default route
through it: the machine's real interfaces and routes are never involved.
The internet netns holds the servers (servers.py) on documentation
addresses, a fake metadata endpoint, a fake private host and one
public-looking address, all on its loopback. The host netns runs its own
services (which sandboxes must not reach) and resolves names through the
fake DNS (ip netns exec binds /etc/netns/NAME/resolv.conf).

CLI, for poking by hand:  python3 fakenet.py up|down NAME
"""
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

HOST_UPLINK = "172.31.255.2"
INET_UPLINK = "172.31.255.1"
HOST_UPLINK6 = "fd31:ffff::2"
INET_UPLINK6 = "fd31:ffff::1"
DNS = "192.0.2.53"
SERVERS = {
    "doc1": "192.0.2.10",
    "doc2": "198.51.100.10",
    "doc3": "203.0.113.10",
    "doc3b": "203.0.113.11",
    "bulk": "203.0.113.12",     # servers.py: its TCP 443 is the bulk download
    "metadata": "169.254.169.254",
    "private": "10.99.0.10",
    "cgnat": "100.64.0.10",
    "public": "5.5.5.5",
    "dns": DNS,
}
# IPv6 servers on the same loopback: documentation, the cloud metadata
# address, a unique local (private) host and a public-looking one
SERVERS6 = {
    "doc6": "2001:db8::10",
    "doc6b": "2001:db8:1::10",
    "metadata6": "fd00:ec2::254",
    "private6": "fd99::10",
    "public6": "2a00:5::5",
}


def sh(*argv, check=True):
    r = subprocess.run(argv, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {r.stderr.strip()}")
    return r


class World:
    # seconds a servers.py may take to say ready; the VM lane, where Python
    # starts 30 times slower, raises it
    start_timeout = 10

    def __init__(self, name):
        self.name = name
        self.host = f"{name}h"
        self.inet = f"{name}i"
        self.etc = Path("/etc/netns") / self.host
        self.procs = []

    def hx(self, *argv):
        """argv inside the host netns."""
        return ["ip", "netns", "exec", self.host, *argv]

    def up(self):
        try:
            self._up()
        except BaseException:
            self.down()
            raise
        return self

    def _up(self):
        sh("ip", "netns", "add", self.host)
        sh("ip", "netns", "add", self.inet)
        sh("ip", "link", "add", "up0", "netns", self.host, "type", "veth",
           "peer", "name", "down0", "netns", self.inet)
        for ns in (self.host, self.inet):
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "-n", self.host, "addr", "add", f"{HOST_UPLINK}/30", "dev", "up0")
        sh("ip", "-n", self.inet, "addr", "add", f"{INET_UPLINK}/30", "dev", "down0")
        sh("ip", "-n", self.host, "link", "set", "up0", "up")
        sh("ip", "-n", self.inet, "link", "set", "down0", "up")
        sh("ip", "-n", self.host, "route", "add", "default", "via", INET_UPLINK)
        for addr in SERVERS.values():
            sh("ip", "-n", self.inet, "addr", "add", f"{addr}/32", "dev", "lo")
        # IPv6 on the uplink (nodad: usable at once) and a default route,
        # so the fake host "has IPv6 egress"
        sh("ip", "-n", self.host, "addr", "add", f"{HOST_UPLINK6}/126", "dev", "up0", "nodad")
        sh("ip", "-n", self.inet, "addr", "add", f"{INET_UPLINK6}/126", "dev", "down0", "nodad")
        sh("ip", "-n", self.host, "-6", "route", "add", "default", "via", INET_UPLINK6)
        for addr in SERVERS6.values():
            sh("ip", "-n", self.inet, "addr", "add", f"{addr}/128", "dev", "lo", "nodad")
        self.etc.mkdir(parents=True, exist_ok=True)
        (self.etc / "resolv.conf").write_text(f"nameserver {DNS}\noptions timeout:1 attempts:1\n")
        (self.etc / "hosts").write_text("127.0.0.1\tlocalhost\n")
        self._serve(self.inet, "internet")
        self._serve(self.host, "host")

    def _serve(self, ns, role):
        p = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-u", str(HERE / "servers.py"), role],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.procs.append(p)
        deadline = time.monotonic() + self.start_timeout
        line = p.stdout.readline()
        if line.strip() != "ready" or time.monotonic() > deadline:
            raise RuntimeError(f"servers.py {role} did not start: {line!r}")

    def down(self):
        for p in self.procs:
            try:
                p.stdin.close()
            except OSError:
                pass
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []
        for ns in (self.host, self.inet):
            sh("ip", "netns", "del", ns, check=False)
        shutil.rmtree(self.etc, ignore_errors=True)

    def __enter__(self):
        return self.up()

    def __exit__(self, *exc):
        self.down()


def leftovers(ns):
    """What kiwi-run may leave in a netns: kiwi* links and kiwi_* tables."""
    links = sh("ip", "-n", ns, "-o", "link", "show").stdout
    veths = [l.split(":")[1].strip().split("@")[0] for l in links.splitlines()
             if l.split(":")[1].strip().startswith("kiwi")]
    tables = [l.split()[-1] for l in sh("ip", "netns", "exec", ns, "nft", "list", "tables").stdout.splitlines()
              if l.split()[-1].startswith("kiwi_")]
    return veths, tables


if __name__ == "__main__":
    w = World(sys.argv[2])
    if sys.argv[1] == "up":
        w.up()
        print("up; servers stay while this process lives (Ctrl-D to stop)")
        try:
            sys.stdin.read()
        finally:
            w.down()
    else:
        w.down()
