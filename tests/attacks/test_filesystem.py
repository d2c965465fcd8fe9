# SPDX-License-Identifier: Apache-2.0
"""The filesystem as a way out or up: the read-only root, procfs and
sysfs, `..` in --cwd, setuid and file-capability binaries, images whose
system directories are symlinks, and a symlink swapped in under a bind
destination while kiwi-run mounts onto it."""
import errno
import os
import stat
import struct
import subprocess
import time

import pytest

from conftest import ATTACK, attack, explain, it, parse_attack, succeeded

ZERO = "0000000000000000"


def _tree(root):
    """Every name below root with its type, mode, size and mtime."""
    out = {}
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(d, n)
            st = os.lstat(p)
            out[os.path.relpath(p, root)] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return out


# -- the read-only root, procfs, sysfs


def test_read_only_root_cannot_be_written(kiwi):
    """On a copy owned by the sandbox's root, so that only the read-only
    mount stands in the way (EROFS, or EPERM for the remounts)."""
    copy = kiwi.rootfs_copy()
    before = _tree(copy)
    steps = attack(kiwi, "ro-root", rootfs=copy)
    assert succeeded(steps) == [], steps
    for step, rec in steps.items():
        assert rec["errno"] in (errno.EROFS, errno.EPERM), (step, rec)
    assert _tree(copy) == before


def test_read_only_root_control_rw_root(kiwi):
    """--rw-root on a copy: the same writes go through, so the test above
    would see them; they go into the sandbox's layer, never the rootfs."""
    copy = kiwi.rootfs_copy()
    before = _tree(copy)
    steps = attack(kiwi, "ro-root", opts=["--rw-root"], rootfs=copy)
    assert steps["create-file"]["ok"] and steps["mkdir"]["ok"], steps
    assert _tree(copy) == before
    # the remount still needs a capability the sandbox does not have
    assert not steps["remount-rw"]["ok"] and not steps["mount-setattr-rw"]["ok"], steps


@pytest.mark.parametrize("seccomp", [None, "unconfined"])
def test_proc_and_sys_cannot_be_written(kiwi, seccomp):
    """sysrq-trigger, core_pattern (the classic escape: a root caller's
    sandbox is the host's uid 0 by file ownership), drop_caches: the
    program only opens them for writing, and every open must fail. The
    mounts hold this, not seccomp, so the control changes nothing."""
    steps = attack(kiwi, "proc-write", seccomp=seccomp)
    assert succeeded(steps) == [], steps
    for step, rec in steps.items():
        assert rec["errno"] in (errno.EROFS, errno.EACCES, errno.ENOENT), (step, rec)


def test_proc_masks_give_nothing(kiwi):
    """Root's 0400 procfs files (slabinfo, vmallocinfo, pagetypeinfo: the
    kernel heap's layout) belong to a root caller's sandbox by ownership:
    they are masked in every mode."""
    steps = attack(kiwi, "proc-read")
    assert succeeded(steps) == [], steps
    # /proc/keys is masked, although the host has it
    assert steps["/proc/keys"]["errno"] == errno.ENODATA, steps


# -- `..` in --cwd


@pytest.mark.parametrize("cwd", ["/../../../../etc", "../../../etc", "/etc/../../../../etc",
                                 "/tmp/../../../etc"])
def test_dotdot_in_cwd_stays_inside(kiwi, cwd):
    r = kiwi.run([ATTACK, "cwd"], opts=["--cwd", cwd])
    if r.returncode == 125:
        return  # refusing is fine
    assert r.returncode == 0, explain(r)
    steps = parse_attack(r)
    assert steps["getcwd"]["note"] == "/etc", steps
    passwd = steps["read-passwd-here"]["note"]
    assert "nobody:x:65534:65534:nobody:/nonexistent:/bin/false" in passwd, steps
    with open("/etc/passwd") as f:
        assert f.read() != passwd


def test_dotdot_through_a_bind(kiwi):
    work = kiwi.workdir()
    r = kiwi.run([ATTACK, "cwd"], opts=["--bind", f"{work}:/workspace", "--cwd",
                                        "/workspace/../../../../../.."])
    assert r.returncode in (0, 125), explain(r)
    if r.returncode == 0:
        assert parse_attack(r)["getcwd"]["note"] == "/"


def test_bind_destination_of_two_thousand_components(kiwi):
    """Its mount point is made one component at a time in a loop: a walk
    that recursed once per component (4 KiB a frame) overflowed pid 1's
    stack, and kiwi-run could only say that init ended without reporting."""
    copy = kiwi.rootfs_copy()
    work = kiwi.workdir()
    (work / "marker").write_text("deep\n")
    dest = "/a" * 2000
    r = kiwi.run(["cat", f"{dest}/marker"], opts=["--bind", f"{work}:{dest}"], rootfs=copy)
    assert r.returncode == 0 and r.stdout == "deep\n", explain(r)


# -- setuid and file capabilities


def _caps(steps):
    return {k: steps[k]["note"] for k in ("CapPrm", "CapEff", "CapInh", "CapAmb")}


def _kept(kiwi):
    """What the command holds from the start, and so no gain: CAP_CHOWN
    alone for root's sandbox on kiwi's id range (kiwi-run(1), ID MAPPING),
    nothing rootless."""
    held = "0000000000000001" if kiwi.mode == "root" else ZERO
    return {k: held for k in ("CapPrm", "CapEff", "CapInh", "CapAmb")}


def _file_caps_v2():
    """security.capability, revision 2: every capability permitted and
    effective (what `setcap =ep` writes)."""
    return struct.pack("<IIIII", 0x02000000 | 1, 0xFFFFFFFF, 0, 0xFFFFFFFF, 0)


@pytest.mark.parametrize("variant", ["setuid", "filecaps", "setuid-rw-root"])
def test_privileged_binary_in_the_image_gains_nothing(kiwi, variant):
    """A setuid-root copy of the attack program, or one carrying every file
    capability, made on the host in a copy of the rootfs: run inside, it
    holds no capability (no_new_privs, nosuid, the locked securebits),
    even with the root writable."""
    copy = kiwi.rootfs_copy()
    binary = copy / "usr/local/bin/kiwi-attack-priv"
    with open(copy / "usr/local/bin/kiwi-attack", "rb") as src, open(binary, "wb") as dst:
        dst.write(src.read())
    os.chown(binary, 0, 0)
    if variant == "filecaps":
        os.chmod(binary, 0o755)
        os.setxattr(binary, "security.capability", _file_caps_v2())
    else:
        os.chmod(binary, 0o4755)
    opts = ["--rw-root"] if variant.endswith("rw-root") else []
    r = kiwi.run(["/usr/local/bin/kiwi-attack-priv", "whoami"], opts=opts, rootfs=copy)
    assert r.returncode == 0, explain(r)
    steps = parse_attack(r)
    assert _caps(steps) == _kept(kiwi), steps
    assert steps["NoNewPrivs"]["note"] == "1", steps


def test_privileged_binary_control_on_the_host(test_user, session_dir):
    """The same setuid-root program run on the host by the unprivileged
    test user does become root with every capability: the check above
    would see a gain."""
    if isinstance(test_user, str) or os.geteuid() != 0:
        pytest.skip("needs root to make the binary and the test user to run it")
    binary = session_dir / "kiwi-attack-suid-control"
    with open(session_dir / "kiwi-attack", "rb") as src, open(binary, "wb") as dst:
        dst.write(src.read())
    os.chown(binary, 0, 0)
    os.chmod(binary, 0o4755)
    try:
        r = subprocess.run([*it._setpriv(), str(binary), "whoami"], capture_output=True,
                           text=True, timeout=10)
    finally:
        binary.unlink()
    steps = parse_attack(r)
    assert steps["Uid"]["note"].split()[1] == "0", steps  # effective uid
    assert steps["CapEff"]["note"] != ZERO, steps


def test_chmod_and_setxattr_inside_gain_nothing(kiwi):
    """Inside, on the writable /tmp: the copy can be made setuid (its owner
    may), but not given file capabilities, and running it gains nothing."""
    r = kiwi.run([ATTACK, "suid", "/tmp"])
    assert r.returncode == 0, explain(r)
    steps = parse_attack(r)
    assert steps["copy"]["ok"], steps
    assert not steps["setxattr-capability"]["ok"], steps
    assert _caps(steps) == _kept(kiwi), steps


def test_setuid_file_left_on_a_writable_bind(kiwi):
    """What the sandbox writes to a bound workspace outlives it: a setuid
    file there is a way up for whoever on the host runs it later (for a
    root caller, up to root)."""
    work = kiwi.workdir()
    r = kiwi.run([ATTACK, "suid", "/workspace"], opts=["--bind", f"{work}:/workspace"])
    assert r.returncode == 0, explain(r)
    steps = parse_attack(r)
    assert steps["copy"]["ok"], steps
    left = work / "kiwi-attack-suid"
    st = os.lstat(left)
    assert not st.st_mode & (stat.S_ISUID | stat.S_ISGID), \
        f"{left} is mode {st.st_mode & 0o7777:o}, owner {st.st_uid}: {steps}"
    with pytest.raises(OSError):
        os.getxattr(left, "security.capability")


# -- images with symlinks where kiwi-run mounts


SYMLINKED = ["proc", "sys", "dev", "dev/pts", "dev/null", "dev/shm", "tmp", "etc"]


@pytest.mark.parametrize("path", SYMLINKED)
def test_symlinked_system_directory_in_the_image(kiwi, canary, path):
    """An image whose /proc, /sys, /dev, /dev/pts, /dev/null, /dev/shm, /tmp
    or /etc is a symlink to a host directory: kiwi-run refuses it (125) or
    resolves it inside the root; nothing it mounts or writes lands in the
    host directory (host_unchanged compares it and the host's mounts),
    and the command cannot read the host's file through the link."""
    copy = kiwi.rootfs_copy()
    target = copy / path
    if target.is_dir() and not target.is_symlink():
        for child in target.iterdir():
            child.unlink() if not child.is_dir() else os.rmdir(child)
        target.rmdir()
    elif target.exists() or target.is_symlink():
        target.unlink()
    target.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(canary, target)
    kiwi.chown(copy)
    r = kiwi.run(["/bin/cat", f"/{path}/canary"], rootfs=copy)
    assert "KIWI-HOST-CANARY" not in r.stdout, explain(r)
    assert r.returncode in (1, 125), explain(r)
    if r.returncode == 125:
        assert "symlink" in r.stderr, explain(r)


@pytest.mark.parametrize("dest", ["/etc/app", "/etc/app/deeper", "/etc"])
def test_bind_below_a_symlinked_etc(kiwi, canary, dest):
    """The image's /etc points at a host directory and a bind goes below
    it: kiwi-run must neither mount there nor create the destination in
    the host directory (host_unchanged compares it)."""
    copy = kiwi.rootfs_copy()
    for child in (copy / "etc").iterdir():
        child.unlink()
    (copy / "etc").rmdir()
    os.symlink(canary, copy / "etc")
    kiwi.chown(copy)
    work = kiwi.workdir()
    r = kiwi.run(["/bin/true"], opts=["--bind", f"{work}:{dest}"], rootfs=copy)
    assert r.returncode == 125 and "symlink" in r.stderr, explain(r)


@pytest.mark.parametrize("path", ["proc", "dev", "tmp", "sys"])
@pytest.mark.parametrize("kind", ["fifo", "file"])
def test_system_directory_of_the_wrong_type(kiwi, path, kind):
    """A FIFO or a regular file where kiwi-run mounts a directory: refused
    (125) rather than blocking on the FIFO or mounting over the file."""
    copy = kiwi.rootfs_copy()
    target = copy / path
    for child in target.iterdir():
        child.unlink()
    target.rmdir()
    if kind == "fifo":
        os.mkfifo(target)
    else:
        target.write_text("not a directory\n")
    kiwi.chown(copy)
    r = kiwi.run(["/bin/true"], rootfs=copy, timeout=10)
    assert r.returncode == 125, explain(r)
    assert r.stderr.count("\n") == 1, explain(r)


# -- the symlink-swap race on a bind destination


@pytest.mark.parametrize("variant", ["etc", "create-below"])
def test_symlink_swap_race_on_a_bind_destination(kiwi, session_dir, canary, attack_binary,
                                                 variant):
    """While kiwi-run mounts onto /race/dst, a host process keeps swapping
    that directory with a symlink (renameat2 RENAME_EXCHANGE). In the
    `etc` variant the symlink points at the host's /etc, in the other at
    the canary directory, and the destination is a directory kiwi-run must
    create below it. Whatever each run's outcome (mounted, or refused as a
    symlink), the host's /etc and the canary directory never receive the
    mount or the new directory (host_unchanged checks both and the host's
    mount table after the whole loop)."""
    copy = kiwi.rootfs_copy()
    race = copy / "race"
    race.mkdir()
    (race / "dst").mkdir()
    os.symlink("/etc" if variant == "etc" else str(canary), race / "dst.swap")
    kiwi.chown(race)
    src = kiwi.workdir()
    (src / "bound-marker").write_text("bound\n")
    dest = "/race/dst" if variant == "etc" else "/race/dst/newsub"
    swapper = subprocess.Popen([str(attack_binary), "swap", str(race), "dst", "dst.swap", "30"],
                               stdout=subprocess.PIPE, text=True)
    outcomes = {}
    try:
        # A few seconds, longer on a slow (sanitized) build until both
        # sides of the race have been hit.
        start = time.monotonic()
        runs = 0
        while runs < 150:
            elapsed = time.monotonic() - start
            hit_both = outcomes.get(0) and outcomes.get(125)
            if elapsed > 15 or (elapsed > 4 and hit_both and runs >= 10):
                break
            runs += 1
            r = kiwi.run(["/bin/ls", "/race/dst", "/etc"],
                         opts=["--bind", f"{src}:{dest}"], rootfs=copy)
            outcomes[r.returncode] = outcomes.get(r.returncode, 0) + 1
            assert r.returncode in (0, 1, 2, 125), explain(r)
            assert "KIWI-HOST-CANARY" not in r.stdout and "canary" not in r.stdout, explain(r)
            if r.returncode == 125:
                assert "bind" in r.stderr, explain(r)
    finally:
        swapper.kill()
        swapper.wait()
    # both sides of the race were hit: mounted, and refused as a symlink
    assert outcomes.get(0) and outcomes.get(125), outcomes
    for p in ("/etc/newsub", "/etc/bound-marker", canary / "newsub", canary / "bound-marker"):
        assert not os.path.exists(p), p
