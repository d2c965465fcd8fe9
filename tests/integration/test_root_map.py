# SPDX-License-Identifier: Apache-2.0
"""No host root inside (issue 15): as root, a sandbox's ids 0..65535 are
kiwi's range of /etc/subuid and /etc/subgid, never the host's root; the
rootfs and binds are idmapped mounts, so the image's and the caller's
files are root's inside and what the sandbox's root writes is the bind
owner's on the host; `chown` to a tarball's ids works inside (CAP_CHOWN
alone is kept); --host-root-map keeps the old map 0 0 1, and only when
asked. Each escape is also tried with --host-root-map, where it works:
the tests would fail without the idmapping."""
import os
import subprocess
import tempfile

import pytest

from conftest import explain
from test_cli import assert_failed_cleanly, run_args

OWNER = (4242, 4343)   # a host user that is not root, owning the binds


def kiwi_start(path):
    with open(path) as f:
        for line in f:
            name, start, count = (line.strip().split(":") + ["", "", ""])[:3]
            if name == "kiwi" and count.isdigit() and int(count) >= 65536:
                return int(start)
    pytest.fail(f"{path} has no kiwi range: run `kiwi-run doctor --fix` (tests/run.sh does)")


@pytest.fixture
def root_kiwi(kiwi):
    if kiwi.mode != "root":
        pytest.skip("root's default map (rootless: the caller's own ids, or kiwi-helper's)")
    return kiwi


def owned(kiwi, files=()):
    """A host directory of OWNER's holding files (name -> (text, uid, mode))."""
    d = kiwi.workdir()
    os.chown(d, *OWNER)
    for name, (text, uid, mode) in dict(files).items():
        (d / name).write_text(text)
        os.chown(d / name, uid, uid)
        os.chmod(d / name, mode)
    return d


def test_root_maps_kiwi_range_not_host_root(root_kiwi):
    r = root_kiwi.sh("cat /proc/self/uid_map /proc/self/gid_map; id -u")
    assert r.returncode == 0, explain(r)
    u, g = kiwi_start("/etc/subuid"), kiwi_start("/etc/subgid")
    assert r.stdout.split() == ["0", str(u), "65536", "0", str(g), "65536", "0"], explain(r)


def test_host_root_map_keeps_0_0_1_when_asked(root_kiwi):
    r = root_kiwi.sh("cat /proc/self/uid_map", opts=["--host-root-map"])
    assert r.returncode == 0 and r.stdout.split() == ["0", "0", "1"], explain(r)
    r = subprocess.run(root_kiwi.argv(["/bin/cat", "/proc/self/uid_map"]), capture_output=True, text=True,
                       env=root_kiwi.env({"KIWI_HOST_ROOT_MAP": "1"}), timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 0 and r.stdout.split() == ["0", "0", "1"], explain(r)


def test_rootfs_files_are_root_owned_inside(root_kiwi):
    r = root_kiwi.sh("ls -lnd /bin/busybox /etc / | awk '{print $3\":\"$4}'")
    assert r.returncode == 0 and r.stdout.split() == ["0:0"] * 3, explain(r)


def test_only_chown_is_kept(root_kiwi):
    """CAP_CHOWN (bit 0) alone, in every set; nothing for --user."""
    r = root_kiwi.sh("grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status")
    assert r.returncode == 0, explain(r)
    assert [l.split()[1] for l in r.stdout.splitlines()] == ["0000000000000001"] * 5, explain(r)
    r = root_kiwi.sh("grep -E '^Cap(Prm|Eff|Bnd|Amb)' /proc/self/status", opts=["--user", "1000"])
    assert [l.split()[1] for l in r.stdout.splitlines()] == ["0000000000000000"] * 4, explain(r)


def test_npm_style_chown_in_the_workspace_lands_as_its_owner(root_kiwi):
    """The host's files are root's inside; chown to a tarball's 501:20
    works; after landing every file is the workspace owner's."""
    ws = owned(root_kiwi, {"host.txt": ("hi\n", OWNER[0], 0o644)})
    os.chown(ws / "host.txt", *OWNER)
    script = ("ls -ln /workspace/host.txt | awk '{print $3\":\"$4}'; "
              "mkdir -p node_modules/a && echo x > node_modules/a/index.js && "
              "chown -R 501:20 node_modules host.txt && ls -ln host.txt | awk '{print $3\":\"$4}'")
    r = root_kiwi.sh(script, opts=["--bind", f"{ws}:/workspace:layer", "--cwd", "/workspace"])
    assert r.returncode == 0, explain(r)
    assert r.stdout.split() == ["0:0", "501:20"], explain(r)
    for p in (ws / "host.txt", ws / "node_modules", ws / "node_modules/a", ws / "node_modules/a/index.js"):
        st = os.lstat(p)
        assert (st.st_uid, st.st_gid) == OWNER, p


def test_a_file_made_in_a_writable_bind_is_its_owners_not_host_roots(root_kiwi):
    d = owned(root_kiwi)
    r = root_kiwi.sh("echo x > /b/made", opts=["--bind", f"{d}:/b"])
    assert r.returncode == 0, explain(r)
    st = os.stat(d / "made")
    assert (st.st_uid, st.st_gid) == OWNER
    # The same with the host's root inside (no capability: the directory
    # must let anyone write): host root's file.
    d.chmod(0o777)
    r = root_kiwi.sh("echo x > /b/made2", opts=["--bind", f"{d}:/b", "--host-root-map"])
    assert r.returncode == 0 and os.stat(d / "made2").st_uid == 0, explain(r)


ATTACK = ("chmod 666 /b/rootfile; echo pwned >> /b/rootfile; chown 0:0 /b/rootfile; "
          "echo pwned > /b/rootfile2; cat /b/rootfile")


@pytest.mark.parametrize("how", ["bind", "layer"])
def test_attack_host_root_file_in_a_writable_bind(root_kiwi, how):
    """A host-root-owned file in the caller's writable bind: root inside
    is not its owner, so neither its mode nor its content changes (nor
    does landing bring a change back)."""
    d = owned(root_kiwi, {"rootfile": ("secret\n", 0, 0o444), "rootfile2": ("secret\n", 0, 0o644)})
    spec = f"{d}:/b" + (":layer" if how == "layer" else "")
    r = root_kiwi.sh(ATTACK, opts=["--bind", spec])
    assert (d / "rootfile").read_text() == "secret\n" and (d / "rootfile2").read_text() == "secret\n", explain(r)
    st = os.stat(d / "rootfile")
    assert (st.st_uid, st.st_mode & 0o777) == (0, 0o444), explain(r)
    assert "secret" in r.stdout, explain(r)
    # The escape is real: with the host's root inside it works (through
    # the layer, the change lands on the host at the end).
    r = root_kiwi.sh(ATTACK, opts=["--bind", spec, "--host-root-map"])
    assert (d / "rootfile").read_text() == "secret\npwned\n", explain(r)


def test_attack_read_only_bind_of_host_root_files(root_kiwi):
    """A read-only bind stays read-only on kiwi's range. Not a test of the
    idmapping (:ro refuses these under --host-root-map too): of the
    idmapped bind keeping the read-only flag."""
    d = root_kiwi.workdir()
    os.chown(d, 0, 0)
    (d / "f").write_text("secret\n")
    r = root_kiwi.sh("chmod 666 /b/f; echo pwned >> /b/f; touch /b/new", opts=["--bind", f"{d}:/b:ro"])
    assert r.returncode != 0 and (d / "f").read_text() == "secret\n" and not (d / "new").exists(), explain(r)
    assert os.stat(d / "f").st_mode & 0o777 == 0o644


def test_without_a_kiwi_range_root_is_refused_in_one_line(root_kiwi):
    """No range in /etc/subuid: exit 125, one line naming the fix, nothing
    made; --host-root-map still runs."""
    with tempfile.NamedTemporaryFile("w", dir="/var/tmp") as empty:
        empty.write("someone:100000:65536\n")
        empty.flush()
        for opts, status in (([], 125), (["--host-root-map"], 0)):
            argv = root_kiwi.argv(["/bin/cat", "/proc/self/uid_map"], opts)
            r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                                'mount --bind "$0" /etc/subuid && exec "$@"', empty.name, *argv],
                               capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                               env=root_kiwi.env())
            assert r.returncode == status, explain(r)
            if status:
                assert r.stdout == "" and len(r.stderr.splitlines()) == 1, explain(r)
                assert "kiwi-run doctor --fix" in r.stderr and "--host-root-map" in r.stderr, explain(r)
            else:
                assert r.stdout.split() == ["0", "0", "1"], explain(r)


def test_host_root_map_excludes_a_map(kiwi):
    assert_failed_cleanly(kiwi.leftovers(run_args(kiwi, opts=["--host-root-map", "--uidmap", "0:100000:65536"])),
                          mentions="exclude each other")


@pytest.mark.parametrize("how", ["run", "session"])
def test_dev_stdout_reopens_as_root_inside(root_kiwi, how):
    """The command's output pipes are kiwi-run's: given to the sandbox's
    root, /dev/stdout and /dev/stderr (reopened through /proc) still
    work, in a run and in a root session's exec."""
    script = "echo out > /dev/stdout && echo err > /dev/stderr"
    if how == "run":
        r = root_kiwi.sh(script)
    else:
        c = root_kiwi.raw(["session", "create", "--rootfs", root_kiwi.rootfs], timeout=60)
        assert c.returncode == 0, explain(c)
        sid = c.stdout.strip()
        try:
            r = root_kiwi.raw(["session", "exec", sid, "--", "/bin/sh", "-c", script], timeout=60)
        finally:
            d = root_kiwi.raw(["session", "destroy", sid], timeout=60)
        assert d.returncode == 0, explain(d)
    assert r.returncode == 0 and r.stdout == "out\n" and r.stderr == "err\n", explain(r)
