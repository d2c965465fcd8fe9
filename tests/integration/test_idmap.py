# SPDX-License-Identifier: Apache-2.0
"""--uidmap, --gidmap and --user (issue 8): the maps the kernel shows
inside, who owns on the host what the sandbox writes, and every bad value
refused with exit 125, one line, nothing left behind. Root writes any
map; a caller that is not root writes its own ids alone (any other map
goes through kiwi-helper: tests/helper/test_run_idmap.py)."""
import os
import subprocess

import pytest

from conftest import explain
from test_cli import assert_failed_cleanly, run_args

MAP = ["--uidmap", "0:100000:65536", "--gidmap", "0:100000:65536"]
MAP_TEXT = "0 100000 65536"


@pytest.fixture
def root_kiwi(kiwi):
    if kiwi.mode != "root":
        pytest.skip("writing a map of other ids needs root (rootless: tests/helper)")
    return kiwi


def owned_dir(kiwi, uid, gid):
    """A host directory only the given host ids may write."""
    d = kiwi.workdir()
    os.chown(d, uid, gid)
    d.chmod(0o755)
    return d


def map_lines(text):
    return [line.split() for line in text.strip().splitlines()]


def test_without_flags_rootless_maps_itself_and_host_root_map_0_to_0(kiwi):
    """Root's default is kiwi's range (test_root_map.py); --host-root-map
    asks for 0 0 1."""
    opts = ["--host-root-map"] if kiwi.mode == "root" else []
    r = kiwi.sh("cat /proc/self/uid_map /proc/self/gid_map; cat /proc/self/setgroups", opts=opts)
    assert r.returncode == 0, explain(r)
    own_uid, own_gid = (0, 0) if kiwi.mode == "root" else (kiwi.uid, kiwi.gid)
    assert r.stdout.split() == ["0", str(own_uid), "1", "0", str(own_gid), "1", "deny"], explain(r)


def test_the_maps_inside_are_the_ones_given(root_kiwi):
    r = root_kiwi.sh("cat /proc/self/uid_map; echo --; cat /proc/self/gid_map; id -u; id -g",
                     opts=["--uidmap", "0:100000:65536", "--gidmap", "0:200000:1000",
                           "--gidmap", "1000:300000:1"])
    assert r.returncode == 0, explain(r)
    uid_map, rest = r.stdout.split("--\n")
    assert map_lines(uid_map) == [["0", "100000", "65536"]], explain(r)
    lines = rest.strip().splitlines()
    assert [l.split() for l in lines[:2]] == [["0", "200000", "1000"], ["1000", "300000", "1"]], explain(r)
    assert lines[2:] == ["0", "0"], explain(r)


def test_one_map_alone_stands_for_both(root_kiwi):
    r = root_kiwi.sh("cat /proc/self/gid_map", opts=["--uidmap", "0:100000:65536"])
    assert r.returncode == 0, explain(r)
    assert map_lines(r.stdout) == [MAP_TEXT.split()], explain(r)


def test_a_file_written_by_root_inside_is_owned_by_the_mapped_id(root_kiwi):
    d = owned_dir(root_kiwi, 100000, 100000)
    r = root_kiwi.sh("echo hi > /workspace/made", opts=[*MAP, "--bind", f"{d}:/workspace"])
    assert r.returncode == 0, explain(r)
    st = os.stat(d / "made")
    assert (st.st_uid, st.st_gid) == (100000, 100000)


def test_host_root_owned_dir_is_not_writable_by_mapped_root(root_kiwi):
    """Root inside is not root outside: a host directory of root's (0755)
    stays closed to it."""
    d = owned_dir(root_kiwi, 0, 0)
    r = root_kiwi.sh("echo x > /workspace/made", opts=[*MAP, "--bind", f"{d}:/workspace"])
    assert r.returncode != 0, explain(r)
    assert "denied" in r.stderr.lower(), explain(r)
    assert not (d / "made").exists()


def test_host_supplementary_groups_are_dropped(root_kiwi):
    """Root's host groups (gid 0) would still open group-writable files of
    the host: pid 1 drops them, so the sandbox holds none."""
    d = owned_dir(root_kiwi, 0, 0)
    d.chmod(0o775)   # writable by host group 0
    argv = root_kiwi.argv(["/bin/sh", "-c", "grep '^Groups:' /proc/self/status; echo x > /workspace/made"],
                          [*MAP, "--bind", f"{d}:/workspace"])
    # kiwi-run holding supplementary group 0, as root's login shell does
    r = subprocess.run(["setpriv", "--groups", "0", *argv], capture_output=True, text=True,
                       env=root_kiwi.env(), timeout=60, stdin=subprocess.DEVNULL)
    assert r.stdout.split() == ["Groups:"], explain(r)
    assert r.returncode != 0 and not (d / "made").exists(), explain(r)


def test_user_runs_the_command_as_those_ids(root_kiwi):
    d = owned_dir(root_kiwi, 101000, 101000)
    r = root_kiwi.sh("id -u; id -g; touch /workspace/made; grep -E '^Cap(Prm|Eff|Bnd)' /proc/self/status",
                     opts=[*MAP, "--user", "1000:1000", "--bind", f"{d}:/workspace"])
    assert r.returncode == 0, explain(r)
    lines = r.stdout.splitlines()
    assert lines[:2] == ["1000", "1000"], explain(r)
    assert [l.split()[1] for l in lines[2:]] == ["0000000000000000"] * 3, explain(r)
    st = os.stat(d / "made")
    assert (st.st_uid, st.st_gid) == (101000, 101000)


def test_user_without_gid_gets_gid_0(root_kiwi):
    r = root_kiwi.sh("id -u; id -g", opts=[*MAP, "--user", "1000"])
    assert r.returncode == 0, explain(r)
    assert r.stdout.split() == ["1000", "0"], explain(r)


def test_rootless_own_ids_elsewhere_need_no_helper(kiwi):
    """Its own uid and gid, at any inside id: a caller that is not root
    writes that map itself (no helper is installed in this suite)."""
    uid, gid = (0, 0) if kiwi.mode == "root" else (kiwi.uid, kiwi.gid)
    r = kiwi.sh("cat /proc/self/uid_map /proc/self/gid_map; id -u; id -g",
                opts=["--uidmap", f"1000:{uid}:1", "--gidmap", f"1000:{gid}:1", "--user", "1000:1000"])
    assert r.returncode == 0, explain(r)
    assert r.stdout.split() == ["1000", str(uid), "1", "1000", str(gid), "1", "1000", "1000"], explain(r)


@pytest.mark.parametrize("opts,mentions", [
    (["--uidmap", "0:100000:65536", "--user", "70000"], "uid 70000 is not mapped"),
    (["--uidmap", "0:100000:10", "--gidmap", "0:100000:10", "--user", "5:10"], "gid 10 is not mapped"),
    (["--user", "70000"], "uid 70000 is not mapped"),
])
def test_unmapped_user_is_refused_before_clone(kiwi, opts, mentions):
    assert_failed_cleanly(kiwi.leftovers(run_args(kiwi, opts=opts)), mentions=mentions)


@pytest.mark.parametrize("flag,value,mentions", [
    ("--uidmap", "0:100000", "INSIDE:OUTSIDE:COUNT"),
    ("--uidmap", "0:100000:65536:1", "INSIDE:OUTSIDE:COUNT"),
    ("--uidmap", "a:100000:1", "INSIDE:OUTSIDE:COUNT"),
    ("--uidmap", "-1:100000:1", "INSIDE:OUTSIDE:COUNT"),
    ("--uidmap", " 0:100000:1", "INSIDE:OUTSIDE:COUNT"),
    ("--gidmap", "0:100000:0", "at least 1"),
    ("--uidmap", "0:4294967295:1", "past the last id"),
    ("--uidmap", "4294967000:0:1000", "past the last id"),
    ("--gidmap", "0:99999999999:1", "INSIDE:OUTSIDE:COUNT"),
    ("--user", "1000:", "UID[:GID]"),
    ("--user", "root", "UID[:GID]"),
    ("--user", "4294967295", "not an id"),
])
def test_malformed_value_is_refused(kiwi, flag, value, mentions):
    res = kiwi.leftovers(run_args(kiwi, opts=[flag, value]))
    assert_failed_cleanly(res, mentions=mentions)
    assert flag in res["stderr"], res["stderr"]


@pytest.mark.parametrize("maps,mentions", [
    (["0:100000:10", "5:200000:10"], "overlaps inside ids 0..9"),
    (["0:100000:10", "10:100005:10"], "overlaps outside ids 100000..100009"),
    (["0:1:1", "1:2:1", "2:3:1", "3:4:1", "4:5:1", "5:6:1"], "at most 5 extents"),
])
def test_overlapping_or_too_many_extents_are_refused(kiwi, maps, mentions):
    opts = [x for m in maps for x in ("--gidmap", m)]
    res = kiwi.leftovers(run_args(kiwi, opts=opts))
    assert_failed_cleanly(res, mentions=mentions)
    assert "--gidmap" in res["stderr"], res["stderr"]
