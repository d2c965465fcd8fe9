# SPDX-License-Identifier: Apache-2.0
"""Hostile images: every one is refused with one clear line and exit 125, or
(symlinks, which mean the image's own root) contained in the destination;
either way nothing outside the destination changes and nothing is left."""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import tempfile

import pytest

from ocilib import (MT_GZIP, MT_INDEX, MT_MANIFEST, MT_TAR, MT_ZSTD, hide_openat2, put_blob,
                    rewrite_config, sha256, snapshot, tar_bytes, write_layout)


@pytest.fixture
def host(tmp_path):
    """A work dir with a canary tree; the test's images aim at it."""
    canary = tmp_path / "canary"
    canary.mkdir()
    (canary / "keep").write_text("precious\n")
    (canary / "sub").mkdir()
    os.chmod(canary, 0o750)
    return tmp_path


def host_state(host, dest):
    """Everything outside dest that an escape could touch."""
    state = {k: v for k, v in snapshot(host).items()
             if k != os.path.basename(dest) and not k.startswith(os.path.basename(dest) + "/")
             and not k.startswith("img")}
    state["/etc/shadow"] = os.stat("/etc/shadow").st_mtime_ns
    state["/etc/shadow-mode"] = os.stat("/etc/shadow").st_mode
    return state


def unpack(run, host, layers, *extra, **kw):
    img = host / "img"
    write_layout(str(img), layers, **kw)
    dest = host / "dest"
    before = host_state(host, dest)
    p = run("unpack", *extra, f"{img}:latest", str(dest))
    assert host_state(host, dest) == before, "something outside the destination changed"
    leftovers = [n for n in os.listdir(host) if ".kiwi-" in n]
    assert not leftovers, f"scratch left behind: {leftovers}"
    return p, dest


def assert_refused(p, dest, *words):
    assert p.returncode == 125, f"exit {p.returncode}: {p.stderr}"
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kiwi-rootfs: "), p.stderr
    for w in words:
        assert w in lines[0], f"`{w}` not in: {lines[0]}"
    assert not dest.exists(), "a refused unpack left a destination"


def L(*entries):
    return (MT_TAR, tar_bytes(entries))


REFUSED = {
    "dotdot": ([L(("file", "../escape", "x"))], ["entry `../escape`", "climbs out", "layer 1/1"]),
    "dotdot-deep": ([L(("dir", "a"), ("file", "a/../../escape", "x"))], ["climbs out"]),
    "absolute": ([L(("file", "/tmp/kiwi-absolute-escape", "x"))], ["absolute"]),
    "hardlink-shadow-abs": ([L(("hardlink", "shadow", "/etc/shadow"))], ["hardlink target", "absolute"]),
    "hardlink-shadow-dotdot": ([L(("hardlink", "shadow", "../../../../../../etc/shadow"))],
                               ["hardlink target", "climbs out"]),
    "hardlink-via-symlink": ([L(("symlink", "e", "/etc"), ("hardlink", "shadow", "e/shadow"))],
                             ["cannot hardlink"]),
    "whiteout-dotdot": ([L(("dir", "d")), L(("file", "../.wh.x", ""))], ["climbs out", "layer 2/2"]),
    "whiteout-of-dotdot": ([L(("dir", "d")), L(("file", "d/.wh...", ""))], ["whiteout names `..`"]),
    "root-replaced": ([L(("file", ".", "x"))], ["replace the root"]),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_entries(run, host, case):
    layers, words = REFUSED[case]
    p, dest = unpack(run, host, layers)
    assert_refused(p, dest, *words)


def test_symlink_escape_dangling_is_refused(run, host):
    # The target means the image's own root, where it does not exist.
    canary = str(host / "canary")
    p, dest = unpack(run, host, [L(("symlink", "out", canary), ("file", "out/pwned", "x"))])
    assert_refused(p, dest, "entry `out/pwned`", "cannot open directory `out`")


def test_symlink_escape_is_contained(run, host):
    canary = str(host / "canary")
    p, dest = unpack(run, host, [L(("dir", canary.lstrip("/")), ("symlink", "out", canary),
                                   ("symlink", "up", "../../../.."), ("dir", "deep/er"),
                                   ("symlink", "deep/er/abs", canary), ("symlink", "deep/er/up", "../../.."),
                                   ("file", "out/pwned", "x"), ("file", "up/pwned2", "y"),
                                   ("file", "deep/er/abs/pwned3", "z"), ("file", "deep/er/up/pwned4", "w"))])
    assert p.returncode == 0, p.stderr
    assert (dest / canary.lstrip("/") / "pwned").read_text() == "x"
    assert (dest / "pwned2").read_text() == "y"
    assert (dest / canary.lstrip("/") / "pwned3").read_text() == "z"  # "/" is the image's root
    assert (dest / "pwned4").read_text() == "w"  # ".." stops at the image's root


def test_dotdot_walk_holds_while_the_host_renames(run, host, tmp_path_factory):
    """openat2 fails EAGAIN on a ".." walk whenever a rename or a mount
    anywhere on the host raced it; that is a retry, not a refusal (CI saw
    `up`: Resource temporarily unavailable next to parallel suites)."""
    spin = tmp_path_factory.mktemp("renamer")
    renamer = subprocess.Popen([sys.executable, "-c", RENAMER, str(spin)])
    try:
        for i in range(8):
            shutil.rmtree(host / "dest", ignore_errors=True)
            p, dest = unpack(run, host, [L(*[("symlink", f"up{n}", "../../..") for n in range(40)],
                                           *[("file", f"up{n}/f", str(n)) for n in range(40)])])
            assert p.returncode == 0, f"round {i}: {p.stderr}"
            assert (dest / "f").read_text() == "39"
    finally:
        renamer.kill()
        renamer.wait()


RENAMER = """
import os, sys
a, b = os.path.join(sys.argv[1], "a"), os.path.join(sys.argv[1], "b")
open(a, "w").close()
while True:
    os.rename(a, b)
    os.rename(b, a)
"""


def test_symlink_planted_then_written_through_refused(run, host):
    canary = str(host / "canary")
    layers = [L(("symlink", "planted", canary)), L(("file", "planted/keep", "overwritten"))]
    p, dest = unpack(run, host, layers)
    assert_refused(p, dest, "layer 2/2", "entry `planted/keep`")


def test_symlink_planted_then_written_through_contained(run, host):
    canary = str(host / "canary")
    inside = canary.lstrip("/")
    layers = [L(("dir", inside + "/sub"), ("file", inside + "/keep", "image's own"),
                ("symlink", "planted", canary)),
              L(("file", "planted/keep", "overwritten"), ("dir", "planted/sub", 0o777),
                ("hardlink", "planted/link", "planted/keep"), ("file", "planted/.wh.sub", ""))]
    p, dest = unpack(run, host, layers)
    assert p.returncode == 0, p.stderr
    assert (dest / inside / "keep").read_text() == "overwritten"
    assert os.stat(dest / inside / "link").st_ino == os.stat(dest / inside / "keep").st_ino
    assert (dest / inside / "sub").is_dir()  # same-layer entries survive its whiteout


def test_symlink_replaced_by_dir_chmod(run, host):
    canary = str(host / "canary")
    p, dest = unpack(run, host, [L(("symlink", "c", canary)), L(("dir", "c", 0o777))])
    assert p.returncode == 0, p.stderr
    assert (dest / "c").is_dir() and not (dest / "c").is_symlink()
    assert oct(os.stat(dest / "c").st_mode & 0o7777) == oct(0o777)


def test_whiteout_and_opaque_through_symlink(run, host):
    canary = str(host / "canary")
    layers = [L(("symlink", "w", canary), ("symlink", "o", canary)),
              L(("file", "w/.wh.keep", ""), ("file", "o/.wh..wh..opq", ""))]
    p, dest = unpack(run, host, layers)
    assert p.returncode == 0, p.stderr


def test_device_nodes_skipped_rootless(kiwi_rootfs, request):
    if os.geteuid() != 0:
        pytest.skip("needs root to drop to an unprivileged uid")
    if not shutil.which("setpriv"):
        pytest.skip("setpriv (util-linux) is missing")
    host = tempfile.mkdtemp(prefix="kiwi-rootless-", dir="/tmp")
    request.addfinalizer(lambda: shutil.rmtree(host))
    host = pathlib.Path(host)
    img = host / "img"
    write_layout(str(img), [L(("chr", "null", 1, 3), ("blk", "sda", 8, 0), ("file", "f", "x"))])
    os.chmod(host, 0o777)
    for dirpath, dirs, files in os.walk(img):
        os.chmod(dirpath, 0o755)
        for f in files:
            os.chmod(os.path.join(dirpath, f), 0o644)
    dest = host / "dest"
    p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                        kiwi_rootfs, "unpack", f"{img}:latest", str(dest)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.returncode == 0, p.stderr
    assert "2 device nodes not created" in p.stderr
    assert (dest / "f").read_text() == "x" and not (dest / "null").exists()


def test_device_nodes_as_root(run, host):
    if os.geteuid() != 0:
        pytest.skip("creating device nodes needs root")
    p, dest = unpack(run, host, [L(("chr", "null", 1, 3))])
    assert p.returncode == 0, p.stderr
    assert os.stat(dest / "null").st_rdev == os.makedev(1, 3)


def test_gzip_bomb(run, host):
    big = tar_bytes([("file", "zeros", b"\0" * (64 << 20))])
    p, dest = unpack(run, host, [(MT_GZIP, big)], "--max-size", "8M")
    assert_refused(p, dest, "size limit", "--max-size", "entry `zeros`")


def test_entry_bomb(run, host):
    many = tar_bytes([("file", f"f{i}", "") for i in range(300)])
    p, dest = unpack(run, host, [(MT_TAR, many)], "--max-entries", "100")
    assert_refused(p, dest, "more than 100 entries")


def test_digest_mismatch(run, host):
    data = tar_bytes([("file", "a", "x")])
    p, dest = unpack(run, host, [{"media_type": MT_TAR, "data": data, "digest": sha256(b"other")}])
    assert_refused(p, dest, "has digest", "layer 1/1")


def test_truncated_blob(run, host):
    data = tar_bytes([("file", "a", "x" * 5000)])
    img = host / "img"
    write_layout(str(img), [(MT_GZIP, data)])
    manifest = json.load(open(img / "index.json"))["manifests"][0]["digest"]
    layer = json.loads((img / "blobs/sha256" / manifest.split(":")[1]).read_bytes())["layers"][0]
    path = img / "blobs/sha256" / layer["digest"].split(":")[1]
    path.write_bytes(path.read_bytes()[:-30])
    dest = host / "dest"
    p = run("unpack", f"{img}:latest", str(dest))
    assert_refused(p, dest, "layer 1/1")
    assert "bytes" in p.stderr or "digest" in p.stderr


def test_blob_longer_than_descriptor(run, host):
    data = tar_bytes([("file", "a", "x")])
    p, dest = unpack(run, host, [{"media_type": MT_TAR, "data": data, "size": 100}])
    assert_refused(p, dest, "longer than its descriptor")


def test_missing_blob(run, host):
    data = tar_bytes([("file", "a", "x")])
    p, dest = unpack(run, host, [{"media_type": MT_TAR, "data": data, "digest": sha256(b"gone")}],
                     )
    assert p.returncode == 125
    img = host / "img"
    os.unlink(img / "blobs/sha256" / sha256(b"gone").split(":")[1])
    p = run("unpack", f"{img}:latest", str(dest))
    assert_refused(p, dest, "cannot open blob", "No such file")


def test_blob_symlink_refused(run, host):
    img = host / "img"
    data = tar_bytes([("file", "a", "x")])
    write_layout(str(img), [(MT_TAR, data)])
    blob = img / "blobs/sha256" / sha256(data).split(":")[1]
    os.unlink(blob)
    os.symlink("/etc/passwd", blob)
    dest = host / "dest"
    p = run("unpack", f"{img}:latest", str(dest))
    assert_refused(p, dest, "cannot open blob")


def two_layers(media_type):
    return [(media_type, tar_bytes([("file", "a", "lower")])),
            (media_type, tar_bytes([("file", "b", "upper")]))]


@pytest.mark.parametrize("media_type", [MT_TAR, MT_GZIP, MT_ZSTD])
def test_wrong_diff_id(run, host, media_type):
    """Blob digests all right, the config's diff_id for layer 2 not: only
    hashing the uncompressed stream can catch it."""
    if media_type == MT_ZSTD and not shutil.which("zstd"):
        pytest.skip("zstd (the command) is missing")
    layers = two_layers(media_type)
    img = host / "img"
    write_layout(str(img), layers)
    wrong = sha256(b"not this layer")
    rewrite_config(str(img), lambda c: c["rootfs"]["diff_ids"].__setitem__(1, wrong))
    dest = host / "dest"
    p = run("unpack", f"{img}:latest", str(dest))
    assert_refused(p, dest, "layer 2/2", "diff_id", sha256(layers[1][1]), wrong)
    assert not [n for n in os.listdir(host) if ".kiwi-" in n], "scratch left behind"


def test_wrong_diff_id_leaves_no_cache_entry(run, host):
    img = host / "img"
    write_layout(str(img), two_layers(MT_GZIP))
    rewrite_config(str(img), lambda c: c["rootfs"]["diff_ids"].reverse())
    cache = host / "cache"
    p = run("unpack", "--cache-dir", str(cache), f"{img}:latest")
    assert_refused(p, cache / "none", "layer 1/2", "diff_id")
    assert [n for n in os.listdir(cache) if not n.endswith(".lock")] == []


BAD_DIFF_IDS = {
    "one-short": (lambda ids: ids[:1], ["has 1 entries for 2 layers"]),
    "one-extra": (lambda ids: ids + [sha256(b"x")], ["has 3 entries for 2 layers"]),
    "uppercase": (lambda ids: [ids[0], ids[1].upper().replace("SHA256", "sha256")],
                  ["diff_id of layer 2", "malformed sha256"]),
    "short-hex": (lambda ids: [ids[0][:-2], ids[1]], ["diff_id of layer 1", "malformed sha256"]),
    "no-alg": (lambda ids: [ids[0], ids[1].split(":")[1]], ["diff_id of layer 2", "alg:hex"]),
    "md5": (lambda ids: ["md5:" + "0" * 32, ids[1]], ["diff_id of layer 1", "unsupported algorithm"]),
    "number": (lambda ids: [ids[0], 7], ["diff_id of layer 2", "not a string"]),
}


@pytest.mark.parametrize("case", sorted(BAD_DIFF_IDS))
def test_malformed_diff_ids(run, host, case):
    edit, words = BAD_DIFF_IDS[case]
    img = host / "img"
    write_layout(str(img), two_layers(MT_GZIP))
    rewrite_config(str(img), lambda c: c["rootfs"].__setitem__("diff_ids", edit(c["rootfs"]["diff_ids"])))
    dest = host / "dest"
    p = run("unpack", f"{img}:latest", str(dest))
    assert_refused(p, dest, "rootfs.diff_ids" if "entries" in words[0] else "config", *words)


@pytest.mark.parametrize("rootfs", [None, {"type": "layers"}, {"type": "tarballs", "diff_ids": []},
                                    {"type": "layers", "diff_ids": "sha256:00"}])
def test_malformed_rootfs(run, host, rootfs):
    img = host / "img"
    write_layout(str(img), two_layers(MT_TAR))

    def edit(c):
        if rootfs is None:
            del c["rootfs"]
        else:
            c["rootfs"] = rootfs
    rewrite_config(str(img), edit)
    dest = host / "dest"
    p = run("unpack", f"{img}:latest", str(dest))
    assert_refused(p, dest, "`rootfs` is not an object")


def test_diff_id_covers_the_tail_after_the_tar(run, host):
    """Bytes after the tar's end blocks are part of the uncompressed layer:
    the diff_id over all of it passes, one over the tar alone does not."""
    tar = tar_bytes([("file", "a", "x")])
    tail = tar + b"\0" * 20000 + b"trailing bytes"
    img = host / "img"
    write_layout(str(img), [(MT_GZIP, tail)])
    p = run("unpack", f"{img}:latest", str(host / "ok"))
    assert p.returncode == 0, p.stderr
    rewrite_config(str(img), lambda c: c["rootfs"].__setitem__("diff_ids", [sha256(tar)]))
    p = run("unpack", f"{img}:latest", str(host / "dest"))
    assert_refused(p, host / "dest", "layer 1/1", "diff_id", sha256(tail), sha256(tar))


def test_tail_bomb_after_the_tar(run, host):
    """Zeros after the end of the tar cost nothing compressed: what the
    diff_id hashing reads there is bounded by --max-size."""
    data = tar_bytes([("file", "a", "x")]) + b"\0" * (64 << 20)
    p, dest = unpack(run, host, [(MT_GZIP, data)], "--max-size", "8M")
    assert_refused(p, dest, "layer 1/1", "after the end of the tar archive", "--max-size")


def nested_index(img, target, depth):
    """Wraps target (a descriptor) in depth nested indexes; returns the top."""
    for _ in range(depth):
        idx = json.dumps({"schemaVersion": 2, "manifests": [target]}).encode()
        target = {"mediaType": MT_INDEX, **put_blob(str(img), idx)}
    return target


def test_index_cycle(run, host):
    img = host / "img"
    write_layout(str(img), [L(("file", "a", "x"))], tag=None)
    # An index blob that names itself: its digest can never match, and the
    # walk must stop either way (on the digest, or on the loop).
    fake = sha256(b"cycle")
    body = json.dumps({"schemaVersion": 2, "manifests": [
        {"mediaType": MT_INDEX, "digest": fake, "size": 0}]}).encode()
    put_blob(str(img), body, digest=fake)
    top = {"mediaType": MT_INDEX, "digest": fake, "size": len(body),
           "annotations": {"org.opencontainers.image.ref.name": "latest"}}
    json.dump({"schemaVersion": 2, "manifests": [top]}, open(img / "index.json", "w"))
    dest = host / "dest"
    p = run("unpack", f"{img}:latest", str(dest))
    assert_refused(p, dest, "index")


def test_index_nesting_too_deep(run, host):
    img = host / "img"
    write_layout(str(img), [L(("file", "a", "x"))], tag=None)
    index = json.load(open(img / "index.json"))
    top = nested_index(img, index["manifests"][0], 12)
    json.dump({"schemaVersion": 2, "manifests": [top]}, open(img / "index.json", "w"))
    dest = host / "dest"
    p = run("unpack", str(img), str(dest))
    assert_refused(p, dest, "nest deeper")


def test_unsupported_media_type(run, host):
    p, dest = unpack(run, host, [("application/vnd.oci.image.layer.v1.tar+bzip2", b"x")])
    assert_refused(p, dest, "unsupported media type")


def test_destination_not_empty(run, host):
    dest = host / "dest"
    dest.mkdir()
    (dest / "mine").write_text("keep")
    img = host / "img"
    write_layout(str(img), [L(("file", "a", "x"))])
    p = run("unpack", f"{img}:latest", str(dest))
    assert p.returncode == 125 and "not an empty directory" in p.stderr
    assert os.listdir(dest) == ["mine"]


def test_unknown_tag(run, host):
    p, dest = unpack(run, host, [L(("file", "a", "x"))])
    shutil.rmtree(dest)
    p = run("unpack", f"{host / 'img'}:nope", str(dest))
    assert_refused(p, dest, "tagged nope", "tags: latest")


def test_bad_usage(run, host):
    for args in (["unpack"], ["unpack", "--max-size", "lots", "a", "b"], ["frobnicate"]):
        p = run(*args)
        assert p.returncode == 125 and p.stderr.count("\n") == 1, (args, p.stderr)


def test_blobs_dir_symlink_refused(run, host):
    img = host / "img"
    write_layout(str(img), [L(("file", "a", "x"))])
    os.rename(img / "blobs", host / "elsewhere")
    os.symlink(host / "elsewhere", img / "blobs")
    dest = host / "dest"
    p = run("unpack", f"{img}:latest", str(dest))
    assert_refused(p, dest, "cannot open blob")


def test_snapshot_refuses_a_base_blob_that_is_a_symlink(run, host):
    """A snapshot on a base image whose layer blob is a symlink is refused,
    as unpack refuses it, instead of linking the symlink itself into the
    new layout, where a reader that follows it (a push) reads the host."""
    img = host / "img"
    write_layout(str(img), [L(("file", "a", "x"))])
    blobs = img / "blobs" / "sha256"
    index = json.loads((img / "index.json").read_text())
    manifest = json.loads((blobs / index["manifests"][0]["digest"].split(":")[1]).read_text())
    layer = manifest["layers"][0]["digest"].split(":")[1]
    os.rename(blobs / layer, host / "outside")
    os.symlink(host / "outside", blobs / layer)
    tree = host / "tree"
    tree.mkdir()
    (tree / "f").write_text("f\n")
    fd = os.open(tree, os.O_RDONLY | os.O_DIRECTORY)
    out = host / "out"
    try:
        p = run("snapshot", "--base", f"{img}:latest", "--tree", f"{fd}:", f"{out}:x", pass_fds=(fd,))
    finally:
        os.close(fd)
    assert_refused(p, out, "cannot open blob")


def test_oci_archive_with_device_refused(run, host):
    img = host / "img"
    write_layout(str(img), [L(("file", "a", "x"))])
    archive = host / "img.tar"
    with tarfile.open(archive, "w") as t:
        for name in sorted(os.listdir(img)):
            t.add(img / name, arcname=name)
        dev = tarfile.TarInfo("sda")
        dev.type, dev.devmajor, dev.devminor, dev.mode = tarfile.BLKTYPE, 8, 0, 0o666
        t.addfile(dev)
    dest = host / "dest"
    scratch = host / "tmp"
    scratch.mkdir()
    p = run("unpack", f"{archive}:latest", str(dest), env={**os.environ, "TMPDIR": str(scratch)})
    assert_refused(p, dest, "entry `sda` is neither a file nor a directory")
    assert os.listdir(scratch) == [], "the archive's scratch copy was left behind"


@pytest.mark.parametrize("media_type", [MT_TAR, MT_GZIP, MT_ZSTD])
def test_garbage_layer(run, host, media_type):
    blob = os.urandom(4096)
    p, dest = unpack(run, host, [{"media_type": media_type, "data": blob, "raw": True}])
    assert_refused(p, dest, "layer 1/1")


def test_without_openat2_still_contained(kiwi_rootfs, host):
    """Where openat2 is missing, the userspace walk keeps the same promise."""
    if os.uname().machine != "x86_64":
        pytest.skip("the test's seccomp filter is written for x86_64")
    canary = str(host / "canary")
    inside = canary.lstrip("/")
    img = host / "img"
    write_layout(str(img), [L(("dir", inside), ("symlink", "abs", canary), ("symlink", "up", "../../.."),
                              ("symlink", "loop", "loop"), ("file", "abs/w1", "1"), ("file", "up/w2", "2")),
                            L(("file", "abs/.wh.keep", ""), ("hardlink", "up/h", "abs/w1"))])
    dest = host / "dest"
    before = host_state(host, dest)
    p = subprocess.run([kiwi_rootfs, "unpack", f"{img}:latest", str(dest)], preexec_fn=hide_openat2,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.returncode == 0, p.stderr
    assert host_state(host, dest) == before
    assert (dest / inside / "w1").read_text() == "1" and (dest / "w2").read_text() == "2"
    assert os.stat(dest / "h").st_ino == os.stat(dest / inside / "w1").st_ino
    write_layout(str(img), [L(("symlink", "loop", "loop"), ("file", "loop/x", "1"))])
    p = subprocess.run([kiwi_rootfs, "unpack", f"{img}:latest", str(host / "d2")], preexec_fn=hide_openat2,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert_refused(p, host / "d2", "entry `loop/x`", "symbolic links")


def zstd_of(data):
    if not shutil.which("zstd"):
        pytest.skip("zstd (the command) is missing")
    return subprocess.run(["zstd", "-q", "-c"], input=data, stdout=subprocess.PIPE, check=True).stdout


def test_zstd_frame_cut_short(run, host):
    """A zstd blob whose last frame ends early, its digest right: refused
    for what it is, whatever the tar reader made of the stream."""
    data = tar_bytes([("file", "a", os.urandom(300000))])
    p, dest = unpack(run, host, [{"media_type": MT_ZSTD, "data": data, "blob": zstd_of(data)[:-200]}])
    assert_refused(p, dest, "layer 1/1", "Truncated zstd input")


def test_zstd_garbage_after_the_frame(run, host):
    data = tar_bytes([("file", "a", "x")])
    p, dest = unpack(run, host, [{"media_type": MT_ZSTD, "data": data, "blob": zstd_of(data) + b"garbage!"}])
    assert_refused(p, dest, "layer 1/1", "Zstd decompression failed")
