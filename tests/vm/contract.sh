#!/usr/bin/env bash
# contract.sh: run.sh's exit statuses (meson: vm-run-contract, suite 'vm').
#   125  usage errors and a working directory outside every share (no boot)
#   124  a VM still running at --timeout is killed, with a message saying so
#   127  a command the guest cannot find (one boot)
# Exit: 0 pass, 1 fail, 77 skip (only when qemu is missing).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=

fail() { echo "FAIL: $*" >&2; exit 1; }

# Runs run.sh with the given arguments; sets $status and $err (its stderr).
run() {
  status=0
  "$here/run.sh" "$@" > "$tmp/out" 2> "$tmp/err" || status=$?
  err=$(< "$tmp/err")
}

expect() { # NAME STATUS PATTERN
  [ "$status" = "$2" ] || fail "$1: run.sh exited $status, want $2; stderr: $err"
  [[ $err == *"$3"* ]] || fail "$1: stderr lacks '$3': $err"
  echo "ok - $1"
}

main() {
  command -v qemu-system-x86_64 > /dev/null || { echo "SKIP: qemu-system-x86_64 missing" >&2; exit 77; }
  tmp=$(mktemp -d /tmp/kiwi-vm-contract.XXXXXX)
  trap 'rm -rf "$tmp"' EXIT
  cd "$tmp"

  run --timeout 3
  expect usage 125 "usage:"
  run --share "$here" -- true
  expect cwd-outside-shares 125 "not inside a share"
  # 3 s is far too short to boot under TCG, so qemu is still running.
  SECONDS=0
  run --timeout 3 --share "$tmp" -- sleep 600
  expect timeout 124 "did not finish within 3 s; killing qemu"
  [ "$SECONDS" -lt 60 ] || fail "timeout: run.sh took $SECONDS s to give up after 3 s"
  run --share "$tmp" -- /nonexistent/kiwi-command
  expect not-found 127 "/nonexistent/kiwi-command"
}

main "$@"
