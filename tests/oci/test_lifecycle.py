# SPDX-License-Identifier: Apache-2.0
"""runtime-spec "Lifecycle", "State" and "Operations" (runtime.md), and the
command line runc defines for them (create/start/state/kill/delete/run/exec/
ps/spec/features), including the errors."""
import json
import os
import subprocess

from oci import CMD_TIMEOUT, control, one, probe_lines, wait_for_file_text, wait_pid_gone, wait_status


def started(rt, bundle, *steps):
    """create + start a container running the probe's steps; returns (id, pid)."""
    bundle.args(*steps)
    cid = rt.new_id()
    r = rt.create(cid, bundle)
    assert r.rc == 0, r
    pid = rt.state(cid)["pid"]
    r = rt.cmd("start", cid)
    assert r.rc == 0, r
    return cid, pid


def waiting(rt, bundle):
    """A running container blocked in the probe's wait-signal step."""
    cid, pid = started(rt, bundle, "wait-signal")
    assert wait_for_file_text(bundle.path / "out", '"ready"'), (bundle.path / "err").read_text()
    return cid, pid


def test_create_waits_start_runs(rt, bundle, tmp_path):
    """create stops just before the user process; start runs it; it ends
    stopped; delete removes it."""
    marks = tmp_path / "marks"
    marks.mkdir()
    bundle.add_mount("/hooks", "bind", marks, ["rbind", "rw"])
    bundle.args("touch=/hooks/started", "report")
    cid = rt.new_id()
    r = rt.create(cid, bundle)
    assert r.rc == 0, r
    st = rt.state(cid)
    assert st["status"] == "created"
    assert st["pid"] > 0 and os.path.exists(f"/proc/{st['pid']}")
    assert not (marks / "started").exists(), "the user process ran before start"
    r = rt.cmd("start", cid)
    assert r.rc == 0, r
    assert wait_pid_gone(st["pid"])
    assert (marks / "started").exists()
    assert one(probe_lines((bundle.path / "out").read_text()), "report")["pid"] == 1
    assert wait_status(rt, cid, "stopped")["status"] == "stopped"
    r = rt.cmd("delete", cid)
    assert r.rc == 0, r
    assert rt.state(cid) is None


def test_state_fields(rt, bundle):
    bundle.config["annotations"] = {"org.example.key": "value"}
    bundle.args("wait-signal")
    cid = rt.new_id()
    assert rt.create(cid, bundle).rc == 0
    st = rt.state(cid)
    assert st["ociVersion"]
    assert st["id"] == cid
    assert st["status"] == "created"
    assert isinstance(st["pid"], int) and st["pid"] > 0
    assert os.path.realpath(st["bundle"]) == os.path.realpath(bundle.path)
    assert st.get("annotations", {}).get("org.example.key") == "value"


def test_run_exit_status(rt, bundle):
    r = rt.run(bundle.args("exit=7"))
    assert r.rc == 7, r


def test_run_output_and_stdin(rt, bundle):
    r = rt.run(bundle.args("stdin-line", "report"), input="hello oci\n")
    assert r.rc == 0, r
    assert r.step("stdin-line")["data"] == "hello oci"
    assert r.report()["pid"] == 1


def test_kill_signal_delivered(rt, bundle):
    cid, pid = waiting(rt, bundle)
    r = rt.cmd("kill", cid, "USR1")
    assert r.rc == 0, r
    assert wait_pid_gone(pid)
    got = one(probe_lines((bundle.path / "out").read_text()), "wait-signal")
    assert got["signal"] == 10  # SIGUSR1
    assert wait_status(rt, cid, "stopped")["status"] == "stopped"


def test_kill_default_is_sigterm(rt, bundle):
    cid, pid = waiting(rt, bundle)
    assert rt.cmd("kill", cid).rc == 0
    assert wait_pid_gone(pid)
    assert one(probe_lines((bundle.path / "out").read_text()), "wait-signal")["signal"] == 15


def test_kill_numeric_and_sig_prefixed(rt, bundle):
    cid, pid = waiting(rt, bundle)
    assert rt.cmd("kill", cid, "SIGUSR2").rc == 0
    assert wait_pid_gone(pid)
    assert one(probe_lines((bundle.path / "out").read_text()), "wait-signal")["signal"] == 12
    cid2, pid2 = started(rt, bundle, "wait-signal")
    assert wait_for_file_text(bundle.path / "out", '"ready"')
    assert rt.cmd("kill", cid2, "9").rc == 0
    assert wait_pid_gone(pid2)


def test_kill_created_container(rt, bundle):
    bundle.args("report")
    cid = rt.new_id()
    assert rt.create(cid, bundle).rc == 0
    pid = rt.state(cid)["pid"]
    assert rt.cmd("kill", cid, "KILL").rc == 0
    assert wait_pid_gone(pid)
    assert wait_status(rt, cid, "stopped")["status"] == "stopped"
    assert rt.cmd("delete", cid).rc == 0


def test_delete_running_refused_force_works(rt, bundle):
    cid, pid = waiting(rt, bundle)
    r = rt.cmd("delete", cid)
    assert r.rc != 0, "delete of a running container must fail"
    assert r.err.strip(), "the refusal says why"
    assert rt.state(cid)["status"] == "running"
    r = rt.cmd("delete", "--force", cid)
    assert r.rc == 0, r
    assert wait_pid_gone(pid)
    assert rt.state(cid) is None


def test_start_twice_fails(rt, bundle):
    cid, pid = started(rt, bundle, "report")
    assert wait_pid_gone(pid)
    wait_status(rt, cid, "stopped")
    r = rt.cmd("start", cid)
    assert r.rc != 0 and r.err.strip(), r


def test_duplicate_id_refused(rt, bundle):
    bundle.args("report")
    cid = rt.new_id()
    assert rt.create(cid, bundle).rc == 0
    r = rt.create(cid, bundle)
    assert r.rc != 0 and r.err.strip(), r
    assert rt.state(cid)["status"] == "created", "the first container survives"


def test_unknown_id_errors(rt, bundle):
    control(rt, bundle.args("report"))
    for args in (("state", "no-such-id"), ("start", "no-such-id"), ("kill", "no-such-id", "KILL"),
                 ("delete", "no-such-id")):
        r = rt.cmd(*args)
        assert r.rc != 0, (args, r)
        assert r.err.strip(), (args, "no message")


def test_pid_file(rt, bundle, tmp_path):
    bundle.args("report")
    cid = rt.new_id()
    pidfile = tmp_path / "pid"
    assert rt.create(cid, bundle, "--pid-file", pidfile).rc == 0
    assert int(pidfile.read_text().strip()) == rt.state(cid)["pid"]


def test_bad_config_refused(rt, bundle):
    control(rt, bundle.args("report"))
    bundle.write()
    (bundle.path / "config.json").write_text('{"ociVersion": "1.0.2", "process": ')
    cid = rt.new_id()
    with open(bundle.path / "err", "w") as err:
        p = subprocess.run(rt.argv("create", "--bundle", bundle.path, cid),
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                           timeout=CMD_TIMEOUT)
    assert p.returncode != 0
    assert (bundle.path / "err").read_text().strip()
    assert rt.state(cid) is None, "nothing left behind"


def test_missing_rootfs_refused(rt, bundle, tmp_path):
    control(rt, bundle.args("report"))
    bundle.config["root"]["path"] = str(tmp_path / "no-such-rootfs")
    cid = rt.new_id()
    r = rt.create(cid, bundle)
    assert r.rc != 0 and r.err.strip(), r
    st = rt.state(cid)
    assert st is None or st["status"] == "stopped"


def test_exec_joins_container(rt, bundle):
    cid, pid = waiting(rt, bundle)
    r = rt.cmd("exec", "--env", "EXTRA=1", "--cwd", "/tmp", cid, "/usr/local/bin/oci-probe",
               "report")
    assert r.rc == 0, r
    rep = r.report()
    for ns in ("pid", "mnt", "net", "uts", "ipc"):
        assert rep["ns"][ns] == os.readlink(f"/proc/{pid}/ns/{ns}"), ns
    assert "EXTRA=1" in rep["env"]
    assert rep["cwd"] == "/tmp"
    assert rep["pid"] != 1
    assert rep["hostname"] == "oci-test"


def test_exec_exit_status(rt, bundle):
    cid, _ = waiting(rt, bundle)
    r = rt.cmd("exec", cid, "/usr/local/bin/oci-probe", "exit=5")
    assert r.rc == 5, r


def test_exec_process_json(rt, bundle, tmp_path):
    cid, _ = waiting(rt, bundle)
    proc = dict(bundle.process)
    proc.update(args=["/usr/local/bin/oci-probe", "report"], cwd="/dev", env=["FROM_JSON=yes"],
                user={"uid": 65534, "gid": 65534})
    pj = tmp_path / "process.json"
    pj.write_text(json.dumps(proc))
    r = rt.cmd("exec", "--process", pj, cid)
    assert r.rc == 0, r
    rep = r.report()
    assert [e for e in rep["env"] if not e.startswith("HOME=")] == ["FROM_JSON=yes"]
    assert rep["cwd"] == "/dev"
    assert (rep["uid"], rep["gid"]) == (65534, 65534)


def test_exec_into_stopped_fails(rt, bundle):
    cid, pid = started(rt, bundle, "report")
    assert wait_pid_gone(pid)
    wait_status(rt, cid, "stopped")
    r = rt.cmd("exec", cid, "/usr/local/bin/oci-probe", "report")
    assert r.rc != 0 and r.err.strip(), r


def test_ps(rt, bundle):
    cid, pid = waiting(rt, bundle)
    r = rt.cmd("ps", "--format", "json", cid)
    assert r.rc == 0, r
    assert pid in json.loads(r.out)


def test_spec_writes_config(rt, tmp_path):
    p = subprocess.run([rt.path, "spec"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=CMD_TIMEOUT)
    assert p.returncode == 0, p.stderr
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert cfg["ociVersion"].startswith("1.")
    assert cfg["process"]["args"] and cfg["root"]["path"]
    assert {"pid", "mount"} <= {n["type"] for n in cfg["linux"]["namespaces"]}


def test_features(rt):
    r = rt.cmd("features")
    assert r.rc == 0, r
    f = json.loads(r.out)
    assert f["ociVersionMin"].startswith("1.") and f["ociVersionMax"].startswith("1.")
    assert "prestart" in f["hooks"] and "createRuntime" in f["hooks"]
    assert "bind" in f["mountOptions"] or "rbind" in f["mountOptions"]
    assert "pid" in f["linux"]["namespaces"]


def test_version(rt):
    p = subprocess.run([rt.path, "--version"], capture_output=True, text=True,
                       timeout=CMD_TIMEOUT)
    assert p.returncode == 0 and p.stdout.strip(), p


def test_global_options_any_order(rt):
    """`--root DIR --version`: global flags before the command, in any order."""
    p = subprocess.run([rt.path, "--root", str(rt.root), "--version"], capture_output=True,
                       text=True, timeout=CMD_TIMEOUT)
    assert p.returncode == 0 and p.stdout.strip(), p


def test_checkpoint_unsupported_says_so(rt, bundle):
    """A runtime that cannot checkpoint (no CRIU) fails with exit 1 and one
    message, leaves the container running, and `features` does not claim
    checkpointing."""
    cid, pid = waiting(rt, bundle)
    feats = json.loads(rt.cmd("features").out or "{}")
    claimed = feats.get("annotations", {}).get("org.opencontainers.runc.checkpoint.enabled") == "true"
    r = rt.cmd("checkpoint", "--image-path", str(bundle.path / "img"), cid)
    if r.rc == 0:
        assert claimed, f"checkpointed without claiming it in features: {r}"
        return
    assert r.rc == 1 and r.err.strip(), r
    assert rt.state(cid)["status"] == "running"
    assert os.path.exists(f"/proc/{pid}")
    if rt.cmd("checkpoint", "--help").rc != 0:
        assert not claimed, feats.get("annotations")
