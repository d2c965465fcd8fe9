#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The OCI runtime's start-up against runc, in one interleaved run, and
what the sealed re-exec (CVE-2019-5736, src/oci/sealed.c) costs.

usage (root): bench/oci-start.py KIWI_RUN BUNDLE [ROUNDS]
BUNDLE: a config.json running `true` (kiwi-run spec, terminal false) with
an absolute root.path that is not a symlink (runc refuses one).
Prints median and min per command, and the ratios. Numbers to read, not to
assert on: the machine is shared.
"""
import statistics
import subprocess
import sys
import tempfile
import time


def main():
    kiwi, bundle = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 50
    kroot, rroot = tempfile.mkdtemp(), tempfile.mkdtemp()
    cmds = {
        "kiwi-run run": [kiwi, "--root", kroot, "run", "-b", bundle, "b"],
        "runc run": ["runc", "--root", rroot, "run", "-b", bundle, "b"],
        "kiwi-run exec, missing id (re-exec only)": [kiwi, "--root", kroot, "exec", "none", "true"],
        "kiwi-run state, missing id (no re-exec)": [kiwi, "--root", kroot, "state", "none"],
    }
    times = {k: [] for k in cmds}
    for _ in range(rounds):
        for name, argv in cmds.items():
            t = time.perf_counter()
            subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            times[name].append((time.perf_counter() - t) * 1000)
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in times.items():
        print(f"| {k} | {med[k]:.2f} ms | {min(v):.2f} ms | {len(v)} |")
    print(f"\nkiwi-run run / runc run (medians): {med['kiwi-run run'] / med['runc run']:.2f}")
    seal = med["kiwi-run exec, missing id (re-exec only)"] - med["kiwi-run state, missing id (no re-exec)"]
    print(f"sealed re-exec: {seal:.2f} ms, {seal / med['kiwi-run run']:.0%} of kiwi-run run")


if __name__ == "__main__":
    main()
