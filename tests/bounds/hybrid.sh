#!/usr/bin/env bash
# hybrid.sh CGTOOL: on a host whose memory/pids/cpu controllers are bound to
# cgroup v1 (hybrid mode), asking for a limit fails at once with exit 125
# and one line naming the missing controller and the fix, and creates
# nothing. Skips (77) on a pure cgroup v2 host, where the VM lane covers it.
set -euo pipefail
cgtool=$1

fail() { echo "FAIL: $*" >&2; exit 1; }

mnt=$(awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo)
[ -n "$mnt" ] || { echo "SKIP: no cgroup2 mount at all on this host" >&2; exit 77; }
if grep -qw memory "$mnt/cgroup.controllers"; then
  echo "SKIP: $mnt offers the memory controller: not a hybrid host" >&2
  exit 77
fi

before=$(find "$mnt" -maxdepth 2 -name 'kiwi*' | sort)
status=0
"$cgtool" run --memory 64M --pids 10 -- /bin/true > /dev/null 2> "${TMPDIR:-/tmp}/hybrid.$$" || status=$?
err=$(cat "${TMPDIR:-/tmp}/hybrid.$$")
rm -f "${TMPDIR:-/tmp}/hybrid.$$"
echo "cgtool said: $err"
[ "$status" = 125 ] || fail "exit status $status, want 125"
[ "$(printf '%s\n' "$err" | wc -l)" = 1 ] || fail "want exactly one line on stderr"
for want in 'lacks the `memory`, `pids` controllers' "unified cgroup hierarchy at \`$mnt\`" \
            'systemd.unified_cgroup_hierarchy=1' 'cgroup_no_v1=all'; do
  case $err in *"$want"*) ;; *) fail "the message does not say: $want" ;; esac
done
[ "$(find "$mnt" -maxdepth 2 -name 'kiwi*' | sort)" = "$before" ] || fail "a kiwi cgroup was created"
echo "ok - hybrid host: one line, exit 125, nothing created"
