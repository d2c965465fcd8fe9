# SPDX-License-Identifier: Apache-2.0
"""`kiwi-run policy check FILE`: the effective policy as JSON and exit 0, or
one `kiwi-run: policy: FILE: ...` line and exit 125, as root and rootless."""
import json
import os
import re

import pytest

from conftest import explain

FAILURE_LINE = re.compile(r"kiwi-run: [^\n]+: [^\n]+\n")

FULL = {
    "version": 1,
    "install": {
        "network": "egress",
        "egress": {"mode": "host_allowlist", "allow_host": ["registry.example:443"],
                   "allow_port": [443], "dns": "192.0.2.53"},
        "limits": {"memory": "2G", "pids": 512, "cpus": 1.5, "timeout": "5m",
                   "output_limit": "1M", "disk": "1G"},
        "env": {"CI": "true"},
        "caches": [{"host": "/var/cache/npm", "dest": "/root/.npm"}],
    },
    "verify": {"network": "none", "pass_env": ["DATABASE_URL"], "limits": {"timeout": 90}},
    "deny_env": ["AWS_*"],
    "model_keys": ["MY_LLM_KEY"],
    "allow_test_credentials": False,
}


def policy_file(kiwi, text, name="kiwi.json", mode=0o644):
    path = kiwi.workdir() / name
    path.write_text(text if isinstance(text, str) else json.dumps(text))
    path.chmod(mode)
    kiwi.chown(path)
    return path


def check(kiwi, path):
    return kiwi.raw(["policy", "check", path])


def assert_refused(r, *mentions):
    assert r.returncode == 125, explain(r)
    assert FAILURE_LINE.fullmatch(r.stderr), f"not one `kiwi-run: step: reason` line: {explain(r)}"
    assert r.stdout == "", explain(r)
    for m in mentions:
        assert m in r.stderr, f"the message does not say {m!r}: {explain(r)}"


def test_prints_the_effective_policy(kiwi):
    r = check(kiwi, policy_file(kiwi, FULL))
    assert r.returncode == 0, explain(r)
    assert r.stderr == "", explain(r)
    eff = json.loads(r.stdout)
    assert eff["version"] == 1
    assert eff["install"]["network"] == "egress"
    assert eff["install"]["egress"] == {"mode": "host_allowlist", "allow_cidr": [],
                                        "allow_host": ["registry.example:443"],
                                        "allow_port": ["443"], "dns": "192.0.2.53"}
    assert eff["install"]["limits"] == {"memory": 2 << 30, "pids": 512, "cpus": "1.5",
                                        "timeout": "5m", "output_limit": 1 << 20, "disk": 1 << 30}
    assert eff["install"]["env"] == {"CI": "true"}
    assert eff["install"]["caches"] == [{"host": "/var/cache/npm", "dest": "/root/.npm"}]
    assert eff["verify"] == {"network": "none", "limits": {"timeout": "90s"}, "env": {},
                             "pass_env": ["DATABASE_URL"], "caches": []}
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "MY_LLM_KEY"):
        assert key in eff["model_keys"], f"{key} missing from the effective model keys"
    assert eff["allow_test_credentials"] is False


def test_defaults_spelt_out(kiwi):
    r = check(kiwi, policy_file(kiwi, '{"version": 1}'))
    assert r.returncode == 0, explain(r)
    eff = json.loads(r.stdout)
    assert eff["install"]["network"] == "egress"
    assert eff["install"]["egress"]["mode"] == "public_internet"
    assert eff["verify"]["network"] == "none"
    assert "egress" not in eff["verify"]
    assert eff["deny_env"] == []


def test_output_is_a_policy_that_reads_back_the_same(kiwi):
    first = check(kiwi, policy_file(kiwi, FULL))
    assert first.returncode == 0, explain(first)
    second = check(kiwi, policy_file(kiwi, first.stdout, name="again.json"))
    assert second.returncode == 0, explain(second)
    assert second.stdout == first.stdout


@pytest.mark.parametrize("text, mentions", [
    ('{"version": 1, "install": {"limts": {}}}', ["unknown key `install.limts`"]),
    ('{"install": {}}', ["missing `version`"]),
    ('{"version": 2}', ["`version` 2 is not supported"]),
    ('{"version": 1, "verify": {"network": "egress"}}', ["`verify.network`: verify never has a network"]),
    ('{"version": 1, "install": {"pass_env": ["HOME"]}}', ["`install.pass_env`: install never receives"]),
    ('{"version": 1, "verify": {"pass_env": ["ANTHROPIC_API_KEY"]}}',
     ["`verify.pass_env[0]`: `ANTHROPIC_API_KEY` is a model-provider key"]),
    ('{"version": 1, "install": {"limits": {"memory": "2Q"}}}', ["`install.limits.memory`", "`2Q`"]),
    ('{"version": 1, "install": {"limits": {"cpus": "lots"}}}', ["`install.limits.cpus`", "`lots`"]),
    ('{"version": 1, "install": {"egress": {"allow_cidr": ["10.0.0.0/33"]}}}',
     ["`install.egress.allow_cidr[0]` `10.0.0.0/33`"]),
    ('{"version": 1,', ["malformed JSON"]),
])
def test_errors_name_the_file_and_the_key(kiwi, text, mentions):
    path = policy_file(kiwi, text)
    assert_refused(check(kiwi, path), f"kiwi-run: policy: {path}: ", *mentions)


def test_refuses_a_file_others_can_write(kiwi):
    path = policy_file(kiwi, '{"version": 1}', mode=0o664)
    assert_refused(check(kiwi, path), "writable by group or others (mode 0664)", "chmod go-w")


def test_refuses_a_file_of_another_user(kiwi):
    """A file of neither root nor the caller: as root, one of the test user;
    rootless, one of a uid nobody uses."""
    if os.geteuid() != 0:
        pytest.skip("giving a file away needs root")
    path = policy_file(kiwi, '{"version": 1}')
    stranger = 4242 if kiwi.mode == "rootless" else pwd_uid("kiwi-test")
    os.chown(path, stranger, stranger)
    assert_refused(check(kiwi, path), f"owned by uid {stranger}, neither root nor the caller")


def test_accepts_a_file_of_root(kiwi):
    path = policy_file(kiwi, '{"version": 1}')
    if os.geteuid() == 0:
        os.chown(path, 0, 0)
    r = check(kiwi, path)
    assert r.returncode == 0, explain(r)


def test_refuses_what_is_not_a_regular_file(kiwi):
    assert_refused(check(kiwi, kiwi.workdir()), "not a regular file")
    assert_refused(check(kiwi, kiwi.scratch / "missing.json"), "missing.json: cannot open",
                   "No such file or directory")


@pytest.mark.parametrize("args, mentions", [
    (["policy"], "no action given"),
    (["policy", "frob"], "unknown action `frob`"),
    (["policy", "check"], "`check` wants exactly one FILE"),
    (["policy", "check", "a", "b"], "`check` wants exactly one FILE"),
    (["policy", "--frob"], "unknown option `--frob`"),
])
def test_usage_errors(kiwi, args, mentions):
    assert_refused(kiwi.raw(args), mentions)


def test_help(kiwi):
    r = kiwi.raw(["policy", "--help"])
    assert r.returncode == 0, explain(r)
    assert "kiwi-run policy check FILE" in r.stdout


def pwd_uid(name):
    import pwd
    return pwd.getpwnam(name).pw_uid
