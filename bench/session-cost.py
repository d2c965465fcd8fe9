#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What a session costs against one-shot runs (issue 14), in one run,
interleaved: `session exec` of /bin/true (p50, p95) against a fresh
`kiwi-run run` of it; create + exec + destroy against one run; and the
host memory an idle session holds (MemAvailable before and after N idle
sessions, and the PSS of each supervisor and pid 1, over --idle-runs
rounds); and, with --crun, crun's create+start / exec / delete of an
equivalent bundle (the same rootfs, read-only, /bin/true) in the same
rounds.

    sudo bench/session-cost.py [--kiwi build/src/kiwi-run] [--rootfs DIR] [-n 200] [--idle 200]
                               [--idle-runs 3] [--crun [--crun-cgroups]]

In the cgroup v2 VM lane (ratios only: the guest is emulated):

    tests/vm/run.sh --timeout 900 -- sh -c 'mkdir /tmp/r && tar -C /tmp/r -xf ROOTFS.tar &&
        python3 bench/session-cost.py --rootfs /tmp/r -n 20 --cycles 10 --idle 0 --crun --crun-cgroups'


crun 1.8 refuses every container on a host whose cgroup v2 hierarchy is
mounted beside v1 ("cgroups in hybrid mode not supported"), even with
--cgroup-manager=disabled: each crun command here runs in a private mount
namespace of its own where /sys/fs/cgroup is an empty tmpfs, so crun sees
no cgroup hierarchy at all and makes no cgroup (kiwi-run's session makes
its witness cgroup: crun has the cheaper start here).

Prints markdown tables; asserts nothing about time."""
import argparse
import ctypes
import json
import os
import shutil
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


def meminfo():
    out = {}
    for line in open("/proc/meminfo"):
        k, v = line.split(":")
        out[k] = int(v.split()[0])
    return out


def mem_available_kib():
    return meminfo()["MemAvailable"]


# Where the kernel's share goes: slab objects (namespaces, cgroups, mounts,
# sockets, inodes), per-CPU data (network namespaces, cgroups), page
# tables, kernel stacks, tmpfs pages. On a shared host MemAvailable moves
# by more than the signal; these counters move much less, and their sum
# with the two processes' PSS is the steadier estimate ("sum").
KERNEL_PARTS = ("SUnreclaim", "Percpu", "PageTables", "KernelStack", "SReclaimable", "Shmem")
SUMMED = ("SUnreclaim", "Percpu", "PageTables", "KernelStack")


CLONE_NEWNS = 0x00020000
MS_REC, MS_PRIVATE = 0x4000, 0x40000
_libc = ctypes.CDLL(None, use_errno=True)


def hide_cgroups():
    """In a crun child, before exec: a mount namespace of its own where
    /sys/fs/cgroup is an empty tmpfs (see the module's doc)."""
    if _libc.unshare(CLONE_NEWNS) != 0 or \
            _libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0 or \
            _libc.mount(b"kiwi-bench-nocg", b"/sys/fs/cgroup", b"tmpfs", 0, None) != 0:
        os._exit(121)


CRUN_CGROUPS = False  # --crun-cgroups: a pure cgroup v2 host (the VM lane), crun's own cgroups


def crun(*args):
    # No pipes: the container's process would hold them open past create.
    if CRUN_CGROUPS:
        argv, pre = ["crun", *args], None
    else:
        argv, pre = ["crun", "--cgroup-manager=disabled", *args], hide_cgroups
    return check(subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, preexec_fn=pre))


def crun_bundle(rootfs, args):
    """An OCI bundle of crun's default spec on rootfs, read-only, no tty."""
    d = Path(tempfile.mkdtemp(prefix="kiwi-bench-crun-"))
    check(subprocess.run(["crun", "spec"], cwd=d, capture_output=True, text=True))
    c = json.loads((d / "config.json").read_text())
    c["root"] = {"path": os.path.abspath(rootfs), "readonly": True}
    c["process"]["terminal"] = False
    c["process"]["args"] = args
    (d / "config.json").write_text(json.dumps(c))
    return d


def children(pid):
    try:
        return [int(p) for p in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        return []


def table(rows):
    print("| what | p50 ms | p95 ms | min ms |\n| --- | ---: | ---: | ---: |")
    for name, v in rows:
        if v:
            print(f"| {name} | {statistics.median(v):.2f} | {pct(v, 95):.2f} | {min(v):.2f} |")


def ratio(a, b):
    return statistics.median(a) / statistics.median(b)


def latency(a, k, rootfs):
    """exec against run, then create+exec+destroy against run (and crun's
    peers in the same rounds), interleaved."""
    cb = crun_bundle(rootfs, ["/bin/sleep", "100000"]) if a.crun else None
    rb = crun_bundle(rootfs, ["/bin/true"]) if a.crun else None
    t = {n: [] for n in ("exec", "run", "crun_exec", "crun_run", "cycle", "one", "create", "destroy",
                         "crun_cycle")}
    sid = run([k, "session", "create", "--rootfs", rootfs]).stdout.strip()
    cid = f"kiwi-bench-{os.getpid()}"
    if cb:
        crun("create", "--bundle", str(cb), cid)
        crun("start", cid)
    try:
        for i in range(5 + a.n):
            e = ms(lambda: run([k, "session", "exec", sid, "--", "/bin/true"]))
            r = ms(lambda: run([k, "run", "--rootfs", rootfs, "--", "/bin/true"]))
            ce = ms(lambda: crun("exec", cid, "/bin/true")) if cb else None
            cr = ms(lambda: crun("run", "--bundle", str(rb), f"{cid}-r{i}")) if rb else None
            if i >= 5:  # warm-up rounds dropped
                t["exec"].append(e)
                t["run"].append(r)
                if cb:
                    t["crun_exec"].append(ce)
                    t["crun_run"].append(cr)
    finally:
        run([k, "session", "destroy", sid])
        if cb:
            crun("delete", "-f", cid)
    for i in range(a.cycles):
        def cycle():
            t0 = time.perf_counter()
            s = run([k, "session", "create", "--rootfs", rootfs]).stdout.strip()
            t1 = time.perf_counter()
            run([k, "session", "exec", s, "--", "/bin/true"])
            t2 = time.perf_counter()
            run([k, "session", "destroy", s])
            t["create"].append((t1 - t0) * 1000)
            t["destroy"].append((time.perf_counter() - t2) * 1000)
        t["cycle"].append(ms(cycle))
        t["one"].append(ms(lambda: run([k, "run", "--rootfs", rootfs, "--", "/bin/true"])))
        if cb:
            def crun_cycle():
                c = f"{cid}-c{i}"
                crun("create", "--bundle", str(cb), c)
                crun("start", c)
                crun("exec", c, "/bin/true")
                crun("delete", "-f", c)
            t["crun_cycle"].append(ms(crun_cycle))
    for d in (cb, rb):
        if d:
            shutil.rmtree(d)
    print(f"load average at the end: {os.getloadavg()}\n")
    table((("session exec /bin/true", t["exec"]), ("kiwi-run run /bin/true", t["run"]),
           ("crun exec /bin/true (running container)", t["crun_exec"]), ("crun run /bin/true", t["crun_run"]),
           ("session create+exec+destroy", t["cycle"]), ("  of which create", t["create"]),
           ("  of which destroy", t["destroy"]), ("kiwi-run run (same rounds)", t["one"]),
           ("crun create+start+exec+delete -f", t["crun_cycle"])))
    print(f"\nexec / run, p50: {ratio(t['exec'], t['run']):.2f}x (goal: below 1)")
    print(f"create+exec+destroy / run, p50: {ratio(t['cycle'], t['one']):.2f}x (goal: at most 2)")
    if cb:
        print(f"session exec / crun exec, p50: {ratio(t['exec'], t['crun_exec']):.2f}x")
        print(f"session cycle / crun cycle, p50: {ratio(t['cycle'], t['crun_cycle']):.2f}x")


def tree(pid):
    """pid and its descendants."""
    out = [pid]
    for t in Path(f"/proc/{pid}/task").iterdir():
        for c in (t / "children").read_text().split():
            out += tree(int(c))
    return out


def density(a, k, rootfs):
    """N idle sessions: MemAvailable before and after (everything:
    processes, page tables, the kernel's namespaces), and the PSS of the
    processes each keeps (supervisor; pid 1 and the leader waiting
    beside it for the next exec)."""
    ids = []
    load = os.getloadavg()[0]
    m0 = meminfo()
    before = m0["MemAvailable"]
    try:
        for _ in range(a.idle):
            ids.append(run([k, "session", "create", "--rootfs", rootfs]).stdout.strip())
        # Idle: past the 2 s the first exec's leader and command wait for
        # it after create (kiwi-run-session(1)); the figure without that
        # wait, for sessions just made, is --idle-fresh's.
        time.sleep(0 if a.idle_fresh else 3)
        m1 = meminfo()
        after = m1["MemAvailable"]
        sup, pid1 = [], []
        for e in json.loads(run([k, "session", "list", "--json"]).stdout):
            if e["id"] in ids:
                sup.append(pss_kib(e["supervisor_pid"]))
                # pid 1 and what waits beside it (the next exec's leader)
                pid1.append(sum(pss_kib(p) for p in tree(e["pid"])))
    finally:
        for s in ids:
            subprocess.run([k, "session", "destroy", s], capture_output=True)
    time.sleep(2)
    back = mem_available_kib()
    per = (before - after) / a.idle
    parts = " | ".join(f"{(m1[p] - m0[p]) / a.idle:.0f}" for p in KERNEL_PARTS)
    pss = statistics.median(sup) + statistics.median(pid1)
    total = pss + sum(m1[p] - m0[p] for p in SUMMED) / a.idle
    print(f"| {load:.1f} | {per:.0f} | {(back - after) / a.idle:.0f} | {statistics.median(sup):.0f} | "
          f"{statistics.median(pid1):.0f} | {parts} | {total:.0f} |")
    return per, pss, total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiwi", default=str(REPO / "build/src/kiwi-run"))
    ap.add_argument("--rootfs")
    ap.add_argument("-n", type=int, default=200, help="execs and runs, interleaved")
    ap.add_argument("--cycles", type=int, default=50, help="create+exec+destroy cycles")
    ap.add_argument("--idle", type=int, default=200, help="idle sessions for the density figure")
    ap.add_argument("--idle-runs", type=int, default=3, help="rounds of the density figure")
    ap.add_argument("--idle-fresh", action="store_true",
                    help="measure the sessions at once, the first exec's leader still waiting in each")
    ap.add_argument("--crun", action="store_true", help="crun's create+start/exec/delete in the same rounds")
    ap.add_argument("--crun-cgroups", action="store_true",
                    help="on a pure cgroup v2 host (the VM lane): crun makes its cgroups, nothing hidden")
    a = ap.parse_args()
    global CRUN_CGROUPS
    CRUN_CGROUPS = a.crun_cgroups
    k = a.kiwi
    rootfs = a.rootfs
    if not rootfs:
        rootfs = tempfile.mkdtemp(prefix="kiwi-bench-rootfs-")
        run(["sh", str(REPO / "rootfs-tools/busybox-rootfs.sh"), rootfs])
    if a.n or a.cycles:
        latency(a, k, rootfs)
    if not a.idle:
        return
    print(f"\n{a.idle} idle sessions, {a.idle_runs} round(s), KiB per session:\n")
    print("| load before | MemAvailable fell | came back at destroy | supervisor PSS | pid 1 PSS | "
          + " | ".join(KERNEL_PARTS) + " | sum |\n| ---: | ---: | ---: | ---: | ---: |"
          + " ---: |" * (len(KERNEL_PARTS) + 1))
    res = [density(a, k, rootfs) for _ in range(a.idle_runs)]
    per = sorted(r[0] for r in res)
    tot = sorted(r[2] for r in res)
    print(f"\nPer idle session: MemAvailable median {statistics.median(per):.0f} KiB "
          f"(range {per[0]:.0f} to {per[-1]:.0f}); sum of PSS and kernel counters median "
          f"{statistics.median(tot):.0f} KiB (range {tot[0]:.0f} to {tot[-1]:.0f}); PSS of both processes "
          f"median {statistics.median(r[1] for r in res):.0f} KiB (goal: at most 1024 KiB)")


if __name__ == "__main__":
    main()
