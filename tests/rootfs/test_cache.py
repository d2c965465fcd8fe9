# SPDX-License-Identifier: Apache-2.0
"""The cache of unpacked roots: keyed by manifest digest, read-only, filled
once under concurrency, pruned by gc unless in use."""
import fcntl
import json
import os
import subprocess

from ocilib import MT_GZIP, MT_TAR, tar_bytes, write_layout


def image(tmp_path, n=1500):
    img = tmp_path / "img"
    entries = [("dir", "d")] + [("file", f"d/f{i}", f"content {i}\n" * 20) for i in range(n)]
    digest = write_layout(str(img), [(MT_GZIP, tar_bytes(entries))],
                          config={"Entrypoint": ["/bin/x"], "Env": ["A=1"], "WorkingDir": "/w",
                                  "User": "7"})
    return img, digest


def test_cache_entry(run, tmp_path):
    img, digest = image(tmp_path, 10)
    cache = tmp_path / "cache"
    p = run("unpack", "--cache-dir", str(cache), f"{img}:latest", check=0)
    entry = cache / digest.replace(":", "-")
    assert p.stdout.strip() == str(entry / "rootfs")
    assert (entry / "rootfs/d/f3").read_text().startswith("content 3")
    assert os.stat(entry).st_mode & 0o777 == 0o555
    cfg = json.loads((entry / "image.json").read_text())
    assert cfg["manifest"] == digest
    assert cfg["config"]["Entrypoint"] == ["/bin/x"] and cfg["config"]["User"] == "7"
    assert cfg["config"]["WorkingDir"] == "/w" and cfg["config"]["Env"] == ["A=1"]
    again = run("unpack", "--json", "--cache-dir", str(cache), f"{img}:latest", check=0)
    assert json.loads(again.stdout)["entries"] == 0, "a cache hit unpacked again"


def test_concurrent_unpacks_work_once(kiwi_rootfs, tmp_path):
    img, digest = image(tmp_path)
    cache = tmp_path / "cache"
    procs = [subprocess.Popen([kiwi_rootfs, "unpack", "--json", "--cache-dir", str(cache),
                               f"{img}:latest"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(6)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        results.append(json.loads(out.splitlines()[-1]))
    assert len({r["rootfs"] for r in results}) == 1
    workers = [r for r in results if r["entries"] > 0]
    assert len(workers) == 1, f"{len(workers)} processes unpacked the same image"
    assert sorted(os.listdir(cache)) == sorted([digest.replace(":", "-"),
                                               digest.replace(":", "-") + ".lock"])


def test_failed_fill_leaves_nothing(run, tmp_path):
    img = tmp_path / "img"
    write_layout(str(img), [(MT_TAR, tar_bytes([("file", "../x", "y")]))])
    cache = tmp_path / "cache"
    p = run("unpack", "--cache-dir", str(cache), f"{img}:latest")
    assert p.returncode == 125 and "climbs out" in p.stderr
    assert [n for n in os.listdir(cache) if not n.endswith(".lock")] == []


def test_gc(run, tmp_path):
    img, digest = image(tmp_path, 5)
    cache = tmp_path / "cache"
    run("unpack", "--cache-dir", str(cache), f"{img}:latest", check=0)
    key = digest.replace(":", "-")
    scratch = cache / f".tmp-{key}-abcdef"
    (scratch / "rootfs").mkdir(parents=True)
    p = run("gc", "--json", "--cache-dir", str(cache), "--older-than", "1", check=0)
    assert json.loads(p.stdout) == {"removed": 1, "kept": 1, "busy": 0}
    assert not scratch.exists() and (cache / key).exists()
    with open(cache / f"{key}.lock") as pin:
        fcntl.flock(pin, fcntl.LOCK_SH)  # what kiwi-run holds while a sandbox runs
        p = run("gc", "--json", "--cache-dir", str(cache), check=0)
        assert json.loads(p.stdout)["busy"] == 1 and (cache / key).exists()
    p = run("gc", "--json", "--cache-dir", str(cache), check=0)
    assert json.loads(p.stdout)["removed"] == 1 and not (cache / key).exists()
    p = run("gc", "--cache-dir", str(cache), "--older-than", "soon")
    assert p.returncode == 125 and "--older-than" in p.stderr


def test_capabilities_kept_apart(run, tmp_path):
    img, digest = image(tmp_path, 3)
    cache = tmp_path / "cache"
    plain = run("unpack", "--cache-dir", str(cache), f"{img}:latest", check=0).stdout.strip()
    caps = run("unpack", "--keep-capabilities", "--cache-dir", str(cache), f"{img}:latest",
               check=0).stdout.strip()
    assert plain != caps and caps.endswith("-caps/rootfs")
    key = digest.replace(":", "-")
    (cache / f".tmp-{key}-caps-Ab12Cd" / "rootfs").mkdir(parents=True)
    p = run("gc", "--json", "--cache-dir", str(cache), check=0)
    assert json.loads(p.stdout)["removed"] == 3
    assert [n for n in os.listdir(cache) if not n.endswith(".lock")] == []
