# SPDX-License-Identifier: Apache-2.0
"""runtime-spec config-linux.md "Namespaces": new ones, absent ones (shared
with the runtime), and joining one by path."""
import os
import subprocess

import pytest

from oci import control


def host_ns(name):
    return os.readlink(f"/proc/self/ns/{name}")


def test_new_namespaces(rt, bundle):
    r = rt.run(bundle.args("report", "cat=/proc/net/dev"))
    assert r.rc == 0, r
    rep = r.report()
    for ns in ("pid", "net", "ipc", "uts", "mnt"):
        assert rep["ns"][ns] != host_ns(ns), ns
    assert rep["pid"] == 1
    devs = [line.split(":")[0].strip() for line in r.step("cat")["data"].splitlines()[2:]]
    assert devs == ["lo"]


def test_pid_namespace_sees_only_itself(rt, bundle):
    r = rt.run(bundle.args("report", "stat=/proc/2"))
    assert r.rc == 0, r
    assert not r.step("stat")["ok"]


def test_absent_namespace_is_shared(rt, bundle):
    bundle.linux["namespaces"] = [n for n in bundle.linux["namespaces"]
                                  if n["type"] not in ("network", "ipc")]
    r = rt.run(bundle.args("report"))
    assert r.rc == 0, r
    rep = r.report()
    assert rep["ns"]["net"] == host_ns("net")
    assert rep["ns"]["ipc"] == host_ns("ipc")
    assert rep["ns"]["mnt"] != host_ns("mnt")


@pytest.fixture
def holder():
    """A process in fresh net and ipc namespaces whose paths a container joins."""
    p = subprocess.Popen(["unshare", "--net", "--ipc", "sleep", "1000"])
    try:
        for _ in range(1000):
            if os.readlink(f"/proc/{p.pid}/ns/net") != host_ns("net"):
                break
            os.sched_yield()
        yield p.pid
    finally:
        p.kill()
        p.wait()


def test_join_namespace_by_path(rt, bundle, holder):
    for n in bundle.linux["namespaces"]:
        if n["type"] in ("network", "ipc"):
            n["path"] = f"/proc/{holder}/ns/{'net' if n['type'] == 'network' else 'ipc'}"
    r = rt.run(bundle.args("report"))
    assert r.rc == 0, r
    rep = r.report()
    assert rep["ns"]["net"] == os.readlink(f"/proc/{holder}/ns/net")
    assert rep["ns"]["ipc"] == os.readlink(f"/proc/{holder}/ns/ipc")
    assert rep["ns"]["uts"] != host_ns("uts")


def test_join_missing_path_refused(rt, bundle, tmp_path):
    control(rt, bundle.args("report"))
    for n in bundle.linux["namespaces"]:
        if n["type"] == "network":
            n["path"] = str(tmp_path / "no-such-netns")
    r = rt.run(bundle.args("report"))
    assert r.rc != 0 and r.err.strip(), r


def test_join_wrong_type_refused(rt, bundle):
    control(rt, bundle.args("report"))
    """A uts namespace file given as the network namespace is refused."""
    for n in bundle.linux["namespaces"]:
        if n["type"] == "network":
            n["path"] = "/proc/self/ns/uts"
    r = rt.run(bundle.args("report"))
    assert r.rc != 0, r


@pytest.mark.vm
@pytest.mark.skipif(not os.path.exists("/sys/fs/cgroup/cgroup.controllers"),
                    reason="needs the cgroup v2 VM lane")
def test_cgroup_namespace(rt, bundle):
    bundle.linux["namespaces"].append({"type": "cgroup"})
    r = rt.run(bundle.args("report"))
    assert r.rc == 0, r
    rep = r.report()
    assert rep["ns"]["cgroup"] != host_ns("cgroup")
    assert rep["cgroup"].strip() == "0::/"


def test_user_namespace_mapping(rt, bundle):
    """runtime-spec config-linux.md "User namespace mappings"."""
    bundle.linux["namespaces"].append({"type": "user"})
    bundle.linux["uidMappings"] = [{"containerID": 0, "hostID": 200000, "size": 65536}]
    bundle.linux["gidMappings"] = [{"containerID": 0, "hostID": 300000, "size": 65536}]
    bundle.process["user"] = {"uid": 0, "gid": 0}
    r = rt.run(bundle.args("report", "stat=/usr/local/bin/oci-probe"))
    assert r.rc == 0, r
    rep = r.report()
    assert rep["uid_map"].split() == ["0", "200000", "65536"]
    assert rep["gid_map"].split() == ["0", "300000", "65536"]
    assert rep["ns"]["user"] != host_ns("user")
    assert (rep["uid"], rep["gid"]) == (0, 0)
    # Host root's files are unmapped inside: they show as the overflow ids.
    st = r.step("stat")
    assert (st["uid"], st["gid"]) == (65534, 65534)


def test_user_namespace_seen_from_host(rt, bundle):
    bundle.linux["namespaces"].append({"type": "user"})
    bundle.linux["uidMappings"] = [{"containerID": 0, "hostID": 200000, "size": 1000}]
    bundle.linux["gidMappings"] = [{"containerID": 0, "hostID": 200000, "size": 1000}]
    bundle.process["user"] = {"uid": 5, "gid": 6}
    bundle.args("wait-signal")
    cid = rt.new_id()
    r = rt.create(cid, bundle)
    assert r.rc == 0, r
    pid = rt.state(cid)["pid"]
    assert rt.cmd("start", cid).rc == 0
    from oci import wait_for_file_text
    assert wait_for_file_text(bundle.path / "out", '"ready"')
    status = open(f"/proc/{pid}/status").read()
    uids = next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1:]
    gids = next(line for line in status.splitlines() if line.startswith("Gid:")).split()[1:]
    assert uids == ["200005"] * 4
    assert gids == ["200006"] * 4


def _without_ns(bundle, kind):
    bundle.linux["namespaces"] = [n for n in bundle.linux["namespaces"] if n["type"] != kind]


def test_sysctl_in_its_namespace(rt, bundle):
    """net.* needs the container's network namespace, kernel.shm*/msg*/sem and
    fs.mqueue.* its ipc namespace; set there, the container sees them."""
    bundle.linux["sysctl"] = {"net.ipv4.ip_forward": "1", "kernel.shmmni": "1234",
                              "fs.mqueue.msg_max": "17"}
    r = rt.run(bundle.args("cat=/proc/sys/net/ipv4/ip_forward", "cat=/proc/sys/kernel/shmmni",
                           "cat=/proc/sys/fs/mqueue/msg_max"))
    assert r.rc == 0, r
    assert [d["data"].strip() for d in r.lines if d.get("step") == "cat"] == ["1", "1234", "17"]


@pytest.mark.parametrize("key, ns", [("net.ipv4.ip_forward", "network"),
                                     ("kernel.shmmax", "ipc"), ("fs.mqueue.msg_max", "ipc")])
def test_sysctl_without_its_namespace_refused(rt, bundle, key, ns):
    """A namespaced sysctl where the container shares the host's namespace
    would change the host: refused."""
    _without_ns(bundle, ns)
    control(rt, bundle)
    # The host's own value: a runtime that wrongly accepts it changes nothing.
    with open("/proc/sys/" + key.replace(".", "/")) as f:
        bundle.linux["sysctl"] = {key: f.read().strip()}
    r = rt.run(bundle.args("report"))
    assert r.rc != 0 and not r.lines, r


def test_sysctl_hostname_refused(rt, bundle):
    """kernel.hostname conflicts with config.json's hostname: refused."""
    control(rt, bundle)
    bundle.linux["sysctl"] = {"kernel.hostname": bundle.config["hostname"]}
    r = rt.run(bundle.args("report"))
    assert r.rc != 0 and not r.lines, r
