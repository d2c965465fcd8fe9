# SPDX-License-Identifier: Apache-2.0
"""runtime-spec config.md "POSIX process" rlimits."""
from oci import control


def test_rlimits_applied(rt, bundle):
    bundle.process["rlimits"] = [
        {"type": "RLIMIT_NOFILE", "soft": 321, "hard": 654},
        {"type": "RLIMIT_CORE", "soft": 0, "hard": 0},
        {"type": "RLIMIT_NPROC", "soft": 500, "hard": 600},
        {"type": "RLIMIT_MSGQUEUE", "soft": 8192, "hard": 16384},
    ]
    r = rt.run(bundle.args("report"))
    assert r.rc == 0, r
    lim = r.report()["rlimits"]
    assert lim["RLIMIT_NOFILE"] == {"soft": 321, "hard": 654}
    assert lim["RLIMIT_CORE"] == {"soft": 0, "hard": 0}
    assert lim["RLIMIT_NPROC"] == {"soft": 500, "hard": 600}
    assert lim["RLIMIT_MSGQUEUE"] == {"soft": 8192, "hard": 16384}


def test_rlimit_nofile_enforced(rt, bundle):
    """With NOFILE 64 the probe opens at most 61 more descriptors (stdio
    holds 3), then gets EMFILE."""
    bundle.process["rlimits"] = [{"type": "RLIMIT_NOFILE", "soft": 64, "hard": 64}]
    r = rt.run(bundle.args("open-many=200"))
    assert r.rc == 0, r
    got = r.step("open-many")
    assert got["errno"] == 24 and got["opened"] <= 61, got


def test_unknown_rlimit_refused(rt, bundle):
    control(rt, bundle.args("report"))
    bundle.process["rlimits"] = [{"type": "RLIMIT_NO_SUCH", "soft": 1, "hard": 1}]
    r = rt.run(bundle.args("report"))
    assert r.rc != 0 and r.err.strip(), r
