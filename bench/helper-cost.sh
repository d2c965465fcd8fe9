#!/usr/bin/env bash
# Start-up cost of a rootless multi-id map through kiwi-helper: /bin/true
# in a fresh sandbox as user nobody, with the caller's own single-id map
# (kiwi-run writes it, no helper) against `--uidmap 0:200000:65536`
# (kiwi-helper started, pidfd checked, maps written by it), interleaved
# round-robin in one run of bench/startbench.c. The ratio rows are the
# result; absolute times on this shared machine are not.
#
# The test build of the helper (build/src/helper/kiwi-helper-test, whose
# admin config lies in a directory under /run named after its build
# directory: its --help says which) is copied setuid-root to a temp dir;
# the config is written for the run and removed after. Do not run it while
# the `helper` test suite of the same build directory runs: they share it.
#
# usage: bench/helper-cost.sh [--build DIR] [--runs N]   (as root)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
build=$repo/build
runs=200
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "helper-cost.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "helper-cost.sh: run as root" >&2; exit 1; }
for f in src/kiwi-run src/helper/kiwi-helper-test; do
  [ -x "$build/$f" ] || { echo "helper-cost.sh: $build/$f missing: build it or pass --build" >&2; exit 1; }
done
cfg=$("$build/src/helper/kiwi-helper-test" --help | sed -n 's/^Admin config: \(.*\)\/helper\.json\. .*/\1/p')
case $cfg in /run/kiwi-helper-test*) ;; *) echo "helper-cost.sh: cannot learn the test helper's config directory" >&2; exit 1 ;; esac
[ ! -e "$cfg" ] || { echo "helper-cost.sh: $cfg exists (a helper test running?)" >&2; exit 1; }

work=$(mktemp -d /var/tmp/kiwi-helperbench.XXXXXX)
trap 'rm -rf "$work" "$cfg"' EXIT
chmod 755 "$work"
"$repo/rootfs-tools/busybox-rootfs.sh" "$work/rootfs" >/dev/null
install -m 755 "$build/src/kiwi-run" "$work/kiwi-run"
install -m 4755 -o root -g root "$build/src/helper/kiwi-helper-test" "$work/kiwi-helper"
mkdir -m 755 "$cfg"
printf '{"rules":[{"user":65534,"operations":["idmap"],"uids":[[200000,65536]],"gids":[[200000,65536]]}]}\n' \
  > "$cfg/helper.json"
mkdir -p "$work/home-nobody"
chown 65534:65534 "$work/home-nobody"
cc -O2 -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -o "$work/startbench" "$here/startbench.c"

echo "# rootless --uidmap through kiwi-helper against the caller's own map, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
echo "- kernel $(uname -r), $(nproc) cores, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- kiwi-run from this tree's HEAD $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "- command: bench/helper-cost.sh --runs $runs"
echo
run="env KIWI_HELPER=$work/kiwi-helper $work/kiwi-run run --rootfs $work/rootfs"
"$work/startbench" --runs "$runs" --batches none --rss-runs 0 --ref helper-map \
  --user "helper-map=65534:65534:$work/home-nobody" --user "own-map=65534:65534:$work/home-nobody" \
  "helper-map=$run --uidmap 0:200000:65536 -- /bin/true" "own-map=$run -- /bin/true"
echo "- load after: $(cut -d' ' -f1-3 /proc/loadavg)"
