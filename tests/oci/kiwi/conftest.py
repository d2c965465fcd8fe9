# SPDX-License-Identifier: Apache-2.0
"""Harness for kiwi-run's own tests of its OCI runtime command line
(kiwi-run-oci(1)): real containers from busybox bundles, driven the way the
containerd shim drives runc, as root and as the unprivileged user kiwi-test.

The cross-runtime conformance suite (kiwi-run beside crun and runc) is the
rest of tests/oci; this directory tests what only kiwi-run promises.

Inputs: KIWI_RUN (the binary, default <repo>/build/src/kiwi-run).
"""
import ctypes
import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent.parent
TEST_USER = "kiwi-test"
MODES = ("root", "rootless")


def _sh(*argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, **kw)


@pytest.fixture(scope="session")
def session_dir():
    # /var/tmp where there is one (the VM lane has none).
    d = Path(tempfile.mkdtemp(prefix="kiwi-oci-it-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None))
    d.chmod(0o755)
    yield d
    with open("/proc/self/mountinfo") as f:
        if any(f" {d}/" in l for l in f):
            return  # never let rmtree walk into a leaked mount
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def kiwi_bin(session_dir):
    src = Path(os.environ.get("KIWI_RUN", REPO / "build" / "src" / "kiwi-run"))
    if not src.is_file():
        pytest.exit(f"kiwi-run binary {src} is missing", 2)
    dst = session_dir / "kiwi-run"
    shutil.copy2(src, dst)
    dst.chmod(0o755)
    return dst


@pytest.fixture(scope="session")
def rootfs(session_dir):
    if not Path("/bin/busybox").exists():
        pytest.skip("busybox-static is not installed")
    dest = session_dir / "rootfs"
    old = os.umask(0o022)
    try:
        r = _sh("sh", str(REPO / "rootfs-tools" / "busybox-rootfs.sh"), str(dest))
    finally:
        os.umask(old)
    assert r.returncode == 0, r.stderr
    return dest


@pytest.fixture(scope="session")
def test_user():
    if os.geteuid() != 0:
        return os.getuid(), os.getgid()
    try:
        pw = pwd.getpwnam(TEST_USER)
    except KeyError:
        r = _sh("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", TEST_USER)
        if r.returncode != 0:
            return None
        pw = pwd.getpwnam(TEST_USER)
    return pw.pw_uid, pw.pw_gid


@pytest.fixture(scope="session", autouse=True)
def subreaper():
    """Container inits outlive `create`: they come back to us, as they come
    back to the shim, and we reap them."""
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER


def reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


class Oci:
    """One mode's view: a state root, bundles, and the CLI."""

    def __init__(self, mode, kiwi, rootfs, work, ids):
        self.mode, self.kiwi, self.rootfs, self.work, self.ids = mode, kiwi, rootfs, work, ids
        self.root = work / "state"
        self.n = 0

    def prefix(self):
        if self.mode == "root":
            return []
        return ["setpriv", f"--reuid={TEST_USER}", f"--regid={TEST_USER}", "--init-groups"]

    def cli(self, *args, root=True, check=False, **kw):
        argv = self.prefix() + [str(self.kiwi)] + (["--root", str(self.root)] if root else []) + list(args)
        # The VM lane emulates its CPU: far slower than this host.
        kw.setdefault("timeout", 300 if os.environ.get("KIWI_VM") else 30)
        # Files, not pipes: a created container's init holds the streams
        # it inherited until it ends, so a pipe would never see EOF.
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, **kw)
            out.seek(0)
            err.seek(0)
            r.stdout = out.read().decode(errors="replace")
            r.stderr = err.read().decode(errors="replace")
        if check:
            assert r.returncode == 0, f"{argv}: {r.returncode}\n{r.stdout}\n{r.stderr}"
        return r

    def spec(self, args, **changes):
        """A config.json like `kiwi-run spec` writes, adapted for tests."""
        r = _sh(str(self.kiwi), "spec", "--bundle", str(self.work), *(["--rootless"] if self.mode == "rootless" else []))
        assert r.returncode == 0, r.stderr
        path = self.work / "config.json"
        cfg = json.loads(path.read_text())
        path.unlink()
        cfg["process"]["terminal"] = False
        cfg["process"]["args"] = args
        cfg["root"]["path"] = str(self.rootfs)
        if self.mode == "rootless":
            uid, gid = self.ids
            cfg["linux"]["uidMappings"][0]["hostID"] = uid
            cfg["linux"]["gidMappings"][0]["hostID"] = gid
        cfg.update(changes)
        return cfg

    def bundle(self, cfg):
        self.n += 1
        b = self.work / f"bundle{self.n}"
        b.mkdir()
        (b / "config.json").write_text(json.dumps(cfg))
        if self.mode == "rootless":
            os.chown(b, *self.ids)
        return b

    def state(self, cid):
        r = self.cli("state", cid)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)


@pytest.fixture(params=MODES)
def oci(request, kiwi_bin, rootfs, session_dir, test_user):
    if request.param == "rootless" and not test_user:
        pytest.skip("no unprivileged test user")
    work = Path(tempfile.mkdtemp(prefix=f"{request.param}-", dir=session_dir))
    work.chmod(0o755)
    ids = test_user if request.param == "rootless" else (0, 0)
    (work / "state").mkdir()
    os.chown(work, *ids)
    os.chown(work / "state", *ids)
    o = Oci(request.param, kiwi_bin, rootfs, work, ids)
    yield o
    # Nothing may outlive a test: every container is deleted, and the
    # state root is empty.
    reap()
    left = sorted(p.name for p in o.root.iterdir())
    for cid in left:
        o.cli("delete", "--force", cid)
        reap()
    assert not left, f"containers left behind: {left}"
