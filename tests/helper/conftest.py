# SPDX-License-Identifier: Apache-2.0
"""Harness of the kiwi-helper suite: the helper as a real setuid-root
binary, called by unprivileged test users.

The session copies the test build of the helper (kiwi-helper-test, whose
config, subid files and quota locks live in a directory under /run named
after its build directory, instead of /etc: its --help says which) to a
root-owned directory under /var/tmp, on a filesystem without nosuid, and
makes it root 4755. Each test writes the admin config it needs. The callers
are client.py processes run as `kiwi-test` and `kiwi-test2` through
setpriv; the tests (root) drive them line by line.

Inputs (environment): KIWI_HELPER_TEST, KIWI_RUN (built by meson; defaults
under <repo>/build). Skips (exit 77 under meson) when not root.
"""
import fcntl
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
BUILD = REPO / "build"
USERS = ("kiwi-test", "kiwi-test2")
PYTHON = "/usr/bin/python3"
sys.path.insert(0, str(REPO / "tests" / "net"))
from fakenet import World, leftovers  # noqa: E402


def pytest_sessionstart(session):
    if os.geteuid() != 0:
        print("SKIP: the helper suite needs root (it installs a setuid binary and test users)")
        os._exit(77)


def _binary(env, default):
    path = Path(os.environ.get(env, BUILD / default))
    if not path.is_file():
        pytest.exit(f"{path} is missing: build it or set {env}", 2)
    return path


def _config_dir():
    """The test build's own directory (per build directory, so that two
    trees can run this suite at once), as its --help names its config."""
    binary = _binary("KIWI_HELPER_TEST", "src/helper/kiwi-helper-test")
    out = subprocess.run([str(binary), "--help"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("Admin config: "):
            path = Path(line.split(": ", 1)[1].split(". ")[0])
            assert path.name == "helper.json" and path.parent.name.startswith("kiwi-helper-test"), path
            return path.parent
    pytest.exit(f"{binary} --help names no admin config", 2)


CONFIG_DIR = _config_dir()


def _ensure_user(name):
    try:
        return pwd.getpwnam(name)
    except KeyError:
        r = subprocess.run(["useradd", "--system", "--create-home", "--home-dir", f"/var/lib/{name}",
                            "--shell", "/usr/sbin/nologin", name], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.exit(f"cannot create user {name}: {r.stderr.strip()}", 2)
        return pwd.getpwnam(name)


@pytest.fixture(scope="session")
def users():
    return {name: _ensure_user(name) for name in USERS}


def _sweep_stale_installs():
    """A session killed before its teardown leaves a setuid-root copy of
    the helper behind: remove every install no live session holds locked."""
    for old in Path("/var/tmp").glob("kiwi-helper-*"):
        try:
            if time.time() - old.stat().st_mtime < 600:
                continue  # perhaps made this instant, not locked yet
            fd = os.open(old, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            shutil.rmtree(old, ignore_errors=True)
        except OSError:
            pass  # a running session's
        finally:
            os.close(fd)


@pytest.fixture(scope="session")
def install_dir():
    _sweep_stale_installs()
    d = Path(tempfile.mkdtemp(prefix="kiwi-helper-", dir="/var/tmp"))
    d.chmod(0o755)
    lock = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(lock, fcntl.LOCK_EX)
    if os.statvfs(d).f_flag & os.ST_NOSUID:
        pytest.skip(f"{d} is on a nosuid filesystem: a setuid binary cannot be tested there")
    yield d
    shutil.rmtree(d, ignore_errors=True)
    os.close(lock)


@pytest.fixture(scope="session")
def kiwi_run(install_dir):
    """kiwi-run and a busybox rootfs with netprobe, where the test users
    reach them: built once for every module (~25 s in the VM lane)."""
    kr = install_dir / "kiwi-run"
    shutil.copy2(_binary("KIWI_RUN", "src/kiwi-run"), kr)
    probe = install_dir / "netprobe"
    shutil.copy2(_binary("KIWI_NETPROBE", "tests/net/netprobe"), probe)
    rootfs = install_dir / "rootfs"
    r = subprocess.run(["sh", str(REPO / "rootfs-tools" / "busybox-rootfs.sh"), str(rootfs), str(probe)],
                       capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"busybox-rootfs.sh failed: {r.stderr.strip()}")
    return kr, rootfs


@pytest.fixture(scope="session")
def helper(install_dir, users):
    """The setuid-root test helper."""
    dest = install_dir / "kiwi-helper"
    shutil.copy2(_binary("KIWI_HELPER_TEST", "src/helper/kiwi-helper-test"), dest)
    os.chown(dest, 0, 0)
    dest.chmod(0o4755)
    for name in ("client.py",):
        shutil.copy2(HERE / name, install_dir / name)
        (install_dir / name).chmod(0o644)
    return dest


def default_rules(users):
    return [
        {"user": "kiwi-test", "operations": ["idmap", "egress"],
         "uids": [[200000, 65536]], "gids": [[200000, 65536]],
         "max_sandboxes": 3, "max_veths": 2, "egress": ["public_internet", "private_network"]},
        {"user": users["kiwi-test2"].pw_uid, "operations": ["idmap"], "subids": True, "max_sandboxes": 2},
    ]


class Config:
    """The admin config and subid files the test build reads."""

    def __init__(self, users):
        self.users = users
        self.path = CONFIG_DIR / "helper.json"

    def write(self, rules=None, raw=None, mode=0o644, owner=0):
        CONFIG_DIR.mkdir(mode=0o755, exist_ok=True)
        CONFIG_DIR.chmod(0o755)
        text = raw if raw is not None else json.dumps({"rules": default_rules(self.users) if rules is None else rules})
        self.path.write_text(text)
        os.chown(self.path, owner, 0)
        self.path.chmod(mode)

    def subids(self, subuid, subgid):
        for name, text in (("subuid", subuid), ("subgid", subgid)):
            (CONFIG_DIR / name).write_text(text)
            (CONFIG_DIR / name).chmod(0o644)


@pytest.fixture
def config(users):
    c = Config(users)
    c.write()
    c.subids("kiwi-test2:300000:65536\n", "kiwi-test2:300000:65536\n")
    yield c
    shutil.rmtree(CONFIG_DIR, ignore_errors=True)


class Client:
    """One client.py process run as a test user: the helper's caller."""

    def __init__(self, helper, user, prefix=()):
        self.user = user
        argv = [*prefix, "setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups",
                PYTHON, str(helper.parent / "client.py"), str(helper)]
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  cwd=str(helper.parent))
        self.helper_pid = None

    def call(self, cmd, **kw):
        self.p.stdin.write(json.dumps({"cmd": cmd, **kw}) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        assert line, f"client.py as {self.user} died (exit {self.p.wait()})"
        return json.loads(line)

    def start(self, **kw):
        self.helper_pid = self.call("start", **kw)["pid"]
        return self.helper_pid

    def request(self, req, fds=(), **kw):
        return self.call("request", req=req, fds=list(fds), **kw)

    def finish(self):
        if self.p.poll() is None:
            self.p.stdin.close()
            self.p.wait(timeout=60)


@pytest.fixture
def clients(helper, config):
    made = []

    def make(user="kiwi-test", prefix=()):
        c = Client(helper, user, prefix)
        made.append(c)
        return c

    yield make
    for c in made:
        c.finish()


IDMAP = {"op": "idmap", "uid_map": [[0, 999, 1]], "gid_map": [[0, 995, 1]]}


def idmap(users, user="kiwi-test", uid_map=None, gid_map=None):
    """An idmap request: the caller's own ids at 0, plus what is given."""
    pw = users[user]
    return {"op": "idmap", "uid_map": [[0, pw.pw_uid, 1], *(uid_map or [])],
            "gid_map": [[0, pw.pw_gid, 1], *(gid_map or [])]}


def maps_of(pid):
    """(uid_map, gid_map) of a process, read as root."""
    return tuple(Path(f"/proc/{pid}/{m}").read_text() for m in ("uid_map", "gid_map"))


def refused(ans, *words):
    """The helper's answer is a refusal whose text names every word."""
    assert ans.get("ok") is False, f"should be refused: {ans}"
    text = f"{ans.get('step')}: {ans.get('error')}".lower()
    for w in words:
        assert w.lower() in text, f"refusal should mention {w!r}: {ans}"


def stale_pidfd_of_a_reused_pid(c):
    """c holds a pidfd (saved as "stale") of a sandbox that ended; a new
    sandbox of the same caller is given its pid through ns_last_pid.
    Returns the new sandbox, or skips when the machine took the pid."""
    old = c.call("sandbox")
    c.call("save", name="stale", spec={"sandbox": old["id"]})
    c.call("end_sandbox", sid=old["id"])
    for _ in range(200):
        Path("/proc/sys/kernel/ns_last_pid").write_text(str(old["pid"] - 1))
        new = c.call("sandbox")
        if new["pid"] == old["pid"]:
            return new
        c.call("end_sandbox", sid=new["id"])
    pytest.skip("could not get the pid reused (a busy machine took it each time)")


# ---- egress: a caller in the fake world of tests/net ----

@pytest.fixture(scope="module")
def world():
    if not shutil.which("ip") or not shutil.which("nft"):
        pytest.skip("needs iproute2 and nftables (test tooling): apt-get install iproute2 nftables")
    w = World(f"kwh{os.getpid() % 100000}")
    with w:
        yield w


@pytest.fixture
def in_world(world, clients):
    """A caller in the world's host namespace."""
    def make(user="kiwi-test"):
        return clients(user, prefix=("ip", "netns", "exec", world.host))
    yield make
    veths, tables = leftovers(world.host)
    assert not veths and not tables, f"left behind: veths {veths}, tables {tables}"


PUBLIC = {"op": "egress-prepare", "egress": "public_internet", "allow-cidr": ["192.0.2.0/24"]}


def attach(c, users, prepare=PUBLIC):
    """prepare, a sandbox with its id map, attach: (prepare answer, sandbox)."""
    prep = c.request(prepare)
    assert prep["ok"], prep
    sb = c.call("sandbox")
    assert c.request(idmap(users), [{"sandbox": sb["id"]}]) == {"ok": True}
    ans = c.request({"op": "egress-attach"}, [{"sandbox": sb["id"]}])
    assert ans["ok"] and ans["host_ifindex"] > 0, ans
    return prep, sb


def quota_held(kind, uid):
    """How many of uid's quota slots of kind ("sandboxes", "veths") a live
    process holds: their lock files, tried as root."""
    held = 0
    for f in (CONFIG_DIR / "state").glob(f"{kind}-{uid}-*.lock"):
        fd = os.open(f, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            held += 1
        finally:
            os.close(fd)
    return held


def settle(pred, bound=60):
    """Until pred() holds, or bound seconds: a bound against a hang, not a
    claim about speed (the assertion follows)."""
    end = time.monotonic() + bound
    while not pred() and time.monotonic() < end:
        time.sleep(0.02)
    return pred()
