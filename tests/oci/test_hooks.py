# SPDX-License-Identifier: Apache-2.0
"""runtime-spec config.md "POSIX-platform Hooks": which run, in what order,
in which namespace, with the state on stdin, args and env as given; a
failing createRuntime hook fails create and leaves nothing behind."""
import json
import os

from oci import control, wait_pid_gone, wait_status, wait_for_file_text

HOST_SH = "/bin/sh"


def host_hook(log, name, extra=""):
    """A hook run in the runtime's namespace: logs its name, its mount
    namespace and its stdin (the state) into log's directory."""
    d = os.path.dirname(log)
    script = (f"echo {name} >> {log}; readlink /proc/self/ns/mnt > {d}/{name}.mnt; "
              f"cat > {d}/{name}.state; {extra}")
    return {"path": HOST_SH, "args": ["sh", "-c", script]}


def test_hooks_order_and_state(rt, bundle, tmp_path):
    logdir = tmp_path / "hooks"
    logdir.mkdir()
    log = logdir / "log"
    bundle.add_mount("/hooks", "bind", logdir, ["rbind", "rw"])
    h = bundle.hooks()
    for name in ("prestart", "createRuntime", "createContainer", "poststart", "poststop"):
        h[name] = [host_hook(log, name)]
    # startContainer runs in the container: its path is the container's sh,
    # and it writes through the bind mount.
    h["startContainer"] = [{"path": "/bin/sh", "args": [
        "sh", "-c", "echo startContainer >> /hooks/log; cat > /hooks/startContainer.state"]}]
    bundle.args("wait-signal")
    cid = rt.new_id()
    r = rt.create(cid, bundle)
    assert r.rc == 0, r
    pid = rt.state(cid)["pid"]
    created = log.read_text().split()
    assert created[-1] == "createContainer", created
    assert set(created) == {"prestart", "createRuntime", "createContainer"}
    assert created.index("createRuntime") < created.index("createContainer")
    assert created.index("prestart") < created.index("createContainer")
    assert rt.cmd("start", cid).rc == 0
    assert wait_for_file_text(bundle.path / "out", '"ready"')
    assert wait_for_file_text(log, "poststart")
    assert log.read_text().split()[len(created):] == ["startContainer", "poststart"]
    assert rt.cmd("kill", cid, "KILL").rc == 0
    assert wait_pid_gone(pid)
    wait_status(rt, cid, "stopped")
    assert rt.cmd("delete", cid).rc == 0
    assert log.read_text().split()[-1] == "poststop"

    for name in ("prestart", "createRuntime", "createContainer", "startContainer",
                 "poststart", "poststop"):
        st = json.loads((logdir / f"{name}.state").read_text())
        assert st["id"] == cid, name
        if name not in ("createContainer", "startContainer"):  # the runtime's view
            assert os.path.realpath(st["bundle"]) == os.path.realpath(bundle.path), name
        # pid is required only once the container is created (state.md).
        if name in ("startContainer", "poststart") or st.get("pid"):
            assert st["pid"] == pid, name


def test_hook_namespaces(rt, bundle, tmp_path):
    """createRuntime (and prestart) in the runtime's mount namespace;
    createContainer in the container's."""
    logdir = tmp_path / "hooks"
    logdir.mkdir()
    log = logdir / "log"
    h = bundle.hooks()
    for name in ("prestart", "createRuntime", "createContainer"):
        h[name] = [host_hook(log, name)]
    bundle.args("wait-signal")
    cid = rt.new_id()
    assert rt.create(cid, bundle).rc == 0
    pid = rt.state(cid)["pid"]
    mine = os.readlink("/proc/self/ns/mnt")
    theirs = os.readlink(f"/proc/{pid}/ns/mnt")
    assert (logdir / "createRuntime.mnt").read_text().strip() == mine
    assert (logdir / "prestart.mnt").read_text().strip() == mine
    assert (logdir / "createContainer.mnt").read_text().strip() == theirs


def test_hook_args_and_env(rt, bundle, tmp_path):
    out = tmp_path / "env"
    bundle.hooks()["createRuntime"] = [{
        "path": HOST_SH, "args": ["sh", "-c", f'echo "$0 $1" > {out}.args; env > {out}',
                                  "first", "second"],
        "env": ["HOOK_VAR=hook value", "PATH=/usr/bin:/bin"]}]
    cid = rt.new_id()
    assert rt.create(cid, bundle.args("report")).rc == 0
    env = out.read_text().splitlines()
    assert "HOOK_VAR=hook value" in env
    assert not any(line.startswith("KIWI_") or line.startswith("PYTEST") for line in env), env
    assert (tmp_path / "env.args").read_text().strip() == "first second"


def test_failing_create_runtime_hook(rt, bundle):
    control(rt, bundle.args("report"))
    bundle.hooks()["createRuntime"] = [{"path": HOST_SH, "args": ["sh", "-c", "exit 3"]}]
    cid = rt.new_id()
    r = rt.create(cid, bundle.args("report"))
    assert r.rc != 0, r
    st = rt.state(cid)
    assert st is None or st["status"] == "stopped", st


def test_hook_timeout(rt, bundle):
    control(rt, bundle.args("report"))
    bundle.hooks()["createRuntime"] = [{"path": HOST_SH, "args": ["sh", "-c", "sleep 600"],
                                        "timeout": 1}]
    cid = rt.new_id()
    r = rt.create(cid, bundle.args("report"))
    assert r.rc != 0, r


def test_hook_without_env_gets_runtime_env(rt, bundle, tmp_path, monkeypatch):
    """A hook without `env` runs with the runtime's own environment (GPU and
    network hooks rely on its PATH), as runc and crun run it."""
    out = tmp_path / "env"
    monkeypatch.setenv("KIWI_OCI_HOOK_MARK", "from-the-caller")
    bundle.hooks()["prestart"] = [{"path": HOST_SH, "args": ["sh", "-c", f"env > {out}"]}]
    r = rt.run(bundle.args("report"))
    assert r.rc == 0, r
    env = out.read_text().splitlines()
    assert "KIWI_OCI_HOOK_MARK=from-the-caller" in env, env
    assert any(line.startswith("PATH=") for line in env), env
