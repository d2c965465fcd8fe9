# SPDX-License-Identifier: Apache-2.0
"""pack -> unpack is lossless; pack --reproducible is byte-stable; layers,
whiteouts and selection behave as the image spec says."""
import hashlib
import io
import json
import os
import shutil
import subprocess
import stat
import struct
import tarfile
import time

import pytest

from ocilib import MT_GZIP, MT_TAR, MT_ZSTD, snapshot, tar_bytes, write_layout


def build_tree(root, owners=True):
    root.mkdir()
    (root / "etc").mkdir()
    (root / "etc/hosts").write_text("127.0.0.1 localhost\n")
    (root / "bin").mkdir()
    tool = root / "bin/tool"
    tool.write_bytes(b"#!/bin/sh\necho hi\n")
    os.chmod(tool, 0o4755)
    (root / "secret").write_text("s")
    os.chmod(root / "secret", 0o600)
    (root / "tmp").mkdir()
    os.chmod(root / "tmp", 0o1777)
    (root / "private").mkdir()
    (root / "private/inner").write_text("in")
    os.chmod(root / "private", 0o700)
    (root / "big").write_bytes(hashlib.sha256(b"seed").digest() * 40000)
    (root / "empty").write_bytes(b"")
    with open(root / "sparse", "wb") as f:
        f.seek(3 << 20)
        f.write(b"end")
    (root / "name with spaces é").write_text("u")
    os.symlink("/etc/hosts", root / "abs-link")
    os.symlink("../etc/hosts", root / "bin/rel-link")
    os.symlink("nowhere", root / "dangling")
    os.link(root / "etc/hosts", root / "etc/hosts.hard")
    os.mkfifo(root / "fifo")
    os.setxattr(root / "etc/hosts", "user.kiwi", b"value")
    if owners:
        os.chown(root / "secret", 1234, 5678)
        os.lchown(root / "abs-link", 42, 43)
        os.mknod(root / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    os.utime(root / "etc/hosts", ns=(1_600_000_000_123_456_789, 1_600_000_000_123_456_789))
    os.utime(root / "etc", (1_500_000_000, 1_500_000_000))
    return root


def full_snapshot(root):
    snap = snapshot(root)
    for rel, info in snap.items():
        p = os.path.join(root, rel)
        info["mtime"] = os.lstat(p).st_mtime_ns
        if not os.path.islink(p):
            info["xattrs"] = {k: os.getxattr(p, k) for k in os.listxattr(p)}
    return snap


@pytest.fixture
def tree(tmp_path):
    return build_tree(tmp_path / "tree", owners=os.geteuid() == 0)


@pytest.mark.parametrize("compression", ["gzip", "zstd", "none"])
def test_pack_unpack_lossless(run, tmp_path, tree, compression):
    layout = tmp_path / "layout"
    p = run("pack", str(tree), f"{layout}:v1", "--compression", compression, "--entrypoint", "/bin/tool",
            "--cmd", "-x", "--env", "A=b", "--workdir", "/tmp", "--user", "1000:1000", check=0)
    digest = p.stdout.strip()
    out = tmp_path / "out"
    run("unpack", f"{layout}@{digest}", str(out), check=0)
    assert full_snapshot(out) == full_snapshot(tree)
    assert os.stat(out / "etc/hosts").st_ino == os.stat(out / "etc/hosts.hard").st_ino
    assert os.stat(out / "sparse").st_blocks * 512 < (1 << 20), "sparse file was filled in"
    info = json.loads(run("inspect", f"{layout}:v1", check=0).stdout)
    assert info["manifest"]["digest"] == digest
    assert info["runtime"]["Entrypoint"] == ["/bin/tool"] and info["runtime"]["Cmd"] == ["-x"]
    assert "A=b" in info["runtime"]["Env"] and info["runtime"]["WorkingDir"] == "/tmp"
    assert info["runtime"]["User"] == "1000:1000" and len(info["layers"]) == 1


def test_reproducible(run, tmp_path, tree):
    a = run("pack", "--reproducible", str(tree), f"{tmp_path / 'a'}:t", check=0).stdout
    os.utime(tree / "etc/hosts", (1, 1))
    b = run("pack", "--reproducible", str(tree), f"{tmp_path / 'b'}:t", check=0).stdout
    assert a == b
    c = run("pack", str(tree), f"{tmp_path / 'c'}:t", check=0).stdout
    assert a != c  # without --reproducible the mtimes are kept


def test_oci_archive(run, tmp_path, tree):
    layout = tmp_path / "layout"
    run("pack", str(tree), f"{layout}:v1", check=0)
    archive = tmp_path / "image.tar"
    with tarfile.open(archive, "w") as t:
        for name in sorted(os.listdir(layout)):
            t.add(layout / name, arcname=name)
    out = tmp_path / "out"
    run("unpack", f"{archive}:v1", str(out), check=0)
    assert full_snapshot(out) == full_snapshot(tree)


def test_pack_failure_leaves_nothing(run, tmp_path):
    layout = tmp_path / "layout"
    p = run("pack", str(tmp_path / "missing"), f"{layout}:v1")
    assert p.returncode == 125 and "missing" in p.stderr and not layout.exists()
    tree = tmp_path / "t"
    tree.mkdir()
    (tree / "unreadable").write_text("x")
    os.chmod(tree / "unreadable", 0)
    if os.geteuid() != 0:
        p = run("pack", str(tree), f"{layout}:v1")
        assert p.returncode == 125 and not layout.exists()


def test_layers_whiteouts(run, tmp_path):
    img = tmp_path / "img"
    l1 = tar_bytes([("dir", "d"), ("file", "d/lower", "1"), ("dir", "d/sub"), ("file", "d/sub/x", "1"),
                    ("file", "gone", "1"), ("dir", "gonedir"), ("file", "gonedir/f", "1"),
                    ("dir", "keep"), ("file", "keep/a", "1"), ("file", "replaced", "file")])
    l2 = tar_bytes([("dir", "d"), ("file", "d/new", "2"), ("file", "d/.wh..wh..opq", ""),
                    ("file", ".wh.gone", ""), ("file", ".wh.gonedir", ""), ("file", "keep/b", "2"),
                    ("dir", "replaced"), ("file", "replaced/now-a-dir", "2")])
    l3 = tar_bytes([("file", "d/sub", "now a file"), ("file", "gone", "back")])
    write_layout(str(img), [(MT_GZIP, l1), (MT_ZSTD, l2), (MT_TAR, l3)])
    out = tmp_path / "out"
    run("unpack", f"{img}:latest", str(out), check=0)
    files = sorted(os.path.relpath(os.path.join(d, n), out)
                   for d, ds, fs in os.walk(out) for n in ds + fs)
    assert files == ["d", "d/new", "d/sub", "gone", "keep", "keep/a", "keep/b",
                     "replaced", "replaced/now-a-dir"]
    assert (out / "d/sub").read_text() == "now a file" and (out / "gone").read_text() == "back"


def test_selection(run, tmp_path, tree):
    layout = tmp_path / "layout"
    d1 = run("pack", str(tree), f"{layout}:one", check=0).stdout.strip()
    (tree / "extra").write_text("x")
    d2 = run("pack", str(tree), f"{layout}:two", check=0).stdout.strip()
    assert d1 != d2
    p = run("unpack", str(layout), str(tmp_path / "o"))
    assert p.returncode == 125 and "several" in p.stderr and "one, two" in p.stderr
    run("unpack", f"{layout}:two", str(tmp_path / "o2"), check=0)
    assert (tmp_path / "o2/extra").exists()
    run("unpack", f"{layout}@{d1}", str(tmp_path / "o1"), check=0)
    assert not (tmp_path / "o1/extra").exists()
    p = run("unpack", "--platform", "linux/arm64", f"{layout}:one", str(tmp_path / "o3"))
    assert p.returncode == 125 and "platform linux/arm64" in p.stderr
    run("pack", "--platform", "linux/arm64", str(tree), f"{layout}:one", check=0)
    run("unpack", "--platform", "linux/arm64", f"{layout}:one", str(tmp_path / "o4"), check=0)


def test_json_output(run, tmp_path, tree):
    layout = tmp_path / "layout"
    run("pack", str(tree), f"{layout}:v1", check=0)
    p = run("unpack", "--json", f"{layout}:v1", str(tmp_path / "o"), check=0)
    events = [json.loads(line) for line in p.stdout.splitlines()]
    assert events[-1]["event"] == "unpacked" and events[-1]["layers"] == 1
    assert events[-1]["entries"] >= 15
    p = run("unpack", "--json", f"{layout}:nope", str(tmp_path / "o2"))
    assert p.returncode == 125 and json.loads(p.stdout)["event"] == "error"


def nobody_host(request):
    """A directory under /tmp that uid 65534 reaches, removed after the
    test; skips where no unprivileged run can be made."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to run as an unprivileged uid")
    import pathlib
    import tempfile
    host = pathlib.Path(tempfile.mkdtemp(prefix="kiwi-rootless-", dir="/tmp"))
    request.addfinalizer(lambda: subprocess.run(["rm", "-rf", str(host)]))
    return host


def unpack_as_nobody(kiwi_rootfs, host, ref, out):
    """kiwi-rootfs unpack as uid 65534, what host holds made readable."""
    subprocess.run(["chmod", "-R", "a+rX", str(host)], check=True)
    os.chmod(host, 0o777)
    return subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                           kiwi_rootfs, "unpack", ref, str(out)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_rootless_unpack(kiwi_rootfs, request):
    """As an unprivileged user: read-only and 0000 directories still get
    their children, modes land at the end, owners are noted, not applied."""
    host = nobody_host(request)
    img = host / "img"
    entries = [("dir", "ro", 0o555), ("file", "ro/f", "x", 0o444), ("dir", "locked", 0o000),
               ("file", "locked/inner", "y"), ("file", "suid", "z", 0o4755)]
    raw = tar_bytes(entries)
    write_layout(str(img), [(MT_GZIP, raw)])
    write_layout(str(host / "img2"), [(MT_TAR, tar_bytes([("dir", "ro", 0o555), ("file", "ro/f", "")])),
                                      (MT_TAR, tar_bytes([("file", "ro/.wh.f", "")]))])
    out = host / "out"
    p = unpack_as_nobody(kiwi_rootfs, host, f"{img}:latest", out)
    assert p.returncode == 0, p.stderr
    assert "entries keep your own uid/gid" in p.stderr
    assert stat.S_IMODE(os.stat(out / "ro").st_mode) == 0o555
    assert stat.S_IMODE(os.stat(out / "locked").st_mode) == 0o000
    assert stat.S_IMODE(os.stat(out / "suid").st_mode) == 0o4755
    assert (out / "locked/inner").read_text() == "y"
    assert os.stat(out / "ro/f").st_uid == 65534
    p = unpack_as_nobody(kiwi_rootfs, host, f"{host / 'img2'}:latest", host / "out2")
    assert p.returncode == 0, p.stderr
    assert os.listdir(host / "out2/ro") == []


def test_nested_multiarch_index(run, tmp_path):
    """A tag on an index of per-platform manifests, as multi-arch images are."""
    from ocilib import MT_INDEX, REF, put_blob
    img = tmp_path / "img"
    amd = write_layout(str(img), [L_("amd64")], tag=None)
    arm = write_layout(str(img), [L_("arm64")], tag=None, platform=("linux", "arm64"))
    manifests = []
    for digest, arch in ((amd, "amd64"), (arm, "arm64")):
        size = os.path.getsize(img / "blobs/sha256" / digest.split(":")[1])
        manifests.append({"mediaType": "application/vnd.oci.image.manifest.v1+json",
                          "digest": digest, "size": size,
                          "platform": {"os": "linux", "architecture": arch}})
    inner = put_blob(str(img), json.dumps({"schemaVersion": 2, "mediaType": MT_INDEX,
                                           "manifests": manifests}).encode())
    top = {"schemaVersion": 2, "manifests": [{"mediaType": MT_INDEX, **inner,
                                              "annotations": {REF: "multi"}}]}
    (img / "index.json").write_text(json.dumps(top))
    for platform, want in ((None, "amd64"), ("linux/arm64", "arm64"), ("linux/arm64/v8", None)):
        out = tmp_path / f"out-{platform or 'default'}".replace("/", "-")
        args = ["--platform", platform] if platform else []
        p = run("unpack", *args, f"{img}:multi", str(out))
        if want:
            assert p.returncode == 0, p.stderr
            assert (out / "arch").read_text() == want
        else:
            assert p.returncode == 125 and "no image for platform linux/arm64/v8" in p.stderr
    run("unpack", f"{img}@{inner['digest']}", str(tmp_path / "by-index-digest"), check=0)


def L_(arch):
    return (MT_TAR, tar_bytes([("file", "arch", arch)]))


def test_empty_layers(run, tmp_path):
    img = tmp_path / "img"
    write_layout(str(img), [(MT_TAR, b""), {"media_type": MT_GZIP, "data": b""},
                            (MT_GZIP, tar_bytes([])), (MT_TAR, tar_bytes([("file", "a", "x")]))])
    out = tmp_path / "out"
    run("unpack", f"{img}:latest", str(out), check=0)
    assert os.listdir(out) == ["a"]


def test_file_capabilities_only_when_asked(run, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("setting security.capability needs root")
    import struct
    tree = tmp_path / "tree"
    tree.mkdir()
    ping = tree / "ping"
    ping.write_bytes(b"\x7fELF")
    cap = struct.pack("<IIIII", 0x02000001, 1 << 13, 0, 0, 0)  # v2, effective, cap_net_raw
    os.setxattr(ping, "security.capability", cap)
    layout = tmp_path / "layout"
    run("pack", str(tree), f"{layout}:v1", check=0)
    p = run("unpack", f"{layout}:v1", str(tmp_path / "plain"), check=0)
    assert "security.capability needs --keep-capabilities" in p.stderr
    assert "security.capability" not in os.listxattr(tmp_path / "plain/ping")
    run("unpack", "--keep-capabilities", f"{layout}:v1", str(tmp_path / "caps"), check=0)
    assert os.getxattr(tmp_path / "caps/ping", "security.capability") == cap


def test_implicit_parents_ignore_umask(kiwi_rootfs, tmp_path):
    img = tmp_path / "img"
    write_layout(str(img), [(MT_TAR, tar_bytes([("file", "a/b/c", "x")]))])
    out = tmp_path / "out"
    p = subprocess.run(f"umask 077; exec {kiwi_rootfs} unpack {img}:latest {out}", shell=True,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.returncode == 0, p.stderr
    for d in ("", "a", "a/b"):
        assert stat.S_IMODE(os.stat(out / d).st_mode) == 0o755, d
    assert stat.S_IMODE(os.stat(out / "a/b/c").st_mode) == 0o644


def test_concurrent_packs_keep_every_tag(kiwi_rootfs, tmp_path):
    """Packs started together into one layout, each with its own tag: every
    tag is in index.json after, and each names its own image (index.json's
    read-modify-write is under the layout's lock, written through a temp
    name of its own). Several rounds, so that a lost update shows."""
    trees = []
    for i in range(12):
        t = tmp_path / f"t{i}"
        t.mkdir()
        (t / "which").write_text(f"{i}\n")
        trees.append(t)
    for rnd in range(5):
        layout = tmp_path / f"layout{rnd}"
        procs = [subprocess.Popen([kiwi_rootfs, "pack", str(t), f"{layout}:tag{i}"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for i, t in enumerate(trees)]
        digests = {}
        for i, p in enumerate(procs):
            out, err = p.communicate(timeout=60)
            assert p.returncode == 0, f"pack {i} of round {rnd}: {err}"
            digests[f"tag{i}"] = out.strip()
        index = json.loads((layout / "index.json").read_text())
        tags = {m["annotations"]["org.opencontainers.image.ref.name"]: m["digest"] for m in index["manifests"]}
        assert tags == digests, f"round {rnd}: index.json has {sorted(tags)}"
        assert not [f for f in os.listdir(layout) if f.startswith(".")], os.listdir(layout)


def zstd_frames(data, cuts):
    """data as zstd frames, one after the other (as pzstd writes), cut at
    the offsets given; no checksum, so a frame's last block is the last
    of its input."""
    edges = [0, *cuts, len(data)]
    return b"".join(subprocess.run(["zstd", "-q", "--no-check", "-c"], input=data[a:b], stdout=subprocess.PIPE,
                                   check=True).stdout for a, b in zip(edges, edges[1:]))


@pytest.mark.parametrize("split", [False, True])
def test_zstd_layer_of_many_buffers(run, tmp_path, split):
    """A zstd layer is inflated by libzstd into 1 MiB buffers: a tar of
    several MiB, text and random data, unpacks byte for byte, and its
    diff_id, over the whole stream, holds. Split: a second frame (as
    pzstd writes) that begins 4096 bytes before a buffer's edge and ends
    5000 bytes after it: the end of the first frame is not the end."""
    if not shutil.which("zstd"):
        pytest.skip("zstd (the command) is missing")
    files = [("file", f"d/f{i}", (b"line %d\n" % i) * (i * 997 % 40000)) for i in range(300)]
    files += [("file", "random", os.urandom(3 << 20)), ("file", "zeros", b"\0" * (5 << 20) + b"end")]
    data = tar_bytes([("dir", "d")] + files)
    edge = (len(data) >> 20) + 1 << 20
    data += b"\0" * (edge + 5000 - len(data))  # bytes after the tar are the layer's too
    blob = zstd_frames(data, [edge - 4096] if split else [])
    layout = tmp_path / "img"
    write_layout(str(layout), [{"media_type": MT_ZSTD, "data": data, "blob": blob}])
    out = tmp_path / "out"
    run("unpack", f"{layout}:latest", str(out), check=0)
    for _, name, content in files:
        assert (out / name).read_bytes() == content, name


def test_zstd_media_type_over_a_plain_tar(run, tmp_path):
    """A layer labelled zstd that holds a plain tar unpacks as libarchive
    always read it (no zstd magic: the bytes as they are)."""
    data = tar_bytes([("file", "a", "plain")])
    layout = tmp_path / "img"
    write_layout(str(layout), [{"media_type": MT_ZSTD, "data": data, "raw": True}])
    out = tmp_path / "out"
    run("unpack", f"{layout}:latest", str(out), check=0)
    assert (out / "a").read_text() == "plain"


KINDS = ["file", "dir", "symlink", "hardlink", "fifo"]


def kind_entries(kind, name, tag):
    return {"file": [("file", name, tag)],
            "dir": [("dir", name), ("file", f"{name}/{tag}", tag)],
            "symlink": [("symlink", name, tag)],
            "hardlink": [("hardlink", name, f"target-{tag}")],
            "fifo": [("fifo", name)]}[kind]


def test_each_kind_replaces_each_kind(run, tmp_path):
    """A later layer's entry takes the place of whatever a lower one put
    there, of every kind; a directory over a directory merges. (Each
    entry is created with an exclusive call and the way cleared only when
    that call finds something there.)"""
    lower = [("file", "target-lower", "t1"), ("file", "target-upper", "t2")]
    upper = []
    for old in KINDS:
        for new in KINDS:
            lower += kind_entries(old, f"{old}-{new}", "lower")
            upper += kind_entries(new, f"{old}-{new}", "upper")
    img = tmp_path / "img"
    write_layout(str(img), [(MT_TAR, tar_bytes(lower)), (MT_TAR, tar_bytes(upper))])
    out = tmp_path / "out"
    run("unpack", f"{img}:latest", str(out), check=0)
    for old in KINDS:
        for new in KINDS:
            p = out / f"{old}-{new}"
            st = os.lstat(p)
            want = {"file": stat.S_ISREG, "dir": stat.S_ISDIR, "symlink": stat.S_ISLNK,
                    "hardlink": stat.S_ISREG, "fifo": stat.S_ISFIFO}[new]
            assert want(st.st_mode), f"{p.name}: mode {oct(st.st_mode)}"
            if new == "file":
                assert p.read_text() == "upper"
            if new == "hardlink":
                assert st.st_ino == os.stat(out / "target-upper").st_ino, p.name
            if new == "symlink":
                assert os.readlink(p) == "upper"
            if new == "dir":
                kids = {"lower", "upper"} if old == "dir" else {"upper"}
                assert set(os.listdir(p)) == kids, p.name


def owned_tar(entries):
    """entries: (name, type, mode, gid): root-owned, with these groups."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, kind, mode, gid in entries:
            ti = tarfile.TarInfo(name)
            ti.type, ti.mode, ti.uid, ti.gid, ti.mtime = kind, mode, 0, gid, 1700000000
            ti.size = 1 if kind == tarfile.REGTYPE else 0
            t.addfile(ti, io.BytesIO(b"x") if kind == tarfile.REGTYPE else None)
    return buf.getvalue()


def test_owner_under_a_setgid_directory(run, tmp_path):
    """A file made in a setgid directory takes the directory's group; the
    tar's own group (0 here) is set all the same, also when the root's
    entry makes the root setgid after files were made in it."""
    if os.geteuid() != 0:
        pytest.skip("needs root (chown)")
    F, D = tarfile.REGTYPE, tarfile.DIRTYPE
    data = owned_tar([("a", F, 0o644, 0), ("./", D, 0o2775, 5678), ("b", F, 0o644, 0),
                      ("g", D, 0o2775, 5678), ("g/f", F, 0o644, 0)])
    img = tmp_path / "img"
    write_layout(str(img), [(MT_TAR, data)])
    out = tmp_path / "out"
    run("unpack", f"{img}:latest", str(out), check=0)
    assert os.stat(out / "g").st_gid == 5678 and os.stat(out).st_gid == 5678
    for name in ("a", "b", "g/f"):
        assert os.stat(out / name).st_gid == 0, name


def test_modes_under_a_default_acl(run, tmp_path):
    """Under a directory with a default ACL (which, not the umask, masks
    a new file's mode), files still get the tar's modes exactly."""
    host = tmp_path / "acl"
    host.mkdir()
    # posix_acl_xattr: version 2; user::rwx, group::---, other::---
    acl = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", tag, perm, 0xFFFFFFFF)
                                          for tag, perm in ((0x01, 7), (0x04, 0), (0x20, 0)))
    try:
        os.setxattr(host, "system.posix_acl_default", acl)
    except OSError as e:
        pytest.skip(f"no default ACLs here: {e}")
    data = tar_bytes([("file", "r", "x", 0o644), ("file", "x", "x", 0o755), ("dir", "d"),
                      ("file", "d/r", "x", 0o664)])
    img = tmp_path / "img"
    write_layout(str(img), [(MT_TAR, data)])
    out = host / "out"
    run("unpack", f"{img}:latest", str(out), check=0)
    for name, mode in (("r", 0o644), ("x", 0o755), ("d/r", 0o664)):
        assert stat.S_IMODE(os.stat(out / name).st_mode) == mode, name


def test_rootless_xattr_on_a_read_only_file(kiwi_rootfs, request):
    """As an unprivileged owner, a user.* xattr can be set on a file only
    while it may write it: a read-only file is made writable first, its
    xattr set, and its mode set after."""
    host = nobody_host(request)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        ti = tarfile.TarInfo("ro")
        ti.mode, ti.size, ti.pax_headers = 0o444, 1, {"SCHILY.xattr.user.kiwi": "v"}
        t.addfile(ti, io.BytesIO(b"x"))
    write_layout(str(host / "img"), [(MT_TAR, buf.getvalue())])
    out = host / "out"
    p = unpack_as_nobody(kiwi_rootfs, host, f"{host / 'img'}:latest", out)
    assert p.returncode == 0, p.stderr
    assert os.getxattr(out / "ro", "user.kiwi") == b"v"
    assert stat.S_IMODE(os.stat(out / "ro").st_mode) == 0o444


def test_a_failed_pack_keeps_a_layout_another_pack_tagged(kiwi_rootfs, tmp_path):
    """A pack that made the layout and then fails removes it only while no
    other writer has tagged into it or is writing it: another pack's tag,
    written meanwhile, stays. (Alone, a failed pack still leaves nothing:
    test_pack_failure_leaves_nothing.)"""
    failing = tmp_path / "failing"
    failing.mkdir()
    # A slow start (random bytes compress slowly), then a path too long.
    with open(failing / "a-big", "wb") as f:
        f.write(os.urandom(64 << 20))
    deep = failing / "z"
    deep.mkdir()
    fd = os.open(deep, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(30):
            os.mkdir("d" * 200, dir_fd=fd)
            nfd = os.open("d" * 200, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
    finally:
        os.close(fd)
    other = tmp_path / "other"
    other.mkdir()
    (other / "f").write_text("f\n")
    layout = tmp_path / "layout"
    a = subprocess.Popen([kiwi_rootfs, "pack", "--compression", "gzip", str(failing), f"{layout}:a"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while a.poll() is None and not (layout / "blobs" / "sha256").exists():
            time.sleep(0.002)
        b = subprocess.run([kiwi_rootfs, "pack", str(other), f"{layout}:b"], capture_output=True, text=True)
    finally:
        out, err = a.communicate(timeout=120)
    assert a.returncode == 125 and "too long" in err, err
    assert b.returncode == 0, b.stderr
    index = json.loads((layout / "index.json").read_text())
    assert [m["digest"] for m in index["manifests"]] == [b.stdout.strip()]


def test_snapshot_reads_a_tree_fd_from_its_start(run, tmp_path):
    """A --tree fd already read to its end (the same open directory passed
    to a second snapshot) is read from its start: the same layer, not an
    empty one."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "f").write_text("f\n")
    fd = os.open(tree, os.O_RDONLY | os.O_DIRECTORY)
    try:
        layers = [json.loads(run("snapshot", "--json", "--tree", f"{fd}:", f"{tmp_path / name}:x",
                                 pass_fds=(fd,), check=0).stdout.splitlines()[-1])["digest"]
                  for name in ("a", "b")]
    finally:
        os.close(fd)
    assert layers[0] == layers[1]


# Names that are valid UTF-8 (U+10FFFF is the last code point) and names
# that are not: stray bytes, "/" in overlong forms of two, three and four
# bytes, a surrogate, a code point above U+10FFFF, a five-byte form, a
# sequence cut short.
UTF8_NAMES = ["café.txt".encode(), "日本.md".encode(), b"max\xf4\x8f\xbf\xbf"]
NOT_UTF8_NAMES = [b"n\xffame", b"\xff\xfe", b"ov\xc0\xaf", b"ov3\xe0\x80\xaf", b"ov4\xf0\x80\x80\xaf",
                  b"sur\xed\xa0\x80", b"big\xf4\x90\x80\x80", b"five\xf8\x88\x80\x80\x80", b"cut\xe6\x97"]


def pax_keywords(layout):
    """{name bytes: (pax headers, link target bytes)} of every entry in the
    layout's uncompressed layers."""
    out = {}
    for blob in (layout / "blobs/sha256").iterdir():
        if tarfile.is_tarfile(blob):
            with tarfile.open(blob, encoding="utf-8", errors="surrogateescape") as t:
                for m in t:
                    out[m.name.encode("utf-8", "surrogateescape")] = (
                        m.pax_headers, m.linkname.encode("utf-8", "surrogateescape"))
    return out


def test_names_are_bytes_and_binary_only_where_needed(run, tmp_path):
    """A name that is valid UTF-8 goes into the layer as a plain pax path
    (or linkpath), with no hdrcharset, although kiwi-rootfs runs in the C
    locale; a name that is not UTF-8 goes in as its bytes, marked
    hdrcharset=BINARY in its own pax header; ASCII names carry no such
    keyword (GNU tar warns once per entry that has it). Unpacking gives the
    same bytes back for both."""
    src = tmp_path / "src"
    src.mkdir()
    names = [b"plain"] + UTF8_NAMES + NOT_UTF8_NAMES
    for n in names:
        with open(os.path.join(bytes(src), n), "w") as f:
            f.write("x")
    for n in UTF8_NAMES + NOT_UTF8_NAMES:
        os.symlink(n, os.path.join(bytes(src), b"sym-" + n))
    os.link(os.path.join(bytes(src), UTF8_NAMES[0]), os.path.join(bytes(src), b"hard-" + UTF8_NAMES[0]))
    layout = tmp_path / "layout"
    c_locale = {**os.environ, "LC_ALL": "C"}
    run("pack", str(src), f"{layout}:t", "--compression", "none", check=0, env=c_locale)
    entries = pax_keywords(layout)
    assert entries[b"plain"][0].get("hdrcharset") is None, entries
    for n in UTF8_NAMES:
        pax, _ = entries[n]
        assert "hdrcharset" not in pax and pax["path"].encode() == n, (n, pax)
        pax, target = entries[b"sym-" + n]
        assert "hdrcharset" not in pax and pax["linkpath"].encode() == n == target, (n, pax)
    # The hardlink resolver names the first of the two it met.
    first, second = sorted([UTF8_NAMES[0], b"hard-" + UTF8_NAMES[0]])
    pax, target = entries[second]
    assert "hdrcharset" not in pax and target == first, (pax, target)
    for n in NOT_UTF8_NAMES:
        assert entries[n][0].get("hdrcharset") == "BINARY", (n, entries[n])
        assert entries[b"sym-" + n][0].get("hdrcharset") == "BINARY", (n, entries[b"sym-" + n])
    out = tmp_path / "out"
    run("unpack", f"{layout}:t", str(out), check=0, env=c_locale)
    got = sorted(os.listdir(bytes(out)))
    assert got == sorted(names + [b"sym-" + n for n in UTF8_NAMES + NOT_UTF8_NAMES] + [b"hard-" + UTF8_NAMES[0]])
    for n in UTF8_NAMES + NOT_UTF8_NAMES:
        assert os.readlink(os.path.join(bytes(out), b"sym-" + n)) == n
    assert os.stat(os.path.join(bytes(out), first)).st_ino == os.stat(os.path.join(bytes(out), second)).st_ino