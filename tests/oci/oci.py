# SPDX-License-Identifier: Apache-2.0
"""The OCI suite's tools: a runtime's command line, a config.json builder,
the probe's JSON, a console-socket receiver and a waiter for processes that
are not our children."""
import array
import copy
import json
import os
import select
import signal
import socket
import subprocess
import time
from pathlib import Path

PROBE = "/usr/local/bin/oci-probe"
CMD_TIMEOUT = 120  # a guard against a hung runtime, never an assertion
# Directories the default config and the tests mount over; they exist in
# the shared rootfs so that no runtime has to create them in it.
MOUNT_POINTS = ("/proc", "/dev", "/sys", "/tmp", "/mnt/a", "/mnt/b", "/mnt/c", "/mnt/d",
                "/mnt/e", "/mnt/f", "/hooks", "/run", "/dev/pts", "/dev/shm", "/dev/mqueue")
FILE_MOUNT_POINTS = ("/mnt/file",)
CAPS_DEFAULT = ["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"]
CAP_BITS = {"CAP_CHOWN": 0, "CAP_DAC_OVERRIDE": 1, "CAP_DAC_READ_SEARCH": 2, "CAP_FOWNER": 3,
            "CAP_FSETID": 4, "CAP_KILL": 5, "CAP_SETGID": 6, "CAP_SETUID": 7, "CAP_SETPCAP": 8,
            "CAP_LINUX_IMMUTABLE": 9, "CAP_NET_BIND_SERVICE": 10, "CAP_NET_BROADCAST": 11,
            "CAP_NET_ADMIN": 12, "CAP_NET_RAW": 13, "CAP_IPC_LOCK": 14, "CAP_IPC_OWNER": 15,
            "CAP_SYS_MODULE": 16, "CAP_SYS_RAWIO": 17, "CAP_SYS_CHROOT": 18,
            "CAP_SYS_PTRACE": 19, "CAP_SYS_PACCT": 20, "CAP_SYS_ADMIN": 21, "CAP_SYS_BOOT": 22,
            "CAP_SYS_NICE": 23, "CAP_SYS_RESOURCE": 24, "CAP_SYS_TIME": 25,
            "CAP_SYS_TTY_CONFIG": 26, "CAP_MKNOD": 27, "CAP_LEASE": 28, "CAP_AUDIT_WRITE": 29,
            "CAP_AUDIT_CONTROL": 30, "CAP_SETFCAP": 31}


def containerd_config(d, disabled=()):
    """The start of a private containerd's config.toml: everything under
    directory d (never the system's /var/lib/containerd, /run/containerd
    or /opt/containerd), the snapshotters this machine lacks and the
    plugins in `disabled` turned off."""
    off = [*disabled, "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
           "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
    return f"""version = 2
root = "{d}/root"
state = "{d}/state"
disabled_plugins = {json.dumps(off)}
[grpc]
  address = "{d}/containerd.sock"
[ttrpc]
  address = "{d}/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "{d}/opt"
"""


def stop_daemon(proc, log, timeout=30):
    """SIGTERM to a daemon the tests started (containerd), SIGKILL if it
    is still there after timeout seconds; then closes its log."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()


def host_runs_peers():
    """True on a pure cgroup v2 host (the VM lane), where crun and runc work."""
    return (os.path.exists("/sys/fs/cgroup/cgroup.controllers")
            and not os.path.exists("/sys/fs/cgroup/unified"))


def version_line(path):
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
        return (out.stdout.splitlines() or ["?"])[0]
    except OSError as e:
        return f"missing ({e.strerror})"


def caps_of(hexmask):
    """Capability names set in a /proc/self/status mask."""
    bits = int(hexmask, 16)
    return {name for name, bit in CAP_BITS.items() if bits >> bit & 1}


def default_config(rootfs):
    """What `runc spec` writes, pointed at the shared rootfs, running the
    probe, with a writable /tmp."""
    return {
        "ociVersion": "1.0.2",
        "process": {
            "terminal": False,
            "user": {"uid": 0, "gid": 0},
            "args": [PROBE, "report"],
            "env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                    "TERM=xterm"],
            "cwd": "/",
            "capabilities": {k: list(CAPS_DEFAULT) for k in ("bounding", "effective",
                                                             "permitted")},
            "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}],
            "noNewPrivileges": True,
        },
        "root": {"path": str(rootfs), "readonly": True},
        "hostname": "oci-test",
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
            {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
             "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]},
            {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
             "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
            {"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue",
             "options": ["nosuid", "noexec", "nodev"]},
            {"destination": "/sys", "type": "sysfs", "source": "sysfs",
             "options": ["nosuid", "noexec", "nodev", "ro"]},
            {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "nodev", "mode=1777"]},
        ],
        "linux": {
            "namespaces": [{"type": t} for t in ("pid", "network", "ipc", "uts", "mount")],
            "maskedPaths": ["/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys",
                            "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
                            "/proc/sched_debug", "/sys/firmware", "/proc/scsi"],
            "readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
                              "/proc/sysrq-trigger"],
        },
    }


class Bundle:
    """A bundle directory; `config` is the dict written as config.json."""

    def __init__(self, path, rootfs):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.config = default_config(rootfs)

    @property
    def process(self):
        return self.config["process"]

    @property
    def linux(self):
        return self.config["linux"]

    def args(self, *argv):
        self.process["args"] = [PROBE, *argv]
        return self

    def add_mount(self, dest, type_, source, options=None):
        m = {"destination": dest, "type": type_, "source": str(source)}
        if options is not None:
            m["options"] = list(options)
        self.config["mounts"].append(m)

    def write(self):
        (self.path / "config.json").write_text(json.dumps(self.config, indent=1))
        return self

    def hooks(self):
        return self.config.setdefault("hooks", {})


def probe_lines(text):
    """The probe's JSON lines, by step name (report, read, ...), in order."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if isinstance(d, dict):
                out.append(d)
    return out


def one(lines, step, arg=None):
    for d in lines:
        if d.get("step") == step and (arg is None or d.get("arg") == arg):
            return d
    raise AssertionError(f"the probe printed no `{step}` line for {arg}: {lines}")


def mount_at(report, target):
    """The last (topmost) mount at target, or None."""
    found = [m for m in report["mounts"] if m["target"] == target]
    return found[-1] if found else None


class Result:
    def __init__(self, proc, out, err):
        self.rc = proc.returncode
        self.out = out
        self.err = err
        self.lines = probe_lines(out)

    def report(self):
        return one(self.lines, "report")

    def step(self, step, arg=None):
        return one(self.lines, step, arg)

    def __repr__(self):
        return f"rc={self.rc} stdout={self.out[-2000:]!r} stderr={self.err[-2000:]!r}"


class Runtime:
    """One runtime's OCI command line, with a private --root."""

    def __init__(self, name, path, root, scratch):
        self.name = name
        self.path = path
        self.root = Path(root)
        self.scratch = Path(scratch)
        self.ids = []

    def new_id(self):
        cid = f"oci-{self.name}-{os.getpid()}-{len(self.ids)}-{time.monotonic_ns() % 100000}"
        self.ids.append(cid)
        return cid

    def argv(self, *args):
        return [self.path, "--root", str(self.root), *map(str, args)]

    def cmd(self, *args, input=None, pass_fds=(), timeout=CMD_TIMEOUT, stdin=None):
        """Runs one command to completion; stdout and stderr go through files,
        never pipes, because `create` hands its stdio to the container."""
        with open(self.scratch / "cmd.out", "w+") as out, open(self.scratch / "cmd.err", "w+") as err:
            kw = {"stdin": stdin if stdin is not None else subprocess.DEVNULL}
            if input is not None:
                kw = {"input": input.encode()}
            proc = subprocess.run(self.argv(*args), stdout=out, stderr=err, timeout=timeout,
                                  pass_fds=pass_fds, **kw)
            out.seek(0)
            err.seek(0)
            return Result(proc, out.read(), err.read())

    def create(self, cid, bundle, *extra, stdout=None):
        """create with the container's stdio on files in the bundle
        (`out`, `err`), so nothing waits for the container to close a pipe."""
        bundle.write()
        with open(bundle.path / "out", "w") as out, open(bundle.path / "err", "w") as err:
            proc = subprocess.run(self.argv("create", "--bundle", bundle.path, *extra, cid),
                                  stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                  timeout=CMD_TIMEOUT)
        return Result(proc, "", (bundle.path / "err").read_text())

    def run(self, bundle, *extra, cid=None, input=None, pass_fds=()):
        bundle.write()
        cid = cid or self.new_id()
        r = self.cmd("run", "--bundle", bundle.path, *extra, cid, input=input,
                     pass_fds=pass_fds)
        # A foreground run that returned has deleted its container: no
        # `delete --force` afterwards (an exec costs tens of ms in the VM).
        self.ids.remove(cid)
        return r

    def state(self, cid):
        r = self.cmd("state", cid)
        if r.rc != 0:
            return None
        return json.loads(r.out)

    def cleanup(self):
        for cid in self.ids:
            subprocess.run(self.argv("delete", "--force", cid), capture_output=True,
                           timeout=CMD_TIMEOUT)


def control(rt, bundle):
    """The positive control of a refusal test: the config without the fault
    runs, so a refusal is about the fault, not a runtime that runs nothing."""
    r = rt.run(bundle)
    assert r.rc == 0, f"control: the valid config must run first: {r}"


def wait_pid_gone(pid, timeout=CMD_TIMEOUT):
    """Waits for a process that is not our child to exit (a zombie counts)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], timeout)[0])
    finally:
        os.close(fd)


def wait_for_file_text(path, text, timeout=CMD_TIMEOUT):
    """Polls a file until it contains text (the container's `ready` line)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if text in Path(path).read_text():
                return True
        except FileNotFoundError:
            pass
        time.sleep(0.02)
    return False


def wait_status(runtime, cid, status, timeout=CMD_TIMEOUT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = runtime.state(cid)
        if st and st.get("status") == status:
            return st
        time.sleep(0.05)
    return runtime.state(cid)


class ConsoleSocket:
    """The receiving end of --console-socket: a unix socket on which the
    runtime sends the pty master as SCM_RIGHTS."""

    def __init__(self, path):
        self.path = str(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(1)

    def receive_master(self, proc, timeout=CMD_TIMEOUT):
        """Waits for the runtime (proc, a Popen) to connect and send the
        master; fails at once when proc exits without doing so."""
        deadline = time.monotonic() + timeout
        while not select.select([self.sock], [], [], 0.05)[0]:
            if proc.poll() is not None:
                raise AssertionError(f"the runtime exited ({proc.returncode}) without "
                                     f"sending a console: {proc.stderr.read()!r}")
            if time.monotonic() > deadline:
                raise AssertionError("no connection on the console socket")
        conn, _ = self.sock.accept()
        with conn:
            fds = array.array("i")
            msg, anc, _, _ = conn.recvmsg(4096, socket.CMSG_SPACE(4 * fds.itemsize))
            for level, typ, data in anc:
                if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                    fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
        if not fds:
            raise AssertionError("no fd arrived on the console socket")
        for extra in fds[1:]:
            os.close(extra)
        return fds[0]

    def close(self):
        self.sock.close()


def read_until(fd, needle, timeout=CMD_TIMEOUT):
    """Reads from a pty master until needle appears or it hangs up."""
    buf = b""
    deadline = time.monotonic() + timeout
    while needle.encode() not in buf and time.monotonic() < deadline:
        ready = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]
        if not ready:
            break
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the slave side is closed
            break
        if not chunk:
            break
        buf += chunk
    return buf.decode(errors="replace")


def signum(name):
    return int(getattr(signal, name))


def deep(d):
    return copy.deepcopy(d)
