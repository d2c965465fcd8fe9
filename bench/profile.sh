#!/usr/bin/env bash
# Where a kiwi-run start spends its time: runs `kiwi-run run --rootfs R --
# /bin/true` N times under perf twice, (1) recording system calls and
# process events to print a phase timeline (bench/perf_phases.py), and (2)
# sampling CPU with call graphs to print the hottest functions of the
# launcher, its init and the command. The binary is copied under a name of
# its own first, so that other kiwi-run processes on a shared machine stay
# out of the numbers. Tracing slows every system call down: read phases
# against each other, and take absolute times from bench/start.sh.
#
# usage: bench/profile.sh [--kiwi PATH] [--runs N] [--rootfs DIR] [-- KIWI-RUN OPTIONS...]
# Needs root and perf (Debian: linux-perf).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
kiwi=${KIWI_RUN:-}
runs=100
rootfs=
extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --kiwi) kiwi=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --rootfs) rootfs=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "profile.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
fail() { echo "profile.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "run as root"
command -v perf >/dev/null || fail "perf is missing (apt-get install linux-perf)"
if [ -z "$kiwi" ]; then
  for c in "$repo/build/src/kiwi-run" /tmp/build-bench/src/kiwi-run; do
    [ -x "$c" ] && { kiwi=$c; break; }
  done
fi
[ -n "$kiwi" ] && [ -x "$kiwi" ] || fail "kiwi-run not found: pass --kiwi PATH"

work=$(mktemp -d /tmp/kiwi-profile.XXXXXX)
trap 'rm -rf "$work"' EXIT
[ -n "$rootfs" ] || rootfs=$work/rootfs
"$repo/rootfs-tools/busybox-rootfs.sh" "$rootfs"
cp "$kiwi" "$work/kiwi-prof"
cat > "$work/loop.sh" <<EOF
for i in \$(seq $runs); do
  "$work/kiwi-prof" run --rootfs "$rootfs" ${extra[*]:-} -- /bin/true || exit 1
done
EOF
"$work/kiwi-prof" run --rootfs "$rootfs" "${extra[@]}" -- /bin/true || fail "kiwi-run does not run"

echo "# kiwi-run profile $(date -u '+%Y-%m-%d %H:%M UTC'), $runs starts of /bin/true"
echo
echo "- kiwi-run: $kiwi (built $(date -u -r "$kiwi" '+%H:%M UTC'); this tree's HEAD: $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?'))${extra[*]:+, options: ${extra[*]}}"
echo "- kernel $(uname -r), load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

perf record -q -a -o "$work/trace.data" \
  -e raw_syscalls:sys_enter,raw_syscalls:sys_exit \
  -e sched:sched_process_exec,sched:sched_process_fork,sched:sched_process_exit \
  -- bash "$work/loop.sh" >/dev/null 2>&1
perf script -i "$work/trace.data" -F comm,tid,time,event,trace 2>/dev/null |
  grep -E '^ *(kiwi-prof|true|bash) ' > "$work/trace.txt" || true
python3 "$here/perf_phases.py" "$work/trace.txt" kiwi-prof

# -a so that exit-time work (namespace teardown) is seen; the comm filter
# keeps only our launcher (comm kiwi-prof, also its init) and the command.
perf record -q -a -g -F 5000 -e cpu-clock -o "$work/cpu.data" -- bash "$work/loop.sh" >/dev/null 2>&1
echo "CPU samples by function (launcher, its init and the command; % of their samples)"
echo
echo '```'
perf report -i "$work/cpu.data" --comms kiwi-prof,true --percentage relative --no-children \
  --sort comm,dso,sym --stdio -g none 2>/dev/null | grep '%' | head -25 || true
echo '```'
echo
echo "Kernel entry points, inclusive (% of the same samples)"
echo
echo '```'
perf report -i "$work/cpu.data" --comms kiwi-prof,true --percentage relative --children \
  --sort sym --stdio -g none 2>/dev/null |
  grep -E '\[k\] (__x64_sys_|__do_sys_|asm_exc_page_fault|copy_net_ns|copy_mnt_ns|do_exit|free_nsproxy|do_seccomp)' |
  head -20 || true
echo '```'
