#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Session snapshot and restore (issue 14) against `tar -c | zstd` of the
same tree, in one run, interleaved: a workspace of SIZE MiB in FILES files
(compressible text, as source trees and node_modules are) is written into
a session's layer; then, each round,

  snapshot  `kiwi-run session snapshot ID LAYOUT:TAG` (zstd)   vs  `tar -c -C TREE . | zstd -q -o OUT`
  restore   `kiwi-run session create --from LAYOUT:TAG ...`    vs  `zstd -dc OUT | tar -x -C DEST` (a tmpfs)
            (until the new session is ready; destroyed untimed)

and the CPU time (user + system) of each, the measure that survives a
loaded host; the restore's CPU is that of `kiwi-rootfs snapshot-restore`
run alone on the same layout (in a session it runs in the new sandbox).

Goal (issue 14): both within 1.5x of the peer.

    sudo bench/snapshot-cost.py [--kiwi build/src/kiwi-run] [--rootfs DIR] [--files 5000] [--mib 100] [-n 5]

Prints a markdown table; asserts nothing about time."""
import argparse
import base64
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run(argv, **kw):
    r = subprocess.run(argv, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise SystemExit(f"failed: {argv}: {r.stderr}")
    return r


CPU = {}
LOAD = []


def timed(fn, key=None):
    """Wall ms of fn; with key, the CPU ms of the processes it waited for
    (user + system) go to CPU[key]: on a shared, loaded host the wall time
    mostly measures the wait for a core, the CPU time the work."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    fn()
    wall = (time.perf_counter() - t) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if key:
        CPU.setdefault(key, []).append((after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000)
    return wall


def make_tree(root, files, total):
    """files files of about total bytes, in 50 directories, text-like."""
    rng = random.Random(14)
    per = total // files
    for i in range(files):
        d = root / f"d{i % 50:02d}"
        d.mkdir(exist_ok=True)
        n = max(1, int(per * rng.uniform(0.5, 1.5)))
        raw = rng.randbytes(n * 3 // 4)
        (d / f"f{i:05d}.txt").write_bytes(base64.b64encode(raw)[:n])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiwi", default=str(REPO / "build" / "src" / "kiwi-run"))
    ap.add_argument("--rootfs", default=None)
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--mib", type=int, default=100)
    ap.add_argument("-n", type=int, default=5)
    ap.add_argument("--rootfs-tool", default=str(REPO / "build" / "rootfs-tools" / "kiwi-rootfs"))
    a = ap.parse_args()
    LOAD.append(f"{os.getloadavg()[0]:.1f}")
    rootfs = a.rootfs or next(p for p in sorted(Path("/var/tmp/kiwi-test-rootfs").iterdir()) if p.is_dir())
    work = Path(tempfile.mkdtemp(prefix="snapbench-", dir="/var/tmp"))
    shm = Path(tempfile.mkdtemp(prefix="snapbench-", dir="/dev/shm"))
    work.chmod(0o755)  # the restore reads the layout as the sandbox's root (kiwi's range for root)
    try:
        tree = work / "tree"
        tree.mkdir()
        make_tree(tree, a.files, a.mib << 20)
        empty = work / "ws"
        empty.mkdir()
        disk = f"{a.mib * 4}M"
        base = ["--rootfs", str(rootfs), "--workspace", str(empty), "--workspace-mode", "discard", "--disk", disk]
        sid = run([a.kiwi, "session", "create", *base]).stdout.strip()
        # The tree goes into the session's layer: what a snapshot reads.
        with subprocess.Popen(["tar", "-c", "-C", str(tree), "."], stdout=subprocess.PIPE) as tar:
            run([a.kiwi, "session", "exec", sid, "--", "tar", "-x", "-C", "/workspace"], stdin=tar.stdout)
        snap, peer_c, restore, peer_x, sizes = [], [], [], [], []
        try:
            for i in range(a.n):
                # The peer unpacks into a tmpfs, as the restore does (the
                # session's layer).
                layout, out, dest = work / f"l{i}", work / f"t{i}.tar.zst", shm / f"x{i}"
                snap.append(timed(lambda: run([a.kiwi, "session", "snapshot", sid, f"{layout}:t"]), "snapshot"))
                peer_c.append(timed(lambda: run(["sh", "-c", f"tar -c -C {tree} . | zstd -q -o {out}"]), "tar"))
                new = []
                restore.append(timed(lambda: new.append(
                    run([a.kiwi, "session", "create", "--from", f"{layout}:t", *base]).stdout.strip())))
                run([a.kiwi, "session", "destroy", new[0]])
                core = shm / f"c{i}"
                core.mkdir()
                # The restore's own work, alone (its CPU is counted here):
                # what pid 1 of the new session has kiwi-rootfs do.
                fd = os.open(core, os.O_RDONLY | os.O_DIRECTORY)
                layer = json.loads(run([a.rootfs_tool, "snapshot-check", "--json", f"{layout}:t"]).stdout)["layer"]
                blob_fd = os.open(layout / "blobs" / "sha256" / layer["digest"].split(":")[1], os.O_RDONLY)
                timed(lambda: run([a.rootfs_tool, "snapshot-restore", "--root", str(fd), "--map", "workspace=x",
                                   "--blob", str(blob_fd), "--media-type", layer["mediaType"],
                                   "--digest", layer["digest"], "--size", str(layer["size"]),
                                   "--diff-id", layer["diff_id"]], pass_fds=(fd, blob_fd)), "restore-core")
                os.close(blob_fd)
                os.close(fd)
                shutil.rmtree(core)
                dest.mkdir()
                peer_x.append(timed(lambda: run(["sh", "-c", f"zstd -dc {out} | tar -x -C {dest}"]), "untar"))
                blob = max((layout / "blobs" / "sha256").iterdir(), key=lambda p: p.stat().st_size)
                sizes.append((blob.stat().st_size, out.stat().st_size))
                shutil.rmtree(layout)
                shutil.rmtree(dest)
                out.unlink()
        finally:
            run([a.kiwi, "session", "destroy", sid])
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(shm, ignore_errors=True)

    def row(name, mine, peer):
        m, p = statistics.median(mine), statistics.median(peer)
        print(f"| {name} | {m:.0f} ({min(mine):.0f}) | {p:.0f} ({min(peer):.0f}) | {m / p:.2f} |")

    print(f"{a.files} files, {a.mib} MiB, {a.n} rounds, interleaved; ms, median (min)\n")
    print("| | kiwi-run | tar + zstd | ratio (medians) |")
    print("|---|---|---|---|")
    row("snapshot", snap, peer_c)
    row("restore", restore, peer_x)
    row("snapshot, CPU", CPU["snapshot"], CPU["tar"])
    row("restore (kiwi-rootfs snapshot-restore alone), CPU", CPU["restore-core"], CPU["untar"])
    print(f"\nload average before and after: {LOAD[0]} / {os.getloadavg()[0]:.1f}")
    s, t = sizes[-1]
    print(f"\nlayer blob {s / 1048576:.1f} MiB, tar.zst {t / 1048576:.1f} MiB")


if __name__ == "__main__":
    main()
