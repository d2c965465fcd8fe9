#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Two builds of kiwi-run, A and B, alternating one operation at a time
(A then B, then B then A, ...), so that both see the same moments of a
shared host's load: `session exec` of /bin/true into a session of each
build's own, `session create` (each followed by its destroy, not
timed), a whole cycle (create, exec of /bin/true, destroy: each part and
the sum), or `run` of /bin/true. For one change's effect where a whole
session-cost.py run per tree would drown it in the load's swings.

    sudo bench/session-ab.py --rootfs DIR A_KIWI B_KIWI {exec,create,cycle,run} [-n 300]

Prints p50, p25 and min per build; asserts nothing about time."""
import argparse
import os
import statistics
import subprocess
import time


def run(argv):
    r = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise SystemExit(f"failed: {argv}: {r.stderr}")
    return r.stdout


def timed(argv):
    t = time.perf_counter()
    out = run(argv)
    return (time.perf_counter() - t) * 1000, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rootfs", required=True)
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("what", choices=("exec", "create", "cycle", "run"))
    ap.add_argument("-n", type=int, default=300, help="operations per build")
    o = ap.parse_args()
    kiwis = (o.a, o.b)
    ms = {k: [] for k in kiwis}
    sid = {}
    parts = {}
    try:
        if o.what == "exec":
            for k in kiwis:
                sid[k] = run([k, "session", "create", "--rootfs", o.rootfs]).strip()
        for i in range(o.n):
            for k in kiwis if i % 2 == 0 else kiwis[::-1]:
                if o.what == "exec":
                    ms[k].append(timed([k, "session", "exec", sid[k], "--", "/bin/true"])[0])
                elif o.what == "run":
                    ms[k].append(timed([k, "run", "--rootfs", o.rootfs, "--", "/bin/true"])[0])
                elif o.what == "cycle":
                    tc, out = timed([k, "session", "create", "--rootfs", o.rootfs])
                    te, _ = timed([k, "session", "exec", out.strip(), "--", "/bin/true"])
                    td, _ = timed([k, "session", "destroy", out.strip()])
                    ms[k].append(tc + te + td)
                    parts.setdefault(k, []).append((tc, te, td))
                else:
                    t, out = timed([k, "session", "create", "--rootfs", o.rootfs])
                    ms[k].append(t)
                    run([k, "session", "destroy", out.strip()])
    finally:
        for k, s in sid.items():
            subprocess.run([k, "session", "destroy", s], capture_output=True)
    for name, k in zip("AB", kiwis):
        v = ms[k]
        print(f"{o.what} {name} ({k}): p50 {statistics.median(v):.3f} ms, p25 "
              f"{statistics.quantiles(v, n=4)[0]:.3f}, min {min(v):.3f}, n {len(v)}")
        if k in parts:
            p50 = [statistics.median(p[i] for p in parts[k]) for i in range(3)]
            print(f"  p50 of create {p50[0]:.3f}, exec {p50[1]:.3f}, destroy {p50[2]:.3f} ms")
    print(f"load average at the end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
