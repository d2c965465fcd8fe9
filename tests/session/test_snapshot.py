# SPDX-License-Identifier: Apache-2.0
"""kiwi-run session snapshot and create --from (kiwi-run-session(1)), root
and rootless: a snapshot, destroyed and restored, gives the same tree
(modes, owners, sizes, link counts, contents, xattrs; deleted files stay
deleted; hardlinks stay linked); umoci reads the layout the same way; a
blob that is not what its digest says is refused; nobody else snapshots
a session."""
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from conftest import OTHER_USER, default_signal_state, explain

PROBE = "/usr/local/bin/kiwi-probe"

# What a session changes: files of every kind in the root and the
# workspace, a hardlink, a symlink, a file and a directory of the rootfs
# deleted, a directory of the rootfs replaced (opaque), an xattr.
CHANGES = f"""set -e
mkdir -p /opt/app/sub
echo one > /opt/app/a; echo two > /opt/app/sub/b
chmod 0751 /opt/app/sub; chmod 0705 /opt/app/a
ln /opt/app/a /opt/app/a-link
ln -s ../app/a /opt/app/sym
mkfifo /opt/app/fifo
{PROBE} setxattr /opt/app/a user.kiwi snap
rm /etc/hosts
rm -r /var
mkdir /var; echo fresh > /var/only
echo changed > /etc/passwd.new; mv /etc/passwd.new /etc/group
echo ws > /workspace/made; chmod 600 /workspace/made
rm /workspace/base-gone
mkdir /workspace/dir; ln /workspace/made /workspace/dir/made-link
"""

# The tree as the session sees it: one line per path (mode, owner, size
# for files, link count), the contents' digests, the xattrs.
LISTING = f"""cd /
find . -xdev | grep -v -E '^\\./(proc|sys|dev|tmp)(/|$)' | grep -v '^\\.$' | sort > /tmp/paths
find /workspace | sort >> /tmp/paths
while read p; do
  if [ -d "$p" ] && [ ! -L "$p" ]; then stat -c '%n %f %u %g dir' "$p"; else stat -c '%n %f %u %g %s %h' "$p"; fi
done < /tmp/paths
while read p; do
  if [ -f "$p" ] && [ ! -L "$p" ]; then sha256sum "$p"; fi
done < /tmp/paths
{PROBE} xattrs /opt/app/a /opt/app/sub /workspace/made
true
"""


@pytest.fixture(autouse=True)
def own_rootfs(kiwi, kiwi_rootfs):
    """kiwi-rootfs where kiwi-run finds it. Rootless, a rootfs the test user owns: the shared one is root's,
    which its sandbox cannot change (root is unmapped there)."""
    if kiwi.mode == "rootless":
        kiwi.rootfs = str(kiwi.rootfs_copy())


def layout_dir(kiwi):
    """A directory the mode's user owns for layouts."""
    d = kiwi.workdir()
    return d


def workspace(kiwi, files):
    d = kiwi.workdir()
    for name, text in files.items():
        (d / name).write_text(text)
    kiwi.chown(d)
    return d


def listing(s):
    r = s.sh(LISTING)
    assert r.returncode == 0, explain(r)
    return r.stdout


def snapshot(s, ref, *opts):
    r = s.raw("session", "snapshot", *opts, s.id, ref)
    assert r.returncode == 0, explain(r)
    res = json.loads(r.stdout)
    assert res["id"] == s.id and res["digest"].startswith("sha256:") and res["size"] > 0, res
    return res


def ws_base(kiwi):
    return workspace(kiwi, {"kept": "kept\n", "base-gone": "gone\n"})


def test_snapshot_destroy_restore_gives_the_same_tree(session, kiwi):
    s = session("--rw-root", "--workspace", ws_base(kiwi), "--workspace-mode", "discard")
    r = s.sh(CHANGES)
    assert r.returncode == 0, explain(r)
    before = listing(s)
    assert "/opt/app/a user.kiwi=snap" in before and "/workspace/made" in before, before
    layout = layout_dir(kiwi) / "snaps"
    res = snapshot(s, f"{layout}:after")
    assert res["base"] == "rootfs"
    # Frozen exactly when the session has a cgroup to freeze.
    cg = s.listed()[0]["cgroup"]
    assert res["frozen"] is (cg is not None), (res, cg)
    assert s.sh("echo still running").returncode == 0, "the session did not go on after its snapshot"
    assert s.destroy().returncode == 0
    # The same base: the rootfs and a workspace as it was.
    t = session("--from", f"{layout}:after", "--rw-root",
                "--workspace", ws_base(kiwi), "--workspace-mode", "discard")
    after = listing(t)
    assert after == before, "\n".join(l for l in set(before.splitlines()) ^ set(after.splitlines()))
    # What the listing means, said plainly.
    r = t.sh("test ! -e /etc/hosts && test ! -e /workspace/base-gone && test ! -e /var/lib"
             " && [ $(stat -c %i /opt/app/a) = $(stat -c %i /opt/app/a-link) ]"
             " && [ $(stat -c %h /workspace/made) = 2 ] && cat /var/only /workspace/kept")
    assert r.returncode == 0 and r.stdout == "fresh\nkept\n", explain(r)
    # The restored session snapshots again, on the same base.
    assert snapshot(t, f"{layout}:again")["base"] == "rootfs"


def rootfs_image(kiwi, kiwi_rootfs):
    """The test rootfs packed as an image the mode's user can read."""
    d = layout_dir(kiwi) / "img"
    r = subprocess.run([str(kiwi_rootfs), "pack", kiwi.rootfs, f"{d}:base"], capture_output=True, text=True)
    assert r.returncode == 0, explain(r)
    kiwi.chown(d)
    return d


def test_image_snapshot_is_the_image_plus_one_layer_and_restores(session, kiwi, kiwi_rootfs):
    img = rootfs_image(kiwi, kiwi_rootfs)
    cache = ["--image-cache", str(kiwi.workdir())]
    s = session("--image", f"{img}:base", *cache, "--rw-root", "--workspace", ws_base(kiwi), "--workspace-mode",
                "discard", rootfs=False)
    assert s.sh(CHANGES).returncode == 0
    before = listing(s)
    layout = layout_dir(kiwi) / "snaps"
    res = snapshot(s, f"{layout}:img")
    assert res["base"] == "image"
    index = json.loads((layout / "index.json").read_text())
    [m] = [m for m in index["manifests"]
           if m["annotations"]["org.opencontainers.image.ref.name"] == "img"]
    blobs = layout / "blobs" / "sha256"
    manifest = json.loads((blobs / m["digest"].split(":")[1]).read_text())
    base_index = json.loads((img / "index.json").read_text())
    base = json.loads((img / "blobs" / "sha256" / base_index["manifests"][0]["digest"].split(":")[1]).read_text())
    assert [l["digest"] for l in manifest["layers"]] == [l["digest"] for l in base["layers"]] + [res["digest"]]
    config = json.loads((blobs / manifest["config"]["digest"].split(":")[1]).read_text())
    assert config["rootfs"]["diff_ids"][-1] == res["diff_id"] and len(config["rootfs"]["diff_ids"]) == 2
    for l in manifest["layers"]:
        assert (blobs / l["digest"].split(":")[1]).stat().st_size == l["size"]
    assert s.destroy().returncode == 0
    t = session("--from", f"{layout}:img", *cache, "--rw-root", "--workspace", ws_base(kiwi), "--workspace-mode",
                "discard", rootfs=False)
    after = listing(t)
    assert after == before, "\n".join(l for l in set(before.splitlines()) ^ set(after.splitlines()))


# File names that are valid UTF-8 and names that are not (a stray byte,
# an overlong form, a surrogate), as bytes.
UTF8_NAMES = ["café.txt".encode(), "日本.md".encode()]
NOT_UTF8_NAMES = [b"\xff\xfe", b"ov\xc0\xaf", b"sur\xed\xa0\x80"]


def sh_bytes(b):
    """A printf format giving the bytes b in the session's shell."""
    return "".join(f"\\{c:03o}" for c in b)


def names_made_and_read(s):
    """Makes a file and a symlink to it per name in /root/names; the
    tree read back: {name: link target or None}."""
    return s.sh("set -e; mkdir -p /root/names; cd /root/names\n" + "".join(
        f"n=$(printf '{sh_bytes(n)}'); echo x > \"$n\"; ln -s \"$n\" \"sym-$n\"\n"
        for n in UTF8_NAMES + NOT_UTF8_NAMES))


def names_in(s):
    """{name bytes: link target bytes or None} of /root/names in the
    session, read as hex so that no byte is lost on the way."""
    r = s.sh("cd /root/names && for f in *; do printf '%s' \"$f\" | od -An -tx1 -v; echo =; "
             "if [ -L \"$f\" ]; then readlink \"$f\" | od -An -tx1 -v; fi; echo .; done")
    assert r.returncode == 0, explain(r)
    out = {}
    for rec in r.stdout.split(".\n")[:-1]:
        name, target = (bytes.fromhex(part.replace("\n", " ")) for part in rec.split("=\n"))
        out[name] = target.rstrip(b"\n") or None
    return out


def test_utf8_names_are_plain_pax_and_every_name_restores(session, kiwi):
    """Under the C locale (kiwi.env sets LC_ALL=C), a name that is valid
    UTF-8 goes into the snapshot as a plain pax path or linkpath, with no
    hdrcharset=BINARY (GNU tar, umoci and skopeo read it as is); a name that
    is not UTF-8 goes in as its bytes under hdrcharset=BINARY. create --from
    gives both back byte for byte."""
    s = session("--rw-root")
    r = names_made_and_read(s)
    assert r.returncode == 0, explain(r)
    before = names_in(s)
    assert set(before) == {p + n for n in UTF8_NAMES + NOT_UTF8_NAMES for p in (b"", b"sym-")}, before
    layout = layout_dir(kiwi) / "snaps"
    # gzip: Python's tarfile reads it, not zstd; zstd is the default,
    # restored through kiwi-rootfs's own zstd path.
    res = snapshot(s, f"{layout}:names", "--compression", "gzip")
    snapshot(s, f"{layout}:names-zstd")
    assert s.destroy().returncode == 0
    pax = {}
    with tarfile.open(layout / "blobs/sha256" / res["digest"].split(":")[1], encoding="utf-8",
                      errors="surrogateescape") as t:
        for m in t:
            pax[m.name.encode("utf-8", "surrogateescape")] = m.pax_headers
    for n in UTF8_NAMES:
        p = pax[b"root/names/" + n]
        assert "hdrcharset" not in p and p["path"].encode() == b"root/names/" + n, (n, p)
        p = pax[b"root/names/sym-" + n]
        assert "hdrcharset" not in p and p["linkpath"].encode() == n, (n, p)
    for n in NOT_UTF8_NAMES:
        assert pax[b"root/names/" + n].get("hdrcharset") == "BINARY", (n, pax[b"root/names/" + n])
        assert pax[b"root/names/sym-" + n].get("hdrcharset") == "BINARY", (n, pax[b"root/names/sym-" + n])
    for tag in ("names", "names-zstd"):
        t = session("--from", f"{layout}:{tag}", "--rw-root")
        assert names_in(t) == before, tag


def host_listing(root):
    """(path, mode, uid, gid, size or target, nlink) under root, as the
    session's listing has them for the same paths."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            rel = "/" + os.path.relpath(p, root)
            is_dir = os.path.isdir(p) and not os.path.islink(p)
            out[rel] = (st.st_mode, st.st_uid, st.st_gid) + (() if is_dir else (st.st_size, st.st_nlink))
    return out


def session_modes(text):
    out = {}
    for line in text.splitlines():
        f = line.split(" ")
        if len(f) in (5, 6) and f[0].startswith("./"):
            out[f[0][1:]] = (int(f[1], 16), int(f[2]), int(f[3])) + (() if f[4] == "dir" else (int(f[4]), int(f[5])))
    return out


def test_umoci_unpacks_the_same_tree(session, kiwi, kiwi_rootfs, tmp_path):
    if kiwi.mode != "root":
        pytest.skip("umoci unpack keeps owners as root only (its --rootless drops them)")
    if not shutil.which("umoci"):
        pytest.skip("umoci is not installed (apt-get install umoci)")
    img = rootfs_image(kiwi, kiwi_rootfs)
    s = session("--image", f"{img}:base", "--rw-root", rootfs=False)
    assert s.sh(CHANGES.replace("/workspace", "/root/ws").replace("set -e", "set -e; mkdir -p /root/ws; "
                                                                  "echo x > /root/ws/base-gone")).returncode == 0
    inside = session_modes(listing(s))
    layout = layout_dir(kiwi) / "snaps"
    # umoci 0.4 reads gzip layers, not zstd ones.
    snapshot(s, f"{layout}:u", "--compression", "gzip")
    bundle = tmp_path / "bundle"
    r = subprocess.run(["umoci", "unpack", "--image", f"{layout}:u", str(bundle)], capture_output=True, text=True)
    assert r.returncode == 0, explain(r)
    host = {p: v for p, v in host_listing(bundle / "rootfs").items()
            if p.split("/")[1] not in ("proc", "sys", "dev", "tmp")}
    for path in ("/opt/app", "/opt/app/a", "/opt/app/a-link", "/opt/app/sub", "/opt/app/sub/b", "/opt/app/sym",
                 "/opt/app/fifo", "/var", "/var/only", "/etc/group", "/root/ws/made", "/root/ws/dir/made-link"):
        assert host[path] == inside[path], (path, host[path], inside[path])
    assert "/etc/hosts" not in host and "/root/ws/base-gone" not in host and "/var/lib" not in host
    assert set(host) == set(inside), set(host) ^ set(inside)
    assert os.getxattr(bundle / "rootfs/opt/app/a", "user.kiwi") == b"snap"
    assert (bundle / "rootfs/opt/app/a").read_text() == "one\n"


def test_another_user_cannot_snapshot_the_session(session, kiwi, tmp_path):
    s = session()
    out = tmp_path / "theirs"
    r = subprocess.run([*OTHER_USER, kiwi.binary, "session", "snapshot", s.id, f"{out}:x"],
                       capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 125 and len(r.stderr.strip().splitlines()) == 1 and s.id in r.stderr, explain(r)
    assert not out.exists()


def snapshot_then_destroy(session, kiwi):
    """A --rw-root session's snapshot (a file in /root), the session then
    destroyed: (session, layout, snapshot result, the layer's blob)."""
    s = session("--rw-root")
    assert s.sh("echo data > /root/file").returncode == 0
    layout = layout_dir(kiwi) / "snaps"
    res = snapshot(s, f"{layout}:x")
    assert s.destroy().returncode == 0
    return s, layout, res, layout / "blobs" / "sha256" / res["digest"].split(":")[1]


def test_a_blob_that_does_not_match_its_digest_is_refused(session, kiwi):
    s, layout, res, blob = snapshot_then_destroy(session, kiwi)
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0xff
    blob.write_bytes(bytes(data))
    files = sorted(p for p in layout.rglob("*"))
    # With the --rootfs it was made from, so that only the digest can
    # refuse it, wherever the check is made (before or in the sandbox).
    r = s.raw("session", "create", "--from", f"{layout}:x", "--rootfs", kiwi.rootfs)
    assert r.returncode == 125 and r.stdout == "", explain(r)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "digest" in lines[0] and res["digest"] in lines[0], explain(r)
    # Nothing left: no supervisor of a session from this layout (the
    # registry is shared with whoever else runs sessions here), nothing
    # new in the layout.
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        assert str(layout).encode() not in cmdline, f"pid {pid} is left: {cmdline!r}"
    assert sorted(p for p in layout.rglob("*")) == files


def test_bad_snapshot_input_one_line(session, kiwi):
    s = session()
    layout = layout_dir(kiwi) / "snaps"
    for args, word in ((["session", "snapshot", s.id, str(layout)], "LAYOUT:TAG"),
                       (["session", "snapshot", "0123456789ab", f"{layout}:x"], "0123456789ab"),
                       (["session", "create", "--from", f"{layout}:nope", "--rootfs", kiwi.rootfs], "nope")):
        r = s.raw(*args)
        assert r.returncode == 125 and len(r.stderr.strip().splitlines()) == 1 and word in r.stderr, explain(r)
    # A rootfs-based snapshot needs its --rootfs.
    assert s.sh("echo x > /tmp/x").returncode == 0
    snapshot(s, f"{layout}:r")
    r = s.raw("session", "create", "--from", f"{layout}:r")
    assert r.returncode == 125 and "--rootfs" in r.stderr, explain(r)


def test_snapshot_never_follows_the_sessions_symlinks(session, kiwi):
    """The session plants symlinks to a host file and a host directory (in
    its root and as its workspace's entries); the snapshot, written by a
    process of the caller's (root, in root mode), stores the links as links
    and nothing of what they point to."""
    secret = kiwi.workdir() / "secret"
    secret.write_text("HOST-SECRET-7f3a\n")
    secret.chmod(0o600)
    s = session("--rw-root", "--workspace", ws_base(kiwi), "--workspace-mode", "discard")
    r = s.sh(f"ln -s {secret} /root/link; ln -s {secret.parent} /root/dirlink;"
             f" ln -s {secret} /workspace/link; mkdir /root/d; ln -s /etc /root/d/etc")
    assert r.returncode == 0, explain(r)
    layout = layout_dir(kiwi) / "snaps"
    res = snapshot(s, f"{layout}:links", "--compression", "none")
    blob = layout / "blobs" / "sha256" / res["digest"].split(":")[1]
    assert b"HOST-SECRET" not in blob.read_bytes()
    with tarfile.open(blob) as t:
        links = {m.name: m.linkname for m in t.getmembers() if m.issym()}
    assert links == {"root/link": str(secret), "root/dirlink": str(secret.parent),
                     "root/d/etc": "/etc", "workspace/link": str(secret)}, links


def lock_down(layout):
    """The layout as a umask of 077 leaves it: only its owner reads it."""
    for root, dirs, files in os.walk(layout):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o700)
        for f in files:
            os.chmod(os.path.join(root, f), 0o600)
    layout.chmod(0o700)


def test_a_layout_only_the_caller_reaches_restores(session, kiwi):
    """The layout sits below a 0700 directory of the caller's and is the
    caller's alone. As root, the sandbox's root is kiwi's id range, nobody
    on the host: the restore reads the blob kiwi-run opened as the caller
    (kiwi-run-session(1) once listed this under BUGS)."""
    s = session("--rw-root", "--workspace", ws_base(kiwi), "--workspace-mode", "discard")
    assert s.sh("echo kept > /root/file; echo ws > /workspace/made").returncode == 0
    private = kiwi.workdir() / "private"
    private.mkdir()
    kiwi.chown(private)
    private.chmod(0o700)
    snapshot(s, f"{private}/snaps:p")
    assert s.destroy().returncode == 0
    lock_down(private / "snaps")
    t = session("--from", f"{private}/snaps:p", "--rw-root", "--workspace", ws_base(kiwi),
                "--workspace-mode", "discard")
    r = t.sh("cat /root/file /workspace/made")
    assert r.returncode == 0 and r.stdout == "kept\nws\n", explain(r)


def test_a_caller_cannot_restore_a_layout_it_cannot_read(session, kiwi, scratch):
    """Rootless, what the caller cannot read stays unread: a layout below
    a 0700 directory of root's, and a layout whose blob is root's 0600."""
    if kiwi.mode != "rootless":
        pytest.skip("root reads every layout")
    s, layout, res, blob = snapshot_then_destroy(session, kiwi)
    hidden = scratch / f"hidden-{s.id}"
    hidden.mkdir(mode=0o700)
    shutil.copytree(layout, hidden / "snaps")
    os.chown(blob, 0, 0)
    blob.chmod(0o600)
    for ref, why in ((f"{hidden}/snaps:x", "Permission denied"), (f"{layout}:x", "Permission denied")):
        r = s.raw("session", "create", "--from", ref, "--rootfs", kiwi.rootfs)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 125 and r.stdout == "" and len(lines) == 1 and why in lines[0], explain(r)


def test_concurrent_snapshots_and_packs_keep_every_tag(session, kiwi, kiwi_rootfs):
    """`session snapshot`s and `kiwi-rootfs pack`s started together into one
    layout, each with its own tag: every tag is in index.json after, naming
    the manifest its writer printed (index.json is rewritten under the
    layout's lock). Three rounds, so that a lost update shows."""
    s = session("--rw-root")
    assert s.sh("echo x > /root/x").returncode == 0
    tree = kiwi.workdir()
    (tree / "f").write_text("f\n")
    for rnd in range(3):
        layout = layout_dir(kiwi) / "shared"
        procs = {}
        for i in range(4):
            procs[f"snap{i}"] = subprocess.Popen(
                kiwi.raw_argv(["session", "snapshot", "--compression", "none", s.id, f"{layout}:snap{i}"]),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                env=kiwi.env())
            procs[f"pack{i}"] = subprocess.Popen(
                [*kiwi.prefix, str(kiwi_rootfs), "pack", str(tree), f"{layout}:pack{i}"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        printed = {}
        for tag, p in procs.items():
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, f"{tag} of round {rnd}: {err}"
            printed[tag] = json.loads(out)["manifest"] if tag.startswith("snap") else out.strip()
        index = json.loads((layout / "index.json").read_text())
        tags = {m["annotations"]["org.opencontainers.image.ref.name"]: m["digest"] for m in index["manifests"]}
        assert tags == printed, f"round {rnd}: index.json has {sorted(tags)}"
        assert not [f for f in os.listdir(layout) if f.startswith(".")], os.listdir(layout)


def layout_state(layout):
    """Every path of the layout with its type, size and content digest."""
    out = []
    for p in sorted(layout.rglob("*")):
        st = p.lstat()
        digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None
        out.append((str(p.relative_to(layout)), oct(st.st_mode), st.st_size if digest else None, digest))
    return out


def writer_alive(layout):
    """The pid of a kiwi-rootfs writing into layout, or None."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmdline[0].endswith(b"kiwi-rootfs") and any(str(layout).encode() in a for a in cmdline):
            return int(pid)
    return None


def snapshot_midway(s, kiwi, ref, blobs):
    """`session snapshot` started, returned once its scratch blob is being
    written (the Popen and its writer's pid), or None when it ended before
    that."""
    p = subprocess.Popen(kiwi.raw_argv(["session", "snapshot", "--compression", "gzip", s.id, ref]),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                         env=kiwi.env(), preexec_fn=default_signal_state)
    def writing():
        try:
            return any(f.name.startswith(".tmp-") and f.stat().st_size > 0 for f in blobs.iterdir())
        except OSError:  # not made yet, or renamed as it was looked at
            return False
    while p.poll() is None:
        writer = writing() and writer_alive(blobs.parent.parent)
        if writer:
            return p, writer
        time.sleep(0.005)
    return None, None


def test_a_snapshot_killed_midway_leaves_what_gc_removes(session, kiwi):
    """kill -9 of `session snapshot` while it writes the layer: its writer
    dies with it, its tagged scratch stays in the layout until `kiwi-run
    gc`, which leaves the layout as it was before; gc never takes the
    scratch of a snapshot still being written; the session was thawed."""
    s = session("--rw-root")
    layout = layout_dir(kiwi) / "snaps"
    blobs = layout / "blobs" / "sha256"
    assert s.sh("echo small > /root/small").returncode == 0
    snapshot(s, f"{layout}:first")
    before = layout_state(layout)
    # Random bytes gzip slowly: the layer takes a while to write.
    r = s.sh("head -c 96000000 /dev/urandom > /root/big")
    assert r.returncode == 0, explain(r)

    # A live writer's scratch is not gc's.
    p, _ = snapshot_midway(s, kiwi, f"{layout}:second", blobs)
    assert p, "the snapshot ended before its scratch was seen: give it a bigger file"
    try:
        gc(s)
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, f"{out}\n{err}"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    second = layout_state(layout)
    assert s.raw("gc").returncode == 0 and layout_state(layout) == second

    # Killed midway: the scratch is left, gc removes it and nothing else.
    p, writer = snapshot_midway(s, kiwi, f"{layout}:third", blobs)
    assert p, "the snapshot ended before its scratch was seen: give it a bigger file"
    kill_snapshot(p, writer)
    left = [f.name for f in blobs.iterdir() if f.name.startswith(".tmp-")]
    assert left, "nothing was left to collect"
    gc(s)
    assert layout_state(layout) == second
    assert s.sh("echo thawed").stdout == "thawed\n"
    # A second gc has nothing left to do.
    gc(s)
    assert layout_state(layout) == second

    # A layout the killed snapshot made is gone again, as before it.
    fresh = layout_dir(kiwi) / "fresh"
    p, writer = snapshot_midway(s, kiwi, f"{fresh}:x", fresh / "blobs" / "sha256")
    assert p, "the snapshot ended before its scratch was seen: give it a bigger file"
    kill_snapshot(p, writer)
    assert fresh.exists()
    gc(s)
    assert not fresh.exists(), sorted(fresh.rglob("*"))


def stopped_writer(layout):
    """The pid of a kiwi-rootfs writing into layout that has stopped
    itself at its test stop point, or None."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if cmdline[0].endswith(b"kiwi-rootfs") and any(str(layout).encode() in a for a in cmdline) and state == "T":
            return int(pid)
    return None


def snapshot_stopped(s, kiwi, ref, layout):
    """`session snapshot` whose writer stops itself once its blobs are
    committed, before index.json names them (KIWI_ROOTFS_TEST_STOP_BEFORE_INDEX,
    test only: kiwi-rootfs(1)); returns the Popen and the writer's pid once
    it has stopped there."""
    p = subprocess.Popen(kiwi.raw_argv(["session", "snapshot", s.id, ref]), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                         env=kiwi.env({"KIWI_ROOTFS_TEST_STOP_BEFORE_INDEX": "1"}), preexec_fn=default_signal_state)
    while p.poll() is None:
        pid = stopped_writer(layout)
        if pid:
            return p, pid
        time.sleep(0.005)
    out, err = p.communicate()
    pytest.fail(f"the snapshot ended without stopping before its index: {out}\n{err}")


def kill_snapshot(p, writer):
    """kill -9 of `session snapshot`; its writer dies with it. Waited for
    until it is a zombie or gone: its cmdline empties before its files
    (and their locks) are closed."""
    p.kill()
    p.wait()
    while True:
        try:
            if Path(f"/proc/{writer}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return
        except (OSError, IndexError):
            return
        time.sleep(0.01)


def blob_files(layout):
    return {f.name for f in (layout / "blobs" / "sha256").iterdir() if not f.name.startswith(".")}


def markers(layout):
    """The digests the writers' markers (.tmp-TAG-blob-HEX) claim."""
    return {f.name.split("-blob-", 1)[1] for f in (layout / "blobs" / "sha256").iterdir()
            if f.name.startswith(".tmp-") and "-blob-" in f.name}


def named_blobs(layout):
    """What index.json names, through manifests and indexes."""
    names = set()

    def walk(j):
        if isinstance(j, dict):
            if isinstance(j.get("digest"), str):
                names.add(j["digest"].split(":", 1)[1])
                if any(k in j.get("mediaType", "") for k in ("manifest", "index")):
                    walk(json.loads((layout / "blobs" / "sha256" / j["digest"].split(":", 1)[1]).read_text()))
            for v in j.values():
                walk(v)
        elif isinstance(j, list):
            for v in j:
                walk(v)
    walk(json.loads((layout / "index.json").read_text()))
    return names


def gc(s):
    """`kiwi-run gc`. Its counts are not asserted: another run's gc on this
    host may collect this test's dead records first (or this one theirs);
    the test looks at its own layouts instead."""
    r = s.raw("gc")
    assert r.returncode == 0 and isinstance(json.loads(r.stdout)["snapshot_blobs_removed"], int), explain(r)


def test_a_snapshot_killed_before_its_index_leaves_blobs_gc_removes(session, kiwi, kiwi_rootfs):
    """kill -9 of `session snapshot` once its blobs are committed, before
    index.json names them: `kiwi-run gc` removes the blobs it made that
    nothing names (its layer, config and manifest, the base's blobs it
    linked in; then the layout it made), never a blob a tag names (the
    same layer made again), and never while another writer writes the
    layout (that writer may be about to name one); a later gc does."""
    img = rootfs_image(kiwi, kiwi_rootfs)
    s = session("--image", f"{img}:base", "--image-cache", str(kiwi.workdir()), "--rw-root", rootfs=False)
    assert s.sh("echo one > /root/one").returncode == 0

    # A layout the killed snapshot made: its four blobs, then the layout, go.
    fresh = layout_dir(kiwi) / "fresh"
    p, writer = snapshot_stopped(s, kiwi, f"{fresh}:x", fresh)
    kill_snapshot(p, writer)
    made = blob_files(fresh)
    assert len(made) == 4 and markers(fresh) == made and not (fresh / "index.json").exists(), made
    gc(s)
    assert not fresh.exists(), sorted(fresh.rglob("*"))

    # Killed again with nothing changed: its layer is the one `first`
    # names (kept); what else it made that nothing names goes.
    layout = layout_dir(kiwi) / "snaps"
    first = snapshot(s, f"{layout}:first")
    before = layout_state(layout)
    p, writer = snapshot_stopped(s, kiwi, f"{layout}:second", layout)
    kill_snapshot(p, writer)
    claimed = markers(layout)
    assert first["digest"].split(":")[1] in claimed, (first, claimed)
    gc(s)
    assert layout_state(layout) == before

    # A dead writer's blobs wait while another writer is live in the layout.
    assert s.sh("echo two > /root/two").returncode == 0
    p, writer = snapshot_stopped(s, kiwi, f"{layout}:third", layout)
    kill_snapshot(p, writer)
    dead = blob_files(layout) - named_blobs(layout)
    assert len(dead) == 3, dead
    assert s.sh("echo three > /root/three").returncode == 0
    q, writer = snapshot_stopped(s, kiwi, f"{layout}:fourth", layout)
    try:
        claims = markers(layout)
        gc(s)
        assert dead <= blob_files(layout) and markers(layout) == claims
    finally:
        os.kill(writer, signal.SIGCONT)
        out, err = q.communicate(timeout=120)
    assert q.returncode == 0, f"{out}\n{err}"
    gc(s)
    assert blob_files(layout) == named_blobs(layout)
    tags = {m["annotations"]["org.opencontainers.image.ref.name"]
            for m in json.loads((layout / "index.json").read_text())["manifests"]}
    assert tags == {"first", "fourth"} and not markers(layout)


def test_a_snapshot_that_fails_after_its_blobs_leaves_them_to_gc(session, kiwi):
    """A snapshot whose index.json cannot be written, its blobs already in
    the layout, fails with one line and exit 125, and leaves its record
    for `kiwi-run gc`, which removes those blobs (nothing names them):
    the layout is as before it."""
    s = session("--rw-root")
    layout = layout_dir(kiwi) / "snaps"
    snapshot(s, f"{layout}:first")
    assert s.sh("echo more > /root/more").returncode == 0
    before = layout_state(layout)
    p, writer = snapshot_stopped(s, kiwi, f"{layout}:second", layout)
    # Where the writer's next index.json goes, a directory: its write fails.
    args = Path(f"/proc/{writer}/cmdline").read_bytes().split(b"\0")
    tag = args[args.index(b"--scratch") + 1].decode()
    blocker = layout / f".tmp-{tag}-index.json"
    blocker.mkdir()
    os.kill(writer, signal.SIGCONT)
    out, err = p.communicate(timeout=120)
    lines = err.strip().splitlines()
    assert p.returncode == 125 and out == "" and len(lines) == 1 and "index.json" in lines[0], (out, err)
    assert blob_files(layout) != {e[0].split("/")[-1] for e in before if e[0].startswith("blobs/sha256/")}
    blocker.rmdir()
    gc(s)
    assert layout_state(layout) == before
