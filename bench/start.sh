#!/usr/bin/env bash
# Start-up benchmark of issue 2: /bin/true in a fresh sandbox, kiwi-run
# against crun, bubblewrap, the `unshare` floor and plain fork/exec, in one
# run, interleaved; then batches of concurrent sandboxes; then each tool's
# own peak RSS. The measuring is done by bench/startbench.c (built here with
# cc), which fork/execs every command itself and times it with
# CLOCK_MONOTONIC + wait4. Prints markdown tables (see bench/RESULTS.md).
#
# usage: bench/start.sh [--kiwi PATH | --no-kiwi] [--no-rootless] [--runs N]
#                       [--batch-reps N] [--batches 1,10,50,200] [--rss-runs N]
#                       [--rootfs DIR]
# Must run as root (the crun bundle maps uid 0 to 0, as kiwi-run does for
# root). Exits non-zero when any tool fails to run; timing never fails it.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
kiwi=${KIWI_RUN:-}
no_kiwi=0
rootless=1
runs=300
batch_reps=5
batches=1,10,50,200
rss_runs=20
rootfs=

while [ $# -gt 0 ]; do
  case $1 in
    --kiwi) kiwi=$2; shift 2 ;;
    --no-kiwi) no_kiwi=1; shift ;;
    --no-rootless) rootless=0; shift ;;
    --runs) runs=$2; shift 2 ;;
    --batch-reps) batch_reps=$2; shift 2 ;;
    --batches) batches=$2; shift 2 ;;
    --rss-runs) rss_runs=$2; shift 2 ;;
    --rootfs) rootfs=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "start.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

fail() { echo "start.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "run as root"
for t in crun bwrap unshare cc python3; do
  command -v "$t" >/dev/null || fail "$t is missing (bash .ci/deps.sh installs the peers)"
done

work=$(mktemp -d /tmp/kiwi-startbench.XXXXXX)
trap 'rm -rf "$work"' EXIT

# kiwi-run: an explicit path, else the tree's usual build dirs, else PATH.
if [ "$no_kiwi" = 0 ] && [ -z "$kiwi" ]; then
  for c in "$repo/build/src/kiwi-run" /tmp/build-bench/src/kiwi-run; do
    [ -x "$c" ] && { kiwi=$c; break; }
  done
  [ -n "$kiwi" ] || kiwi=$(command -v kiwi-run || true)
  [ -n "$kiwi" ] || fail "kiwi-run not found: build it, pass --kiwi PATH, or --no-kiwi"
fi

[ -n "$rootfs" ] || rootfs=$work/rootfs
"$repo/rootfs-tools/busybox-rootfs.sh" "$rootfs"
rootfs=$(cd "$rootfs" && pwd)

cc -O2 -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -o "$work/startbench" "$here/startbench.c"

# crun bundle, as close to kiwi-run's defaults as OCI allows: the same
# rootfs read-only; user (0->0, one id, as kiwi-run maps root), mount, pid,
# net, uts, ipc and cgroup namespaces; no capabilities; no_new_privs;
# hostname kiwi; fresh /proc with kiwi-run's read-only and masked paths;
# tmpfs /dev (crun binds null, zero, full, tty, random, urandom into it),
# devpts newinstance, /dev/shm and /tmp tmpfs; /sys read-only; kiwi-run's
# own default seccomp profile (seccomp-profiles/default.json, OCI format);
# no linux.resources, so no cgroup is created or written.
mkdir -p "$work/bundle" "$work/crun-state"
python3 - "$rootfs" "$repo/seccomp-profiles/default.json" "$work/bundle/config.json" <<'PY'
import json, sys
rootfs, profile, out = sys.argv[1:]
proc_ro = ["sys", "sysrq-trigger", "irq", "bus", "fs"]
proc_masked = ["kcore", "keys", "timer_list", "sched_debug", "latency_stats", "timer_stats", "acpi",
               "scsi", "kmsg", "kpagecount", "kpageflags", "kpagecgroup", "config.gz"]
tmpfs = lambda dst, src, opts: {"destination": dst, "type": "tmpfs", "source": src, "options": opts}
cfg = {
  "ociVersion": "1.0.0",
  "process": {
    "terminal": False,
    "user": {"uid": 0, "gid": 0},
    "args": ["/bin/true"],
    "env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"],
    "cwd": "/",
    "capabilities": {k: [] for k in ("bounding", "effective", "inheritable", "permitted", "ambient")},
    "noNewPrivileges": True,
  },
  "root": {"path": rootfs, "readonly": True},
  "hostname": "kiwi",
  "mounts": [
    {"destination": "/proc", "type": "proc", "source": "proc"},
    tmpfs("/dev", "tmpfs", ["nosuid", "strictatime", "mode=755", "size=256k"]),
    {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
     "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]},
    tmpfs("/dev/shm", "shm", ["nosuid", "noexec", "nodev", "mode=1777"]),
    tmpfs("/tmp", "tmpfs", ["nosuid", "nodev", "mode=1777"]),
    {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", "ro"]},
  ],
  "linux": {
    "uidMappings": [{"containerID": 0, "hostID": 0, "size": 1}],
    "gidMappings": [{"containerID": 0, "hostID": 0, "size": 1}],
    "namespaces": [{"type": t} for t in ("pid", "network", "ipc", "uts", "user", "mount", "cgroup")],
    "maskedPaths": ["/proc/" + p for p in proc_masked] + ["/sys/firmware"],
    "readonlyPaths": ["/proc/" + p for p in proc_ro],
    "seccomp": json.load(open(profile)),
  },
}
json.dump(cfg, open(out, "w"), indent=1)
PY

tools=()
[ "$no_kiwi" = 1 ] || tools+=(
  "kiwi=$kiwi run --rootfs $rootfs -- /bin/true"
  "kiwi-noseccomp=$kiwi run --rootfs $rootfs --seccomp unconfined -- /bin/true"
)
tools+=(
  "crun=crun --root $work/crun-state --cgroup-manager=disabled run --bundle $work/bundle startbench-{n}"
  "bwrap=bwrap --unshare-all --die-with-parent --ro-bind $rootfs / --proc /proc --dev /dev --tmpfs /tmp /bin/true"
  "floor=unshare -Urmpinuf --mount-proc true"
  "forkexec=/bin/true"
)
# Rootless rows (sequential phase only): the same tools as user nobody
# (65534), which maps itself to 0 inside. kiwi-rootless gets a HOME it can
# write (its seccomp cache lives there); kiwi-rootless-nocache keeps
# nobody's HOME=/nonexistent, as a service account without a home would.
opts=()
if [ "$rootless" = 1 ]; then
  chmod 755 "$work"
  mkdir -p "$work/home-nobody"
  chown 65534:65534 "$work/home-nobody"
  if [ "$no_kiwi" = 0 ]; then
    tools+=(
      "kiwi-rootless=$kiwi run --rootfs $rootfs -- /bin/true"
      "kiwi-rootless-nocache=$kiwi run --rootfs $rootfs -- /bin/true"
    )
    opts+=(--user "kiwi-rootless=65534:65534:$work/home-nobody" --seq-only kiwi-rootless
           --user kiwi-rootless-nocache=65534:65534:/nonexistent --seq-only kiwi-rootless-nocache)
  fi
  tools+=(
    "bwrap-rootless=bwrap --unshare-all --die-with-parent --ro-bind $rootfs / --proc /proc --dev /dev --tmpfs /tmp /bin/true"
    "floor-rootless=unshare -Urmpinuf --mount-proc true"
  )
  opts+=(--user bwrap-rootless=65534:65534 --seq-only bwrap-rootless
         --user floor-rootless=65534:65534 --seq-only floor-rootless)
fi
case "$rootfs$work" in *' '*) fail "paths with spaces are not supported" ;; esac

echo "# startbench $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
echo "- kernel: $(uname -r); cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- crun $(crun --version | head -1 | awk '{print $3}'), bubblewrap $(bwrap --version | awk '{print $2}'), $(unshare --version)"
if [ "$no_kiwi" = 0 ]; then
  echo "- kiwi-run: $kiwi (built $(date -u -r "$kiwi" '+%H:%M UTC'); this tree's HEAD: $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?'))"
else
  echo "- kiwi-run: not measured (--no-kiwi)"
fi
echo "- crun runs with --cgroup-manager=disabled, a bundle without linux.resources, and in a private mount namespace (made once by the driver) where /sys/fs/cgroup/unified is detached: crun 1.8 refuses every container on this hybrid-cgroup host otherwise. The other tools run in the host's mount namespace."
echo "- command: bench/start.sh --runs $runs --batch-reps $batch_reps --batches $batches --rss-runs $rss_runs${kiwi:+ --kiwi $kiwi}$([ "$no_kiwi" = 1 ] && echo ' --no-kiwi')$([ "$rootless" = 0 ] && echo ' --no-rootless')"
echo "- all tools run as root except the *-rootless rows (uid 65534, sequential phase only)"
echo

ref=()
[ "$no_kiwi" = 1 ] || ref=(--ref kiwi --goals kiwi --seq-only kiwi-noseccomp --quiet kiwi-noseccomp)
set +e
"$work/startbench" --runs "$runs" --batch-reps "$batch_reps" --batches "$batches" --rss-runs "$rss_runs" \
  "${ref[@]}" "${opts[@]}" --hide-cgroup2 crun --seq-only forkexec "${tools[@]}"
rc=$?
set -e
echo "- load after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $rc
