#!/usr/bin/env bash
# The README's first command: install what is missing, build, build a
# busybox rootfs, and run one sandbox on it with its verdict on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/deps.sh
[ -f build/build.ninja ] || meson setup build >/dev/null
ninja -C build >/dev/null
# Root's sandboxes map their ids onto kiwi's range of /etc/subuid and
# /etc/subgid, never onto the host's root: added once here.
[ "$(id -u)" != 0 ] || build/src/kiwi-run doctor --fix >/dev/null
rootfs-tools/busybox-rootfs.sh build/rootfs
echo "--- a sandbox on build/rootfs:"
build/src/kiwi-run run --rootfs build/rootfs --hostname demo --verdict-fd 3 -- \
	sh -c 'echo "hello from $(hostname) as $(id -un), pid $$"; echo "network:"; ip -o link | cut -d" " -f2; touch /etc/x 2>&1 || true' 3>&1
