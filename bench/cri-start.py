#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A pod's start through containerd's CRI with kiwi-run against runc as the
runtime handler, in one run, interleaved: RunPodSandbox (the pause
container) + CreateContainer + StartContainer, up to the app's first line
in its CRI log. The kubelet's path, with the setup of tests/oci/cri.

usage (root, on the host): KIWI_CRI_GUEST=bench/cri-start.py tests/oci/cri/run.sh BUILD [ROUNDS]
It runs in the VM lane (pure cgroup v2): under TCG every time is many
times the native one, so only the ratios mean anything. Each round starts
one pod per handler (which goes first alternates), after 2 warm-up
rounds; the pods are hostNetwork pods with the test's limits (memory, cpu,
pids), each under a pod cgroup the bench makes with those controllers
enabled below it; each pod is stopped and removed before the next (not
timed). Prints markdown tables: median
and min per phase and handler (cumulative, and each call alone), and
kiwi-run's ratios to runc (of the medians, of the minimums, and the median
of each round's paired ratio).
"""
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "oci" / "cri"))
WORK = Path(os.environ.get("KIWI_CRI_WORK", "."))
os.environ.setdefault("KIWI_CRI_STUBS", str(WORK / "stubs"))
import cri  # noqa: E402
from cri import pb  # noqa: E402

HANDLERS = ("kiwi", "runc")
PHASES = ("RunPodSandbox", "CreateContainer", "StartContainer", "first output")
CG = Path("/sys/fs/cgroup/kiwi-cri-bench")
LIMITS = dict(memory_limit_in_bytes=64 << 20, cpu_period=100000, cpu_quota=50000,
              cpu_shares=512, unified={"pids.max": "40"})


def one_pod(d, handler, n):
    """Times one pod; returns the cumulative time (ms) at the end of each
    phase."""
    name = f"bench-{handler}-{n}"
    cg = CG / name
    cg.mkdir()
    (cg / "cgroup.subtree_control").write_text("+memory +pids +cpu")
    log = d.dir / "logs" / name / "app.log"
    t0 = time.perf_counter()
    marks = []
    pod_id, cfg = d.run_pod(name, handler, f"/{CG.name}/{name}")
    marks.append(time.perf_counter())
    cid = d.create(pod_id, cfg, "app", ["wait-signal"], pb.LinuxContainerResources(**LIMITS))
    marks.append(time.perf_counter())
    d.start(cid)
    marks.append(time.perf_counter())
    while not cri.log_lines(log):
        time.sleep(0.001)
    marks.append(time.perf_counter())
    d.remove_pod(pod_id)
    cg.rmdir()
    return [(m - t0) * 1000 for m in marks]


def table(times):
    print("Cumulative from the RunPodSandbox call, median / min:\n")
    print("| handler | " + " | ".join(PHASES) + " |")
    print("|---|" + "---|" * len(PHASES))
    for h in HANDLERS:
        cols = [f"{statistics.median(c):.0f} / {min(c):.0f} ms" for c in zip(*times[h])]
        print(f"| {h} | " + " | ".join(cols) + " |")
    print("\nEach call alone (the time since the previous mark), median / min:\n")
    print("| handler | " + " | ".join(PHASES) + " |")
    print("|---|" + "---|" * len(PHASES))
    alone = {h: [[t[0]] + [b - a for a, b in zip(t, t[1:])] for t in times[h]] for h in HANDLERS}
    for h in HANDLERS:
        cols = [f"{statistics.median(c):.0f} / {min(c):.0f} ms" for c in zip(*alone[h])]
        print(f"| {h} | " + " | ".join(cols) + " |")
    # Paired: the two handlers of one round ran back to back, under the
    # same load; the median of those ratios drifts least with the load.
    print("\n| kiwi-run / runc, cumulative | ratio of medians | ratio of mins | median of the rounds' ratios |")
    print("|---|---|---|---|")
    for i, p in enumerate(PHASES):
        k = [t[i] for t in times["kiwi"]]
        r = [t[i] for t in times["runc"]]
        paired = statistics.median(a / b for a, b in zip(k, r))
        print(f"| {p} | {statistics.median(k) / statistics.median(r):.2f} | {min(k) / min(r):.2f} "
              f"| {paired:.2f} |")


def main():
    if os.environ.get("KIWI_VM") != "1":
        print("needs the VM lane: KIWI_CRI_GUEST=bench/cri-start.py tests/oci/cri/run.sh BUILD")
        return 77
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    CG.mkdir(exist_ok=True)
    (CG / "cgroup.subtree_control").write_text("+memory +pids +cpu")
    d = cri.Daemon(Path("/tmp/kiwi-cri-bench"), os.environ["KIWI_RUN"])
    times = {h: [] for h in HANDLERS}
    try:
        d.load(WORK / "kiwi-pause.tar", cri.PAUSE_IMAGE)
        d.load(WORK / "oci-probe.tar", cri.APP_IMAGE)
        for n in range(rounds + 2):
            order = HANDLERS if n % 2 == 0 else HANDLERS[::-1]
            for h in order:
                t = one_pod(d, h, n)
                if n >= 2:
                    times[h].append(t)
            print(f"# round {n}: " + ", ".join(f"{h} {times[h][-1][-1]:.0f} ms" for h in HANDLERS
                                               if n >= 2), flush=True)
    finally:
        d.stop()
    print(f"\n{rounds} rounds per handler (after 2 warm-up rounds), interleaved, in the VM lane "
          f"(qemu TCG: absolute times are not native ones)\n")
    table(times)
    return 0


if __name__ == "__main__":
    sys.exit(main())
