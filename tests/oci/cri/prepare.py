#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Host half of the CRI lane (run.sh): the two images the pods run and the
gRPC stubs, made on the host where each program starts 30 times faster
than in the VM.

usage: prepare.py OUT_DIR APP_ROOTFS PAUSE_BINARY
Writes OUT_DIR/oci-probe.tar (the app image: the busybox rootfs with
oci-probe, entrypoint oci-probe), OUT_DIR/kiwi-pause.tar (the sandbox
image: one static file, /pause, as in the upstream pause image) and
OUT_DIR/stubs/api_pb2*.py.
"""
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import images  # noqa: E402  (tests/oci/images.py)


def main():
    out, app_rootfs, pause = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    os.environ["KIWI_CRI_STUBS"] = str(out / "stubs")
    import cri  # noqa: F401  (generates the stubs there)
    out.mkdir(parents=True, exist_ok=True)
    images.oci_archive(app_rootfs, out)
    root = out / "pause-rootfs"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    shutil.copy2(pause, root / "pause")
    images.pack(root, out, "kiwi-pause", ["--entrypoint", "/pause"])


if __name__ == "__main__":
    main()
