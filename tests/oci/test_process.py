# SPDX-License-Identifier: Apache-2.0
"""runtime-spec config.md "Process": args, env, cwd, user (uid, gid, umask,
additionalGids), noNewPrivileges, oomScoreAdj; and "Hostname"."""
from oci import control


def test_args(rt, bundle):
    r = rt.run(bundle.args("exit=0"))
    assert r.rc == 0, r
    r = rt.run(bundle.args("report", "exit=3"))
    assert r.rc == 3 and r.report()["pid"] == 1, r


def test_env_exact(rt, bundle):
    bundle.process["env"] = ["PATH=/bin", "A=1", "B=two words", "EMPTY="]
    r = rt.run(bundle.args("report"))
    assert r.rc == 0, r
    env = r.report()["env"]
    for want in ("PATH=/bin", "A=1", "B=two words", "EMPTY="):
        assert want in env
    # A runtime may add HOME (runc and crun do); nothing of the caller's.
    extra = set(env) - {"PATH=/bin", "A=1", "B=two words", "EMPTY="}
    assert all(e.startswith("HOME=") for e in extra), env


def test_cwd(rt, bundle):
    bundle.process["cwd"] = "/dev/shm"
    r = rt.run(bundle.args("report"))
    assert r.rc == 0, r
    assert r.report()["cwd"] == "/dev/shm"


def test_cwd_created_when_missing(rt, bundle):
    """A working directory the rootfs lacks is made (here on the
    container's own /tmp, so the shared rootfs stays as it is)."""
    bundle.process["cwd"] = "/tmp/not/yet"
    r = rt.run(bundle.args("report", "stat=/tmp/not/yet"))
    assert r.rc == 0, r
    assert r.report()["cwd"] == "/tmp/not/yet"


def test_home_from_passwd(rt, bundle):
    """Without HOME in process.env, HOME is the user's home in the
    container's /etc/passwd, for the init and for exec."""
    bundle.process["user"] = {"uid": 65534, "gid": 65534}
    r = rt.run(bundle.args("report"))
    assert r.rc == 0, r
    assert "HOME=/nonexistent" in r.report()["env"], r.report()["env"]
    from test_lifecycle import waiting
    bundle.process["user"] = {"uid": 0, "gid": 0}
    cid, _ = waiting(rt, bundle)
    r = rt.cmd("exec", "--user", "65534:65534", cid, "/usr/local/bin/oci-probe", "report")
    assert r.rc == 0, r
    assert "HOME=/nonexistent" in r.report()["env"], r.report()["env"]
    r = rt.cmd("exec", cid, "/usr/local/bin/oci-probe", "report")
    assert r.rc == 0, r
    assert "HOME=/root" in r.report()["env"], r.report()["env"]


def test_user_uid_gid(rt, bundle):
    bundle.process["user"] = {"uid": 1234, "gid": 5678}
    r = rt.run(bundle.args("report"))
    assert r.rc == 0, r
    rep = r.report()
    assert (rep["uid"], rep["euid"], rep["gid"], rep["egid"]) == (1234, 1234, 5678, 5678)


def test_user_additional_gids(rt, bundle):
    bundle.process["user"] = {"uid": 1000, "gid": 1000, "additionalGids": [4, 27, 1001]}
    r = rt.run(bundle.args("report"))
    assert r.rc == 0, r
    assert {4, 27, 1001} <= set(r.report()["groups"])


def test_user_no_additional_gids_drops_groups(rt, bundle):
    bundle.process["user"] = {"uid": 1000, "gid": 1000}
    r = rt.run(bundle.args("report"))
    assert r.rc == 0, r
    assert set(r.report()["groups"]) <= {1000}, "the runtime's own groups leaked in"


def test_user_umask(rt, bundle):
    bundle.process["user"] = {"uid": 0, "gid": 0, "umask": 0o077}
    r = rt.run(bundle.args("report"))
    assert r.rc == 0, r
    assert r.report()["status"]["Umask"] == "0077"


def test_no_new_privileges(rt, bundle):
    bundle.process["noNewPrivileges"] = True
    r = rt.run(bundle.args("report"))
    assert r.rc == 0, r
    assert r.report()["status"]["NoNewPrivs"] == "1"
    bundle.process["noNewPrivileges"] = False
    r = rt.run(bundle.args("report"))
    assert r.rc == 0, r
    assert r.report()["status"]["NoNewPrivs"] == "0"


def test_oom_score_adj(rt, bundle):
    bundle.process["oomScoreAdj"] = 123
    r = rt.run(bundle.args("report"))
    assert r.rc == 0, r
    assert r.report()["oom_score_adj"].strip() == "123"


def test_hostname_and_domainname(rt, bundle):
    bundle.config["hostname"] = "box-one"
    bundle.config["domainname"] = "example.test"
    r = rt.run(bundle.args("report"))
    assert r.rc == 0, r
    rep = r.report()
    assert rep["hostname"] == "box-one"
    assert rep["domainname"] == "example.test"


def test_missing_executable_fails(rt, bundle):
    control(rt, bundle.args("report"))
    bundle.process["args"] = ["/no/such/program"]
    r = rt.run(bundle)
    assert r.rc != 0, r
    assert r.err.strip(), "the failure says why"
