#!/usr/bin/env bash
# hybrid.sh CGTOOL KIWI_RUN: on a host whose memory/pids/cpu controllers are
# bound to cgroup v1 (hybrid mode), asking for a limit fails at once with
# exit 125 and one line naming the missing controller and the fix, and
# creates nothing: first through the cgroup module (cgtool), then through
# `kiwi-run run --memory`; and a run without limits still works, with
# "cgroup": null in its verdict. Skips (77) on a pure cgroup v2 host, where
# the VM lane covers all of it.
set -euo pipefail
cgtool=$1
kiwi=${2:-}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

fail() { echo "FAIL: $*" >&2; exit 1; }

mnt=$(awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo)
[ -n "$mnt" ] || { echo "SKIP: no cgroup2 mount at all on this host" >&2; exit 77; }
if grep -qw memory "$mnt/cgroup.controllers"; then
  echo "SKIP: $mnt offers the memory controller: not a hybrid host" >&2
  exit 77
fi
tmp=$(mktemp -d /tmp/kiwi-hybrid.XXXXXX)
# The refused runs are given a parent of this test's own, and only what
# appears below it counts: others' sandboxes come and go on a shared host.
own=kiwi-hybrid-test-$$
mkdir "$mnt/$own"
trap 'rm -rf "$tmp"; rmdir "$mnt/$own"' EXIT

# expect_refusal NAME CONTROLLERS CMD...: exit 125, one line, the fix named.
expect_refusal() {
  local name=$1 controllers=$2 status=0 err want
  shift 2
  "$@" > /dev/null 2> "$tmp/err" || status=$?
  err=$(cat "$tmp/err")
  echo "$name said: $err"
  [ "$status" = 125 ] || fail "$name: exit status $status, want 125"
  [ "$(wc -l < "$tmp/err")" = 1 ] || fail "$name: want exactly one line on stderr"
  for want in "lacks the $controllers" "unified cgroup hierarchy at \`$mnt\`" \
              'systemd.unified_cgroup_hierarchy=1' 'cgroup_no_v1=all'; do
    case $err in *"$want"*) ;; *) fail "$name: the message does not say: $want" ;; esac
  done
  [ -z "$(find "$mnt/$own" -mindepth 1 -type d)" ] || fail "$name: a kiwi cgroup was created"
  echo "ok - $name: one line, exit 125, nothing created"
}

expect_refusal cgtool '`memory`, `pids` controllers' "$cgtool" run --parent "/$own" --memory 64M --pids 10 -- /bin/true

# A v1 path as the parent is refused by name, not read as a path inside the
# unified hierarchy, and gc touches nothing there.
status=0
"$cgtool" gc --parent /sys/fs/cgroup/memory > /dev/null 2> "$tmp/err" || status=$?
[ "$status" = 125 ] && grep -q "is not below the cgroup2 mount \`$mnt\`" "$tmp/err" ||
  fail "gc --parent /sys/fs/cgroup/memory: exit $status: $(cat "$tmp/err")"
echo "ok - a v1 path as --parent is refused: $(cat "$tmp/err")"

# An unprivileged gc where nothing was ever delegated finds nothing to do.
out=$(setpriv --reuid 65534 --regid 65534 --clear-groups "$cgtool" gc 2>&1) ||
  fail "rootless gc failed: $out"
[ "$out" = '{"event":"gc","removed":0}' ] || fail "rootless gc said: $out"
echo "ok - rootless gc without delegation: nothing to do"

if [ -z "$kiwi" ] || ! "$kiwi" run --help 2>&1 | grep -q -- '--memory'; then
  echo "ok - kiwi-run has no --memory yet: its part is not run"   # the module part above ran
  exit 0
fi
"$here/../../rootfs-tools/busybox-rootfs.sh" "$tmp/rootfs"
expect_refusal kiwi-run '`memory` controller' \
  "$kiwi" run --rootfs "$tmp/rootfs" --cgroup-parent "/$own" --memory 64M -- /bin/true
status=0
"$kiwi" run --rootfs "$tmp/rootfs" --verdict "$tmp/v.json" -- /bin/sh -c 'echo hi' > "$tmp/out" || status=$?
[ "$status" = 0 ] && [ "$(cat "$tmp/out")" = hi ] || fail "a run without limits failed: exit $status"
grep -q '"cgroup":null' "$tmp/v.json" || fail "no \"cgroup\":null in the verdict: $(cat "$tmp/v.json")"
echo 'ok - kiwi-run without limits: runs, "cgroup": null'
