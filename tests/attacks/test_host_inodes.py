# SPDX-License-Identifier: Apache-2.0
"""The host's inodes a sandbox reaches without being given them: the device
nodes of /dev (binds of the host's) and the file that masks /proc entries
(the host's /dev/null). A root caller's sandbox is the host's uid 0 by
file ownership, so only a read-only bind keeps it from changing their
mode, owner or times; and an image whose /dev/null is a symlink into /proc
must never have that file used as a device or bound over a mask. Through
`run`, `phase verify`, `shell` and the OCI verbs, root and rootless."""
import json
import os

import pytest

from conftest import ATTACK, attack, explain, parse_attack, run_on_a_pty

DEVICES = {"/dev/null": "c 1:3", "/dev/zero": "c 1:5", "/dev/full": "c 1:7",
           "/dev/random": "c 1:8", "/dev/urandom": "c 1:9", "/dev/tty": "c 5:0"}
# kiwi-run's masked files that this host has (each is then the host's
# /dev/null inside); the OCI default config masks a few of them.
MASKED = [p for p in ("/proc/keys", "/proc/timer_list", "/proc/kallsyms", "/proc/modules",
                      "/proc/iomem", "/proc/ioports", "/proc/slabinfo", "/proc/vmallocinfo",
                      "/proc/pagetypeinfo", "/proc/kpageflags", "/proc/kpagecount", "/proc/kmsg",
                      "/proc/sched_debug") if os.path.isfile(p)]
OCI_MASKED = [p for p in ("/proc/keys", "/proc/timer_list", "/proc/sched_debug") if os.path.isfile(p)]
# What the hostile image's /dev nodes point at: procfs files that a write
# would reach the host's kernel through.
PROCFS_TARGETS = {"null": "/proc/sys/kernel/printk_ratelimit",
                  "zero": "/proc/sys/kernel/printk_ratelimit_burst",
                  "tty": "/proc/sys/kernel/printk"}


def host_inodes():
    """The mode and owner of every host inode the sandbox gets: its devices
    (the mask is /dev/null). Not ctime: the host is shared, and others move
    it without changing anything (a fanotify watch caught `crun exec`, run
    with /dev/null as stdio, doing so many times a second): the attack's
    own steps, each of which must fail, witness its no-op changes
    (check_inode_attack)."""
    out = {}
    for path in DEVICES:
        st = os.stat(path)
        out[path] = (st.st_mode, st.st_uid, st.st_gid)
    return out


def procfs_values():
    return {p: open(p).read() for p in PROCFS_TARGETS.values()}


def hostile_image(kiwi):
    """A copy of the rootfs whose /dev/null, /dev/zero and /dev/tty are
    symlinks to procfs files."""
    copy = kiwi.rootfs_copy()
    for name, target in PROCFS_TARGETS.items():
        os.symlink(target, copy / "dev" / name)
        os.lchown(copy / "dev" / name, kiwi.uid, kiwi.gid)
    return copy


def check_inode_attack(steps, paths):
    """Each path is the device it should be (masks: /dev/null), and no
    change of its metadata went through."""
    for path in paths:
        assert steps[f"{path} stat"]["note"] == DEVICES.get(path, "c 1:3"), (path, steps)
        for op in ("chmod", "chown", "utime"):
            rec = steps[f"{path} {op}"]
            assert not rec["ok"], (path, op, steps)


@pytest.fixture
def host_inodes_unchanged():
    before = host_inodes()
    yield
    assert host_inodes() == before


def test_run_cannot_change_the_host_devices_or_masks(kiwi, host_inodes_unchanged):
    paths = [*DEVICES, *MASKED]
    check_inode_attack(attack(kiwi, "inode", *paths), paths)


def test_phase_verify_cannot_change_the_host_devices_or_masks(kiwi, host_inodes_unchanged):
    paths = [*DEVICES, *MASKED]
    r = kiwi.raw(["phase", "verify", "--rootfs", kiwi.rootfs, "--workspace", kiwi.workdir(), "--",
                  ATTACK, "inode", *paths])
    assert r.returncode == 0, explain(r)
    check_inode_attack(parse_attack(r), paths)


def test_shell_cannot_change_the_host_devices_or_masks(kiwi, host_inodes_unchanged):
    paths = [*DEVICES, *MASKED]
    status, _, out = run_on_a_pty(kiwi.raw_argv(["shell", "--rootfs", kiwi.rootfs, "--", ATTACK, "inode",
                                                 *paths]), kiwi.env())
    assert status == 0, out
    steps = {}
    for line in out.splitlines():
        if line.startswith("{"):
            rec = json.loads(line)
            steps[rec["step"]] = rec
    check_inode_attack(steps, paths)


def test_run_ignores_an_image_whose_dev_null_is_a_symlink(kiwi, host_inodes_unchanged):
    """`run` mounts a /dev of its own over the image's."""
    copy = hostile_image(kiwi)
    before = procfs_values()
    paths = ["/dev/null", "/dev/zero", "/dev/tty", *MASKED]
    check_inode_attack(attack(kiwi, "inode", *paths, rootfs=copy), paths)
    assert procfs_values() == before


# -- the OCI verbs


def oci_bundle(kiwi, args, rootfs, dev_mount=True):
    """A bundle with `kiwi-run spec`'s default config (rootless in the
    rootless mode), the given process and root; without the /dev mount
    when dev_mount is false (the container then has the image's /dev)."""
    b = kiwi.workdir()
    r = kiwi.raw(["spec", "--bundle", b, *(["--rootless"] if kiwi.mode == "rootless" else [])])
    assert r.returncode == 0, explain(r)
    cfg = json.loads((b / "config.json").read_text())
    cfg["process"]["terminal"] = False
    cfg["process"]["args"] = [str(a) for a in args]
    cfg["root"] = {"path": str(rootfs), "readonly": True}
    if not dev_mount:
        cfg["mounts"] = [m for m in cfg["mounts"] if not (m["destination"] + "/").startswith("/dev/")]
    (b / "config.json").write_text(json.dumps(cfg))
    kiwi.chown(b)
    return b


def oci_run(kiwi, bundle):
    state = kiwi.workdir()
    return kiwi.raw(["--root", state, "run", "--bundle", bundle, f"attack-{os.getpid()}"])


@pytest.mark.parametrize("dev_mount", [True, False], ids=["dev-tmpfs", "image-dev"])
def test_oci_container_cannot_change_the_host_devices_or_masks(kiwi, host_inodes_unchanged, dev_mount):
    """The default config's /dev is a tmpfs with kiwi-run's binds on it;
    without that mount they are bound over the image's /dev."""
    rootfs = kiwi.rootfs if dev_mount else kiwi.rootfs_copy()
    paths = [*DEVICES, *OCI_MASKED]
    r = oci_run(kiwi, oci_bundle(kiwi, [ATTACK, "inode", *paths], rootfs, dev_mount))
    assert r.returncode == 0, explain(r)
    check_inode_attack(parse_attack(r), paths)


@pytest.mark.parametrize("dev_mount", [True, False], ids=["dev-tmpfs", "image-dev"])
def test_oci_image_whose_dev_nodes_are_procfs_symlinks(kiwi, host_inodes_unchanged, dev_mount):
    """CVE-2025-31133's pattern: /dev/null -> a procfs file. With a /dev
    mount the image's nodes are hidden; without one, the container is
    refused (or would get real devices), and the masks are never that
    file: the host's sysctls it names are never opened."""
    copy = hostile_image(kiwi)
    before = procfs_values()
    paths = ["/dev/null", "/dev/zero", "/dev/tty", *OCI_MASKED]
    r = oci_run(kiwi, oci_bundle(kiwi, [ATTACK, "inode", *paths], copy, dev_mount))
    if not dev_mount and r.returncode != 0:
        # Refused before the container started, in one line.
        assert r.stdout == "", explain(r)
        lines = r.stderr.splitlines()
        assert len(lines) == 1 and "/dev/null" in lines[0] and "symlink" in lines[0], explain(r)
    else:
        assert r.returncode == 0, explain(r)
        check_inode_attack(parse_attack(r), paths)
    # the image is left as it was
    for name, target in PROCFS_TARGETS.items():
        assert os.readlink(copy / "dev" / name) == target
    assert procfs_values() == before
