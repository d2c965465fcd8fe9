#!/usr/bin/env bash
# What cgroup setup adds to a sandbox start (issue 3), inside the VM lane's
# pure cgroup v2 guest: kiwi-run with limits against kiwi-run without, and
# crun with the same limits against crun without, in one run, interleaved
# (bench/startbench.c). Prints ratios only: absolute times under TCG say
# nothing about a real host.
#
# usage: bench/cgroup-cost.sh [--kiwi PATH] [--runs N] [--cgtool PATH]
# Runs as root on the host: builds the rootfs, the crun bundles and the
# driver into a scratch dir under the repo (the guest sees the repo), then
# boots one VM (tests/vm/run.sh) that runs the measurement.
#
# Tools (each starts /bin/true in a fresh sandbox):
#   kiwi          kiwi-run run --rootfs R
#   kiwi-limits   kiwi-run run --rootfs R --memory 512M --pids 256 --cpus 1.5 --io-weight 100
#   crun          crun --cgroup-manager=disabled, no linux.resources
#   crun-cgroup   crun --cgroup-manager=cgroupfs, no linux.resources (a cgroup, no limits)
#   crun-limits   crun --cgroup-manager=cgroupfs with the same four limits
# With --cgtool (tests/bounds/cgtool from a build), it also times the cgroup
# module alone: create + destroy with the four limits, no process, as a
# fraction of kiwi-run's median start.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
limits=(--memory 512M --pids 256 --cpus 1.5 --io-weight 100)

fail() { echo "cgroup-cost.sh: $*" >&2; exit 1; }

# ---- inside the guest ---------------------------------------------------------

# The median and min columns of startbench's table, as "name median min".
table() {
  awk -F'|' '/^\| tool \| median ms/ { on = 1; next }
             on && /^\|---/ { next }
             on && /^\| / { gsub(/ /, "", $2); print $2, $3 + 0, $4 + 0; next }
             on { exit }' "$1"
}

ratios() {
  awk '{ med[$1] = $2; min[$1] = $3 }
       END {
         print "| ratio | by median | by min |"
         print "|---|---:|---:|"
         printf "| kiwi-limits / kiwi | %.2f | %.2f |\n", med["kiwi-limits"] / med["kiwi"], min["kiwi-limits"] / min["kiwi"]
         printf "| crun-limits / crun | %.2f | %.2f |\n", med["crun-limits"] / med["crun"], min["crun-limits"] / min["crun"]
         printf "| crun-cgroup / crun | %.2f | %.2f |\n", med["crun-cgroup"] / med["crun"], min["crun-cgroup"] / min["crun"]
         printf "| kiwi-limits / crun-limits | %.2f | %.2f |\n", med["kiwi-limits"] / med["crun-limits"], min["kiwi-limits"] / min["crun-limits"]
         printf "| kiwi / crun | %.2f | %.2f |\n", med["kiwi"] / med["crun"], min["kiwi"] / min["crun"]
         dk = med["kiwi-limits"] - med["kiwi"]; dc = med["crun-limits"] - med["crun"]
         mk = min["kiwi-limits"] - min["kiwi"]; mc = min["crun-limits"] - min["crun"]
         printf "| cgroup cost: kiwi-run'\''s added time / crun'\''s added time | %.2f | %.2f |\n", dk / dc, mk / mc
       }'
}

in_guest() {
  local work=$1 kiwi=$2 runs=$3 rootfs
  [ "$(cat /sys/fs/cgroup/cgroup.controllers)" != "" ] || fail "no cgroup v2 controllers in the guest"
  rootfs=/tmp/cgbench-rootfs
  cp -a "$(readlink -f "$work/rootfs")" "$rootfs"  # the rootfs path is a symlink to its version
  sed -i "s|@ROOTFS@|$rootfs|" "$work"/bundle-*/config.json
  echo "- guest: kernel $(uname -r), $(nproc) vCPUs (TCG), controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
  echo "- crun $(crun --version | awk 'NR == 1 { print $3 }'); kiwi-run tree $(git -C "$(dirname "$work")" rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "- limits: ${limits[*]} (crun: the same as linux.resources)"
  echo "- $runs starts per tool, round-robin, after 5 dropped warm-up rounds"
  echo
  "$work/startbench" --runs "$runs" --batches none --rss-runs 0 \
    "kiwi=$kiwi run --rootfs $rootfs -- /bin/true" \
    "kiwi-limits=$kiwi run --rootfs $rootfs ${limits[*]} -- /bin/true" \
    "crun=crun --root /tmp/crun-state --cgroup-manager=disabled run --bundle $work/bundle-none cgb-{n}" \
    "crun-cgroup=crun --root /tmp/crun-state --cgroup-manager=cgroupfs run --bundle $work/bundle-none cgb-{n}" \
    "crun-limits=crun --root /tmp/crun-state --cgroup-manager=cgroupfs run --bundle $work/bundle-limits cgb-{n}" \
    > "$work/startbench.out" 2>&1 || { cat "$work/startbench.out" >&2; fail "a start failed"; }
  table "$work/startbench.out" > "$work/table"
  ratios < "$work/table"
  if [ -x "$work/cgtool" ]; then
    local n=200 t0 t1 kiwi_med
    t0=$(date +%s%N)
    "$work/cgtool" cycles "${limits[@]}" "$n" > /dev/null
    t1=$(date +%s%N)
    kiwi_med=$(awk '$1 == "kiwi" { print $2 }' "$work/table")
    awk -v ns=$((t1 - t0)) -v n=$n -v med="$kiwi_med" 'BEGIN {
      printf "| module alone: one create + destroy with the limits / kiwi median start | %.2f | |\n", ns / n / 1e6 / med }'
  fi
  local left
  left=$(find /sys/fs/cgroup -name 'kiwi-*' -o -name 'cgb-*' | wc -l)
  echo
  echo "- cgroups left behind after the run: $left"
}

# ---- on the host ------------------------------------------------------------

# A crun bundle from `crun spec`, running /bin/true on a read-only rootfs in
# user (0 -> 0), mount, pid, net, uts, ipc and cgroup namespaces, as
# kiwi-run does; with_limits adds linux.resources equal to $limits.
make_bundle() {
  local dir=$1 with_limits=$2
  mkdir -p "$dir"
  (cd "$dir" && crun spec)
  python3 - "$dir/config.json" "$with_limits" <<'PY'
import json, sys
path, with_limits = sys.argv[1], sys.argv[2] == "1"
cfg = json.load(open(path))
cfg["process"].update(terminal=False, args=["/bin/true"])
cfg["root"] = {"path": "@ROOTFS@", "readonly": True}
lx = cfg["linux"]
lx["namespaces"] = [{"type": t} for t in ("pid", "network", "ipc", "uts", "user", "mount", "cgroup")]
lx["uidMappings"] = [{"containerID": 0, "hostID": 0, "size": 1}]
lx["gidMappings"] = [{"containerID": 0, "hostID": 0, "size": 1}]
cfg["mounts"] = [m for m in cfg["mounts"] if m["destination"] != "/sys/fs/cgroup"]
for m in cfg["mounts"]:   # gid 5 does not exist in a one-id user namespace
    m["options"] = [o for o in m.get("options", []) if not o.startswith("gid=")]
lx.pop("resources", None)
if with_limits:
    mem = 512 << 20
    lx["resources"] = {
        "memory": {"limit": mem, "swap": mem},    # OCI swap is memory + swap: none
        "pids": {"limit": 256},
        "cpu": {"quota": 150000, "period": 100000},
        "blockIO": {"weight": 100},
    }
json.dump(cfg, open(path, "w"), indent=1)
PY
}

work=
on_host() {
  local kiwi= runs=200 cgtool=
  while [ $# -gt 0 ]; do
    case $1 in
      --kiwi) kiwi=$2; shift 2 ;;
      --runs) runs=$2; shift 2 ;;
      --cgtool) cgtool=$2; shift 2 ;;
      -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
      *) fail "unknown argument '$1'" ;;
    esac
  done
  [ "$(id -u)" = 0 ] || fail "run as root"
  for t in crun cc python3 qemu-system-x86_64; do
    command -v "$t" > /dev/null || fail "$t is missing"
  done
  [ -n "$kiwi" ] || kiwi=$repo/build/src/kiwi-run
  [ -x "$kiwi" ] || fail "kiwi-run not found at $kiwi: build it or pass --kiwi"
  work=$(mktemp -d "$repo/.cgroup-cost.XXXXXX")
  trap '[ -z "$work" ] || rm -rf "$work"' EXIT
  # A copy inside the scratch dir: the guest sees only the repo.
  cp "$kiwi" "$work/kiwi-run"
  [ -z "$cgtool" ] || cp "$cgtool" "$work/cgtool"
  "$repo/rootfs-tools/busybox-rootfs.sh" "$work/rootfs"
  cc -O2 -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -o "$work/startbench" "$here/startbench.c"
  make_bundle "$work/bundle-none" 0
  make_bundle "$work/bundle-limits" 1
  echo "# cgroup-cost $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "- command: bench/cgroup-cost.sh --runs $runs --kiwi $kiwi (built $(date -u -r "$kiwi" '+%H:%M UTC'))"
  echo "- host load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  cd "$repo"
  "$repo/tests/vm/run.sh" --timeout 1800 -- bash "$here/cgroup-cost.sh" --in-guest "$work" "$work/kiwi-run" "$runs"
}

if [ "${1:-}" = --in-guest ]; then
  shift
  in_guest "$@"
else
  on_host "$@"
fi
