#!/usr/bin/env bash
# run.sh: the meson test `vm-cri` (suite 'vm'), and the driver of
# bench/cri-start.py. Prepares the images and the gRPC stubs on the host
# (prepare.py), then boots one VM (pure cgroup v2, tests/vm/run.sh) that
# runs KIWI_CRI_GUEST (default: tests/oci/cri/guest.py, the CRI pod test)
# with ARGS (guest.py: the handler, kiwi or runc).
# usage: run.sh BUILD_ROOT [ARGS...]
# kiwi-run, oci-probe and kiwi-pause come from BUILD_ROOT (or KIWI_RUN,
# KIWI_OCI_PROBE, KIWI_PAUSE). Exit: the guest script's status; 77 when
# qemu, containerd or Python's grpc is missing.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
build=$(realpath -- "${1:-$repo/build}")
[ $# -eq 0 ] || shift
export KIWI_RUN=${KIWI_RUN:-$build/src/kiwi-run}
probe=${KIWI_OCI_PROBE:-$build/tests/oci/oci-probe}
pause=${KIWI_PAUSE:-$build/tests/oci/kiwi-pause}
export PYTHONDONTWRITEBYTECODE=1

command -v qemu-system-x86_64 > /dev/null || { echo "SKIP: qemu-system-x86_64 missing" >&2; exit 77; }
command -v containerd > /dev/null || { echo "SKIP: containerd missing (.ci/deps.sh)" >&2; exit 77; }
/usr/bin/python3 -c 'import grpc, grpc_tools' 2> /dev/null ||
  { echo "SKIP: python3-grpcio or python3-grpc-tools missing (.ci/deps.sh)" >&2; exit 77; }
for bin in "$KIWI_RUN" "$probe" "$pause"; do
  [ -x "$bin" ] || { echo "run.sh: $bin missing: build it (ninja -C $build)" >&2; exit 1; }
done

export KIWI_CRI_WORK=$build/tests/oci/cri-work
sh "$repo/rootfs-tools/busybox-rootfs.sh" "$build/tests/oci/rootfs" "$probe"
/usr/bin/python3 "$here/prepare.py" "$KIWI_CRI_WORK" "$build/tests/oci/rootfs" "$pause"

shares=(--share "$repo")
case $build/ in "$repo"/*) ;; *) shares+=(--share "$build") ;; esac
case $KIWI_RUN in "$repo"/*|"$build"/*) ;; *) shares+=(--share "$(dirname "$KIWI_RUN")") ;; esac

guest=$(realpath -- "${KIWI_CRI_GUEST:-$here/guest.py}")
cd "$here"
exec "$repo/tests/vm/run.sh" --timeout "${KIWI_CRI_VM_TIMEOUT:-600}" "${shares[@]}" -- \
  /usr/bin/python3 -B "$guest" "$@"
