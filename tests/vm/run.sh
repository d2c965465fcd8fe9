#!/usr/bin/env bash
# run.sh [--timeout SECS] [--share HOSTDIR]... -- CMD [ARGS...]
#
# Runs CMD as root in a throwaway VM with a pure cgroup v2 hierarchy (every
# controller enabled) and no network card, and exits with CMD's status.
# CMD's stdout and stderr arrive byte for byte on run.sh's own; kernel
# messages go to a log shown only when the guest fails.
#
# The guest sees the host's /usr and /etc (read-only, under writable tmpfs
# overlays) and every HOSTDIR read-write at its host path (default: the repo
# root), so host-built binaries and paths work unchanged; CMD starts in the
# current directory, which must lie inside a share, with run.sh's environment
# plus KIWI_VM=1 and stdin from /dev/null. See README.md for what else the
# guest offers.
#
# Exit status: CMD's; 124 when the VM had to be killed after --timeout
# (default 600 s); 125 when the VM could not run CMD at all.
# Environment: KIWI_VM_ACCEL=kvm on hosts with real virtualisation (default
# tcg), KIWI_VM_CPU_MODEL (qemu -cpu under tcg, e.g. max), KIWI_VM_MEM (1G),
# KIWI_VM_CPUS (2), KIWI_VM_CACHE (see prepare.sh),
# KIWI_VM_TSC_KHZ (host TSC frequency, normally found in dmesg),
# KIWI_VM_DEBUG=1 (boot messages and a timed trace of the host's and the
# guest's steps on stderr afterwards), KIWI_VM_APPEND (more kernel
# parameters, e.g. initcall_debug).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
timeout=600
shares=()
run=
qemu_pid=
sleep_pid=

die() { echo "run.sh: $*" >&2; exit 125; }

# Under KIWI_VM_DEBUG=1: host-side steps with seconds since run.sh began.
started=$EPOCHREALTIME
host_trace() {
  [ -n "${KIWI_VM_DEBUG:-}" ] || return 0
  local us=$(( ${EPOCHREALTIME/[.,]/} - ${started/[.,]/} ))
  printf 'run.sh: %d.%03d %s\n' $((us / 1000000)) $((us / 1000 % 1000)) "$*" >&2
}

usage() {
  echo "usage: run.sh [--timeout SECS] [--share HOSTDIR]... -- CMD [ARGS...]" >&2
  exit 125
}

parse_args() {
  while [ $# -gt 0 ]; do
    case $1 in
      --timeout) [ $# -ge 2 ] || usage; timeout=$2; shift 2 ;;
      --share) [ $# -ge 2 ] || usage
               [ -d "$2" ] || die "--share $2: not a directory"
               shares+=("$(realpath -- "$2")"); shift 2 ;;
      --) shift; break ;;
      *) usage ;;
    esac
  done
  [ $# -gt 0 ] || usage
  [[ $timeout =~ ^[1-9][0-9]*$ ]] || die "--timeout $timeout: not a whole number of seconds"
  [ ${#shares[@]} -gt 0 ] || shares=("$(cd "$here/../.." && pwd)")
  cmd=("$@")
}

# The kernel cannot calibrate its TSC against anything on microvm (no PIT
# or HPET worth the name under TCG) and then sometimes hangs at boot; under
# TCG the guest's TSC ticks at the host's rate, so hand it that rate.
host_tsc_khz() {
  if [ -n "${KIWI_VM_TSC_KHZ:-}" ]; then
    echo "$KIWI_VM_TSC_KHZ"
    return
  fi
  local mhz
  mhz=$(dmesg 2>/dev/null | sed -n -e 's/.*tsc: Refined TSC clocksource calibration: \([0-9.]*\) MHz.*/\1/p' \
                                  -e 's/.*tsc: Detected \([0-9.]*\) MHz processor.*/\1/p' | tail -n 1)
  [ -n "$mhz" ] || mhz=$(awk -F': *' '/^cpu MHz/ { print $2; exit }' /proc/cpuinfo)
  [ -n "$mhz" ] || die "cannot tell the host's TSC frequency: set KIWI_VM_TSC_KHZ"
  awk -v mhz="$mhz" 'BEGIN { printf "%d\n", mhz * 1000 }'
}

# The control dir the guest mounts as /kiwi/ctl: the command (argv and
# environment NUL-separated, so any byte but NUL survives, and the working
# directory) and the shares to mount; the guest writes the exit status back.
write_control() {
  local ctl=$run/ctl share inside= i=0
  mkdir "$ctl"
  printf '%s\0' "${cmd[@]}" > "$ctl/argv"
  # KIWI_HOST_ROOT_MAP=1: the guest's files live on 9p and on tmpfs,
  # which Linux 6.1 cannot idmap, so root's sandboxes keep map 0 0 1
  # there, as asked (kiwi-run(1), ID MAPPING).
  { env -0; printf 'KIWI_VM=1\0KIWI_VM_USER=kiwitest\0KIWI_HOST_ROOT_MAP=1\0'; } > "$ctl/env"
  printf '%s' "$PWD" > "$ctl/cwd"
  # Parents before children, so a nested share is mounted over its parent.
  while IFS= read -r share; do
    [ "$share" != / ] || die "--share /: share a directory, not the root"
    [[ $share != *$'\n'* ]] || die "--share: newline in a path"
    echo "kiwishare$i $share" >> "$ctl/shares"
    case $PWD/ in "$share"/*) inside=1 ;; esac
    i=$((i + 1))
  done < <(printf '%s\n' "${shares[@]}" | sort -u)
  case $PWD/ in /usr/*|/etc/*) inside=1 ;; esac
  [ -n "$inside" ] || die "the current directory $PWD is not inside a share (add --share DIR)"
}

# qemu's option syntax doubles commas inside values.
qemu_escape() { printf '%s' "${1//,/,,}"; }

# Adds a 9p export of host dir $2 tagged $1 to the qemu arguments; $3 is
# extra fsdev options. multidevs=remap keeps inode numbers unique when the
# directory spans several host filesystems.
add_9p() {
  qemu_args+=(-fsdev "local,id=$1,path=$(qemu_escape "$2"),security_model=passthrough,multidevs=remap$3"
              -device "virtio-9p-device,fsdev=$1,mount_tag=$1")
}

build_qemu_args() {
  local accel cmdline tag path khz hz
  khz=$(host_tsc_khz)
  hz=$(sed -n 's/^CONFIG_HZ=//p' "${KIWI_VM_KERNEL%/*}/config")
  case ${KIWI_VM_ACCEL:-tcg} in
    # x86-64-v2 and rdrand, deliberately without XSAVE/AVX: under -cpu max
    # an exec in the guest took about 45% longer (5 of 5 interleaved pairs),
    # likely from emulating its 2.7 KB AVX-512 state on every switch.
    tcg) accel=(-accel tcg,thread=multi
                -cpu "${KIWI_VM_CPU_MODEL:-qemu64,+rdrand,+cx16,+ssse3,+sse4.1,+sse4.2,+popcnt}") ;;
    kvm) accel=(-accel kvm -cpu host) ;;
    *) die "KIWI_VM_ACCEL=${KIWI_VM_ACCEL}: want tcg or kvm" ;;
  esac
  # quiet: every line on the emulated serial port costs boot time; panic=-1
  # with reboot=t and -no-reboot turns any guest failure into a qemu exit.
  cmdline="console=ttyS0 panic=-1 oops=panic reboot=t cgroup_no_v1=all"
  if [ -n "${KIWI_VM_DEBUG:-}" ]; then cmdline+=" kiwi.trace"; else cmdline+=" quiet"; fi
  cmdline+=" ${KIWI_VM_APPEND:-}"
  cmdline+=" mitigations=off tsc=reliable no_timer_check tsc_early_khz=$khz"
  # Boot time under TCG: the preset loops-per-jiffy skips calibrating each
  # CPU, crypto self-tests are skipped, RCU grace periods are expedited.
  cmdline+=" lpj=$((khz * 1000 / hz)) cryptomgr.notests rcupdate.rcu_expedited=1"
  cmdline+=" rdinit=/init"
  qemu_args=(-M microvm "${accel[@]}" -m "${KIWI_VM_MEM:-1G}" -smp "${KIWI_VM_CPUS:-2}"
             -nodefaults -no-user-config -display none -no-reboot
             -kernel "$KIWI_VM_KERNEL" -initrd "$KIWI_VM_INITRD" -append "$cmdline"
             -serial "file:$(qemu_escape "$run/console.log")"
             -device virtio-serial-device
             -chardev "file,id=out,path=$(qemu_escape "$run/stdout")" -device virtconsole,chardev=out
             -chardev "file,id=err,path=$(qemu_escape "$run/stderr")" -device virtconsole,chardev=err)
  add_9p kiwictl "$run/ctl" ""
  add_9p kiwiusr /usr ,readonly=on
  add_9p kiwietc /etc ,readonly=on
  add_9p kiwimods "$KIWI_VM_MODULES" ,readonly=on
  while read -r tag path; do
    add_9p "$tag" "$path" ""
  done < "$run/ctl/shares"
}

# Why the guest failed, from its serial console.
show_console() {
  echo "run.sh: last lines of the guest's console (${1}):" >&2
  tail -n 40 "$run/console.log" >&2 || true
  if [ -s "$run/qemu.log" ]; then
    echo "run.sh: qemu said:" >&2
    cat "$run/qemu.log" >&2
  fi
}

# Only what this script started, by pid.
cleanup() {
  local pid
  for pid in $qemu_pid $sleep_pid; do
    kill -KILL "$pid" 2>/dev/null || true
  done
  [ -z "$run" ] || rm -rf "$run"
}

# Streams the guest's stdout and stderr, which qemu writes into regular
# files, to ours until qemu is gone. Regular files because qemu drops
# console bytes whenever a write would block (a full pipe); not qemu's own
# file chardev on /dev/fd/1 either, which would open a second file
# description whose offset clashes with the caller's when stdout is a file.
start_pumps() {
  tail -c +1 -s 0.1 -f --pid="$qemu_pid" "$run/stdout" &
  out_pid=$!
  tail -c +1 -s 0.1 -f --pid="$qemu_pid" "$run/stderr" >&2 &
  err_pid=$!
}

# Waits for qemu or the timeout, whichever comes first; returns 124 on timeout.
wait_for_qemu() {
  local done_pid= i
  sleep "$timeout" &
  sleep_pid=$!
  wait -n -p done_pid "$qemu_pid" "$sleep_pid" || true
  if [ "$done_pid" = "$sleep_pid" ]; then
    sleep_pid=
    echo "run.sh: the VM did not finish within $timeout s; killing qemu (pid $qemu_pid)" >&2
    kill -TERM "$qemu_pid" 2>/dev/null || true
    for i in 1 2 3 4 5 6 7 8 9 10; do
      kill -0 "$qemu_pid" 2>/dev/null || break
      sleep 0.5
    done
    kill -KILL "$qemu_pid" 2>/dev/null || true
    wait "$qemu_pid" 2>/dev/null || true
    qemu_pid=
    return 124
  fi
  qemu_pid=
  kill "$sleep_pid" 2>/dev/null || true
  wait "$sleep_pid" 2>/dev/null || true
  sleep_pid=
}

# CMD's exit status: from the file the guest wrote, else from the marker on
# its console; 125 when neither exists (the guest died first).
guest_status() {
  local status=
  if [ -s "$run/ctl/status" ]; then
    status=$(< "$run/ctl/status")
  else
    status=$(sed -n 's/^KIWI_VM_EXIT=\([0-9]*\).*/\1/p' "$run/console.log" | tail -n 1)
  fi
  if [[ ! $status =~ ^[0-9]+$ ]]; then
    show_console "the guest reported no exit status"
    status=125
  fi
  echo "$status"
}

main() {
  parse_args "$@"
  KIWI_VM_QUIET=1 "$here/prepare.sh" >&2 || die "prepare.sh failed"
  host_trace prepared
  # shellcheck source=/dev/null
  . "${KIWI_VM_CACHE:-/var/cache/kiwi-vm}/current.env"
  command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 missing (apt-get install qemu-system-x86)"
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  run=$(mktemp -d /tmp/kiwi-vm.XXXXXX)
  write_control
  build_qemu_args
  : > "$run/stdout"
  : > "$run/stderr"
  # pdeathsig: should run.sh itself be killed outright (no trap runs),
  # the VM goes with it instead of running on unsupervised.
  setpriv --pdeathsig KILL qemu-system-x86_64 "${qemu_args[@]}" > "$run/qemu.log" 2>&1 < /dev/null &
  qemu_pid=$!
  host_trace "qemu started"
  start_pumps
  local status=0
  wait_for_qemu || status=$?
  host_trace "qemu exited"
  # The pumps copy what is left and end once qemu is gone.
  wait "$out_pid" "$err_pid" || true
  host_trace "output copied"
  [ -z "${KIWI_VM_DEBUG:-}" ] || cat "$run/console.log" >&2
  if [ "$status" = 124 ]; then
    show_console "timed out"
    exit 124
  fi
  exit "$(guest_status)"
}

main "$@"
