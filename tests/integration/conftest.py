# SPDX-License-Identifier: Apache-2.0
"""Harness for the black-box tests of `kiwi-run run`.

Every behavioural test takes the `kiwi` fixture, which is parametrized over
two modes: `root` (kiwi-run started by uid 0) and `rootless` (started by the
system user `kiwi-test` through setpriv). Inside the sandbox the static helper
`kiwi-probe` (tests/helpers) reports what the kernel shows.

Inputs (environment):
  KIWI_RUN     the kiwi-run binary   (default <repo>/build/src/kiwi-run)
  KIWI_PROBE   the kiwi-probe binary (default <builddir>/tests/helpers/kiwi-probe,
               else compiled here with cc -static)
  KIWI_TEST_ROOTFS  where busybox rootfses are cached, one per probe
               (default /var/tmp/kiwi-test-rootfs, -UID appended for non-root)

Everything the sandboxes see from the host (the binary copy, the rootfs,
bind sources) lives under /var/tmp, not /tmp: the leftover checks run
kiwi-run with a fresh tmpfs over /tmp, so that files kiwi-run leaves in /tmp
can be told apart from those of the other programs on this machine.
"""
import fcntl
import hashlib
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from procs import (become_subreaper, children_of_self, describe_pid, kill_and_reap,
                   reap_zombies)

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
TEST_USER = "kiwi-test"
CANARY = "KIWI_TEST_CANARY"
MODES = ("root", "rootless")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
RUN_TIMEOUT = 10
PROBE = "/usr/local/bin/kiwi-probe"  # where busybox-rootfs.sh puts it


def _sh(*argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, **kw)


# ---------------------------------------------------------------------------
# session: binaries, rootfs, the unprivileged user


@pytest.fixture(scope="session")
def session_dir():
    """A world-traversable scratch directory under /var/tmp."""
    d = Path(tempfile.mkdtemp(prefix="kiwi-it-", dir="/var/tmp"))
    d.chmod(0o755)
    yield d
    # Never let rmtree walk into a mount a buggy kiwi-run left on the host:
    # it would delete the mounted (host) files.
    with open("/proc/self/mountinfo") as f:
        leaked = [l for l in f if f" {d}/" in l or f" {d} " in l]
    if leaked:
        sys.stderr.write(f"kiwi-it: leaving {d}: mounts under it: {leaked}\n")
        return
    shutil.rmtree(d, ignore_errors=True)


def _kiwi_run_source():
    path = Path(os.environ.get("KIWI_RUN", REPO / "build" / "src" / "kiwi-run"))
    if not path.is_file():
        pytest.exit(f"kiwi-run binary {path} is missing: build it or set KIWI_RUN", 2)
    return path


def _probe_source(session_dir):
    env = os.environ.get("KIWI_PROBE")
    if env:
        return Path(env)
    built = _kiwi_run_source().parent.parent / "tests" / "helpers" / "kiwi-probe"
    if built.is_file():
        return built
    out = session_dir / "kiwi-probe"
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.exit("no KIWI_PROBE and no C compiler to build it", 2)
    r = _sh(cc, "-std=gnu11", "-D_GNU_SOURCE", "-O2", "-Wall", "-Wextra", "-Werror",
            "-static", "-o", str(out), str(REPO / "tests" / "helpers" / "kiwi-probe.c"))
    if r.returncode != 0:
        pytest.exit(f"building kiwi-probe failed:\n{r.stderr}", 2)
    return out


@pytest.fixture(scope="session")
def binaries(session_dir):
    """(kiwi-run, kiwi-probe), copied where the test user can run them."""
    kiwi_run = session_dir / "kiwi-run"
    shutil.copy2(_kiwi_run_source(), kiwi_run)
    kiwi_run.chmod(0o755)
    probe = session_dir / "kiwi-probe"
    src = _probe_source(session_dir)
    if src != probe:
        shutil.copy2(src, probe)
    probe.chmod(0o755)
    return kiwi_run, probe


@pytest.fixture(scope="session")
def kiwi_rootfs(binaries):
    """kiwi-rootfs beside the copied kiwi-run, where an install puts it and
    where kiwi-run looks for it (--image, session snapshots)."""
    run = Path(os.environ.get("KIWI_RUN", REPO / "build" / "src" / "kiwi-run"))
    src = Path(os.environ.get("KIWI_ROOTFS", run.parent.parent / "rootfs-tools" / "kiwi-rootfs"))
    if not src.is_file():
        pytest.skip(f"kiwi-rootfs is not built at {src}")
    dest = Path(binaries[0]).parent / "kiwi-rootfs"
    shutil.copy2(src, dest)
    dest.chmod(0o755)
    return dest


@pytest.fixture(scope="session")
def rootfs(binaries):
    """The busybox rootfs with kiwi-probe in /usr/local/bin, built once per
    probe binary and kept: one directory per probe checksum, so that test
    sessions with different probes never rebuild a rootfs under each other."""
    if not Path("/bin/busybox").exists():
        pytest.skip("busybox-static is not installed (apt-get install busybox-static)")
    own = "" if os.geteuid() == 0 else f"-{os.geteuid()}"
    cache = Path(os.environ.get("KIWI_TEST_ROOTFS", f"/var/tmp/kiwi-test-rootfs{own}"))
    cache.mkdir(mode=0o755, parents=True, exist_ok=True)
    digest = hashlib.sha256(binaries[1].read_bytes()).hexdigest()[:16]
    dest = cache / digest
    script = REPO / "rootfs-tools" / "busybox-rootfs.sh"
    old = os.umask(0o022)
    try:
        with open(cache / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            r = _sh("sh", str(script), str(dest), str(binaries[1]))
    finally:
        os.umask(old)
    if r.returncode != 0:
        pytest.exit(f"busybox-rootfs.sh failed:\n{r.stdout}{r.stderr}", 2)
    assert (dest / PROBE.lstrip("/")).is_file()
    # the cache may have been made under another umask: the test user reads it
    for p in (dest, *dest.parents):
        if p.stat().st_mode & 0o005 != 0o005:
            pytest.exit(f"{p} is not world-readable: the rootless tests need it", 2)
    before = manifest(dest)
    yield dest
    # Every test that writes uses a copy: the shared rootfs must come out as
    # it went in, or kiwi-run wrote through a read-only root.
    after = manifest(dest)
    if after != before:
        changed = sorted(set(after) ^ set(before))[:10]
        shutil.rmtree(dest, ignore_errors=True)  # the next session rebuilds it
        pytest.fail(f"the shared test rootfs {dest} changed during the tests: {changed}")


def manifest(root):
    """(path, mode, size) of everything below ROOT, symlinks not followed."""
    out = []
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            out.append((os.path.relpath(p, root), st.st_mode, st.st_size))
    return sorted(out)


@pytest.fixture(scope="session")
def test_user():
    """(uid, gid) of `kiwi-test`, created (never deleted) when missing.
    Returns None with a skip reason when rootless runs are impossible here."""
    if os.geteuid() != 0:
        return os.getuid(), os.getgid()  # already unprivileged: rootless is us
    try:
        pw = pwd.getpwnam(TEST_USER)
    except KeyError:
        r = _sh("useradd", "--system", "--create-home", "--home-dir",
                f"/var/lib/{TEST_USER}", "--shell", "/usr/sbin/nologin", TEST_USER)
        if r.returncode != 0:
            return f"cannot create user {TEST_USER}: {r.stderr.strip()}"
        pw = pwd.getpwnam(TEST_USER)
    r = _sh(*_setpriv(), "unshare", "--user", "--map-root-user", "true")
    if r.returncode != 0:
        return f"{TEST_USER} cannot create a user namespace: {r.stderr.strip()}"
    return pw.pw_uid, pw.pw_gid


def _setpriv():
    return ["setpriv", f"--reuid={TEST_USER}", f"--regid={TEST_USER}", "--init-groups"]


@pytest.fixture(scope="session", autouse=True)
def subreaper():
    """Orphans of everything the tests start come back to pytest, so that a
    process kiwi-run leaves behind is seen (and reaped) instead of drifting
    to the host's init."""
    become_subreaper()


@pytest.fixture(autouse=True)
def no_leftover_processes():
    """Fails a test after which some process it started is still alive
    (2 s later). Dead orphans are only reaped: when a test kills kiwi-run
    itself, the sandbox's init is reparented here and dies (pdeathsig)."""
    before = set(children_of_self())
    yield
    deadline = time.monotonic() + 2  # a SIGKILLed kiwi-run's init is dying
    while left := reap_zombies([p for p in children_of_self() if p not in before]):
        if time.monotonic() > deadline:
            break
        time.sleep(0.02)
    if not left:
        return
    described = [describe_pid(p) for p in left]
    kill_and_reap(left)
    pytest.fail(f"processes left behind by the test: {described}")


# ---------------------------------------------------------------------------
# the per-mode runner


class Kiwi:
    """Runs kiwi-run as root or as the test user."""

    def __init__(self, mode, binary, probe, rootfs, scratch, owner):
        self.mode = mode
        self.binary = str(binary)
        self.probe_path = str(probe)
        self.rootfs = str(rootfs)
        self.scratch = scratch
        self.uid, self.gid = owner
        self._n = 0

    # -- command lines
    @property
    def prefix(self):
        if self.mode == "rootless" and os.geteuid() == 0:
            return _setpriv()
        return []

    def env(self, extra=None):
        env = dict(os.environ)
        env[CANARY] = "leaked-from-the-caller"
        env["LC_ALL"] = "C"
        env.update(extra or {})
        return env

    def argv(self, cmd, opts=(), rootfs=None):
        """kiwi-run run --rootfs R OPTS -- CMD"""
        return [*self.prefix, self.binary, "run", "--rootfs", str(rootfs or self.rootfs),
                *map(str, opts), "--", *map(str, cmd)]

    def raw_argv(self, args):
        return [*self.prefix, self.binary, *map(str, args)]

    # -- running
    def raw(self, args, timeout=RUN_TIMEOUT, pass_fds=(), input=None):
        """kiwi-run ARGS..., exactly as given."""
        return subprocess.run(self.raw_argv(args), capture_output=True, text=True,
                              env=self.env(), timeout=timeout, pass_fds=pass_fds,
                              input=input)

    def run(self, cmd, opts=(), rootfs=None, timeout=RUN_TIMEOUT, pass_fds=()):
        return subprocess.run(self.argv(cmd, opts, rootfs), capture_output=True, text=True,
                              env=self.env(), timeout=timeout, pass_fds=pass_fds,
                              stdin=subprocess.DEVNULL)

    def popen(self, cmd, opts=(), rootfs=None, **kw):
        """kiwi-run in the background. Its signal state is reset to the
        defaults (pytest may have been started with SIGINT ignored, as in a
        background job) unless preexec_fn says otherwise."""
        kw.setdefault("preexec_fn", default_signal_state)
        return subprocess.Popen(self.argv(cmd, opts, rootfs), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                text=True, env=self.env(), **kw)

    def sh(self, script, opts=(), rootfs=None, **kw):
        return self.run(["/bin/sh", "-c", script], opts, rootfs, **kw)

    def probe(self, *args, opts=(), rootfs=None, pass_fds=()):
        """Runs kiwi-probe ARGS in a sandbox; returns its parsed JSON."""
        r = self.run([PROBE, *args], opts, rootfs, pass_fds=pass_fds)
        assert r.returncode == 0, f"kiwi-probe {' '.join(args)}: {explain(r)}"
        try:
            return json.loads(r.stdout)
        except ValueError:
            pytest.fail(f"kiwi-probe {' '.join(args)} printed no JSON: {explain(r)}")

    def probe_text(self, *args, opts=(), rootfs=None):
        r = self.run([PROBE, *args], opts, rootfs)
        assert r.returncode == 0, f"kiwi-probe {' '.join(args)}: {explain(r)}"
        return r.stdout

    def leftovers(self, args, timeout=RUN_TIMEOUT):
        """Runs kiwi-run ARGS in a private mount namespace with a fresh /tmp
        (leftovers.py) and returns what it saw before and after."""
        if os.geteuid() != 0:
            pytest.skip("the leftover checks need root (a private mount namespace)")
        spec = {"argv": self.raw_argv(args), "env": self.env(), "timeout": timeout}
        r = subprocess.run(["unshare", "--mount", "--propagation", "private",
                            "/usr/bin/python3", "-B", str(HERE / "leftovers.py"), json.dumps(spec)],
                           capture_output=True, text=True, timeout=timeout + 10)
        assert r.returncode == 0, f"leftovers.py failed: {r.stderr}"
        res = json.loads(r.stdout)
        # A mount the host itself lost meanwhile (another program's `ip netns
        # delete` unlinks its mount point, which detaches it in every
        # namespace) is not kiwi-run's doing: only count those still here.
        with open("/proc/self/mountinfo") as f:
            host = {mount_key(l) for l in f.read().splitlines()}
        res["mounts_removed"] = [l for l in res["mounts_removed"] if mount_key(l) in host]
        return res

    # -- host-side scratch owned by the sandbox's root
    def _fresh(self, prefix):
        self._n += 1
        d = Path(tempfile.mkdtemp(prefix=f"{prefix}{self._n}-", dir=self.scratch))
        d.chmod(0o755)
        return d

    def chown(self, path):
        path = Path(path)
        os.lchown(path, self.uid, self.gid)
        if path.is_dir() and not path.is_symlink():
            for root, dirs, files in os.walk(path):
                for name in dirs + files:
                    os.lchown(os.path.join(root, name), self.uid, self.gid)

    def workdir(self):
        """A host directory the sandbox's uid 0 owns (the caller's uid)."""
        d = self._fresh("work")
        self.chown(d)
        return d

    def rootfs_copy(self):
        """A private, writable copy of the rootfs owned by the caller."""
        d = self._fresh("rootfs") / "rootfs"
        shutil.copytree(self.rootfs, d, symlinks=True)
        self.chown(d)
        return d


def default_signal_state():
    """Every signal at its default action and none blocked."""
    for sig in signal.valid_signals():
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            try:
                signal.signal(sig, signal.SIG_DFL)
            except (OSError, ValueError):
                pass  # the ones Python or the kernel keep
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


def signal_when_ready(proc, signum, timeout=5):
    """Waits for the command's `ready` line, sends SIGNUM to kiwi-run, and
    returns (exit status, stdout, stderr, seconds from the signal to the
    exit). Fails the test if kiwi-run outlives the signal by TIMEOUT."""
    try:
        line = proc.stdout.readline()
        if line != "ready\n":
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"no ready line (got {line!r}); exit {proc.returncode}\n{out}\n{err}")
        start = time.monotonic()
        proc.send_signal(signum)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            out = None
        if out is None:
            pytest.fail(f"kiwi-run still runs {timeout}s after signal {signum}")
        return proc.returncode, out, err, time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def mount_key(line):
    """A mountinfo line without the ids and flags that differ between
    namespaces: (root, mount point, fs type, source)."""
    left, right = line.split(" - ", 1)
    fields, tail = left.split(), right.split()
    return fields[3], fields[4], tail[0], tail[1] if len(tail) > 1 else ""


def explain(r):
    return (f"exit {r.returncode}\n--- stdout\n{r.stdout}\n--- stderr\n{r.stderr}")


@pytest.fixture(scope="session")
def scratch(session_dir):
    d = session_dir / "scratch"
    d.mkdir(mode=0o755)
    return d


@pytest.fixture(params=MODES)
def kiwi(request, binaries, rootfs, scratch, test_user):
    mode = request.param
    if mode == "root":
        if os.geteuid() != 0:
            pytest.skip("root mode needs the tests to run as root")
        owner = (0, 0)
    else:
        if isinstance(test_user, str):
            pytest.skip(test_user)
        owner = test_user
    return Kiwi(mode, binaries[0], binaries[1], rootfs, scratch, owner)


# ---------------------------------------------------------------------------
# meson: a run in which every test skipped is a skip (77), not a pass

_outcomes = {"passed": 0, "failed": 0, "skipped": 0}


def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":
        _outcomes[report.outcome] = _outcomes.get(report.outcome, 0) + 1


def pytest_sessionfinish(session, exitstatus):
    if exitstatus == 0 and _outcomes["skipped"] and not _outcomes["passed"]:
        session.exitstatus = 77
