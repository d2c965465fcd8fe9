"""kiwi-run run --image: an OCI layout made by kiwi-rootfs pack, unpacked
once into a cache by kiwi-rootfs (run by kiwi-run only for --image), pinned
against gc while a sandbox uses it, its Env/Entrypoint/WorkingDir the
defaults that flags override."""
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import explain, manifest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def layout(kiwi_rootfs, rootfs, session_dir):
    """The test rootfs as a one-layer OCI image tagged t."""
    out = session_dir / "image-layout"
    r = subprocess.run([str(kiwi_rootfs), "pack", str(rootfs), f"{out}:t", "--entrypoint", "/bin/sh",
                        "--env", "IMAGE_VAR=from-image", "--env", "SHARED=image"],
                       capture_output=True, text=True)
    assert r.returncode == 0, explain(r)
    for root, dirs, files in os.walk(out):
        for name in dirs + files:
            os.chmod(os.path.join(root, name), 0o755 if name in dirs else 0o644)
    out.chmod(0o755)
    return out


@pytest.fixture
def cache(kiwi):
    return kiwi.workdir()


def image_run(kiwi, layout, cache, cmd=(), opts=(), **kw):
    args = ["run", "--image", f"{layout}:t", "--image-cache", str(cache), *opts]
    if cmd:
        args += ["--", *cmd]
    return kiwi.raw(args, **kw)


def test_runs_a_command_in_the_image(kiwi, layout, cache):
    r = image_run(kiwi, layout, cache, ["/bin/sh", "-c", "echo ran; cat /proc/self/status | grep NoNewPrivs"])
    assert r.returncode == 0, explain(r)
    assert r.stdout.splitlines() == ["ran", "NoNewPrivs:\t1"], explain(r)


def test_image_env_is_the_default_and_flags_override_it(kiwi, layout, cache):
    r = image_run(kiwi, layout, cache, ["/bin/sh", "-c", "echo $IMAGE_VAR $SHARED"],
                  opts=["--env", "SHARED=flag"])
    assert r.returncode == 0, explain(r)
    assert r.stdout == "from-image flag\n", explain(r)


def test_entrypoint_runs_without_a_command(kiwi, layout, cache):
    r = kiwi.raw(["run", "--image", f"{layout}:t", "--image-cache", str(cache)],
                 input="echo from-entrypoint $IMAGE_VAR\n")
    assert r.returncode == 0, explain(r)
    assert r.stdout == "from-entrypoint from-image\n", explain(r)


def test_unpacked_once_and_read_only(kiwi, layout, cache):
    for _ in range(2):
        r = image_run(kiwi, layout, cache, ["/bin/sh", "-c", "touch /x 2>/dev/null; echo $?"])
        assert r.returncode == 0 and r.stdout == "1\n", explain(r)
    entries = [p for p in cache.iterdir() if p.is_dir()]
    assert len(entries) == 1, entries
    # The entry is made read-only (0555) on the host too, whoever runs this.
    mode = entries[0].stat().st_mode
    assert not mode & 0o222, f"cache entry {entries[0]} is mode {mode & 0o7777:o}"


def _tree(root):
    out = {}
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            st = os.lstat(os.path.join(d, n))
            out[os.path.relpath(os.path.join(d, n), root)] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return out


def test_rw_root_leaves_the_cache_entry_unchanged(kiwi, layout, cache):
    """--rw-root on an image writes into the sandbox's own layer: the
    shared cache entry is never written, and a later run of the image
    does not see what an earlier one wrote under /bin."""
    r = image_run(kiwi, layout, cache, ["true"])
    assert r.returncode == 0, explain(r)
    # The entry's own mtime marks its last use (for gc); what is in it must not move.
    (entry,) = [p for p in cache.iterdir() if p.is_dir()]
    before = _tree(entry)
    r = image_run(kiwi, layout, cache, ["/bin/sh", "-c", "echo planted > /bin/kiwi-rw-marker; cat /bin/kiwi-rw-marker"],
                  opts=["--rw-root"])
    assert r.returncode == 0 and r.stdout == "planted\n", explain(r)
    assert _tree(entry) == before
    r = image_run(kiwi, layout, cache, ["/bin/sh", "-c", "test -e /bin/kiwi-rw-marker; echo $?"])
    assert r.returncode == 0 and r.stdout == "1\n", explain(r)


def test_unknown_tag_is_one_clear_line(kiwi, layout, cache):
    r = kiwi.raw(["run", "--image", f"{layout}:no-such-tag", "--image-cache", str(cache), "--", "true"])
    assert r.returncode == 125, explain(r)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kiwi-run: image: "), explain(r)
    assert "no-such-tag" in lines[0], explain(r)


def test_rootfs_and_image_exclude_each_other(kiwi, layout, cache):
    r = kiwi.raw(["run", "--rootfs", kiwi.rootfs, "--image", f"{layout}:t", "--", "true"])
    assert r.returncode == 125, explain(r)


def test_gc_keeps_an_entry_a_sandbox_uses(kiwi, kiwi_rootfs, layout, cache):
    p = subprocess.Popen([*kiwi.raw_argv(["run", "--image", f"{layout}:t", "--image-cache", str(cache),
                                          "--", "/bin/sh", "-c", "echo up; sleep 3"])],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=kiwi.env())
    try:
        assert p.stdout.readline() == "up\n"
        gc = subprocess.run([*kiwi.prefix, str(kiwi_rootfs), "gc", "--cache-dir", str(cache),
                             "--older-than", "0"], capture_output=True, text=True)
        assert gc.returncode == 0, explain(gc)
        assert [e for e in cache.iterdir() if e.is_dir()], "gc removed an image in use"
    finally:
        out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    time.sleep(0.1)
    gc = subprocess.run([*kiwi.prefix, str(kiwi_rootfs), "gc", "--cache-dir", str(cache),
                         "--older-than", "0"], capture_output=True, text=True)
    assert gc.returncode == 0, explain(gc)
    assert not [e for e in cache.iterdir() if e.is_dir()], "gc kept an image nobody uses"


def test_unknown_tag_is_in_the_verdict(kiwi, layout, cache):
    verdict = kiwi.workdir() / "v.json"
    r = kiwi.raw(["run", "--image", f"{layout}:no-such-tag", "--image-cache", str(cache),
                  "--verdict", str(verdict), "--", "true"])
    assert r.returncode == 125, explain(r)
    v = json.loads(verdict.read_text())
    assert v["exit_code"] == 125 and v["error"]["step"] == "image", v
    assert "no-such-tag" in v["error"]["message"], v


def test_rw_root_writes_into_the_layer_never_the_cache(kiwi, layout, cache):
    """--image X --rw-root: the root is writable, its writes go into the
    sandbox's own layer, and the cache entry (shared by every sandbox of
    the image) comes out exactly as it went in."""
    r = image_run(kiwi, layout, cache, ["/bin/true"])
    assert r.returncode == 0, explain(r)
    entries = [p for p in cache.iterdir() if p.is_dir()]
    assert len(entries) == 1, entries
    before = manifest(entries[0])
    r = image_run(kiwi, layout, cache, ["/bin/sh", "-c", "echo x > /etc/kiwi-new && rm -f /bin/true && "
                                        "mkdir /newdir && cat /etc/kiwi-new"], opts=["--rw-root"])
    assert r.returncode == 0 and r.stdout == "x\n", explain(r)
    assert manifest(entries[0]) == before
    r = image_run(kiwi, layout, cache, ["/bin/true"])
    assert r.returncode == 0, explain(r)
