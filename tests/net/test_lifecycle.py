# SPDX-License-Identifier: Apache-2.0
"""Setup, teardown and gc of the egress module through egresstool: what
is created goes away on every path, concurrent sandboxes get distinct
addresses and cannot reach each other, and bad input or missing
privilege fails before anything exists."""
import fcntl
import json
import os
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from fakenet import leftovers

POOL_DIR = Path("/run/kiwi/egress")
PUBLIC = ["--egress", "public_internet", "--allow-cidr", "203.0.113.0/24"]


def pool_files():
    """Pool entries no live run holds: what a run of ours could leak. (Live
    entries of other kiwi-runs on this machine come and go meanwhile.)"""
    stale = set()
    for lock in POOL_DIR.glob("*.lock") if POOL_DIR.is_dir() else []:
        try:
            with open(lock) as f:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                stale.add(lock.name)
        except OSError:
            pass
    return stale


def test_sequential_sandboxes_leave_nothing(egress, world):
    before = pool_files()
    for i in range(200):
        r, rep = egress.run(PUBLIC, ["true"])
        assert r.returncode == 0 and rep["exit_code"] == 0, (i, r.stderr)
    assert leftovers(world.host) == ([], [])
    assert pool_files() <= before, f"pool entries left: {pool_files() - before}"
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert sorted(l.split()[0] for l in netns.splitlines() if l.startswith(world.name)) == \
        sorted([world.host, world.inet]), netns


def test_concurrent_sandboxes_distinct_and_isolated(egress, world, tools):
    """Eight sandboxes at once, each serving on its own address; each
    tries its neighbour, under a policy (private_network over 10/8) that
    would allow it if the pool were not always denied."""
    n = 8
    opts = ["--egress", "private_network", "--allow-cidr", "10.0.0.0/8"]
    server = ("import socket,sys,time\n"
              "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
              "s.bind(('0.0.0.0',7000)); s.listen(8); s.settimeout(6)\n"
              "try:\n  c,_=s.accept(); c.recv(64); c.sendall(b'pong sandbox\\n'); c.close()\nexcept OSError: pass\n")
    board = egress.scratch / "board"
    board.mkdir()
    # each sandbox writes its address, waits for all, then probes the next one
    script = ("addr=$(ip -o -4 addr show dev eth0 | awk '{{split($4,a,\"/\"); print a[1]}}'); "
              "/usr/bin/python3 -c \"$SERVER\" & "
              "echo $addr > {board}/$addr; "
              "while [ $(ls {board} | wc -l) -lt {n} ]; do sleep 0.05; done; "
              "next=$(ls {board} | sort | awk -v me=$addr 'BEGIN{{f=0}} {{a[NR]=$1}} END{{for(i=1;i<=NR;i++) if(a[i]==me) print a[i%NR+1]}}'); "
              "{probe} tcp $next 7000; {probe} tcp 10.99.0.10 80; wait").format(
                  board=board, n=n, probe=tools["netprobe"])

    def one(_):
        env = dict(os.environ, SERVER=server)
        report = egress.scratch / f"c-{_}.json"
        r = subprocess.run(world.hx(tools["egresstool"], "run", "--report", str(report), *opts,
                                    "--", "/bin/sh", "-c", script),
                           capture_output=True, text=True, timeout=60, env=env)
        return r, json.loads(report.read_text()) if report.exists() else None

    with ThreadPoolExecutor(n) as pool:
        results = list(pool.map(one, range(n)))
    addrs = [rep["address"] for _, rep in results]
    assert all(rep for _, rep in results), [r.stderr for r, _ in results]
    assert len(set(addrs)) == n, f"addresses collide: {addrs}"
    for r, rep in results:
        lines = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
        assert len(lines) == 2, r.stdout + r.stderr
        neighbour, private = lines
        assert not neighbour["ok"] and neighbour["ms"] < 500, f"reached a neighbour sandbox: {neighbour}"
        assert private["ok"], f"the allowed private host: {private}"
        assert any(b["port"] == 7000 for b in rep["egress_blocked"]), rep


def test_neighbour_server_is_up(egress, world, tools):
    """The control for the test above: the host (not a sandbox) reaches a
    sandbox's server, so the failure there is the filter's doing."""
    server = ("import socket\ns=socket.socket(); s.bind(('0.0.0.0',7000)); s.listen(1); "
              "print('up',flush=True)\nc,_=s.accept(); c.recv(64); c.sendall(b'pong sandbox\\n'); c.close()")
    report = egress.scratch / "srv.json"
    p = subprocess.Popen(world.hx(tools["egresstool"], "run", "--report", str(report), *PUBLIC,
                                  "--", "/usr/bin/python3", "-c", server), stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "up"
        links = subprocess.run(["ip", "-n", world.host, "-o", "-4", "addr", "show"], capture_output=True,
                               text=True).stdout
        gw = [l.split()[3].split("/")[0] for l in links.splitlines() if " kiwi" in l][0]
        sandbox = gw.rsplit(".", 1)[0] + "." + str(int(gw.rsplit(".", 1)[1]) + 1)
        r = subprocess.run(world.hx(tools["netprobe"], "tcp", sandbox, "7000"), capture_output=True, text=True)
        assert json.loads(r.stdout)["ok"], r.stdout
    finally:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()  # egresstool; its child dies with it (pdeathsig)
            p.wait()


@pytest.mark.parametrize("opts,says", [
    (["--egress", "private_network"], "needs at least one --allow-cidr"),
    (["--egress", "host_allowlist"], "needs at least one --allow-host"),
    (["--allow-host", "good.test"], "needs --egress host_allowlist"),
    (["--allow-cidr", "10.0.0.1/8"], "--allow-cidr `10.0.0.1/8`: host bits"),
    (["--egress-audit", "/nonexistent/dir/audit"], "--egress-audit `/nonexistent/dir/audit`"),
])
def test_bad_input_fails_before_anything_exists(egress, world, opts, says):
    before = pool_files()
    r, rep = egress.run(opts, ["true"])
    assert r.returncode == 125 and rep is None, r
    assert says in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert leftovers(world.host) == ([], []) and pool_files() <= before


def test_unprivileged_caller_is_refused(egress, world, tools):
    r = subprocess.run(world.hx("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                tools["egresstool"], "run", *PUBLIC, "--", "true"),
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 125, r
    assert "needs root" in r.stderr and "kiwi-helper" in r.stderr, r.stderr


def test_forwarding_is_turned_on_only_in_kiwi_runs_netns(egress, world):
    outside = Path("/proc/sys/net/ipv4/ip_forward").read_text()
    subprocess.run(["ip", "netns", "exec", world.host, "sh", "-c", "echo 0 > /proc/sys/net/ipv4/ip_forward"],
                   check=True)
    res, _ = egress.probe(PUBLIC, "tcp", "203.0.113.10", "80")
    assert res["ok"], res
    inside = subprocess.run(["ip", "netns", "exec", world.host, "cat", "/proc/sys/net/ipv4/ip_forward"],
                            capture_output=True, text=True).stdout
    assert inside.strip() == "1"
    assert Path("/proc/sys/net/ipv4/ip_forward").read_text() == outside


def test_killed_run_is_collected_by_gc(egress, world, tools):
    """kiwi-run killed mid-run: the sandbox dies with it (and its veth with
    its netns), the table and pool entry stay until gc; a live run's stay."""
    # The live run must outlast the checks below on a loaded machine (CI
    # under ASan): 5 s did not always.
    live = subprocess.Popen(world.hx(tools["egresstool"], "run", *PUBLIC, "--", "sleep", "20"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    dead = subprocess.Popen(world.hx(tools["egresstool"], "run", *PUBLIC, "--", "sleep", "30"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while len(leftovers(world.host)[1]) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(leftovers(world.host)[1]) == 2
        # ip netns exec execs: the pid is egresstool's own
        os.kill(dead.pid, signal.SIGKILL)
        dead.wait()
        time.sleep(0.3)
        assert len(leftovers(world.host)[1]) == 2, "the dead run's table is left, as expected"
        r = subprocess.run(world.hx(tools["egresstool"], "gc"), capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["removed"] >= 2, r.stdout  # its table and its pool entry
        veths, tables = leftovers(world.host)
        assert len(tables) == 1, "the live run keeps its table"
    finally:
        try:
            live.wait(timeout=40)
        except subprocess.TimeoutExpired:
            live.kill()
            live.wait()
        if dead.poll() is None:
            dead.kill()
            dead.wait()
    assert live.returncode == 0


def test_host_firewall_reload_keeps_the_filter(egress, world, tools):
    """`nft flush ruleset` (what reloading a host firewall does) while a
    sandbox runs: its table is owned by kiwi-run, so it is skipped; other
    processes cannot delete it either."""
    p = tools["netprobe"]
    report = egress.scratch / "reload.json"
    run = subprocess.Popen(world.hx(tools["egresstool"], "run", "--report", str(report), *PUBLIC, "--",
                                    "/bin/sh", "-c", f"read x; {p} tcp 10.99.0.10 80; {p} tcp 203.0.113.10 80"),
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 10
        while not leftovers(world.host)[1] and time.monotonic() < deadline:
            time.sleep(0.05)
        table = leftovers(world.host)[1][0]
        flush = subprocess.run(world.hx("nft", "flush", "ruleset"), capture_output=True, text=True)
        assert flush.returncode == 0, flush.stderr
        delete = subprocess.run(world.hx("nft", "delete", "table", "inet", table), capture_output=True, text=True)
        assert delete.returncode != 0, "another process deleted the sandbox's table"
        assert leftovers(world.host)[1] == [table]
        out, _ = run.communicate("go\n", timeout=20)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    private, doc = [json.loads(l) for l in out.splitlines()]
    assert not private["ok"] and private["ms"] < 500, f"the filter is gone: {private}"
    assert doc["ok"], doc
