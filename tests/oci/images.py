# SPDX-License-Identifier: Apache-2.0
"""The image containerd and podman run: the suite's busybox rootfs with
oci-probe, packed by `kiwi-rootfs pack` into an OCI layout and tarred into
an oci-archive."""
import os
import subprocess
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
IMAGE = "localhost/oci-probe:latest"


def kiwi_rootfs():
    given = os.environ.get("KIWI_ROOTFS_TOOL")
    if given:
        return given
    for cand in (Path(os.environ.get("KIWI_RUN", "")).parent.parent / "rootfs-tools" / "kiwi-rootfs",
                 REPO / "build" / "rootfs-tools" / "kiwi-rootfs"):
        if cand.is_file():
            return str(cand)
    raise FileNotFoundError("kiwi-rootfs not found: build it or set KIWI_ROOTFS_TOOL")


def oci_archive(rootfs, workdir):
    """Packs rootfs (entrypoint the probe, cmd `report`) and returns the
    archive's path."""
    return pack(rootfs, workdir, "oci-probe", ["--entrypoint", "/usr/local/bin/oci-probe",
                                               "--cmd", "report"])


def pack(rootfs, workdir, name, config_args):
    """`kiwi-rootfs pack CONFIG_ARGS ROOTFS` into an OCI layout in workdir,
    tarred into workdir/NAME.tar: an oci-archive whose one image is tagged
    `latest`. Returns the archive's path."""
    layout = Path(workdir) / f"{name}-layout"
    subprocess.run([kiwi_rootfs(), "pack", *config_args, str(rootfs), f"{layout}:latest"],
                   check=True, capture_output=True)
    archive = Path(workdir) / f"{name}.tar"
    with tarfile.open(archive, "w") as tar:
        for entry in sorted(os.listdir(layout)):
            tar.add(layout / entry, arcname=entry)
    return archive
