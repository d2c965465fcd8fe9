# SPDX-License-Identifier: Apache-2.0
"""The command line: --version, --help, and every bad input failing with
exit 125, one line on stderr, and nothing left behind."""
import os
import re

import pytest

from conftest import explain

FAILURE_LINE = re.compile(r"kiwi-run: [^\n]+: [^\n]+\n")


def test_version(kiwi):
    r = kiwi.raw(["--version"])
    assert r.returncode == 0, explain(r)
    assert re.search(r"\b\d+\.\d+\.\d+\b", r.stdout), f"no version number: {explain(r)}"


def test_help(kiwi):
    r = kiwi.raw(["--help"])
    assert r.returncode == 0, explain(r)
    assert re.search(r"^\s+run\b", r.stdout, re.M), f"--help does not list `run`: {explain(r)}"


def test_run_help(kiwi):
    r = kiwi.raw(["run", "--help"])
    assert r.returncode == 0, explain(r)
    for flag in ("--rootfs", "--bind", "--env", "--verdict", "--preserve-fd", "--rw-root"):
        assert flag in r.stdout, f"--help does not mention {flag}: {explain(r)}"


def assert_failed_cleanly(res, mentions=None):
    """Exit 125, exactly one `kiwi-run: <step>: <reason>` line on stderr,
    nothing on stdout, no mount, /tmp entry or process left behind."""
    detail = (f"exit {res['returncode']}\n--- stdout\n{res['stdout']}\n"
              f"--- stderr\n{res['stderr']}")
    assert res["returncode"] == 125, detail
    assert FAILURE_LINE.fullmatch(res["stderr"]), f"not one `kiwi-run: step: reason` line: {detail}"
    assert res["stdout"] == "", detail
    if mentions:
        assert mentions in res["stderr"], f"the message does not name {mentions!r}: {detail}"
    assert res["mounts_added"] == [], f"mounts left behind: {res['mounts_added']}"
    assert res["mounts_removed"] == [], f"host mounts gone: {res['mounts_removed']}"
    assert res["tmp_entries"] == [], f"left in /tmp: {res['tmp_entries']}"
    assert res["processes"] == [], f"processes left behind: {res['processes']}"


def run_args(kiwi, cmd=("true",), opts=(), rootfs=None):
    return ["run", "--rootfs", rootfs or kiwi.rootfs, *opts, "--", *cmd]


def test_missing_rootfs(kiwi):
    missing = kiwi.scratch / "no-such-rootfs"
    assert_failed_cleanly(kiwi.leftovers(run_args(kiwi, rootfs=missing)), mentions=str(missing))


def test_rootfs_is_a_file(kiwi):
    f = kiwi.workdir() / "a-file"
    f.write_text("not a directory\n")
    assert_failed_cleanly(kiwi.leftovers(run_args(kiwi, rootfs=f)), mentions=str(f))


def test_rootfs_the_caller_cannot_read(kiwi):
    """A rootfs only root may enter: root runs it, an unprivileged caller
    gets exit 125 and nothing left behind."""
    root = kiwi.rootfs_copy()
    os.chown(root, 0, 0)
    root.chmod(0o700)
    res = kiwi.leftovers(run_args(kiwi, rootfs=root, cmd=["true"]))
    if kiwi.mode == "root":
        assert res["returncode"] == 0, res
    else:
        assert_failed_cleanly(res)


def test_unknown_flag(kiwi):
    args = ["run", "--rootfs", kiwi.rootfs, "--no-such-flag", "--", "true"]
    assert_failed_cleanly(kiwi.leftovers(args), mentions="--no-such-flag")


def test_unknown_subcommand(kiwi):
    assert_failed_cleanly(kiwi.leftovers(["no-such-command", "--rootfs", kiwi.rootfs]))


def test_no_command_after_dashdash(kiwi):
    assert_failed_cleanly(kiwi.leftovers(["run", "--rootfs", kiwi.rootfs, "--"]))


def test_no_command_at_all(kiwi):
    assert_failed_cleanly(kiwi.leftovers(["run", "--rootfs", kiwi.rootfs]))


def test_no_rootfs_flag(kiwi):
    assert_failed_cleanly(kiwi.leftovers(["run", "--", "true"]))


def test_bind_source_missing(kiwi):
    missing = kiwi.scratch / "no-such-source"
    opts = ["--bind", f"{missing}:/workspace"]
    assert_failed_cleanly(kiwi.leftovers(run_args(kiwi, opts=opts)), mentions=str(missing))


def test_bind_without_destination(kiwi):
    src = kiwi.workdir()
    assert_failed_cleanly(kiwi.leftovers(run_args(kiwi, opts=["--bind", str(src)])))


def test_env_without_equals(kiwi):
    assert_failed_cleanly(kiwi.leftovers(run_args(kiwi, opts=["--env", "NOEQUALS"])))


def test_verdict_in_missing_directory(kiwi):
    missing_dir = kiwi.workdir() / "missing"
    verdict = missing_dir / "verdict.json"
    res = kiwi.leftovers(run_args(kiwi, opts=["--verdict", verdict]))
    assert_failed_cleanly(res, mentions=str(verdict))
    assert not missing_dir.exists(), "kiwi-run created the verdict's missing directory"


def test_hostname_too_long(kiwi):
    opts = ["--hostname", "h" * 100]
    assert_failed_cleanly(kiwi.leftovers(run_args(kiwi, opts=opts)))


def test_preserve_fd_not_open(kiwi):
    assert_failed_cleanly(kiwi.leftovers(run_args(kiwi, opts=["--preserve-fd", "97"])))


def test_verdict_fd_not_open(kiwi):
    assert_failed_cleanly(kiwi.leftovers(run_args(kiwi, opts=["--verdict-fd", "97"])))


def test_bind_relative_destination(kiwi):
    src = kiwi.workdir()
    assert_failed_cleanly(kiwi.leftovers(run_args(kiwi, opts=["--bind", f"{src}:workspace"])))


@pytest.fixture
def escape_setup(kiwi):
    """A rootfs copy whose symlinks point at a host directory `outside`
    (holding a marker), and a bind source with a file of its own."""
    outside = kiwi.workdir()
    (outside / "sub").mkdir()
    (outside / "marker").write_text("host\n")
    kiwi.chown(outside)
    root = kiwi.rootfs_copy()
    (root / "escape-abs").symlink_to(outside)
    (root / "escape-rel").symlink_to("../" * 12 + str(outside).lstrip("/"))
    (root / "inner-link").symlink_to("/workspace")
    (root / "workspace" / "link-up").symlink_to("../../../../../../" + str(outside).lstrip("/"))
    for name in ("escape-abs", "escape-rel", "inner-link", "workspace/link-up"):
        os.lchown(root / name, kiwi.uid, kiwi.gid)
    src = kiwi.workdir()
    (src / "from-source").write_text("source\n")
    kiwi.chown(src)
    return root, outside, src


@pytest.mark.parametrize("dest", [
    "/escape-abs",            # absolute symlink to a host directory
    "/escape-rel",            # relative symlink climbing out
    "/escape-abs/sub",        # through a symlinked directory
    "/workspace/link-up",     # a symlink deeper down
    "/workspace/link-up/sub",
    "/inner-link",            # a symlink that stays inside is refused too
])
def test_bind_destination_through_symlink_refused(kiwi, escape_setup, dest):
    root, outside, src = escape_setup
    before = sorted(p.name for p in outside.iterdir())
    res = kiwi.leftovers(run_args(kiwi, rootfs=root, opts=["--bind", f"{src}:{dest}"],
                                  cmd=["kiwi-probe", "ls", dest]))
    assert_failed_cleanly(res)
    assert sorted(p.name for p in outside.iterdir()) == before
    assert (outside / "marker").read_text() == "host\n"


@pytest.mark.parametrize("dest", ["/escape-abs", "/escape-rel"])
def test_bind_destination_symlink_not_followed_ro(kiwi, escape_setup, dest):
    root, _, src = escape_setup
    res = kiwi.leftovers(run_args(kiwi, rootfs=root, opts=["--bind", f"{src}:{dest}:ro"]))
    assert_failed_cleanly(res)


def test_bind_to_plain_directory_of_same_rootfs_works(kiwi, escape_setup):
    """The control for the refusals above: a bind beside those symlinks works."""
    root, _, src = escape_setup
    r = kiwi.run(["cat", "/workspace/from-source"], rootfs=root,
                 opts=["--bind", f"{src}:/workspace"])
    assert r.returncode == 0, explain(r)
    assert r.stdout == "source\n"


def test_success_leaves_nothing_behind(kiwi):
    res = kiwi.leftovers(run_args(kiwi, cmd=["kiwi-probe", "exit", "0"]))
    assert res["returncode"] == 0, res
    assert res["mounts_added"] == [] and res["mounts_removed"] == [], res
    assert res["tmp_entries"] == [], res
    assert res["processes"] == [], res


def test_command_missing_from_rootfs_is_127(kiwi):
    res = kiwi.leftovers(run_args(kiwi, cmd=["/usr/bin/no-such-program"]))
    assert res["returncode"] == 127, res
    assert res["mounts_added"] == [] and res["tmp_entries"] == [] and res["processes"] == [], res


def test_bind_destination_dotdot_stays_inside(kiwi, escape_setup):
    """`..` in DST cannot climb out of the rootfs: either refused, or the
    bind lands inside the sandbox; the host directory is never touched."""
    root, outside, src = escape_setup
    dest = "/workspace/../../../../.." + str(outside)
    res = kiwi.leftovers(run_args(kiwi, rootfs=root, opts=["--bind", f"{src}:{dest}"],
                                  cmd=["/bin/sh", "-c", f"ls {dest}; cat {dest}/marker"]))
    if res["returncode"] != 125:
        assert res["returncode"] == 1, f"the host marker was readable inside: {res}"
        assert res["stdout"] == "from-source\n", res
    assert sorted(p.name for p in outside.iterdir()) == ["marker", "sub"]
    assert res["mounts_added"] == [] and res["processes"] == [], res
