# SPDX-License-Identifier: Apache-2.0
"""Files kiwi-run writes on its caller's behalf are never written through a
link a sandbox planted (issue 20, item 3). Orchestrators keep verdicts and
logs beside the workspace; an install phase that can write there plants
`verdict.json -> /some/host/file`, and a later run (as root, say) would
write the sandbox's chosen text there. Root and rootless: the planted
link's target is a file the caller could write, so only kiwi-run's refusal
stands in the way.

Each planted name must be refused with exit 125 and one line on stderr,
the target left as it was; the controls show the same flags work on
plain paths."""
import os
import subprocess

import pytest

from conftest import explain

HOST_TEXT = "host file: must not change\n"
FLAGS = ["--verdict", "--stdout", "--stderr"]


def _target(kiwi, d, name="host-file"):
    """A file the caller owns (so a write through the link would work)."""
    t = d / name
    t.write_text(HOST_TEXT)
    os.chown(t, kiwi.uid, kiwi.gid)
    return t


def _refused(r, what):
    assert r.returncode == 125, explain(r)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kiwi-run: "), explain(r)
    assert what in lines[0], explain(r)


@pytest.mark.parametrize("flag", FLAGS)
def test_a_planted_symlink_is_not_followed(kiwi, flag):
    d = kiwi.workdir()
    target = _target(kiwi, d)
    link = d / "planted"
    os.symlink(target, link)
    os.lchown(link, kiwi.uid, kiwi.gid)
    r = kiwi.run(["/bin/echo", "PWNED"], [flag, link])
    _refused(r, "symbolic link")
    assert target.read_text() == HOST_TEXT
    assert os.path.islink(link)


@pytest.mark.parametrize("flag", FLAGS)
def test_a_dangling_symlink_creates_nothing(kiwi, flag):
    """A link to a file that does not exist yet (a cron.d name, say):
    following it would create the file."""
    d = kiwi.workdir()
    link = d / "planted"
    os.symlink(d / "would-be-created", link)
    os.lchown(link, kiwi.uid, kiwi.gid)
    r = kiwi.run(["/bin/echo", "PWNED"], [flag, link])
    _refused(r, "symbolic link")
    assert not (d / "would-be-created").exists()


@pytest.mark.parametrize("flag", FLAGS)
def test_a_planted_hard_link_is_not_written(kiwi, flag):
    """A hard link to a host file the sandbox can see: one inode, two
    names, and writing the planted one would write the other."""
    d = kiwi.workdir()
    target = _target(kiwi, d)
    link = d / "planted"
    os.link(target, link)
    r = kiwi.run(["/bin/echo", "PWNED"], [flag, link])
    _refused(r, "hard link")
    assert target.read_text() == HOST_TEXT


def test_a_file_of_another_owner_is_not_written(kiwi, test_user):
    """Root writes over no file but root's own: a name in a shared
    directory may be someone else's (the other way round the kernel
    refuses anyway)."""
    if kiwi.mode != "root" or isinstance(test_user, str):
        pytest.skip("needs root and the test user")
    d = kiwi.workdir()
    other = d / "theirs.json"
    other.write_text(HOST_TEXT)
    os.chown(other, *test_user)
    r = kiwi.run(["/bin/true"], ["--verdict", other])
    _refused(r, "belongs to uid")
    assert other.read_text() == HOST_TEXT


@pytest.mark.parametrize("flag", FLAGS)
def test_control_a_plain_path_is_written_and_truncated(kiwi, flag):
    d = kiwi.workdir()
    out = _target(kiwi, d, "out")
    cmd = ["/bin/sh", "-c", "echo fresh; echo fresh >&2"]
    r = kiwi.run(cmd, [flag, out])
    assert r.returncode == 0, explain(r)
    text = out.read_text()
    assert HOST_TEXT not in text  # truncated, then written
    assert ("fresh" in text) if flag != "--verdict" else text.startswith("{")


@pytest.mark.parametrize("name", ["/dev/fd/3", "/proc/self/fd/3"])
def test_control_a_name_of_an_fd_we_hold_is_followed(kiwi, name):
    """`--verdict >(jq .)` names /dev/fd/N: the host's own link to a pipe
    kiwi-run already holds, which no sandbox can plant. The pipe is made
    by a shell of the caller's (another user's pipe cannot be opened
    again through /proc, by the kernel's rule)."""
    run = kiwi.argv(["/bin/true"], ["--verdict", name])[len(kiwi.prefix):]
    argv = [*kiwi.prefix, "/bin/sh", "-c", '"$@" 3>&1 >/dev/null | cat', "sh", *run]
    r = subprocess.run(argv, capture_output=True, text=True, env=kiwi.env(), stdin=subprocess.DEVNULL,
                       timeout=60)
    assert r.returncode == 0, explain(r)
    assert r.stdout.startswith('{"version"'), explain(r)


@pytest.mark.parametrize("flag", FLAGS)
def test_a_planted_fifo_does_not_hold_kiwi_run(kiwi, flag):
    """A FIFO where the verdict goes, with nothing to read it: opening it
    for writing would block kiwi-run for good (the orchestrator waits on
    a run that never ends)."""
    d = kiwi.workdir()
    fifo = d / "planted"
    os.mkfifo(fifo)
    os.chown(fifo, kiwi.uid, kiwi.gid)
    r = kiwi.run(["/bin/echo", "PWNED"], [flag, fifo])
    _refused(r, "FIFO")


def test_control_a_fifo_with_a_reader_gets_the_verdict(kiwi):
    d = kiwi.workdir()
    fifo = d / "read"
    os.mkfifo(fifo)
    os.chown(fifo, kiwi.uid, kiwi.gid)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # open before kiwi-run's writer comes
    try:
        r = kiwi.run(["/bin/true"], ["--verdict", fifo])
        assert r.returncode == 0, explain(r)
        assert os.read(reader, 65536).startswith(b'{"version"')
    finally:
        os.close(reader)


def test_control_dev_null_is_taken_as_it_is(kiwi):
    r = kiwi.run(["/bin/echo", "gone"], ["--stdout", "/dev/null"])
    assert r.returncode == 0 and r.stdout == "", explain(r)


def test_egress_audit_through_a_planted_symlink(kiwi, scratch):
    """--egress-audit (root only) appends: a dangling link would create
    the file it names. kiwi-run runs in a network namespace of the test's
    own, so nothing it sets up touches the host's network."""
    if kiwi.mode != "root":
        pytest.skip("--egress-audit needs root")
    d = kiwi.workdir()
    link = d / "audit.jsonl"
    os.symlink(d / "would-be-created", link)
    argv = ["unshare", "--net", *kiwi.argv(["/bin/true"], ["--network", "egress", "--egress-audit", link])]
    r = subprocess.run(argv, capture_output=True, text=True, env=kiwi.env(), stdin=subprocess.DEVNULL,
                       timeout=60)
    _refused(r, "symbolic link")
    assert not (d / "would-be-created").exists()
