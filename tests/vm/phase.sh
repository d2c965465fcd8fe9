#!/usr/bin/env bash
# phase.sh: the meson test `vm-phase` (suite 'vm'). One VM boot runs
# tests/vm/phase_guest.py: `kiwi-run phase` under real cgroup v2 limits
# (root and rootless), and --network egress|audit on the guest's 6.1
# kernel against a fake upstream made of network namespaces.
# usage: phase.sh BUILD_ROOT   (kiwi-run, kiwi-probe and netprobe are taken
# from there, or from KIWI_RUN / KIWI_PROBE / KIWI_NETPROBE)
# Exit: the guest script's status; 77 when qemu is missing.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$(realpath -- "${1:-$repo/build}")
export KIWI_RUN=${KIWI_RUN:-$build/src/kiwi-run}
probe=${KIWI_PROBE:-$build/tests/helpers/kiwi-probe}
netprobe=${KIWI_NETPROBE:-$build/tests/net/netprobe}
export PYTHONDONTWRITEBYTECODE=1

command -v qemu-system-x86_64 > /dev/null || { echo "SKIP: qemu-system-x86_64 missing" >&2; exit 77; }
for bin in "$KIWI_RUN" "$probe" "$netprobe"; do
  [ -x "$bin" ] || { echo "phase.sh: $bin missing: build it (ninja -C $build)" >&2; exit 1; }
done

# The sandboxes' rootfs, built on the host and handed over as one tar
# file: the guest unpacks it onto its tmpfs with one read over 9p, where
# `cp -a` of the tree cost ~50 s (one 9p round trip per applet symlink).
rootfs=$build/tests/vm/phase-rootfs
mkdir -p "$build/tests/vm"
sh "$repo/rootfs-tools/busybox-rootfs.sh" "$rootfs" "$probe" "$netprobe"
export KIWI_VM_PHASE_ROOTFS=$rootfs.tar
tar -C "$rootfs/" -cf "$KIWI_VM_PHASE_ROOTFS.tmp" . && mv "$KIWI_VM_PHASE_ROOTFS.tmp" "$KIWI_VM_PHASE_ROOTFS"

shares=(--share "$repo")
case $build/ in "$repo"/*) ;; *) shares+=(--share "$build") ;; esac
case $KIWI_RUN in "$repo"/*|"$build"/*) ;; *) shares+=(--share "$(dirname "$KIWI_RUN")") ;; esac

cd "$here"
exec "$repo/tests/vm/run.sh" --timeout 600 "${shares[@]}" -- /usr/bin/python3 -B "$here/phase_guest.py"
