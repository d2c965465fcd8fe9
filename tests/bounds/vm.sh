#!/usr/bin/env bash
# vm.sh: the bounds tests of the VM lane (meson: bounds-vm, suite 'vm').
# Boots one VM through tests/vm/run.sh and runs every pytest file of
# tests/bounds/vm/ inside it, as root, on a pure cgroup v2 hierarchy.
# usage: vm.sh BUILD_ROOT   (cgtool and kiwi-run are taken from there,
# or from KIWI_CGTOOL / KIWI_RUN)
# Exit: pytest's status; 77 when qemu is missing or every test skipped.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$(realpath -- "${1:-$repo/build}")
[ $# -eq 0 ] || shift
export KIWI_CGTOOL=${KIWI_CGTOOL:-$build/tests/bounds/cgtool}
export KIWI_RUN=${KIWI_RUN:-$build/src/kiwi-run}
export PYTHONDONTWRITEBYTECODE=1

command -v qemu-system-x86_64 > /dev/null || { echo "SKIP: qemu-system-x86_64 missing" >&2; exit 77; }
[ -x "$KIWI_CGTOOL" ] || { echo "vm.sh: $KIWI_CGTOOL missing: build it (ninja tests/bounds/cgtool)" >&2; exit 1; }

# The sandboxes' rootfs, built on the host (the guest copies it to tmpfs).
export KIWI_BOUNDS_ROOTFS=${KIWI_BOUNDS_ROOTFS:-$build/tests/bounds/rootfs}
sh "$repo/rootfs-tools/busybox-rootfs.sh" "$KIWI_BOUNDS_ROOTFS"

shares=(--share "$repo")
case $build/ in "$repo"/*) ;; *) shares+=(--share "$build") ;; esac
for bin in "$KIWI_CGTOOL" "$KIWI_RUN"; do
  case $bin in "$repo"/*|"$build"/*) ;; *) [ ! -e "$bin" ] || shares+=(--share "$(dirname "$bin")") ;; esac
done

cd "$here"
exec "$repo/tests/vm/run.sh" --timeout 870 "${shares[@]}" -- \
  /usr/bin/python3 -m pytest -q -rs -p no:cacheprovider "$here/vm" "$@"
