#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The guest half of the meson test `vm-cri` (tests/oci/cri/run.sh): a pod
through containerd's CRI, the path the kubelet takes, with kiwi-run as the
runtime handler `kiwi` (containerd's stock io.containerd.runc.v2 shim with
BinaryName = kiwi-run; config in cri.py and docs/kubernetes.md).

  1. RunPodSandbox with the handler `kiwi`: the pause container runs under
     kiwi-run (kiwi-run's own `state` knows it);
  2. CreateContainer/StartContainer of an app from a local image, with
     memory, cpu and pids limits: the values land in its cgroup, read from
     the VM's cgroupfs; with the security context of a `restricted` pod
     (uid 1000, capabilities dropped, no_new_privs, seccomp
     RuntimeDefault: containerd's own profile): the app and an ExecSync'd
     process run so, as the kernel shows them;
  3. ExecSync (exit status, output, the container's namespaces), then
     StopContainer and ContainerStatus with the app's exit code;
  4. a second pod annotated io.kiwi.phase=verify: no network, although the
     pod asks for the node's (a veth the test adds to the node is visible
     in the first pod and absent in this one);
  5. StopPodSandbox and RemovePodSandbox of both pods: nothing the test's
     ids made is left (containerd's lists, kiwi-run's state, processes,
     cgroups, mounts, the shims' bundles).

Plain Python with a tiny runner, not pytest (importing pytest costs ~15 s
under emulation). Each step prints `ok` or `not ok`; once one fails the
remaining steps are reported as not run, except the last (removal leaves
nothing), which runs in any case. Exits 1 when a step failed, 77 outside
the VM.

usage: guest.py [HANDLER]   HANDLER: kiwi (the default) or runc, the same
steps against runc to check the harness (runc fails 4.: it knows no
io.kiwi.* annotation).
Inputs (environment): KIWI_RUN, KIWI_CRI_WORK (prepare.py's output: the
two image archives and the gRPC stubs in stubs/), KIWI_VM=1.
"""
import json
import os
import subprocess
import sys
import time
import traceback
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
WORK = Path(os.environ.get("KIWI_CRI_WORK", "."))
os.environ.setdefault("KIWI_CRI_STUBS", str(WORK / "stubs"))
import cri  # noqa: E402
from cri import pb  # noqa: E402
from oci import probe_lines  # noqa: E402  (tests/oci/oci.py, on the path through cri)

CGROOT = Path("/sys/fs/cgroup")
TAG = uuid.uuid4().hex[:8]
# The kubelet (cgroupfs driver) makes each pod's cgroup below one whose
# children have the controllers (kubepods/burstable...) and passes it as
# cgroup_parent; as runc's cgroup manager does, it enables them on the way
# down but not in the pod's own cgroup: the runtime enables them there.
PODS_CG = f"/kiwi-cri-{TAG}"
VETH = f"kcri{TAG[:6]}"
APP_UID = 1000
LIMITS = dict(memory_limit_in_bytes=64 << 20, cpu_period=100000, cpu_quota=50000,
              cpu_shares=512, unified={"pids.max": "40"})


class S:
    """What the steps made, for the later steps and for the cleanup."""
    d = None
    handler = "kiwi"
    binary = ""      # the handler's runtime binary (kiwi-run, or runc)
    pods = {}        # name -> (pod id, pod config)
    ids = []         # every pod and container id
    pids = []        # every container process seen
    app = None       # container id of the first pod's app


def sh(*argv):
    return subprocess.run(argv, capture_output=True, text=True, timeout=cri.TIMEOUT)


def runtime_state(cid):
    """The runtime's own view of a container (`state`: kiwi-run and runc
    alike; the shim passes the handler's Root/NAMESPACE as --root)."""
    r = sh(S.binary, "--root", str(S.d.dir / S.handler / cri.NS), "state", cid)
    return json.loads(r.stdout) if r.returncode == 0 else None


def ns_of(pid, kind):
    return os.readlink(f"/proc/{pid}/ns/{kind}")


def pod_cgroup(name):
    path = f"{PODS_CG}/{name}"
    (CGROOT / path.lstrip("/")).mkdir()
    return path


def run_pod(name, annotations=None):
    pod_id, cfg = S.d.run_pod(name, S.handler, pod_cgroup(name), annotations)
    S.pods[name] = (pod_id, cfg)
    S.ids.append(pod_id)
    st, info = S.d.pod_status(pod_id)
    assert st.state == pb.SANDBOX_READY and st.runtime_handler == S.handler, st
    pid = info["pid"]
    S.pids.append(pid)
    mine = runtime_state(pod_id)
    assert mine and mine["status"] == "running" and mine["pid"] == pid, \
        f"{S.binary} does not know the pause container: {mine}"
    assert Path(f"/proc/{pid}/cmdline").read_bytes() == b"/pause\0"
    return pod_id, pid


def start(pod, name, args, resources=None, security=None):
    pod_id, cfg = S.pods[pod]
    cid = S.d.create(pod_id, cfg, name, args, resources, security)
    S.ids.append(cid)
    S.d.start(cid)
    st, info = S.d.status(cid)
    S.pids.append(info["pid"])
    return cid, st, info


def log_of(pod, name):
    return S.d.dir / "logs" / pod / f"{name}.log"


def wait_exited(cid):
    return cri.wait_for(lambda: (lambda st: st if st.state == pb.CONTAINER_EXITED else None)(
        S.d.status(cid)[0]), f"container {cid} to exit")


# ---- the steps ----------------------------------------------------------------

def step_pod_under_handler():
    run_pod("plain")


def step_app_with_limits():
    cid, st, info = start("plain", "app", ["report", "wait-signal", "exit=3"],
                          pb.LinuxContainerResources(**LIMITS), cri.restricted(APP_UID))
    S.app = cid
    assert st.state == pb.CONTAINER_RUNNING, st
    assert runtime_state(cid)["status"] == "running"
    cri.wait_for(lambda: any('"ready"' in l for l in cri.log_lines(log_of("plain", "app"))),
                 "the app's first output")


def assert_restricted(rep, who):
    """The process runs as a restricted pod's container must."""
    st = rep["status"]
    got = (rep["uid"], rep["gid"], st["CapEff"], st["CapPrm"], st["CapBnd"], st["NoNewPrivs"], st["Seccomp"])
    assert got == (APP_UID, APP_UID, "0" * 16, "0" * 16, "0" * 16, "1", "2"), f"{who}: {got}"


def step_restricted():
    spec = S.d.status(S.app)[1]["runtimeSpec"]
    seccomp = spec["linux"].get("seccomp") or {}
    assert seccomp.get("defaultAction") == "SCMP_ACT_ERRNO" and seccomp.get("syscalls"), \
        "containerd wrote its default seccomp profile into config.json"
    lines = probe_lines("\n".join(cri.log_lines(log_of("plain", "app"))))
    assert_restricted(next(l for l in lines if l.get("step") == "report"), "the app")
    # An exec'd process gets the container's context too (containerd
    # builds its process.json from the container's process).
    r = S.d.exec_sync(S.app, [cri.PROBE, "report"])
    assert r.exit_code == 0, r
    assert_restricted(next(l for l in probe_lines(r.stdout.decode()) if l.get("step") == "report"),
                      "ExecSync's process")


def step_limits_in_cgroup():
    _, info = S.d.status(S.app)
    path = info["runtimeSpec"]["linux"]["cgroupsPath"]
    assert path == f"{PODS_CG}/plain/{S.app}", path
    own = Path(f"/proc/{info['pid']}/cgroup").read_text().strip()
    assert own == f"0::{path}", own
    d = CGROOT / path.lstrip("/")
    got = {f: (d / f).read_text().strip() for f in ("memory.max", "cpu.max", "cpu.weight", "pids.max")}
    want = {"memory.max": str(64 << 20), "cpu.max": "50000 100000",
            # runc's map of shares 2..262144 onto weight 1..10000
            "cpu.weight": str(1 + (512 - 2) * 9999 // 262142), "pids.max": "40"}
    assert got == want, f"cgroup {d}: {got}, want {want}"


def step_exec_sync():
    _, info = S.d.status(S.app)
    pid = info["pid"]
    r = S.d.exec_sync(S.app, [cri.PROBE, "report", "cat=/proc/net/dev", "exit=5"])
    assert r.exit_code == 5, r
    lines = probe_lines(r.stdout.decode())
    rep = next(l for l in lines if l.get("step") == "report")
    for kind in ("pid", "mnt", "ipc", "net"):
        assert rep["ns"][kind] == ns_of(pid, kind), kind
    pause = S.d.pod_status(S.pods["plain"][0])[1]["pid"]
    assert rep["ns"]["ipc"] == ns_of(pause, "ipc"), "the pod's IPC namespace is shared"
    assert rep["ns"]["net"] == ns_of(1, "net"), "a hostNetwork pod without a phase has the node's"
    dev = next(l for l in lines if l.get("step") == "cat")["data"]
    assert VETH in dev, dev


def step_stop_exit_code():
    S.d.rt.StopContainer(pb.StopContainerRequest(container_id=S.app, timeout=30),
                         timeout=cri.TIMEOUT)
    st = wait_exited(S.app)
    assert st.exit_code == 3 and st.finished_at > 0, st
    assert any('"signal":15' in l for l in cri.log_lines(log_of("plain", "app"))), \
        "the app got SIGTERM first"


def step_verify_pod_has_no_network():
    _, pause = run_pod("verify", {"io.kiwi.phase": "verify"})
    assert ns_of(pause, "net") != ns_of(1, "net"), "the verify pod's pause has the node's network"
    cid, _, info = start("verify", "job", ["report", "cat=/proc/net/dev"])
    assert info["runtimeSpec"]["annotations"].get("io.kiwi.phase") == "verify", \
        "containerd passes io.kiwi.* to the container (container_annotations/pod_annotations)"
    st = wait_exited(cid)
    assert st.exit_code == 0, st
    lines = probe_lines("\n".join(cri.log_lines(log_of("verify", "job"))))
    rep = next(l for l in lines if l.get("step") == "report")
    assert rep["ns"]["net"] != ns_of(1, "net"), "verify ran in the node's network namespace"
    dev = next(l for l in lines if l.get("step") == "cat")["data"]
    ifaces = sorted(l.split(":")[0].strip() for l in dev.splitlines()[2:])
    assert ifaces == ["lo"], dev


def step_remove_leaves_nothing():
    for pod_id, _ in S.pods.values():
        S.d.remove_pod(pod_id)
    S.pods.clear()
    assert leftovers() == [], leftovers()


def leftovers():
    """Whatever of the test's ids is still around."""
    left = []
    pods = S.d.rt.ListPodSandbox(pb.ListPodSandboxRequest(), timeout=cri.TIMEOUT).items
    ctrs = S.d.rt.ListContainers(pb.ListContainersRequest(), timeout=cri.TIMEOUT).containers
    left += [f"CRI pod {p.id}" for p in pods if p.id in S.ids]
    left += [f"CRI container {c.id}" for c in ctrs if c.id in S.ids]
    left += [f"process {pid}" for pid in S.pids if Path(f"/proc/{pid}").exists()]
    mounts = Path("/proc/self/mountinfo").read_text()
    shims = S.d.dir / "state" / "io.containerd.runtime.v2.task" / cri.NS
    for i in S.ids:
        if (S.d.dir / S.handler / cri.NS / i).exists():
            left.append(f"{S.binary}'s state of {i}")
        if (shims / i).exists():
            left.append(f"shim bundle of {i}")
        if i in mounts:
            left.append(f"a mount of {i}")
    left += [f"cgroup {p}" for p in (CGROOT / PODS_CG.lstrip("/")).glob("*/*") if p.is_dir()]
    return left


STEPS = [
    ("RunPodSandbox: the pause container runs under the handler's runtime", step_pod_under_handler),
    ("CreateContainer + StartContainer: the app runs and writes its CRI log", step_app_with_limits),
    ("the container config's memory, cpu and pids limits are in its cgroup", step_limits_in_cgroup),
    ("a restricted security context: not root, no capabilities, no_new_privs, seccomp", step_restricted),
    ("ExecSync: exit status, output, the container's namespaces", step_exec_sync),
    ("StopContainer, then ContainerStatus has the app's exit code", step_stop_exit_code),
    ("io.kiwi.phase=verify: the pod has no network", step_verify_pod_has_no_network),
]
# Runs after a failed step too: removal must leave nothing in any case.
LAST = ("StopPodSandbox + RemovePodSandbox: nothing of the test's ids is left", step_remove_leaves_nothing)


def run_steps():
    failed = []
    for name, fn in STEPS + [LAST]:
        if failed and fn is not LAST[1]:
            print(f"not ok - {name} # not run: an earlier step failed")
            failed.append(name)
            continue
        t = time.monotonic()
        try:
            fn()
            print(f"ok - {name} ({time.monotonic() - t:.1f} s)", flush=True)
        except Exception:
            print(f"not ok - {name}\n" + "".join(f"#   {l}\n" for l in traceback.format_exc().splitlines()),
                  end="", flush=True)
            failed.append(name)
    return failed


def setup(tmp):
    S.binary = os.environ["KIWI_RUN"] if S.handler == "kiwi" else cri.RUNC
    (CGROOT / PODS_CG.lstrip("/")).mkdir()
    (CGROOT / PODS_CG.lstrip("/") / "cgroup.subtree_control").write_text("+memory +pids +cpu")
    r = sh("ip", "link", "add", VETH, "type", "veth", "peer", "name", VETH + "p")
    assert r.returncode == 0, r.stderr
    S.d = cri.Daemon(tmp, os.environ["KIWI_RUN"])
    S.d.load(WORK / "kiwi-pause.tar", cri.PAUSE_IMAGE)
    S.d.load(WORK / "oci-probe.tar", cri.APP_IMAGE)


def teardown():
    if S.d:
        for pod_id, _ in S.pods.values():
            try:
                S.d.remove_pod(pod_id)
            except Exception as e:
                print(f"# cleanup: pod {pod_id}: {e}")
        S.d.stop()
    sh("ip", "link", "del", VETH)
    top = CGROOT / PODS_CG.lstrip("/")
    for p in [p for p in top.glob("*/*") if p.is_dir()] + [p for p in top.glob("*") if p.is_dir()] + [top]:
        try:
            p.rmdir()
        except OSError as e:
            print(f"# cleanup: {p}: {e}")


def main():
    if os.environ.get("KIWI_VM") != "1":
        print("SKIP: needs the VM lane (tests/oci/cri/run.sh)")
        return 77
    S.handler = sys.argv[1] if len(sys.argv) > 1 else "kiwi"
    tmp = Path("/tmp") / f"kiwi-cri-{TAG}"
    start = time.monotonic()
    try:
        setup(tmp)
        print(f"# setup (containerd, two images) {time.monotonic() - start:.1f} s", flush=True)
        failed = run_steps()
    except Exception:
        print("not ok - setup\n" + "".join(f"#   {l}\n" for l in traceback.format_exc().splitlines()), end="")
        failed = ["setup"]
    finally:
        teardown()
    if failed and S.d:
        print("# containerd's log, last lines:\n" + "".join(f"#   {l}\n" for l in S.d.tail().splitlines()), end="")
    print(f"# {len(failed)} failed, {time.monotonic() - start:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
