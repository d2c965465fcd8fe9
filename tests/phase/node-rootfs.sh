#!/bin/sh
# A rootfs with a real package manager for the phase tests: Debian 12
# minbase plus nodejs and npm, from Debian's archive only (debootstrap).
# Built once into DEST (default /var/cache/kiwi-run-tests/node-rootfs) and
# kept: a stamp names what it was built from; a second run is a no-op.
# Needs root and debootstrap. Usage: node-rootfs.sh [DEST]
set -eu
dest=${1:-/var/cache/kiwi-run-tests/node-rootfs}
# The archive this machine's apt uses (KIWI_DEBIAN_MIRROR overrides it).
mirror=$("$(dirname "$0")/../../.ci/debian-mirror.sh")
stamp="bookworm minbase nodejs npm v1"
mkdir -p "$(dirname "$dest")"
exec 9>"$dest.lock"
flock 9
if [ -f "$dest/.kiwi-stamp" ] && [ "$(cat "$dest/.kiwi-stamp")" = "$stamp" ]; then
	exit 0
fi
rm -rf "$dest.new"
log="$dest.log"
fail() {
	tail -20 "$log" >&2
	echo "node-rootfs.sh: $1 (log: $log)" >&2
	exit 1
}
# debootstrap cannot order npm's many virtual dependencies (it leaves them
# unconfigured): it installs the base and nodejs, apt the rest.
debootstrap --variant=minbase --include=nodejs bookworm "$dest.new" "$mirror" >"$log" 2>&1 ||
	fail "debootstrap failed"
cp /etc/resolv.conf "$dest.new/etc/resolv.conf"
{ chroot "$dest.new" apt-get update -q &&
  chroot "$dest.new" env DEBIAN_FRONTEND=noninteractive \
	apt-get install -y -q --no-install-recommends npm; } >>"$log" 2>&1 ||
	fail "apt-get install npm failed"
: >"$dest.new/etc/resolv.conf"
mkdir -p "$dest.new/workspace"
# Nothing in the tests needs apt's lists or caches: keep the tree small.
rm -rf "$dest.new/var/cache/apt/archives"/*.deb "$dest.new/var/lib/apt/lists"/*
echo "$stamp" >"$dest.new/.kiwi-stamp"
rm -rf "$dest"
mv "$dest.new" "$dest"
