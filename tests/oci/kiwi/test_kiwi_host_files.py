# SPDX-License-Identifier: Apache-2.0
"""Files the OCI verbs write or reach on their caller's behalf (--pid-file,
--log, --console-socket) are never reached through a planted symbolic
link (issue 20, item 3). Root and rootless; the link's target is the
caller's own, so only kiwi-run's refusal stands in the way."""
import os
import socket

import pytest

HOST_TEXT = "host file: must not change\n"


def _owned(oci, path, text=HOST_TEXT):
    path.write_text(text)
    os.chown(path, *oci.ids)
    return path


def _link(oci, link, target):
    os.symlink(target, link)
    os.lchown(link, *oci.ids)


@pytest.mark.parametrize("planted", ["pid.kiwi-tmp", "pid"])
def test_pid_file_is_not_written_through_a_link(oci, planted):
    """The pid file is written under NAME.kiwi-tmp and renamed: a link
    planted at that name must not be written through, and one at NAME
    itself is replaced, not followed."""
    target = _owned(oci, oci.work / "host-file")
    pidfile = oci.work / "pid"
    _link(oci, oci.work / planted, target)
    b = oci.bundle(oci.spec(["sleep", "1000"]))
    oci.cli("create", "--bundle", str(b), "--pid-file", str(pidfile), "hf1", check=True)
    try:
        assert target.read_text() == HOST_TEXT
        assert not pidfile.is_symlink() and int(pidfile.read_text()) == oci.state("hf1")["pid"]
    finally:
        oci.cli("delete", "--force", "hf1", check=True)


def test_log_through_a_planted_link_is_refused(oci):
    target = _owned(oci, oci.work / "host-file")
    log = oci.work / "log.json"
    _link(oci, log, target)
    r = oci.cli("--log", str(log), "state", "nosuch")
    assert r.returncode != 0 and "symbolic link" in r.stderr, r.stderr
    assert target.read_text() == HOST_TEXT


def test_log_control_a_plain_path_is_appended_to(oci):
    log = _owned(oci, oci.work / "log.json", "")
    r = oci.cli("--log", str(log), "state", "nosuch")
    assert r.returncode != 0
    assert "nosuch" in log.read_text()


def test_console_socket_through_a_planted_link_is_refused(oci):
    """connect(2) has no O_NOFOLLOW: a link to some other socket of the
    caller's must not receive the container's terminal."""
    sock_path = oci.work / "other.sock"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(sock_path))
    os.chown(sock_path, *oci.ids)
    srv.listen(1)
    srv.setblocking(False)
    link = oci.work / "console.sock"
    _link(oci, link, sock_path)
    cfg = oci.spec(["sleep", "1000"])
    cfg["process"]["terminal"] = True
    b = oci.bundle(cfg)
    try:
        r = oci.cli("create", "--bundle", str(b), "--console-socket", str(link), "hf3")
        assert r.returncode != 0 and "symbolic link" in r.stderr, r.stderr
        try:
            conn, _ = srv.accept()
            conn.close()
            raise AssertionError("kiwi-run connected through the planted link")
        except BlockingIOError:
            pass
    finally:
        srv.close()


def test_a_container_that_binds_the_seccomp_cache_does_not_use_it(oci):
    """A bind reaching the filter cache (kiwi-run-seccomp(5)) keeps the
    container from the cache; the control, without it, fills it."""
    profile = {"defaultAction": "SCMP_ACT_ALLOW",
               "syscalls": [{"names": ["mkdir"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]}
    for n, bind in enumerate((True, False)):
        cache = oci.work / f"cache{n}"
        cache.mkdir(mode=0o700)
        os.chown(cache, *oci.ids)
        cfg = oci.spec(["true"])
        cfg["linux"]["seccomp"] = profile
        if bind:
            cfg["mounts"].append({"destination": "/mnt", "type": "bind", "source": str(cache),
                                  "options": ["rbind", "rw"]})
        b = oci.bundle(cfg)
        env = dict(os.environ, KIWI_SECCOMP_CACHE_DIR=str(cache))
        oci.cli("create", "--bundle", str(b), f"sc{n}", check=True, env=env)
        oci.cli("delete", "--force", f"sc{n}", check=True)
        entries = [p for p in os.listdir(cache) if p.endswith(".bpf")]
        assert bool(entries) != bind, (bind, entries)
