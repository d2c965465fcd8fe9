# SPDX-License-Identifier: Apache-2.0
"""Kernel facilities a sandbox must not reach: namespaces and mounts,
keyrings, bpf, userfaultfd, io_uring, perf, file handles, modules, raw
sockets, and the 32-bit and x32 ways into the same system calls.

Each attack runs in a default sandbox and must fail in every step. Where
the kernel would let an unprivileged process succeed, the same attack runs
again with `--seccomp unconfined` as the control: it must succeed there,
which shows that the attack is real and that this test can fail; the
seccomp profile is then the wall that stops it."""
import errno
import socket
import subprocess
import uuid

import pytest

from conftest import attack, parse_attack, succeeded


def sysctl(name):
    try:
        with open("/proc/sys/" + name.replace(".", "/")) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError):
        return None


# attack -> (steps the control must show succeeding, or a reason there is
# no control on this host). The reasons are why the kernel itself already
# refuses an unprivileged caller; seccomp is then a second wall.
def _controls():
    bpf_off = sysctl("kernel.unprivileged_bpf_disabled")
    uring_off = sysctl("kernel.io_uring_disabled")
    paranoid = sysctl("kernel.perf_event_paranoid")
    return {
        "mount": (None, "mount needs CAP_SYS_ADMIN, which the sandbox dropped"),
        "unshare": (["unshare-newuser", "clone-newuser", "clone3-newuser"], None),
        "keyctl": (["join-session-keyring", "add-key"], None),
        "bpf": ((["bpf-map-create"], None) if bpf_off == 0
                else (None, f"kernel.unprivileged_bpf_disabled={bpf_off}")),
        "userfaultfd": (["userfaultfd-user-mode"], None),
        "io_uring": ((["io-uring-setup"], None) if uring_off == 0
                     else (None, f"kernel.io_uring_disabled={uring_off}")),
        "perf": ((["perf-self"], None) if paranoid is not None and paranoid <= 2
                 else (None, f"kernel.perf_event_paranoid={paranoid}")),
        "handle": (["name-to-handle-tmp"], None),
        "module": (None, "modules need CAP_SYS_MODULE in the host's user namespace"),
        "sockets": (None, "raw sockets need CAP_NET_RAW, which the sandbox dropped"),
    }


CONTROLS = _controls()


@pytest.mark.parametrize("name", sorted(CONTROLS))
def test_attack_fails(kiwi, name):
    steps = attack(kiwi, name)
    assert steps, f"{name}: no attempt reported"
    assert succeeded(steps) == [], steps
    # The profile answers EPERM (ENOSYS for clone3, whose flags it cannot
    # read); a file the sandbox lacks answers ENOENT.
    for step, rec in steps.items():
        assert rec["errno"] in (errno.EPERM, errno.ENOSYS, errno.ENOENT, errno.EACCES), (step, rec)


@pytest.mark.parametrize("name", sorted(n for n, (c, _) in CONTROLS.items() if c))
def test_control_without_seccomp_succeeds(kiwi, name):
    """The same attack with the filter off: the kernel lets it through, so
    on this kind of host the profile alone stops each of these:
      unshare      unshare/clone/clone3(CLONE_NEWUSER): a nested user
                   namespace, where the process holds every capability
                   (over namespaces it owns; see the test below for what
                   stays locked)
      keyctl       a session keyring of its own and a key in it
      userfaultfd  a userfaultfd (user-mode faults only), the classic aid
                   for winning kernel races
      io_uring     an io_uring instance, a large and often-exploited
                   kernel surface
      perf         perf_event_open on itself (kernel.perf_event_paranoid=2)
      handle       name_to_handle_at; open_by_handle_at itself still needs
                   CAP_DAC_READ_SEARCH in the host's user namespace
      bpf          only where kernel.unprivileged_bpf_disabled=0"""
    steps = attack(kiwi, name, seccomp="unconfined")
    want, _ = CONTROLS[name]
    missing = [s for s in want if not steps.get(s, {}).get("ok")]
    assert not missing, f"control {name}: {missing} failed: {steps}"


def test_nested_namespace_cannot_unlock_the_sandbox(kiwi):
    """Without seccomp a new user namespace gives every capability back,
    inside it: tmpfs mounts and fsopen work there, and fsopen's parameter
    parsing is where CVE-2022-0185 lived. What the launcher set up stays
    locked even then: the /proc masks cannot be unmounted, nor the root
    remounted writable, nor a fresh procfs mounted over the masked one,
    nor a cgroup v1 hierarchy mounted for its release_agent
    (CVE-2022-0492). The default profile refuses the unshare itself."""
    steps = attack(kiwi, "unshare", seccomp="unconfined")
    assert steps["unshare-newuser"]["ok"], steps
    assert steps["nested-mount-tmpfs"]["ok"], "control: the nested namespace has capabilities"
    for step in ("nested-umount-kcore-mask", "nested-umount-proc-sys", "nested-remount-root-rw",
                 "nested-mount-proc", "nested-mount-cgroup-v1"):
        assert not steps[step]["ok"], (step, steps)


def test_nested_namespace_cannot_make_a_read_only_bind_writable(kiwi):
    work = kiwi.workdir()
    steps = attack(kiwi, "unshare", "/workspace", opts=["--bind", f"{work}:/workspace:ro"],
                   seccomp="unconfined")
    assert steps["unshare-newuser"]["ok"], steps
    assert not steps["nested-remount-bind-rw"]["ok"], steps


@pytest.mark.parametrize("variant", ["tmp", "rw-root"])
def test_device_nodes_cannot_be_made(kiwi, variant):
    """mknod of the host's memory and disks: CAP_MKNOD in the host's user
    namespace is needed, and /tmp is nodev besides."""
    if variant == "tmp":
        steps = attack(kiwi, "devices", "/tmp")
    else:
        steps = attack(kiwi, "devices", "/", opts=["--rw-root"], rootfs=kiwi.rootfs_copy())
    assert succeeded(steps) == [], steps


# -- the host's sockets


@pytest.fixture
def host_listeners():
    """A unix socket in the host's abstract namespace and a TCP listener on
    the host's loopback: what a daemon on the host offers (containerd's
    shim API was such an abstract socket, CVE-2020-15257)."""
    name = f"kiwi-attack-{uuid.uuid4().hex}"
    un = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    un.bind("\0" + name)
    un.listen(8)
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(8)
    yield name, str(tcp.getsockname()[1])
    un.close()
    tcp.close()


@pytest.mark.parametrize("seccomp", [None, "unconfined"])
def test_host_sockets_are_out_of_reach(kiwi, host_listeners, seccomp):
    """The sandbox's network namespace has its own loopback and its own
    abstract socket namespace; seccomp plays no part."""
    steps = attack(kiwi, "reach-host", *host_listeners, seccomp=seccomp)
    assert succeeded(steps) == [], steps


def test_host_sockets_control_outside_a_sandbox(attack_binary, host_listeners):
    r = subprocess.run([str(attack_binary), "reach-host", *host_listeners],
                       capture_output=True, text=True, timeout=10)
    steps = parse_attack(r)
    assert steps["abstract-unix"]["ok"] and steps["tcp-loopback"]["ok"], steps


def test_keyring_attack_leaves_no_key(kiwi):
    """/proc/keys on the host shows every key its root may view: the key
    the attack tries to add must not be among them. (The control's key,
    added to a throw-away session keyring, lingers there until the
    kernel's key collector runs, hence a name of its own.)"""
    name = f"kiwi-attack-{uuid.uuid4().hex}"
    steps = attack(kiwi, "keyctl", name)
    assert not steps.get("add-key", {}).get("ok"), steps
    with open("/proc/keys") as f:
        assert name not in f.read()


# -- 32-bit and x32 entry points


def _ia32_enabled():
    """Whether this kernel runs int 0x80 for 64-bit programs at all."""
    try:
        with open("/proc/config.gz", "rb") as f:
            import gzip
            config = gzip.decompress(f.read()).decode()
    except OSError:
        return None
    return "CONFIG_IA32_EMULATION=y" in config


def test_i386_and_x32_entry_points_are_closed(kiwi):
    """The filter checks the architecture of every call: an i386 call
    through int 0x80 or an x32 call (bit 30 in the number) from an x86-64
    program is killed, whatever the call, even getpid."""
    steps = attack(kiwi, "compat")
    assert steps["x86_64-getpid"]["ok"], "control: a native call works"
    for step in ("i386-getpid", "i386-unshare-newuser", "i386-keyctl-join", "i386-ptrace-init",
                 "x32-getpid", "x32-unshare-newuser", "x32-keyctl-join"):
        assert not steps[step]["ok"], (step, steps)
        assert steps[step]["note"] == "signal 31", f"{step} not killed by SIGSYS: {steps[step]}"


def test_i386_control_without_seccomp(kiwi):
    """With the filter off the same int 0x80 calls reach the kernel (when
    it has IA32 emulation): unshare(CLONE_NEWUSER) and keyctl succeed, so
    only the filter's architecture check closes this door. x32 answers
    ENOSYS on kernels built without it (CONFIG_X86_X32_ABI)."""
    if not _ia32_enabled():
        pytest.skip("the kernel has no IA32 emulation (or no /proc/config.gz to say)")
    steps = attack(kiwi, "compat", seccomp="unconfined")
    for step in ("i386-getpid", "i386-unshare-newuser", "i386-keyctl-join"):
        assert steps[step]["ok"], (step, steps)
    assert int(steps["i386-getpid"]["note"].split()[1]) > 2  # a child of the command
