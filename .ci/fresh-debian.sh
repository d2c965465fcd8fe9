#!/usr/bin/env bash
# Runs the README's two commands from a clean clone inside a freshly
# debootstrapped Debian 12 minbase root, to prove the project installs
# everything it needs. The root is entered with pivot_root in new mount,
# pid, uts and ipc namespaces (not chroot: the kernel refuses user
# namespaces inside a chroot); the network namespace is the host's, for
# apt-get. Needs root, debootstrap and Debian's archive. Not part of CI.
#   .ci/fresh-debian.sh [ROOT_DIR] [COMMIT]   (default: /var/tmp/kiwi-fresh/root, HEAD)
# KIWI_FRESH_CMD, when set, runs instead of the README's commands (for a
# closer look at one failure; KIWI_FRESH_KEEP=1 keeps the earlier clone).
set -euo pipefail
root=${1:-/var/tmp/kiwi-fresh/root}
commit=${2:-HEAD}
repo=$(cd "$(dirname "$0")/.." && pwd)
if [ ! -x "$root/usr/bin/apt-get" ]; then
	mirror=$("$repo/.ci/debian-mirror.sh")   # this machine's own apt source
	mkdir -p "$root"
	debootstrap --variant=minbase bookworm "$root" "$mirror"
fi
if [ -z "${KIWI_FRESH_KEEP:-}" ]; then
	rm -rf "$root/src/kiwi-run"
	mkdir -p "$root/src"
	git clone -q --no-local "$repo" "$root/src/kiwi-run"
	git -C "$root/src/kiwi-run" checkout -q "$commit"
fi
cp /etc/resolv.conf "$root/etc/resolv.conf"

# shellcheck disable=SC2016
exec unshare --mount --pid --uts --ipc --fork --kill-child -- bash -c '
	set -euo pipefail
	root=$1
	mount --make-rprivate /
	mount --bind "$root" "$root"
	mount -t proc proc "$root/proc"
	mount -t sysfs sysfs "$root/sys"
	mount --rbind /sys/fs/cgroup "$root/sys/fs/cgroup" 2>/dev/null || true
	mount --rbind /dev "$root/dev"
	mount -t tmpfs tmpfs "$root/tmp"
	mount -t tmpfs -o mode=0755 tmpfs "$root/run"   # as a booted system has it: kiwi-helper refuses a world-writable /run
	cd "$root"
	mkdir -p .old-root
	pivot_root . .old-root
	umount -l /.old-root
	rmdir /.old-root
	cd /src/kiwi-run
	export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
	if [ -n "$2" ]; then
		bash -c "$2"
		exit
	fi
	echo "=== README command 1"
	bash .ci/quickstart.sh
	echo "=== README command 2"
	./tests/run.sh
' fresh "$root" "${KIWI_FRESH_CMD:-}"
