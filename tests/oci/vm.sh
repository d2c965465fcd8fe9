#!/usr/bin/env bash
# vm.sh: the OCI runtime comparison in the VM lane (meson: oci-vm, suite
# 'vm'). Boots one VM (pure cgroup v2, tests/vm/run.sh) and runs the whole
# tests/oci suite inside it against every runtime of KIWI_OCI_RUNTIMES
# (default kiwi-run, crun and runc), plus the containerd and podman tests.
# usage: vm.sh BUILD_ROOT [PYTEST_ARGS...]
# Environment: KIWI_RUN, KIWI_OCI_RUNTIMES, KIWI_OCI_RESULTS (default
# BUILD_ROOT/tests/oci/results-vm.json, the input of report.py),
# KIWI_OCI_EXPECT (default: tests/oci/expected-kiwi.txt; set it empty for
# a plain comparison in which every failure counts), KIWI_OCI_VM_TIMEOUT
# (seconds, default 870: under meson's 900).
# Exit: pytest's status; 77 when qemu is missing.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$(realpath -- "${1:-$repo/build}")
[ $# -eq 0 ] || shift
export KIWI_RUN=${KIWI_RUN:-$build/src/kiwi-run}
export KIWI_OCI_PROBE=${KIWI_OCI_PROBE:-$build/tests/oci/oci-probe}
export KIWI_OCI_RUNTIMES=${KIWI_OCI_RUNTIMES:-kiwi=$KIWI_RUN,crun=/usr/bin/crun,runc=/usr/sbin/runc}
export KIWI_OCI_RESULTS=${KIWI_OCI_RESULTS:-$build/tests/oci/results-vm.json}
export KIWI_OCI_EXPECT=${KIWI_OCI_EXPECT-$here/expected-kiwi.txt}
export PYTHONDONTWRITEBYTECODE=1

command -v qemu-system-x86_64 > /dev/null || { echo "SKIP: qemu-system-x86_64 missing" >&2; exit 77; }
[ -x "$KIWI_OCI_PROBE" ] || { echo "vm.sh: $KIWI_OCI_PROBE missing: build it (ninja tests/oci/oci-probe)" >&2; exit 1; }

# The containers' rootfs and the image for containerd and podman, built on
# the host (the guest copies the rootfs to its tmpfs).
export KIWI_OCI_ROOTFS=${KIWI_OCI_ROOTFS:-$build/tests/oci/rootfs}
sh "$repo/rootfs-tools/busybox-rootfs.sh" "$KIWI_OCI_ROOTFS" "$KIWI_OCI_PROBE"

shares=(--share "$repo")
case $build/ in "$repo"/*) ;; *) shares+=(--share "$build") ;; esac
mkdir -p "$(dirname "$KIWI_OCI_RESULTS")"
for bin in "$KIWI_RUN" "$KIWI_OCI_PROBE" "$KIWI_OCI_RESULTS"; do
  case $bin in "$repo"/*|"$build"/*) ;; *) [ ! -e "$bin" ] || shares+=(--share "$(dirname "$bin")") ;; esac
done

cd "$here"
exec "$repo/tests/vm/run.sh" --timeout "${KIWI_OCI_VM_TIMEOUT:-870}" "${shares[@]}" -- \
  /usr/bin/python3 -m pytest -q -rfE -p no:cacheprovider "$here" "$@"
