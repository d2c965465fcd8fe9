# SPDX-License-Identifier: Apache-2.0
"""runtime-spec config.md "Linux process" capabilities: the five sets."""
from oci import caps_of


def test_default_caps(rt, bundle):
    r = rt.run(bundle.args("report"))
    assert r.rc == 0, r
    st = r.report()["status"]
    want = {"CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"}
    assert caps_of(st["CapBnd"]) == want
    assert caps_of(st["CapEff"]) == want
    assert caps_of(st["CapPrm"]) == want
    assert caps_of(st["CapInh"]) == set()
    assert caps_of(st["CapAmb"]) == set()


def test_no_caps(rt, bundle):
    bundle.process["capabilities"] = {k: [] for k in ("bounding", "effective", "permitted",
                                                      "inheritable", "ambient")}
    r = rt.run(bundle.args("report", "write=/proc/sys/kernel/hostname"))
    assert r.rc == 0, r
    st = r.report()["status"]
    for s in ("CapBnd", "CapEff", "CapPrm", "CapInh", "CapAmb"):
        assert caps_of(st[s]) == set(), s


def test_sets_are_separate(rt, bundle):
    bundle.process["capabilities"] = {
        "bounding": ["CAP_CHOWN", "CAP_KILL", "CAP_SYS_ADMIN"],
        "permitted": ["CAP_CHOWN", "CAP_KILL"],
        "effective": ["CAP_CHOWN", "CAP_KILL"],
        "inheritable": ["CAP_CHOWN"],
    }
    r = rt.run(bundle.args("report"))
    assert r.rc == 0, r
    st = r.report()["status"]
    assert caps_of(st["CapBnd"]) == {"CAP_CHOWN", "CAP_KILL", "CAP_SYS_ADMIN"}
    assert caps_of(st["CapPrm"]) == {"CAP_CHOWN", "CAP_KILL"}
    # uid 0: execve makes effective = permitted (capabilities(7)).
    assert caps_of(st["CapEff"]) == {"CAP_CHOWN", "CAP_KILL"}
    assert caps_of(st["CapInh"]) == {"CAP_CHOWN"}
    assert caps_of(st["CapAmb"]) == set()


def test_ambient_for_non_root(rt, bundle):
    """A non-root process keeps a capability only through the ambient set."""
    bundle.process["user"] = {"uid": 1000, "gid": 1000}
    bundle.process["noNewPrivileges"] = False
    bundle.process["capabilities"] = {k: ["CAP_NET_BIND_SERVICE"] for k in (
        "bounding", "effective", "permitted", "inheritable", "ambient")}
    r = rt.run(bundle.args("report"))
    assert r.rc == 0, r
    st = r.report()["status"]
    assert caps_of(st["CapAmb"]) == {"CAP_NET_BIND_SERVICE"}
    assert caps_of(st["CapEff"]) == {"CAP_NET_BIND_SERVICE"}


def test_non_root_without_ambient_has_none_effective(rt, bundle):
    bundle.process["user"] = {"uid": 1000, "gid": 1000}
    r = rt.run(bundle.args("report"))
    assert r.rc == 0, r
    st = r.report()["status"]
    assert caps_of(st["CapEff"]) == set()
    assert caps_of(st["CapBnd"]) == {"CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"}


def test_unknown_capability_skipped(rt, bundle):
    """A name this kernel does not know (a config written for a newer one)
    is skipped, as runc does; the known ones still apply."""
    for s in ("bounding", "effective", "permitted"):
        bundle.process["capabilities"][s].append("CAP_KIWI_NOT_A_CAPABILITY")
    r = rt.run(bundle.args("report"))
    assert r.rc == 0, r
    want = {"CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"}
    assert caps_of(r.report()["status"]["CapEff"]) == want


def test_exec_cap_adds_capability(rt, bundle):
    """exec --cap adds a capability to the exec'd process (what an unknown
    name does differs: runc and crun ignore it, kiwi-run refuses it, see
    tests/oci/kiwi)."""
    from test_lifecycle import waiting
    cid, _ = waiting(rt, bundle)
    r = rt.cmd("exec", "--cap", "CAP_SYS_ADMIN", cid, "/usr/local/bin/oci-probe", "report")
    assert r.rc == 0, r
    st = r.report()["status"]
    assert "CAP_SYS_ADMIN" in caps_of(st["CapEff"]) and "CAP_SYS_ADMIN" in caps_of(st["CapBnd"])
