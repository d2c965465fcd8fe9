#!/usr/bin/env bash
# vm.sh: the meson test `vm-session` (suite 'vm'). One VM boot (Debian's 6.1
# kernel, pure cgroup v2) runs tests/session/vm_guest.py: each exec of a
# session in a cgroup of its own, its OOM kill reported on that exec alone,
# as root and rootless (the guest's delegated subtree).
# usage: vm.sh BUILD_ROOT   Exit: the guest's status; 77 without qemu.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$(realpath -- "${1:-$repo/build}")
export KIWI_RUN=${KIWI_RUN:-$build/src/kiwi-run}
export PYTHONDONTWRITEBYTECODE=1
command -v qemu-system-x86_64 > /dev/null || { echo "SKIP: qemu-system-x86_64 missing" >&2; exit 77; }
[ -x "$KIWI_RUN" ] || { echo "vm.sh: $KIWI_RUN missing: build it (ninja -C $build)" >&2; exit 1; }
rootfs=$build/tests/session/vm-rootfs
mkdir -p "$build/tests/session"
sh "$repo/rootfs-tools/busybox-rootfs.sh" "$rootfs" >/dev/null
export KIWI_VM_SESSION_ROOTFS=$rootfs.tar
tar -C "$rootfs/" -cf "$KIWI_VM_SESSION_ROOTFS.tmp" . && mv "$KIWI_VM_SESSION_ROOTFS.tmp" "$KIWI_VM_SESSION_ROOTFS"
shares=(--share "$repo")
case $build/ in "$repo"/*) ;; *) shares+=(--share "$build") ;; esac
cd "$here"
exec "$repo/tests/vm/run.sh" --timeout 400 "${shares[@]}" -- /usr/bin/python3 -B "$here/vm_guest.py"
