# SPDX-License-Identifier: Apache-2.0
"""kiwi-run exec: a process joins a running container (namespaces, user,
capabilities, seccomp), and the CVE-2019-5736 attack on the joining
binary fails."""
import hashlib
import json
import os
import shutil
import subprocess
import time

import pytest

from conftest import reap


def start_sleeper(oci, cid, **changes):
    cfg = oci.spec(["sleep", "1000"])
    for k, v in changes.items():
        cfg[k] = v
    b = oci.bundle(cfg)
    oci.cli("run", "-d", "-b", str(b), cid, check=True)
    return oci.state(cid)


def test_exec_joins_the_container(oci):
    st = start_sleeper(oci, "x1")
    r = oci.cli("exec", "x1", "sh", "-c", "hostname; echo $$; readlink /proc/1/exe; "
                "grep -E 'NoNewPrivs|CapBnd' /proc/self/status")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split()
    assert lines[0] == "kiwi" and lines[2] == "/bin/busybox", r.stdout
    assert int(lines[1]) > 1, "a new process in the container's pid namespace"
    assert "NoNewPrivs:\t1" in r.stdout.replace("NoNewPrivs: ", "NoNewPrivs:\t")
    bnd = int(r.stdout.split("CapBnd:")[1].split()[0], 16)
    assert bnd == (1 << 29) | (1 << 5) | (1 << 10), hex(bnd)
    for ns in ("mnt", "pid", "uts", "ipc", "net"):
        with open(f"/proc/{st['pid']}/ns/{ns}") as _:
            pass
    oci.cli("delete", "-f", "x1", check=True)


def test_exec_unknown_cap_is_refused(oci):
    """A capability typed on the command line that no one knows is a typo
    until proven otherwise: refused in one line, unlike a config's, which
    is skipped (runc and crun ignore both)."""
    start_sleeper(oci, "xc")
    r = oci.cli("exec", "--cap", "CAP_SYS_ADMN", "xc", "true")
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "CAP_SYS_ADMN" in r.stderr, r.stderr
    oci.cli("delete", "-f", "xc", check=True)


def test_exec_with_a_bad_option_closes_no_fd_it_did_not_open(oci, tmp_path):
    """exec refuses a bad option in one line and ends, closing nothing of
    its caller's. Its pidfd's cleanup once ran on an uninitialised value
    when the arguments were bad (a goto jumped past the pidfd's
    initialisation, which clang refuses to build): with gcc it closed
    fd 0 on the way out."""
    if oci.mode != "root":
        pytest.skip("the same code path rootless; the trace needs a log the caller can write")
    if not shutil.which("strace"):
        pytest.skip("strace is not installed")
    log = tmp_path / "close.log"
    # LeakSanitizer cannot run under ptrace: off for this traced run alone
    untraced = os.environ.get("ASAN_OPTIONS", "")
    r = subprocess.run(["strace", "-o", str(log), "-e", "trace=close", str(oci.kiwi), "--root", str(oci.root),
                        "exec", "--no-such-option", "x", "true"], capture_output=True, text=True, timeout=30,
                       stdin=subprocess.DEVNULL,
                       env={**os.environ, "ASAN_OPTIONS": f"{untraced}:detect_leaks=0".lstrip(":")})
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "--no-such-option" in r.stderr, r.stderr
    closed = [l for l in log.read_text().splitlines() if l.startswith("close(")]
    assert not [l for l in closed if l.split("(")[1].split(")")[0] in ("0", "1", "2")], closed


def test_exec_flags_and_status(oci):
    start_sleeper(oci, "x2")
    # A rootless container maps only the caller, as 0.
    who = "65534" if oci.mode == "root" else "0"
    r = oci.cli("exec", "--env", "FOO=bar", "--cwd", "/tmp", "--user", f"{who}:{who}", "x2",
                "sh", "-c", "id -u; id -g; pwd; echo $FOO; exit 5")
    assert r.returncode == 5 and r.stdout.split() == [who, who, "/tmp", "bar"], (r.stdout, r.stderr)
    if oci.mode == "rootless":
        r = oci.cli("exec", "--user", "65534", "x2", "true")
        assert r.returncode == 1 and "is it mapped" in r.stderr
    r = oci.cli("exec", "x2", "no-such-thing")
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "not found" in r.stderr
    pidfile = oci.work / "exec.pid"
    oci.cli("exec", "-d", "--pid-file", str(pidfile), "x2", "sleep", "1000", check=True)
    pid = int(pidfile.read_text())
    pids = json.loads(oci.cli("ps", "-f", "json", "x2", check=True).stdout)
    assert pid in pids
    # The detached process's parent is us, as it would be the shim: the
    # namespace's init only ends once we reaped it.
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    proc = {"args": ["sh", "-c", "echo from-process-file $A"], "cwd": "/", "env": ["A=1", "PATH=/bin"]}
    pf = oci.work / "process.json"
    pf.write_text(json.dumps(proc))
    os.chown(pf, *oci.ids)
    r = oci.cli("exec", "--process", str(pf), "x2")
    assert r.returncode == 0 and r.stdout == "from-process-file 1\n", (r.stdout, r.stderr)
    oci.cli("delete", "-f", "x2", check=True)
    r = oci.cli("exec", "x2", "true")
    assert r.returncode == 1 and "does not exist" in r.stderr


def test_exec_in_stopped_is_refused(oci):
    b = oci.bundle(oci.spec(["true"]))
    oci.cli("run", "--keep", "-b", str(b), "x3", check=True)
    r = oci.cli("exec", "x3", "true")
    assert r.returncode == 1 and "stopped" in r.stderr
    oci.cli("delete", "x3", check=True)


def test_exec_keeps_the_seccomp_filter(oci):
    cfg = oci.spec(["sleep", "1000"])
    cfg["linux"]["seccomp"] = {"defaultAction": "SCMP_ACT_ALLOW",
                               "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO",
                                             "errnoRet": 1}]}
    b = oci.bundle(cfg)
    oci.cli("run", "-d", "-b", str(b), "x4", check=True)
    r = oci.cli("exec", "x4", "sh", "-c", "mkdir /tmp/x 2>&1; grep Seccomp: /proc/self/status")
    assert "Operation not permitted" in r.stdout and "Seccomp:\t2" in r.stdout, r.stdout
    oci.cli("delete", "-f", "x4", check=True)


ATTACK = r"""
for d in /proc/[0-9]*; do
  p=${d#/proc/}
  l=$(readlink /proc/$p/exe 2>/dev/null)
  case "$l" in /bin/busybox|"") ;; *) t=$p; echo "target $p $l";; esac
done
[ -n "$t" ] || { echo NOTARGET; exit 0; }
exec 3< /proc/$t/exe || { echo NOOPEN; exit 0; }
echo "fd3 $(readlink /proc/self/fd/3)"
if echo PWNED >> /proc/$t/exe 2>/dev/null; then echo WROTE-LIVE; else echo DENIED-LIVE; fi
touch /shared/opened
while [ "$(readlink /proc/$t/exe)" != /bin/busybox ] || ! [ -e /shared/go ]; do sleep 0.05; done
echo "after $(readlink /proc/$t/exe)"
if echo PWNED >> /proc/self/fd/3 2>/dev/null; then echo WROTE-APPEND; else echo DENIED-APPEND; fi
if echo PWNED > /proc/self/fd/3 2>/dev/null; then echo WROTE-TRUNC; else echo DENIED-TRUNC; fi
touch /shared/done
"""


def test_cve_2019_5736_binary_cannot_be_overwritten(oci):
    """Container A, root with CAP_SYS_PTRACE (so no dumpable check stands
    in the way), sees container B's init, which shares A's pid namespace and
    waits in kiwi-run before its exec. A keeps B's /proc/PID/exe open across
    B's exec and then writes through it, as the runc exploit did. What A
    holds must be the sealed memfd copy, and the host binary must not
    change."""
    if oci.mode != "root":
        pytest.skip("the host binary is root's: a rootless container could not write it anyway")
    shared = oci.work / "shared"
    shared.mkdir()
    cfg = oci.spec(["sleep", "1000"])
    for s in ("bounding", "effective", "permitted"):
        cfg["process"]["capabilities"][s].append("CAP_SYS_PTRACE")
    cfg["mounts"].append({"destination": "/shared", "type": "bind", "source": str(shared),
                          "options": ["rbind", "rw"]})
    a = oci.bundle(cfg)
    oci.cli("run", "-d", "-b", str(a), "cveA", check=True)
    a_pid = oci.state("cveA")["pid"]
    before = hashlib.sha256(oci.kiwi.read_bytes()).hexdigest()

    cfg_b = oci.spec(["sleep", "1000"])
    cfg_b["linux"]["namespaces"] = [n for n in cfg_b["linux"]["namespaces"] if n["type"] != "pid"]
    cfg_b["linux"]["namespaces"].append({"type": "pid", "path": f"/proc/{a_pid}/ns/pid"})
    b = oci.bundle(cfg_b)
    oci.cli("create", "-b", str(b), "cveB", check=True)

    # Detached, so that no kiwi-run of ours runs the binary when the
    # attacker writes (a busy binary is ETXTBSY): the exploit's setting.
    oci.cli("exec", "-d", "cveA", "sh", "-c", f"exec >/shared/out 2>&1; {ATTACK}", check=True)
    for _ in range(1000):  # bounded waits on the attacker's markers
        if (shared / "opened").exists():
            break
        time.sleep(0.02)
    oci.cli("start", "cveB", check=True)
    (shared / "go").touch()  # every kiwi-run process has ended
    for _ in range(1500):
        if (shared / "done").exists():
            break
        time.sleep(0.02)
    out = (shared / "out").read_text()
    err = ""
    assert "target" in out and "NOTARGET" not in out and "NOOPEN" not in out, (out, err)
    assert "fd3 /memfd:kiwi-run (deleted)" in out, f"the attacker reached something else: {out}"
    assert "after /bin/busybox" in out, out
    assert "WROTE" not in out, out
    assert out.count("DENIED") == 3, out
    assert hashlib.sha256(oci.kiwi.read_bytes()).hexdigest() == before
    reap()  # the attacker's shell and B's init were ours (as the shim's):
    oci.cli("delete", "-f", "cveB", check=True)
    reap()  # A's init ends once they are reaped was ours (as the shim's): A's init ends once it is reaped
    oci.cli("delete", "-f", "cveA", check=True)
