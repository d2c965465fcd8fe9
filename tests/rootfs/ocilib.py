# SPDX-License-Identifier: Apache-2.0
"""Builds OCI image layouts for the rootfs tests, byte by byte, so hostile
images (bad names, bad digests, cycles) can be made as easily as good ones."""
import gzip
import hashlib
import io
import json
import os
import subprocess
import tarfile

MT_TAR = "application/vnd.oci.image.layer.v1.tar"
MT_GZIP = MT_TAR + "+gzip"
MT_ZSTD = MT_TAR + "+zstd"
MT_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_INDEX = "application/vnd.oci.image.index.v1+json"
MT_CONFIG = "application/vnd.oci.image.config.v1+json"
REF = "org.opencontainers.image.ref.name"


def sha256(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def put_blob(layout, data, digest=None):
    """Stores data as a blob (under digest when given, even a wrong one)."""
    digest = digest or sha256(data)
    alg, hexd = digest.split(":")
    d = os.path.join(layout, "blobs", alg)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hexd), "wb") as f:
        f.write(data)
    return {"digest": digest, "size": len(data)}


def tar_bytes(entries, fmt=tarfile.PAX_FORMAT):
    """entries: tuples (kind, name, ...):
    ("file", name, data[, mode]), ("dir", name[, mode]), ("symlink", name, target),
    ("hardlink", name, target), ("chr"|"blk", name, major, minor), ("fifo", name)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
        for e in entries:
            kind, name = e[0], e[1]
            ti = tarfile.TarInfo(name)
            ti.mtime = 1700000000
            ti.uid = ti.gid = 0
            data = None
            if kind == "file":
                data = e[2] if isinstance(e[2], bytes) else e[2].encode()
                ti.size = len(data)
                ti.mode = e[3] if len(e) > 3 else 0o644
            elif kind == "dir":
                ti.type = tarfile.DIRTYPE
                ti.mode = e[2] if len(e) > 2 else 0o755
            elif kind == "symlink":
                ti.type = tarfile.SYMTYPE
                ti.linkname = e[2]
                ti.mode = 0o777
            elif kind == "hardlink":
                ti.type = tarfile.LNKTYPE
                ti.linkname = e[2]
            elif kind in ("chr", "blk"):
                ti.type = tarfile.CHRTYPE if kind == "chr" else tarfile.BLKTYPE
                ti.devmajor, ti.devminor = e[2], e[3]
                ti.mode = 0o666
            elif kind == "fifo":
                ti.type = tarfile.FIFOTYPE
                ti.mode = 0o644
            else:
                raise ValueError(kind)
            t.addfile(ti, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def compress(data, media_type):
    if media_type == MT_GZIP:
        return gzip.compress(data, mtime=0)
    if media_type == MT_ZSTD:
        return subprocess.run(["zstd", "-q", "-c"], input=data, stdout=subprocess.PIPE,
                              check=True).stdout
    return data


def write_layout(layout, layers, tag="latest", config=None, platform=("linux", "amd64"),
                 index_extra=None):
    """layers: list of (media_type, tar_bytes) or dicts with keys media_type,
    data and optional digest/size overrides (raw: store data uncompressed
    whatever the media type; blob: store these bytes, data still the tar
    the diff_id names). Returns the manifest digest."""
    os.makedirs(layout, exist_ok=True)
    with open(os.path.join(layout, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)
    descs, diff_ids = [], []
    for layer in layers:
        if isinstance(layer, tuple):
            layer = {"media_type": layer[0], "data": layer[1]}
        blob = layer.get("blob") or (layer["data"] if layer.get("raw") else
                                     compress(layer["data"], layer["media_type"]))
        d = put_blob(layout, blob, layer.get("digest"))
        d["size"] = layer.get("size", d["size"])
        descs.append({"mediaType": layer["media_type"], **d})
        diff_ids.append(sha256(layer["data"]))
    cfg = {"architecture": platform[1], "os": platform[0],
           "config": config or {"Env": ["PATH=/usr/bin:/bin"], "Cmd": ["/bin/sh"]},
           "rootfs": {"type": "layers", "diff_ids": diff_ids}}
    cdesc = put_blob(layout, json.dumps(cfg).encode())
    manifest = {"schemaVersion": 2, "mediaType": MT_MANIFEST,
                "config": {"mediaType": MT_CONFIG, **cdesc}, "layers": descs}
    mdesc = put_blob(layout, json.dumps(manifest).encode())
    entry = {"mediaType": MT_MANIFEST, **mdesc,
             "platform": {"os": platform[0], "architecture": platform[1]}}
    if tag:
        entry["annotations"] = {REF: tag}
    index = {"schemaVersion": 2, "mediaType": MT_INDEX,
             "manifests": [entry] + (index_extra or [])}
    with open(os.path.join(layout, "index.json"), "w") as f:
        json.dump(index, f)
    return mdesc["digest"]


def rewrite_config(layout, edit, tag="latest"):
    """Applies edit(config dict) to the tagged image's config and stores it
    again with a manifest and index that name it under its new digest, so
    every blob digest checks out and only what edit changed is wrong."""
    index_path = os.path.join(layout, "index.json")
    with open(index_path) as f:
        index = json.load(f)
    entry = next(e for e in index["manifests"] if e.get("annotations", {}).get(REF) == tag)

    def blob(digest):
        with open(os.path.join(layout, "blobs", *digest.split(":")), "rb") as f:
            return json.loads(f.read())
    manifest = blob(entry["digest"])
    config = blob(manifest["config"]["digest"])
    edit(config)
    manifest["config"].update(put_blob(layout, json.dumps(config).encode()))
    entry.update(put_blob(layout, json.dumps(manifest).encode()))
    with open(index_path, "w") as f:
        json.dump(index, f)
    return config


def snapshot(root):
    """Paths, types, modes, link targets, contents (hashes) and owners of a
    tree, for comparisons that must catch any difference."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            info = {"mode": oct(st.st_mode), "uid": st.st_uid, "gid": st.st_gid}
            if os.path.islink(p):
                info["target"] = os.readlink(p)
            elif os.path.isfile(p):
                with open(p, "rb") as f:
                    info["sha256"] = hashlib.sha256(f.read()).hexdigest()
                info["nlink"] = st.st_nlink
            elif not os.path.isdir(p):
                info["rdev"] = st.st_rdev
            out[rel] = info
    return out


def hide_openat2():
    """preexec_fn: a seccomp filter making openat2 fail with ENOSYS, as on
    kernels before 5.6 or under old container profiles (x86_64 only)."""
    import ctypes
    import struct
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
    AUDIT_ARCH_X86_64, NR_OPENAT2 = 0xC000003E, 437
    prog = [
        (0x20, 0, 0, 4),                   # load seccomp_data.arch
        (0x15, 0, 3, AUDIT_ARCH_X86_64),   # another arch: allow
        (0x20, 0, 0, 0),                   # load seccomp_data.nr
        (0x15, 0, 1, NR_OPENAT2),
        (0x06, 0, 0, 0x00050000 | 38),     # SECCOMP_RET_ERRNO | ENOSYS
        (0x06, 0, 0, 0x7FFF0000),          # SECCOMP_RET_ALLOW
    ]
    raw = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *i) for i in prog))
    fprog = ctypes.create_string_buffer(struct.pack("HxxxxxxQ", len(prog), ctypes.addressof(raw)))
    if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.addressof(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "seccomp")
