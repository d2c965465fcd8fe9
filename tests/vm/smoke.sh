#!/usr/bin/env bash
# smoke.sh: proves the VM test lane in one boot (meson: suite 'vm').
#
# On the host it boots one VM through run.sh with this script as the command
# (--in-guest); inside, every check prints "ok - NAME" or "not ok - NAME",
# and when all pass the script exits 3, so the host also sees the exit status
# cross the VM boundary. The guest writes a random binary blob to stderr and
# nothing else, so the host can check that stderr arrives byte for byte,
# apart from stdout, with no kernel message mixed in (the memory check makes
# the kernel log an OOM kill meanwhile).
# Exit: 0 pass, 1 fail, 77 skip (only when qemu is missing).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
checks=(controllers memory-oom pids-max userns delegation modules pivot-root)
all_ok=3

# ---- inside the guest -------------------------------------------------------

# Each check ends with one of these, which give its status.
ok() { echo "ok - $1"; }
not_ok() { echo "not ok - $1: $2"; return 1; }

# A fresh cgroup under the root with its name; removed by the caller.
new_cgroup() {
  local cg=/sys/fs/cgroup/smoke-$1
  mkdir "$cg"
  echo "$cg"
}

check_controllers() {
  local have c missing=
  have=" $(< /sys/fs/cgroup/cgroup.controllers) "
  for c in cpu io memory pids; do
    [[ $have == *" $c "* ]] || missing+=" $c"
  done
  # No cgroup v1 hierarchy may be mounted: the lane is pure v2.
  if [ -z "$missing" ] && [ -z "$(awk '$3 == "cgroup"' /proc/mounts)" ]; then
    ok controllers
  else
    not_ok controllers "missing:$missing; mounts: $(grep cgroup /proc/mounts | tr '\n' ' ')"
  fi
}

# 100 MB written into a buffer under memory.max=32M: the OOM killer must
# end the writer (SIGKILL, status 137) and count it in memory.events.
check_memory_oom() {
  local cg status=0 kills
  cg=$(new_cgroup mem)
  echo 32M > "$cg/memory.max"
  # dd runs under an inner bash, which reports the kill into /dev/null.
  bash -c 'echo $$ > "$1/cgroup.procs"; dd if=/dev/zero of=/dev/null bs=100M count=1; exit $?' \
    _ "$cg" > /dev/null 2>&1 || status=$?
  kills=$(awk '$1 == "oom_kill" { print $2 }' "$cg/memory.events")
  rmdir "$cg"
  if [ "$status" = 137 ] && [ "${kills:-0}" -ge 1 ]; then
    ok memory-oom
  else
    not_ok memory-oom "writer exit $status, oom_kill ${kills:-none}"
  fi
}

# pids.max=5: starting ten sleepers must fail past the fifth process, and
# pids.events must count the refusals.
check_pids_max() {
  local cg n max
  cg=$(new_cgroup pids)
  echo 5 > "$cg/pids.max"
  busybox sh -c 'echo $$ > "$1/cgroup.procs"; for i in 1 2 3 4 5 6 7 8 9 10; do sleep 30 & done' \
    _ "$cg" > /dev/null 2>&1 || true
  n=$(wc -l < "$cg/cgroup.procs")
  max=$(awk '$1 == "max" { print $2 }' "$cg/pids.events")
  echo 1 > "$cg/cgroup.kill"
  while [ -s "$cg/cgroup.procs" ]; do sleep 0.05; done
  rmdir "$cg"
  if [ "$n" -le 5 ] && [ "${max:-0}" -ge 1 ]; then
    ok pids-max
  else
    not_ok pids-max "$n processes in the cgroup, pids.events max ${max:-none}"
  fi
}

# An unprivileged user (the guest's kiwitest, and nobody) can create a user
# namespace and be root inside it.
check_userns() {
  local as_user as_nobody
  as_user=$(/kiwi/as-user sh -c 'id -un; unshare --user --map-root-user id -u' 2>&1 | tr '\n' ' ') || true
  as_nobody=$(setpriv --reuid 65534 --regid 65534 --clear-groups unshare --user --map-root-user id -u 2>&1) || true
  if [ "$as_user" = "kiwitest 0 " ] && [ "$as_nobody" = 0 ]; then
    ok userns
  else
    not_ok userns "kiwitest: '$as_user', nobody: '$as_nobody'"
  fi
}

# kiwitest manages the subtree delegated to it: creates a cgroup, limits it
# and moves itself in.
check_delegation() {
  local out
  out=$(/kiwi/as-user sh -c 'd=$KIWI_VM_DELEGATED_CGROUP/child && mkdir $d && echo 7 > $d/pids.max &&
                              echo $$ > $d/cgroup.procs && cat /proc/self/cgroup' 2>&1) || true
  rmdir /sys/fs/cgroup/kiwitest/child 2>/dev/null || true
  if [ "$out" = "0::/kiwitest/child" ]; then
    ok delegation
  else
    not_ok delegation "$out"
  fi
}

# Modules load on demand through the host's modprobe and the shared modules
# tree, as the network, disk and rootfs tests need them: veth, nf_tables,
# tun, loop, overlayfs.
check_modules() {
  local failed_parts= img=/tmp/smoke-loop.img dev d=/tmp/smoke-ovl
  ip link add kiwi-a type veth peer name kiwi-b > /dev/null 2>&1 && ip link del kiwi-a ||
    failed_parts+=" veth"
  nft add table inet kiwi_smoke > /dev/null 2>&1 && grep -qw '^nf_tables' /proc/modules ||
    failed_parts+=" nf_tables"
  ip tuntap add mode tap kiwi-t > /dev/null 2>&1 && ip tuntap del mode tap kiwi-t ||
    failed_parts+=" tun"
  truncate -s 1M "$img"
  if dev=$(losetup -f --show "$img" 2>/dev/null); then losetup -d "$dev"; else failed_parts+=" loop"; fi
  mkdir -p "$d/lower" "$d/upper" "$d/work" "$d/merged"
  mount -t overlay -o "lowerdir=$d/lower,upperdir=$d/upper,workdir=$d/work" overlay "$d/merged" &&
    umount "$d/merged" || failed_parts+=" overlay"
  if [ -z "$failed_parts" ]; then
    ok modules
  else
    not_ok modules "failed:$failed_parts"
  fi
}

# A runtime moves into its rootfs with pivot_root(2), which refuses to
# work when the root is the initramfs: the guest's root must be a real
# mount for this to pass.
check_pivot_root() {
  local out
  out=$(unshare --mount sh -c 'mount --make-rprivate / && mkdir -p /tmp/pr && mount -t tmpfs pr /tmp/pr &&
                               mkdir /tmp/pr/old && cd /tmp/pr && pivot_root . old && echo pivoted' 2>&1) || true
  if [ "$out" = pivoted ]; then
    ok pivot-root
  else
    not_ok pivot-root "$out"
  fi
}

in_guest() {
  local blob=$1 check failed=0
  # Each check in a subshell, so one that breaks half-way (bash ignores
  # set -e there) still reports, and the next ones run.
  for check in "${checks[@]}"; do
    ("check_${check//-/_}") || failed=1
    [ -z "${KIWI_VM_DEBUG:-}" ] || echo "# $(cut -d' ' -f1 /proc/uptime) after $check"
  done
  cat "$blob" >&2
  [ "$failed" = 0 ] || exit 1
  exit "$all_ok"
}

# ---- on the host ------------------------------------------------------------

# Fails the test with a message.
fail() { echo "FAIL: $*" >&2; exit 1; }

on_host() {
  command -v qemu-system-x86_64 > /dev/null || { echo "SKIP: qemu-system-x86_64 missing" >&2; exit 77; }
  local status=0 check
  # Global: the EXIT trap runs after this function has returned.
  tmp=$(mktemp -d /tmp/kiwi-vm-smoke.XXXXXX)
  trap 'rm -rf "$tmp"' EXIT
  # Every byte value, newlines and carriage returns included.
  head -c 262144 /dev/urandom > "$tmp/blob"
  cd "$tmp"
  "$here/run.sh" --timeout 240 --share "$here" --share "$tmp" -- \
    "$here/smoke.sh" --in-guest "$tmp/blob" > "$tmp/stdout" 2> "$tmp/stderr" || status=$?
  cat "$tmp/stdout"
  for check in "${checks[@]}"; do
    grep -qx "ok - $check" "$tmp/stdout" || fail "check $check did not pass"
  done
  [ "$status" = "$all_ok" ] || fail "run.sh exited $status, the guest exited $all_ok"
  if ! cmp -s "$tmp/blob" "$tmp/stderr"; then
    echo "stderr: $(stat -c %s "$tmp/stderr") bytes; $(cmp "$tmp/blob" "$tmp/stderr" 2>&1 | head -n 1)" >&2
    head -c 300 "$tmp/stderr" | cat -v >&2
    fail "stderr is not the guest's 256 KiB blob byte for byte"
  fi
  echo "ok - exit status $status crossed the VM; 256 KiB of stderr arrived byte-exact"
}

if [ "${1:-}" = --in-guest ]; then
  in_guest "$2"
else
  on_host
fi
