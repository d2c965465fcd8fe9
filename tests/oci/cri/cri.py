# SPDX-License-Identifier: Apache-2.0
"""A small client of the Kubernetes CRI for the tests and the benchmark:
a private containerd with its CRI plugin, two runtime handlers (`kiwi`:
kiwi-run, `runc`: runc, both through the stock io.containerd.runc.v2 shim),
the local images, and the gRPC stubs of api.proto.

Nothing here touches the system's containerd: config, root, state, socket,
CNI dirs and the runtimes' state dirs all live under one fresh directory.
The pods use the node's network namespace (NamespaceMode NODE, a
hostNetwork pod): containerd's CRI then calls no CNI plugin, which a host
without a network card (the VM lane) could not serve anyway.
"""
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import grpc

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from oci import containerd_config, stop_daemon  # noqa: E402  (tests/oci/oci.py: stdlib only, cheap in the VM)

NS = "k8s.io"                       # the CRI plugin's containerd namespace
PAUSE_IMAGE = "localhost/kiwi-pause:latest"
APP_IMAGE = "localhost/oci-probe:latest"
PROBE = "/usr/local/bin/oci-probe"
RUNC = "/usr/sbin/runc"
TIMEOUT = 120                       # a guard against a hung daemon, never an assertion

CRI_CONFIG = """[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause}"
  stream_server_address = "127.0.0.1"
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{d}/cni/bin"
    conf_dir = "{d}/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "{runc}"
        Root = "{d}/runc"
        SystemdCgroup = false
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kiwi]
      runtime_type = "io.containerd.runc.v2"
      pod_annotations = ["io.kiwi.*"]
      container_annotations = ["io.kiwi.*"]
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kiwi.options]
        BinaryName = "{kiwi}"
        Root = "{d}/kiwi"
        SystemdCgroup = false
"""


def stubs():
    """api_pb2 and api_pb2_grpc, generated from api.proto into
    KIWI_CRI_STUBS (prepare.py fills it on the host: a protoc run costs
    seconds under emulation) unless they are there and newer, else into a
    temp dir."""
    d = os.environ.get("KIWI_CRI_STUBS") or tempfile.mkdtemp(prefix="kiwi-cri-stubs-")
    made = Path(d) / "api_pb2_grpc.py"
    if not made.exists() or made.stat().st_mtime < (HERE / "api.proto").stat().st_mtime:
        Path(d).mkdir(parents=True, exist_ok=True)
        generate(d)
    sys.path.insert(0, d)
    return importlib.import_module("api_pb2"), importlib.import_module("api_pb2_grpc")


def generate(out):
    from grpc_tools import protoc
    rc = protoc.main(["protoc", f"-I{HERE}", f"--python_out={out}", f"--grpc_python_out={out}",
                      str(HERE / "api.proto")])
    if rc != 0:
        raise RuntimeError(f"grpc_tools.protoc failed ({rc}) on {HERE / 'api.proto'}")


pb, pb_grpc = stubs()


class Daemon:
    """containerd with the CRI plugin, private to directory d."""

    def __init__(self, d, kiwi, runc=RUNC):
        self.dir = Path(d)
        self.sock = str(self.dir / "containerd.sock")
        for sub in ("cni/bin", "cni/net.d", "logs"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        self.config = containerd_config(self.dir) + CRI_CONFIG.format(
            d=self.dir, pause=PAUSE_IMAGE, kiwi=kiwi, runc=runc)
        (self.dir / "config.toml").write_text(self.config)
        self.log = open(self.dir / "containerd.log", "w")
        self.proc = subprocess.Popen(["containerd", "--config", str(self.dir / "config.toml")],
                                     stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        self.channel = grpc.insecure_channel(f"unix://{self.sock}")
        self.rt = pb_grpc.RuntimeServiceStub(self.channel)
        self.img = pb_grpc.ImageServiceStub(self.channel)
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                self.rt.Version(pb.VersionRequest(), timeout=5)
                break
            except grpc.RpcError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("containerd's CRI did not answer: " + self.tail())
                time.sleep(0.2)

    def tail(self, n=3000):
        if not self.log.closed:
            self.log.flush()
        return (self.dir / "containerd.log").read_text()[-n:]

    def ctr(self, *args):
        return subprocess.run(["ctr", "-a", self.sock, "-n", NS, *map(str, args)],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=TIMEOUT)

    def load(self, archive, name):
        """Imports an oci-archive as NAME and waits until the CRI sees it
        (its image cache follows containerd's image events)."""
        base = name.rsplit(":", 1)[0]
        r = self.ctr("images", "import", "--base-name", base, archive)
        if r.returncode != 0:
            raise RuntimeError(f"ctr images import {archive}: {r.stderr.strip()}")
        deadline = time.monotonic() + TIMEOUT
        while not self.img.ImageStatus(pb.ImageStatusRequest(image=pb.ImageSpec(image=name)),
                                       timeout=TIMEOUT).image.id:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the CRI never saw image {name}")
            time.sleep(0.1)

    def stop(self):
        self.channel.close()
        stop_daemon(self.proc, self.log)

    # ---- the CRI calls the tests make, with the configs the kubelet would send

    def run_pod(self, name, handler, cgroup_parent, annotations=None):
        cfg = pod_config(name, self.dir / "logs" / name, cgroup_parent, annotations)
        (self.dir / "logs" / name).mkdir(parents=True, exist_ok=True)
        r = self.rt.RunPodSandbox(pb.RunPodSandboxRequest(config=cfg, runtime_handler=handler),
                                  timeout=TIMEOUT)
        return r.pod_sandbox_id, cfg

    def create(self, pod_id, pod_cfg, name, args, resources=None, security=None, annotations=None):
        cfg = pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name=name),
            image=pb.ImageSpec(image=APP_IMAGE),
            command=[PROBE], args=args,
            annotations=annotations or {},
            log_path=f"{name}.log",
            linux=pb.LinuxContainerConfig(resources=resources, security_context=security))
        r = self.rt.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=pod_id, config=cfg, sandbox_config=pod_cfg), timeout=TIMEOUT)
        return r.container_id

    def start(self, cid):
        self.rt.StartContainer(pb.StartContainerRequest(container_id=cid), timeout=TIMEOUT)

    def status(self, cid):
        """(ContainerStatus, info): info is containerd's verbose JSON (pid,
        runtimeSpec...)."""
        r = self.rt.ContainerStatus(pb.ContainerStatusRequest(container_id=cid, verbose=True),
                                    timeout=TIMEOUT)
        return r.status, json.loads(r.info.get("info", "{}"))

    def pod_status(self, pod_id):
        r = self.rt.PodSandboxStatus(pb.PodSandboxStatusRequest(pod_sandbox_id=pod_id,
                                                                verbose=True), timeout=TIMEOUT)
        return r.status, json.loads(r.info.get("info", "{}"))

    def exec_sync(self, cid, cmd, timeout=60):
        return self.rt.ExecSync(pb.ExecSyncRequest(container_id=cid, cmd=cmd, timeout=timeout),
                                timeout=TIMEOUT)

    def remove_pod(self, pod_id):
        self.rt.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=pod_id), timeout=TIMEOUT)
        self.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=pod_id),
                                 timeout=TIMEOUT)


def pod_config(name, log_dir, cgroup_parent, annotations=None):
    """A hostNetwork pod (no CNI), one pid namespace per container (the
    kubelet's default), the pod's IPC namespace shared."""
    ns = pb.NamespaceOption(network=pb.NODE, pid=pb.CONTAINER, ipc=pb.POD)
    return pb.PodSandboxConfig(
        metadata=pb.PodSandboxMetadata(name=name, uid=str(uuid.uuid4()), namespace="kiwi-test"),
        log_directory=str(log_dir),
        annotations=annotations or {},
        linux=pb.LinuxPodSandboxConfig(
            cgroup_parent=cgroup_parent,
            security_context=pb.LinuxSandboxSecurityContext(namespace_options=ns)))


def restricted(uid):
    """The security context of a container the `restricted` Pod Security
    Standard admits: not root, no capabilities, no privilege escalation
    (no_new_privs), the runtime's default seccomp profile (containerd
    writes its own into config.json)."""
    return pb.LinuxContainerSecurityContext(
        capabilities=pb.Capability(drop_capabilities=["ALL"]),
        run_as_user=pb.Int64Value(value=uid), run_as_group=pb.Int64Value(value=uid),
        no_new_privs=True,
        seccomp=pb.SecurityProfile(profile_type=pb.SecurityProfile.RuntimeDefault))


def log_lines(path):
    """The container's output from its CRI log file: each line is
    `TIME STREAM TAG TEXT` (TAG F: a full line, P: a partial one)."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return []
    out = []
    for line in text.splitlines():
        parts = line.split(" ", 3)
        if len(parts) == 4:
            out.append(parts[3])
    return out


def wait_for(predicate, what, timeout=TIMEOUT, step=0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what}")
        time.sleep(step)
