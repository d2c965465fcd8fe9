# SPDX-License-Identifier: Apache-2.0
"""The idmap operation and every refusal around a sandbox's identity:
each attack is tried for real against the setuid helper, and the target's
maps are read afterwards (empty: nothing was written)."""
import os
from pathlib import Path

import pytest

from conftest import idmap, maps_of, refused, stale_pidfd_of_a_reused_pid


def test_version_before_privileges(helper, users):
    r = os.popen(f"setpriv --reuid=kiwi-test --regid=kiwi-test --init-groups {helper} --version").read()
    assert r.startswith("kiwi-helper ")


def test_maps_the_allotted_range(clients, users):
    c = clients()
    c.start()
    sb = c.call("sandbox")
    ans = c.request(idmap(users, uid_map=[[1, 200000, 65536]], gid_map=[[1, 200000, 1000]]), [{"sandbox": sb["id"]}])
    assert ans == {"ok": True}
    uid_map, gid_map = maps_of(sb["pid"])
    assert uid_map.split() == ["0", str(users["kiwi-test"].pw_uid), "1", "1", "200000", "65536"]
    assert gid_map.split() == ["0", str(users["kiwi-test"].pw_gid), "1", "1", "200000", "1000"]
    assert Path(f"/proc/{sb['pid']}/setgroups").read_text().strip() == "deny"


def test_subuid_ranges_count_when_the_rule_says_so(clients, users):
    c = clients("kiwi-test2")
    c.start()
    sb = c.call("sandbox")
    assert c.request(idmap(users, "kiwi-test2", [[1, 300000, 10]], [[1, 300000, 10]]), [{"sandbox": sb["id"]}]) == {"ok": True}
    # kiwi-test has no subids in its rule: the same file line is not its own
    c1 = clients()
    c1.start()
    sb1 = c1.call("sandbox")
    refused(c1.request(idmap(users, uid_map=[[1, 300000, 10]]), [{"sandbox": sb1["id"]}]), "not allotted")


@pytest.mark.parametrize("uid_map,gid_map,why", [
    ([[1, 300000, 10]], [], "not allotted"),              # someone else's range
    ([[1, 0, 1]], [], "host root"),                        # host root
    ([], [[1, 0, 1]], "host root"),                        # host root group
    ([[1, 265000, 1000]], [], "not allotted"),             # runs past the end of the range
    ([[1, 199999, 2]], [], "not allotted"),                # starts before it
])
def test_unallotted_ids_are_refused(clients, users, uid_map, gid_map, why):
    c = clients()
    c.start()
    sb = c.call("sandbox")
    refused(c.request(idmap(users, uid_map=uid_map, gid_map=gid_map), [{"sandbox": sb["id"]}]), why)
    assert maps_of(sb["pid"]) == ("", "")


def test_own_id_with_a_count_is_refused(clients, users):
    c = clients()
    c.start()
    sb = c.call("sandbox")
    req = {"op": "idmap", "uid_map": [[0, users["kiwi-test"].pw_uid, 2]], "gid_map": [[0, users["kiwi-test"].pw_gid, 1]]}
    refused(c.request(req, [{"sandbox": sb["id"]}]), "not allotted")
    assert maps_of(sb["pid"]) == ("", "")


def test_another_users_sandbox_is_refused(clients, users):
    other = clients("kiwi-test2")
    theirs = other.call("sandbox")
    c = clients()
    c.start()
    refused(c.request(idmap(users), [{"pid": theirs["pid"]}]), "not yours")
    assert maps_of(theirs["pid"]) == ("", "")


@pytest.mark.parametrize("target", ["host init", "own process without a user namespace"])
def test_processes_outside_a_sandbox_are_refused(clients, users, target):
    c = clients()
    c.start()
    if target == "host init":
        refused(c.request(idmap(users), [{"pid": 1}]), "not yours")
    else:
        sb = c.call("sandbox", userns=False, netns=False)
        refused(c.request(idmap(users), [{"sandbox": sb["id"]}]), "user namespace")


@pytest.mark.parametrize("spec", [
    {"path": "/proc/self/ns/net"},       # the host's network namespace
    {"path": "/proc/self/ns/user"},      # the host's user namespace
    {"path": "/etc/hostname"},           # not a namespace at all
])
def test_forged_fds_are_refused(clients, users, spec):
    c = clients()
    c.start()
    refused(c.request(idmap(users), [spec]), "not a pidfd")


def test_a_sandboxs_namespace_fd_is_no_pidfd(clients, users):
    c = clients()
    c.start()
    sb = c.call("sandbox")
    for ns in ("user", "net"):
        refused(c.request(idmap(users), [{"path": f"/proc/{sb['pid']}/ns/{ns}"}]), "not a pidfd")
    assert maps_of(sb["pid"]) == ("", "")


def test_fd_count_is_checked(clients, users):
    c = clients()
    c.start()
    sb = c.call("sandbox")
    refused(c.request(idmap(users)), "exactly one fd")
    refused(c.request(idmap(users), [{"sandbox": sb["id"]}, {"sandbox": sb["id"]}]), "exactly one fd")
    assert maps_of(sb["pid"]) == ("", "")


def test_one_helper_serves_one_sandbox(clients, users):
    c = clients()
    c.start()
    a, b = c.call("sandbox"), c.call("sandbox")
    assert c.request(idmap(users), [{"sandbox": a["id"]}]) == {"ok": True}
    refused(c.request(idmap(users), [{"sandbox": b["id"]}]), "done already")
    refused(c.request({"op": "egress-attach"}, [{"sandbox": b["id"]}]), "another sandbox")
    assert maps_of(b["pid"]) == ("", "")


def test_a_reused_pid_is_not_the_sandbox(clients, users):
    """The caller holds a pidfd of its sandbox, the sandbox dies, and a
    new sandbox of the same caller gets the same pid (forced through
    ns_last_pid): the stale pidfd must not reach the new process, which
    would pass every other check."""
    c = clients()
    c.start()
    new = stale_pidfd_of_a_reused_pid(c)
    ans = c.request(idmap(users), [{"saved": "stale"}])
    refused(ans, "gone")
    assert maps_of(new["pid"]) == ("", "")


def test_over_quota(clients, users, config):
    rules = [{"user": "kiwi-test", "operations": ["idmap"], "max_sandboxes": 2}]
    config.write(rules)
    held = []
    for _ in range(2):
        c = clients()
        c.start()
        sb = c.call("sandbox")
        assert c.request(idmap(users), [{"sandbox": sb["id"]}]) == {"ok": True}
        held.append(c)
    third = clients()
    third.start()
    sb = third.call("sandbox")
    refused(third.request(idmap(users), [{"sandbox": sb["id"]}]), "quota")
    assert maps_of(sb["pid"]) == ("", "")
    # a slot comes back when its holder ends
    held[0].call("close")
    again = clients()
    again.start()
    sb = again.call("sandbox")
    assert again.request(idmap(users), [{"sandbox": sb["id"]}]) == {"ok": True}


def test_operation_not_allowed_by_the_rule(clients, users):
    c = clients("kiwi-test2")
    c.start()
    refused(c.request({"op": "egress-prepare", "egress": "public_internet"}), "not allowed")


def test_user_without_a_rule(clients, users, config):
    config.write([{"user": "kiwi-test2", "operations": ["idmap"]}])
    c = clients()
    c.start()
    sb = c.call("sandbox")
    refused(c.request(idmap(users), [{"sandbox": sb["id"]}]), "not allowed")


@pytest.mark.parametrize("case", ["group-writable", "world-writable", "not root's", "unknown key", "malformed"])
def test_a_bad_config_refuses_everything(clients, users, config, case):
    rules = [{"user": "kiwi-test", "operations": ["idmap"]}]
    if case == "group-writable":
        config.write(rules, mode=0o664)
    elif case == "world-writable":
        config.write(rules, mode=0o646)
    elif case == "not root's":
        config.write(rules, owner=users["kiwi-test"].pw_uid)
    elif case == "unknown key":
        config.write([{"user": "kiwi-test", "operations": ["idmap"], "max_everything": 1}])
    else:
        config.write(raw='{"rules": [')
    c = clients()
    c.start()
    sb = c.call("sandbox")
    ans = c.request(idmap(users), [{"sandbox": sb["id"]}])
    refused(ans, "max_everything" if case == "unknown key" else "")
    assert ans["step"] in ("config", "json")
    assert maps_of(sb["pid"]) == ("", "")


@pytest.mark.parametrize("raw", [
    "not json", "[]", '{"op": "idmap"}', '{"op": "mount"}', '{"op": "idmap", "uid_map": [[0, 999, 1]], "x": 1}',
    '{"op": "idmap", "uid_map": [[0, 4294967290, 10]], "gid_map": [[0, 995, 1]]}',
    '{"op": "egress-prepare", "egress": "public_internet", "egress-audit": "/etc/shadow"}',
    '{"op": "egress-prepare", "egress": "public_internet", "egress-pool": "172.31.255.0/24"}',
])
def test_malformed_requests(clients, raw):
    c = clients()
    c.start()
    ans = c.call("request", req=None, fds=[], raw=raw)
    assert ans.get("ok") is False and ans.get("error"), ans


def test_the_session_ends_with_the_sandbox(clients, users):
    c = clients()
    c.start()
    sb = c.call("sandbox")
    assert c.request(idmap(users), [{"sandbox": sb["id"]}]) == {"ok": True}
    c.call("end_sandbox", sid=sb["id"])
    assert c.call("answer") == {"closed": True}
    assert c.call("close") == {"status": 0}
