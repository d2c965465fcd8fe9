#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What the writable layer (issue 15) costs, against the tree before it, in
one run, interleaved.

  start:  `run --rootfs R --bind WS:/ws -- /bin/true` with the old binary
          (rootfs bound onto itself, /tmp and /dev/shm tmpfs of their own,
          workspace bound in place) against the new one's
          `--bind WS:/ws:layer` (rootfs overlay, one layer tmpfs, workspace
          overlay, changes landed at the end).
  loop:   the same start and write with --disk-backend loop (an ext4
          image on a loop device, kiwi/loopfs.h): no goal of its own, its
          cost against both.
  idmap:  root's start with kiwi's id range and idmapped rootfs and
          workspace (the default since issue 15's "no host root inside")
          against the same binary's `--host-root-map` (map 0 0 1, the
          mounts as they are: the start before it), both with the layered
          workspace; `--old` may then be left out.
  write:  50,000 small files (100 bytes, 500 directories of 100) written
          by the sandbox into the workspace: the new binary's bounded,
          layered workspace (landing included: the time is kiwi-run's
          whole run) against the old binary writing into a plain directory
          bound in place. Each round starts from an empty workspace.

Usage (root, from the tree, after `ninja -C build`):
  bench/layer-cost.py --old OLD_KIWI_RUN [--new build/src/kiwi-run]
                      [--rootfs R] [--starts 200] [--writes 7 (0: starts only)]
  bench/layer-cost.py --idmap-only [--new build/src/kiwi-run] [--starts 200]
OLD_KIWI_RUN: e.g. a build of the commit before the layer:
  git worktree add /var/tmp/kiwi-old a28781b~1 && (cd /var/tmp/kiwi-old &&
  meson setup b && ninja -C b src/kiwi-run)
Prints medians, minimums and the ratios; exits 1 if any run fails.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WRITER = ("i=0; while [ $i -lt 500 ]; do mkdir /ws/d$i; j=0; "
          "while [ $j -lt 100 ]; do echo 0123456789012345678901234567890123456789012345678901234567890"
          "12345678901234567890123456789012345678 > /ws/d$i/f$j; j=$((j+1)); done; i=$((i+1)); done")


def timed(argv):
    t0 = time.perf_counter()
    r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(argv)}\n{r.stderr}")
    return dt * 1000


def fresh(path):
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir()


def report(name, a_name, a, b_name, b, goal):
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"| {name} | {a_name} | {ma:.2f} | {min(a):.2f} |")
    print(f"| {name} | {b_name} | {mb:.2f} | {min(b):.2f} |")
    ratio, rmin = mb / ma, min(b) / min(a)
    verdict = "" if goal is None else " met" if ratio <= goal else " NOT met"
    print(f"| {name} | ratio{'' if goal is None else f' (goal <= {goal}x)'} | {ratio:.3f}x{verdict}"
          f" | {rmin:.3f}x by min |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old")
    ap.add_argument("--idmap-only", action="store_true")
    ap.add_argument("--new", default="build/src/kiwi-run")
    ap.add_argument("--rootfs")
    ap.add_argument("--starts", type=int, default=200)
    ap.add_argument("--writes", type=int, default=7)
    a = ap.parse_args()
    if not a.old and not a.idmap_only:
        ap.error("--old OLD_KIWI_RUN, or --idmap-only")
    rootfs = a.rootfs or str(sorted(Path("/var/tmp/kiwi-test-rootfs").glob("*/"))[0])
    scratch = Path(tempfile.mkdtemp(prefix="kiwi-layer-bench-", dir="/var/tmp"))
    ws = scratch / "ws"
    fresh(ws)
    print(f"load before: {os.getloadavg()}")
    hrm_start = [a.new, "run", "--host-root-map", "--rootfs", rootfs, "--bind", f"{ws}:/ws:layer", "--",
                 "/bin/true"]
    idm_start = [a.new, "run", "--rootfs", rootfs, "--bind", f"{ws}:/ws:layer", "--", "/bin/true"]
    for _ in range(10):
        timed(hrm_start), timed(idm_start)
    hrms, idms = [], []
    for _ in range(a.starts):
        hrms.append(timed(hrm_start))
        idms.append(timed(idm_start))
    if a.idmap_only:
        print(f"load after: {os.getloadavg()}")
        print("| what | tool | median ms | min ms |\n|---|---|---|---|")
        report("start /bin/true", "--host-root-map (map 0 0 1)", hrms,
               "kiwi's range, idmapped rootfs + workspace", idms, 1.15)
        shutil.rmtree(scratch, ignore_errors=True)
        return
    old_start = [a.old, "run", "--rootfs", rootfs, "--bind", f"{ws}:/ws", "--", "/bin/true"]
    new_start = [a.new, "run", "--rootfs", rootfs, "--bind", f"{ws}:/ws:layer", "--", "/bin/true"]
    loop = ["--disk-backend", "loop"]
    loop_start = new_start[:-2] + loop + new_start[-2:]
    for _ in range(10):
        timed(old_start), timed(new_start), timed(loop_start)
    olds, news, loops = [], [], []
    for _ in range(a.starts):
        olds.append(timed(old_start))
        news.append(timed(new_start))
        loops.append(timed(loop_start))
    old_w, new_w, loop_w = [], [], []
    for _ in range(a.writes):
        fresh(ws)
        old_w.append(timed([a.old, "run", "--rootfs", rootfs, "--bind", f"{ws}:/ws", "--",
                            "/bin/sh", "-c", WRITER]))
        fresh(ws)
        new_w.append(timed([a.new, "run", "--rootfs", rootfs, "--bind", f"{ws}:/ws:layer", "--disk", "1G",
                            "--", "/bin/sh", "-c", WRITER]))
        n = sum(len(f) for _, _, f in os.walk(ws))
        if n != 50000:
            sys.exit(f"the layered run landed {n} files, not 50000")
        fresh(ws)
        loop_w.append(timed([a.new, "run", "--rootfs", rootfs, "--bind", f"{ws}:/ws:layer", "--disk", "1G",
                             *loop, "--", "/bin/sh", "-c", WRITER]))
        n = sum(len(f) for _, _, f in os.walk(ws))
        if n != 50000:
            sys.exit(f"the loop-backed run landed {n} files, not 50000")
    print(f"load after: {os.getloadavg()}")
    print("| what | tool | median ms | min ms |\n|---|---|---|---|")
    report("start /bin/true", "before the layer (bind in place)", olds,
           "layer + layered workspace", news, 1.15)
    report("start /bin/true", "before the layer (bind in place)", olds,
           "loop backend + layered workspace", loops, None)
    report("start /bin/true", "--host-root-map (map 0 0 1)", hrms,
           "kiwi's range, idmapped rootfs + workspace", idms, 1.15)
    if old_w:  # --writes 0: the starts alone
        report("50,000 files", "plain directory (bind in place)", old_w,
               "bounded layered workspace, landed", new_w, 1.3)
        report("50,000 files", "plain directory (bind in place)", old_w,
               "loop backend, landed", loop_w, None)
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
