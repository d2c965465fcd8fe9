# SPDX-License-Identifier: Apache-2.0
"""Images made by Debian's umoci and skopeo unpack to the same tree as
`umoci unpack` produces: paths, types, modes, owners, link targets, contents."""
import os
import shutil
import subprocess

import pytest

from ocilib import snapshot
from test_roundtrip import build_tree


def need(*tools):
    for t in tools:
        if not shutil.which(t):
            pytest.skip(f"{t} is not installed (apt-get install {t})")
    if os.geteuid() != 0:
        pytest.skip("umoci's reference unpack keeps owners only as root")


def sh(*args, **kw):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    assert p.returncode == 0, f"{args}: {p.stdout}"
    return p.stdout


@pytest.fixture
def umoci_image(tmp_path):
    """A two-layer image built with umoci: a tree, then deletions (whiteouts),
    a replaced directory, a new hardlink and a mode change."""
    need("umoci")
    layout = tmp_path / "layout"
    sh("umoci", "init", "--layout", str(layout))
    sh("umoci", "new", "--image", f"{layout}:t")
    bundle = tmp_path / "bundle"
    sh("umoci", "unpack", "--image", f"{layout}:t", str(bundle))
    rootfs = bundle / "rootfs"
    shutil.rmtree(rootfs)
    build_tree(rootfs)
    (rootfs / "olddir").mkdir()
    (rootfs / "olddir/a").write_text("a")
    sh("umoci", "repack", "--image", f"{layout}:t", str(bundle))
    os.unlink(rootfs / "secret")
    shutil.rmtree(rootfs / "private")
    shutil.rmtree(rootfs / "olddir")
    (rootfs / "olddir").mkdir()
    (rootfs / "olddir/b").write_text("b")
    os.link(rootfs / "bin/tool", rootfs / "bin/tool2")
    os.chmod(rootfs / "etc/hosts", 0o640)
    sh("umoci", "repack", "--image", f"{layout}:t", str(bundle))
    shutil.rmtree(bundle)
    return layout


def reference(layout, tag, tmp_path):
    bundle = tmp_path / f"ref-{tag}"
    sh("umoci", "unpack", "--image", f"{layout}:{tag}", str(bundle))
    return snapshot(bundle / "rootfs")


def test_umoci_image(run, tmp_path, umoci_image):
    want = reference(umoci_image, "t", tmp_path)
    assert "olddir/b" in want and "secret" not in want and "private" not in want
    out = tmp_path / "out"
    run("unpack", f"{umoci_image}:t", str(out), check=0)
    assert snapshot(out) == want


def test_skopeo_archive_and_zstd(run, tmp_path, umoci_image):
    need("skopeo")
    want = reference(umoci_image, "t", tmp_path)
    archive = tmp_path / "image.tar"
    sh("skopeo", "copy", "--quiet", f"oci:{umoci_image}:t", f"oci-archive:{archive}:s")
    out = tmp_path / "out-archive"
    run("unpack", f"{archive}:s", str(out), check=0)
    assert snapshot(out) == want
    zlayout = tmp_path / "zstd"
    sh("skopeo", "copy", "--quiet", "--dest-compress-format", "zstd",
       f"oci:{umoci_image}:t", f"oci:{zlayout}:z")
    out = tmp_path / "out-zstd"
    run("unpack", f"{zlayout}:z", str(out), check=0)
    assert snapshot(out) == want
    # Docker schema 2 media types (manifest, config, layers) in an OCI layout.
    dlayout = tmp_path / "docker"
    sh("skopeo", "copy", "--quiet", "--format", "v2s2", f"oci:{umoci_image}:t", f"oci:{dlayout}:d")
    out = tmp_path / "out-docker"
    run("unpack", f"{dlayout}:d", str(out), check=0)
    assert snapshot(out) == want


def test_kiwi_pack_reads_back_in_umoci(run, tmp_path):
    need("umoci")
    tree = build_tree(tmp_path / "tree")
    layout = tmp_path / "layout"
    run("pack", str(tree), f"{layout}:k", check=0)
    want = reference(layout, "k", tmp_path)
    assert want == snapshot(tree)
