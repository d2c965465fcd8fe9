#!/usr/bin/env bash
# Start-up cost of `kiwi-run run --network audit` against `--network none`:
# /bin/true in a fresh sandbox, both interleaved round-robin in one run of
# bench/startbench.c, as root and then as user nobody (rootless). The
# ratio rows (audit / none, by median and by minimum) are the result;
# absolute times on this shared machine are not.
#
# usage: bench/net-audit-cost.sh [--kiwi PATH] [--runs N] [--rootfs DIR]
# Must run as root (the rootless rows switch to uid 65534 themselves).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
kiwi=$repo/build/src/kiwi-run
runs=200
rootfs=
while [ $# -gt 0 ]; do
  case $1 in
    --kiwi) kiwi=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --rootfs) rootfs=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "net-audit-cost.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "net-audit-cost.sh: run as root" >&2; exit 1; }
[ -x "$kiwi" ] || { echo "net-audit-cost.sh: $kiwi missing: build it or pass --kiwi" >&2; exit 1; }

work=$(mktemp -d /tmp/kiwi-auditbench.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
[ -n "$rootfs" ] || rootfs=$work/rootfs
"$repo/rootfs-tools/busybox-rootfs.sh" "$rootfs" >/dev/null
rootfs=$(cd "$rootfs" && pwd)
# the rootless rows run a copy nobody can read and execute
cp "$kiwi" "$work/kiwi-run"
chmod 755 "$work/kiwi-run"
kiwi=$work/kiwi-run
mkdir -p "$work/home-nobody"
chown 65534:65534 "$work/home-nobody"
cc -O2 -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -o "$work/startbench" "$here/startbench.c"

echo "# --network audit against --network none, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
echo "- kernel $(uname -r), $(nproc) cores, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- kiwi-run from this tree's HEAD $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "- command: bench/net-audit-cost.sh --runs $runs"
echo
run="$kiwi run --rootfs $rootfs"
"$work/startbench" --runs "$runs" --batches none --rss-runs 0 --ref audit \
  "audit=$run --network audit -- /bin/true" "none=$run --network none -- /bin/true"
"$work/startbench" --runs "$runs" --batches none --rss-runs 0 --ref audit-rootless \
  --user "audit-rootless=65534:65534:$work/home-nobody" --user "none-rootless=65534:65534:$work/home-nobody" \
  "audit-rootless=$run --network audit -- /bin/true" "none-rootless=$run --network none -- /bin/true"
echo "- load after: $(cut -d' ' -f1-3 /proc/loadavg)"
