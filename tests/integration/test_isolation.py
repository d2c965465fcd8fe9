# SPDX-License-Identifier: Apache-2.0
"""What a command sees from inside the sandbox: namespaces, mounts, /dev,
environment, file descriptors, credentials."""
import errno
import os
import socket
import subprocess

import pytest

from conftest import manifest, CANARY, DEFAULT_PATH, explain

ZERO_CAPS = "0000000000000000"


def mountinfo_entries(text):
    """[(mount point, fs type, options)] from mountinfo text."""
    out = []
    for line in text.splitlines():
        left, right = line.split(" - ", 1)
        fields = left.split()
        out.append((fields[4], right.split()[0], set(fields[5].split(","))))
    return out


# -- pid namespace


def test_command_is_pid_2_under_init(kiwi):
    st = kiwi.probe("status")
    assert st["pid"] == 2, st
    assert st["ppid"] == 1, st
    # NSpid, read through the sandbox's own /proc, starts at its pid ns.
    assert st["NSpid"] == "2", st


def test_host_processes_invisible(kiwi):
    assert kiwi.probe("pids") == [1, 2]


def test_shell_sees_its_own_pid_namespace(kiwi):
    r = kiwi.sh('echo $$; ls /proc | grep -c "^[0-9]"')
    assert r.returncode == 0, explain(r)
    pid, count = r.stdout.split()
    assert pid == "2", explain(r)
    assert int(count) <= 4, f"more processes than init, sh, ls, grep: {explain(r)}"


# -- uts, net


def test_default_hostname(kiwi):
    host_before = socket.gethostname()
    assert kiwi.probe_text("hostname") == "kiwi\n"
    assert socket.gethostname() == host_before


def test_custom_hostname(kiwi):
    host_before = socket.gethostname()
    r = kiwi.run(["hostname"], opts=["--hostname", "sandbox-7"])
    assert r.returncode == 0 and r.stdout == "sandbox-7\n", explain(r)
    assert socket.gethostname() == host_before


def test_only_loopback_and_up(kiwi):
    assert kiwi.probe("netdevs") == {"lo": {"up": True, "running": True}}


def test_shell_net_dev_lists_only_lo(kiwi):
    r = kiwi.sh("cat /proc/net/dev")
    assert r.returncode == 0, explain(r)
    names = [l.split(":")[0].strip() for l in r.stdout.splitlines()[2:]]
    assert names == ["lo"], explain(r)


def test_loopback_works(kiwi):
    res = kiwi.probe("loopback")
    assert res["ok"], res


# -- ipc, cgroup


@pytest.fixture
def host_shm():
    """A SysV shared memory segment on the host, removed afterwards."""
    r = subprocess.run(["ipcmk", "-M", "4096"], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"ipcmk cannot make a SysV segment here: {r.stderr.strip()}")
    shmid = r.stdout.split(":")[-1].strip()
    yield shmid
    subprocess.run(["ipcrm", "-m", shmid], capture_output=True)


def test_host_sysv_ipc_invisible(kiwi, host_shm):
    with open("/proc/sysvipc/shm") as f:
        assert any(l.split()[1] == host_shm for l in f.read().splitlines()[1:]), \
            "the host segment is not there to hide"
    r = kiwi.run(["cat", "/proc/sysvipc/shm"])
    assert r.returncode == 0, explain(r)
    assert len(r.stdout.splitlines()) == 1, f"SysV segments visible inside: {explain(r)}"


def test_cgroup_paths_hidden(kiwi):
    """The cgroup namespace hides where on the host the sandbox sits."""
    with open("/proc/self/cgroup") as f:
        host = [l.split(":", 2)[2] for l in f.read().splitlines()]
    if all(path == "/" for path in host):
        pytest.skip("the tests run in the root cgroup: there is no host path to hide")
    r = kiwi.run(["cat", "/proc/self/cgroup"])
    assert r.returncode == 0, explain(r)
    inside = r.stdout
    for path in host:
        if path != "/":
            assert path not in inside, f"host cgroup path {path} visible: {inside}"


# -- credentials


# Root's sandbox keeps CAP_CHOWN alone: its root is kiwi's unprivileged
# range (test_root_map.py); --host-root-map keeps nothing.
CHOWN_ONLY = "0000000000000001"


def kept_caps(kiwi):
    return CHOWN_ONLY if kiwi.mode == "root" else ZERO_CAPS


def test_all_capabilities_dropped_and_no_new_privs(kiwi):
    st = kiwi.probe("status")
    for field in ("CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb"):
        assert st[field] == kept_caps(kiwi), f"{field} = {st[field]}"
    assert st["NoNewPrivs"] == "1", st
    if kiwi.mode == "root":
        st = kiwi.probe("status", opts=["--host-root-map"])
        for field in ("CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb"):
            assert st[field] == ZERO_CAPS, f"{field} = {st[field]}"


def test_shell_sees_no_capabilities(kiwi):
    r = kiwi.sh("grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status")
    assert r.returncode == 0, explain(r)
    fields = dict(l.split(":\t") for l in r.stdout.splitlines())
    assert fields == {"CapEff": kept_caps(kiwi), "CapBnd": kept_caps(kiwi), "NoNewPrivs": "1"}, explain(r)


def test_init_holds_no_capability(kiwi):
    """Seen from the command's first instant: init must drop its
    capabilities before it starts the command, not after (8 tries, as the
    window is short)."""
    for attempt in range(8):
        st = kiwi.probe("status", "1")
        held = {k: st[k] for k in ("CapEff", "CapPrm", "CapBnd") if st[k] != kept_caps(kiwi)}
        assert held == {}, f"try {attempt}: the sandbox's init holds {held}"
    r = kiwi.sh("grep -E '^(CapEff|CapPrm|CapBnd)' /proc/1/status")
    assert r.returncode == 0, explain(r)
    fields = dict(l.split(":\t") for l in r.stdout.splitlines())
    k = kept_caps(kiwi)
    assert fields == {"CapEff": k, "CapPrm": k, "CapBnd": k}, explain(r)


def test_command_cannot_trace_init(kiwi):
    """Init keeps kiwi-run's sync socket: tracing it would let the command
    forge its own verdict."""
    res = kiwi.probe("ptrace", "1")
    assert res["ok"] is False, f"the command can ptrace the sandbox's init: {res}"
    for path in ("/proc/1/environ", "/proc/1/mem"):
        res = kiwi.probe("read", path, "16")
        assert res["ok"] is False, f"the command can read {path}: {res}"
    r = kiwi.sh("for f in /proc/1/fd/*; do readlink $f; done")
    assert r.stdout == "", f"the command can follow init's fds: {explain(r)}"


def test_init_reveals_no_host_paths(kiwi):
    """The sandbox's init is a fork of kiwi-run: its command line (readable
    by the command) would name the rootfs, bind sources and verdict path of
    the host unless kiwi-run hides them."""
    src = kiwi.workdir()
    verdict = kiwi.workdir() / "verdict.json"
    r = kiwi.run(["/bin/sh", "-c", "cat /proc/1/cmdline /proc/1/comm; readlink /proc/1/exe; true"],
                 opts=["--bind", f"{src}:/workspace:ro", "--verdict", verdict,
                       "--env", "NOT_FOR_INIT=kiwi-secret-value"])
    assert r.returncode == 0 and "/proc/1/cmdline" not in r.stderr, explain(r)
    seen = r.stdout.replace("\0", " ")
    for host_thing in (str(src), str(verdict), kiwi.rootfs, kiwi.binary, "kiwi-secret-value"):
        assert host_thing not in seen, f"{host_thing} visible through /proc/1: {seen!r}"


def test_runs_as_uid_0_mapped_to_caller(kiwi):
    """Root's own ids with --host-root-map (its default: test_root_map.py)."""
    opts = ["--host-root-map"] if kiwi.mode == "root" else []
    st = kiwi.probe("status", opts=opts)
    assert st["Uid"].split() == ["0"] * 4 and st["Gid"].split() == ["0"] * 4, st
    r = kiwi.sh("cat /proc/self/uid_map /proc/self/gid_map /proc/self/setgroups", opts=opts)
    assert r.returncode == 0, explain(r)
    uid_line, gid_line = r.stdout.splitlines()[:2]
    inside, outside, _count = uid_line.split()
    assert (inside, outside) == ("0", str(kiwi.uid)), explain(r)
    inside, outside, _count = gid_line.split()
    assert (inside, outside) == ("0", str(kiwi.gid)), explain(r)
    if kiwi.mode == "rootless":
        assert r.stdout.splitlines()[2] == "deny", explain(r)


def test_cannot_change_hostname_inside(kiwi):
    """No CAP_SYS_ADMIN left, even over its own uts namespace."""
    r = kiwi.probe("write", "/proc/sys/kernel/hostname", "evil")
    assert r["ok"] is False, r
    assert kiwi.probe_text("hostname") == "kiwi\n"


# Sysctls that act on the whole host. Their files belong to the host's root,
# so in root mode (uid 0 inside is uid 0 outside) only a read-only /proc/sys
# stops a capability-less sandbox from writing them. Opened for writing and
# closed again: no byte is ever written.
HOST_SYSCTLS = ["/proc/sys/kernel/core_pattern", "/proc/sys/vm/drop_caches",
                "/proc/sys/kernel/printk_ratelimit", "/proc/sys/kernel/modprobe",
                "/proc/sysrq-trigger"]


@pytest.mark.parametrize("path", HOST_SYSCTLS)
def test_host_sysctls_not_writable(kiwi, path):
    if not os.path.exists(path):
        pytest.skip(f"{path} does not exist on this kernel")
    res = kiwi.probe("open-w", path)
    assert res["ok"] is False, f"the sandbox can open {path} for writing: {res}"


# -- environment


def test_environment_is_exactly_the_default(kiwi):
    env = kiwi.probe("env")
    assert sorted(env) == sorted([f"PATH={DEFAULT_PATH}", "HOME=/root"]), env


def test_env_flags_add_and_override(kiwi):
    env = kiwi.probe("env", opts=["--env", "FOO=bar", "--env", "PATH=/bin",
                                  "--env", "EQ=a=b", "--env", "EMPTY="])
    assert sorted(env) == sorted(["PATH=/bin", "HOME=/root", "FOO=bar", "EQ=a=b", "EMPTY="]), env


def test_env_repeated_last_wins(kiwi):
    env = kiwi.probe("env", opts=["--env", "A=1", "--env", "A=2"])
    assert sorted(env) == sorted([f"PATH={DEFAULT_PATH}", "HOME=/root", "A=2"]), env


def test_env_home_override(kiwi):
    env = kiwi.probe("env", opts=["--env", "HOME=/tmp"])
    assert sorted(env) == sorted([f"PATH={DEFAULT_PATH}", "HOME=/tmp"]), env


def test_shell_does_not_see_caller_environment(kiwi):
    r = kiwi.sh(f'echo "${{{CANARY}-unset}} $HOME $PATH"')
    assert r.returncode == 0, explain(r)
    assert r.stdout == f"unset /root {DEFAULT_PATH}\n", explain(r)


# -- file descriptors


def test_fds_above_2_closed(kiwi):
    extra = [os.open("/dev/null", os.O_RDONLY) for _ in range(3)]
    try:
        fds = kiwi.probe("fds", pass_fds=extra)
    finally:
        for fd in extra:
            os.close(fd)
    assert fds == [0, 1, 2], f"inherited {extra}, inside: {fds}"


def test_preserve_fd(kiwi):
    r_fd, w_fd = os.pipe()
    other = os.open("/dev/null", os.O_RDONLY)
    try:
        fds = kiwi.probe("fds", opts=["--preserve-fd", w_fd], pass_fds=[w_fd, other])
        assert fds == [0, 1, 2, w_fd], f"preserved {w_fd}, also passed {other}: {fds}"
        res = kiwi.probe("write-fd", str(w_fd), "through the fd\n",
                         opts=["--preserve-fd", w_fd], pass_fds=[w_fd])
        assert res["ok"], res
        os.close(w_fd)
        w_fd = -1
        assert os.read(r_fd, 100) == b"through the fd\n"
    finally:
        for fd in (r_fd, w_fd, other):
            if fd >= 0:
                os.close(fd)


def test_stdio_passed_through(kiwi):
    r = kiwi.sh("read line; echo \"got $line\"; echo err >&2")
    # stdin is /dev/null in run(): read fails, the echo still happens
    assert r.stdout == "got \n", explain(r)
    assert r.stderr == "err\n", explain(r)
    out = kiwi.raw(["run", "--rootfs", kiwi.rootfs, "--", "cat"], input="piped in\n")
    assert out.returncode == 0 and out.stdout == "piped in\n", explain(out)


# -- filesystem


def test_no_host_mounts_visible(kiwi):
    entries = mountinfo_entries(kiwi.probe_text("mounts"))
    points = [p for p, _, _ in entries]
    assert "/" in points
    allowed_top = {"/", "/proc", "/dev", "/tmp", "/sys"}
    strange = [p for p in points
               if p not in allowed_top and not p.startswith(("/proc/", "/dev/", "/sys/"))]
    assert strange == [], f"mounts outside the sandbox layout: {strange}\n{points}"
    host_paths = (str(kiwi.scratch.parent), kiwi.rootfs, "/work", "/var/tmp")
    assert not [p for p in points if p.startswith(host_paths)], points


def test_root_is_the_rootfs(kiwi):
    r = kiwi.run(["cat", "/.kiwi-rootfs-stamp"])
    assert r.returncode == 0, explain(r)
    with open(os.path.join(kiwi.rootfs, ".kiwi-rootfs-stamp")) as f:
        assert r.stdout == f.read()


def test_host_files_unreachable(kiwi):
    canary = kiwi.workdir() / "host-canary"
    canary.write_text("host secret\n")
    kiwi.chown(canary)
    attempts = kiwi.probe("escape", str(canary))
    reached = {k: v for k, v in attempts.items() if v["reached"]}
    assert reached == {}, f"reached the host file: {reached}"
    assert {"direct", "proc_1_root", "chroot", "userns_chroot"} <= attempts.keys(), attempts


def test_root_read_only(kiwi):
    for path in ("/newfile", "/etc/passwd", "/usr/local/bin/kiwi-probe", "/root/x"):
        res = kiwi.probe("write", path)
        assert res["ok"] is False, f"{path}: {res}"
        if path != "/root/x" or kiwi.mode == "root":  # /root is 0700 host-root's
            assert res["errno"] == errno.EROFS, f"{path}: {res}"
    r = kiwi.sh("touch /etc/kiwi-x")
    assert r.returncode != 0, explain(r)
    assert not os.path.exists(os.path.join(kiwi.rootfs, "etc/kiwi-x"))
    root = [e for e in mountinfo_entries(kiwi.probe_text("mounts")) if e[0] == "/"]
    assert root and "ro" in root[-1][2], root


def test_rw_root(kiwi):
    """--rw-root writes into the sandbox's own layer: readable inside, never
    in the rootfs directory, gone with the sandbox."""
    root = kiwi.rootfs_copy()
    before = manifest(root)
    r = kiwi.sh("echo written inside > /newfile && cat /newfile", opts=["--rw-root"], rootfs=root)
    assert r.returncode == 0 and r.stdout == "written inside\n", explain(r)
    assert not (root / "newfile").exists()
    assert manifest(root) == before
    r = kiwi.sh("test -e /newfile", opts=["--rw-root"], rootfs=root)
    assert r.returncode == 1, explain(r)


def test_tmp_is_writable_tmpfs(kiwi):
    assert kiwi.probe("write", "/tmp/x")["ok"]
    assert kiwi.probe("ls", "/tmp") == [], "/tmp is not fresh"
    r = kiwi.sh("echo hello > /tmp/f && cat /tmp/f")
    assert r.returncode == 0 and r.stdout == "hello\n", explain(r)
    fs = {p: t for p, t, _ in mountinfo_entries(kiwi.probe_text("mounts"))}
    assert fs.get("/tmp") == "tmpfs", fs
    assert not os.path.exists(os.path.join(kiwi.rootfs, "tmp/f"))


def test_proc_is_fresh(kiwi):
    fs = {p: t for p, t, _ in mountinfo_entries(kiwi.probe_text("mounts"))}
    assert fs.get("/proc") == "proc", fs
    r = kiwi.run(["cat", "/proc/1/cmdline"])
    assert r.returncode == 0 and r.stdout != "", explain(r)


def test_sys_read_only_or_absent(kiwi):
    entries = mountinfo_entries(kiwi.probe_text("mounts"))
    sys_mounts = [e for e in entries if e[0] == "/sys" or e[0].startswith("/sys/")]
    for point, _, opts in sys_mounts:
        assert "ro" in opts, f"{point} is mounted read-write: {opts}"
    for target in ("/sys/kernel/uevent_helper", "/sys/newfile"):
        assert kiwi.probe("write", target)["ok"] is False, target


DEVICES = {"null": (1, 3), "zero": (1, 5), "full": (1, 7), "random": (1, 8),
           "urandom": (1, 9), "tty": (5, 0)}
DEV_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
             "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"}


def test_dev_is_minimal(kiwi):
    names = set(kiwi.probe("ls", "/dev"))
    allowed = set(DEVICES) | set(DEV_LINKS) | {"pts", "ptmx", "shm"}
    assert names - allowed == set(), f"unexpected in /dev: {sorted(names - allowed)}"
    assert set(DEVICES) | {"pts", "ptmx", "shm"} <= names, f"missing: {sorted(allowed - names)}"


@pytest.mark.parametrize("name", sorted(DEVICES))
def test_dev_nodes(kiwi, name):
    st = kiwi.probe("stat", f"/dev/{name}")
    assert st["exists"] and st["type"] == "char", st
    assert (st["major"], st["minor"]) == DEVICES[name], st


def test_dev_symlinks(kiwi):
    for name, target in DEV_LINKS.items():
        st = kiwi.probe("stat", f"/dev/{name}")
        assert st["exists"] and st["type"] == "symlink" and st["target"] == target, (name, st)


def test_dev_nodes_work(kiwi):
    assert kiwi.probe("write", "/dev/null")["ok"]
    full = kiwi.probe("write", "/dev/full")
    assert full["ok"] is False and full["errno"] == errno.ENOSPC, full
    for dev in ("/dev/zero", "/dev/urandom", "/dev/random"):
        res = kiwi.probe("read", dev, "16")
        assert res["ok"] and res["bytes"] == 16, (dev, res)
    r = kiwi.sh("head -c 8 /dev/urandom | wc -c; echo x > /dev/null && echo ok")
    assert r.returncode == 0 and r.stdout.split() == ["8", "ok"], explain(r)


def test_devpts_new_instance(kiwi):
    entries = mountinfo_entries(kiwi.probe_text("mounts"))
    fs = {p: t for p, t, _ in entries}
    assert fs.get("/dev/pts") == "devpts", fs
    assert fs.get("/dev/shm") == "tmpfs", fs
    assert sorted(kiwi.probe("ls", "/dev/pts")) == ["ptmx"], "host ptys visible"
    pty = kiwi.probe("pty")
    assert pty["ok"] and pty["ptsname"] == "/dev/pts/0", pty


def test_dev_shm_writable(kiwi):
    assert kiwi.probe("write", "/dev/shm/x")["ok"]


def test_default_cwd_is_root(kiwi):
    assert kiwi.probe_text("cwd") == "/\n"


def test_mount_flags(kiwi):
    """Root nosuid/nodev; /tmp and /dev/shm nosuid/nodev; /proc and /sys
    nosuid/nodev/noexec."""
    by_point = {p: o for p, _, o in mountinfo_entries(kiwi.probe_text("mounts"))}
    want = {"/": {"nosuid", "nodev"}, "/tmp": {"nosuid", "nodev"},
            "/dev/shm": {"nosuid", "nodev"}, "/proc": {"nosuid", "nodev", "noexec"}}
    if "/sys" in by_point:
        want["/sys"] = {"nosuid", "nodev", "noexec"}
    for point, flags in want.items():
        assert point in by_point, f"{point} is not a mount: {sorted(by_point)}"
        assert flags <= by_point[point], f"{point}: {by_point[point]} lacks {flags - by_point[point]}"


def test_shell_identity(kiwi):
    r = kiwi.run(["id"])
    assert r.returncode == 0 and r.stdout.startswith("uid=0(root) gid=0(root)"), explain(r)


def test_cwd(kiwi):
    assert kiwi.probe_text("cwd", opts=["--cwd", "/tmp"]) == "/tmp\n"
    r = kiwi.sh("pwd", opts=["--cwd", "/etc"])
    assert r.returncode == 0 and r.stdout == "/etc\n", explain(r)


# -- bind mounts


@pytest.mark.parametrize("suffix", ["", ":rw"])
def test_bind_rw(kiwi, suffix):
    src = kiwi.workdir()
    (src / "in").write_text("from host\n")
    kiwi.chown(src)
    r = kiwi.sh("cat /workspace/in && echo from sandbox > /workspace/out",
                opts=["--bind", f"{src}:/workspace{suffix}"])
    assert r.returncode == 0 and r.stdout == "from host\n", explain(r)
    assert (src / "out").read_text() == "from sandbox\n"
    st = (src / "out").stat()
    assert (st.st_uid, st.st_gid) == (kiwi.uid, kiwi.gid)


def test_bind_ro(kiwi):
    src = kiwi.workdir()
    (src / "in").write_text("from host\n")
    kiwi.chown(src)
    opts = ["--bind", f"{src}:/workspace:ro"]
    res = kiwi.probe("write", "/workspace/out", opts=opts)
    assert res["ok"] is False and res["errno"] == errno.EROFS, res
    assert not (src / "out").exists()
    r = kiwi.run(["cat", "/workspace/in"], opts=opts)
    assert r.returncode == 0 and r.stdout == "from host\n", explain(r)


def test_bind_file(kiwi):
    src = kiwi.workdir()
    (src / "hosts").write_text("10.9.8.7\tbound\n")
    kiwi.chown(src)
    r = kiwi.run(["cat", "/etc/hosts"], opts=["--bind", f"{src / 'hosts'}:/etc/hosts:ro"])
    assert r.returncode == 0 and r.stdout == "10.9.8.7\tbound\n", explain(r)


def test_bind_creates_missing_destination_in_writable_rootfs(kiwi):
    root = kiwi.rootfs_copy()
    src = kiwi.workdir()
    (src / "f").write_text("created\n")
    kiwi.chown(src)
    r = kiwi.run(["cat", "/newmnt/f"], rootfs=root, opts=["--bind", f"{src}:/newmnt"])
    assert r.returncode == 0 and r.stdout == "created\n", explain(r)


def test_relative_rootfs_path(kiwi):
    parent, name = os.path.split(kiwi.rootfs)
    argv = kiwi.raw_argv(["run", "--rootfs", f"./{name}/", "--", "kiwi-probe", "hostname"])
    r = subprocess.run(argv, cwd=parent, capture_output=True, text=True, env=kiwi.env(),
                       timeout=10)
    assert r.returncode == 0 and r.stdout == "kiwi\n", explain(r)


def test_several_binds(kiwi):
    a, b = kiwi.workdir(), kiwi.workdir()
    (a / "a").write_text("A\n")
    (b / "b").write_text("B\n")
    r = kiwi.sh("cat /workspace/a /var/tmp/b",
                opts=["--bind", f"{a}:/workspace:ro", "--bind", f"{b}:/var/tmp"])
    assert r.returncode == 0 and r.stdout == "A\nB\n", explain(r)
