#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What a session costs against one-shot runs (issue 14), in one run,
interleaved: `session exec` of /bin/true (p50, p95) against a fresh
`kiwi-run run` of it; create + exec + destroy against one run; and the
host memory an idle session holds (MemAvailable before and after N idle
sessions, and the PSS of each supervisor and pid 1).

    sudo bench/session-cost.py [--kiwi build/src/kiwi-run] [--rootfs DIR] [-n 200] [--idle 200]

Prints markdown tables; asserts nothing about time."""
import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def ms(fn):
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1000


def check(r):
    if r.returncode != 0:
        raise SystemExit(f"failed: {r.args}: {r.stderr}")
    return r


def run(argv):
    return check(subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL))


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def pss_kib(pid):
    try:
        for line in open(f"/proc/{pid}/smaps_rollup"):
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def mem_available_kib():
    for line in open("/proc/meminfo"):
        if line.startswith("MemAvailable:"):
            return int(line.split()[1])
    return 0


def children(pid):
    try:
        return [int(p) for p in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        return []


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiwi", default=str(REPO / "build/src/kiwi-run"))
    ap.add_argument("--rootfs")
    ap.add_argument("-n", type=int, default=200, help="execs and runs, interleaved")
    ap.add_argument("--cycles", type=int, default=50, help="create+exec+destroy cycles")
    ap.add_argument("--idle", type=int, default=200, help="idle sessions for the density figure")
    a = ap.parse_args()
    k = a.kiwi
    rootfs = a.rootfs
    if not rootfs:
        rootfs = tempfile.mkdtemp(prefix="kiwi-bench-rootfs-")
        run(["sh", str(REPO / "rootfs-tools/busybox-rootfs.sh"), rootfs])
    sid = run([k, "session", "create", "--rootfs", rootfs]).stdout.strip()
    execs, runs = [], []
    try:
        for _ in range(5):
            run([k, "session", "exec", sid, "--", "/bin/true"])
            run([k, "run", "--rootfs", rootfs, "--", "/bin/true"])
        for _ in range(a.n):
            execs.append(ms(lambda: run([k, "session", "exec", sid, "--", "/bin/true"])))
            runs.append(ms(lambda: run([k, "run", "--rootfs", rootfs, "--", "/bin/true"])))
    finally:
        run([k, "session", "destroy", sid])
    cycles, one = [], []
    for _ in range(a.cycles):
        def cycle():
            s = run([k, "session", "create", "--rootfs", rootfs]).stdout.strip()
            run([k, "session", "exec", s, "--", "/bin/true"])
            run([k, "session", "destroy", s])
        cycles.append(ms(cycle))
        one.append(ms(lambda: run([k, "run", "--rootfs", rootfs, "--", "/bin/true"])))
    print(f"load average at the end: {os.getloadavg()}\n")
    print("| what | p50 ms | p95 ms | min ms |\n| --- | ---: | ---: | ---: |")
    for name, v in (("session exec /bin/true", execs), ("kiwi-run run /bin/true", runs),
                    ("session create+exec+destroy", cycles), ("kiwi-run run (same rounds)", one)):
        print(f"| {name} | {statistics.median(v):.2f} | {pct(v, 95):.2f} | {min(v):.2f} |")
    print(f"\nexec / run, p50: {statistics.median(execs) / statistics.median(runs):.2f}x "
          f"(goal: below 1)")
    print(f"create+exec+destroy / run, p50: {statistics.median(cycles) / statistics.median(one):.2f}x "
          f"(goal: at most 2)")
    if not a.idle:
        return
    # Density: N idle sessions, from MemAvailable (everything: processes,
    # page tables, the kernel's namespaces) and from the PSS of the two
    # processes each keeps (supervisor, pid 1).
    ids = []
    before = mem_available_kib()
    try:
        for _ in range(a.idle):
            ids.append(run([k, "session", "create", "--rootfs", rootfs]).stdout.strip())
        time.sleep(2)
        after = mem_available_kib()
        pss = []
        import json
        for e in json.loads(run([k, "session", "list", "--json"]).stdout):
            if e["id"] in ids:
                pss.append(pss_kib(e["supervisor_pid"]) + pss_kib(e["pid"]))
    finally:
        for s in ids:
            subprocess.run([k, "session", "destroy", s], capture_output=True)
    print(f"\n{a.idle} idle sessions: MemAvailable fell by {(before - after) / a.idle:.0f} KiB per session; "
          f"supervisor + pid 1 PSS median {statistics.median(pss):.0f} KiB (goal: at most 1024 KiB)")


if __name__ == "__main__":
    main()
