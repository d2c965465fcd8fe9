#!/usr/bin/env bash
# compare.sh: the OCI runtime comparison. One VM boot runs the whole suite
# against kiwi-run, crun and runc with no expected list (every failure
# counts), then report.py writes the table of who passes what.
# usage: compare.sh BUILD_ROOT [PYTEST_ARGS...]
# Environment: KIWI_OCI_RUNTIMES (default kiwi, crun, runc), KIWI_OCI_REPORT
# (default tests/oci/RESULTS.md).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$(realpath -- "${1:-$repo/build}")
[ $# -eq 0 ] || shift
results=$build/tests/oci/results-compare.json
rm -f "$results"
# Three runtimes under emulation on a loaded host: 20-25 minutes.
KIWI_OCI_VM_TIMEOUT=${KIWI_OCI_VM_TIMEOUT:-3600} KIWI_OCI_EXPECT= KIWI_OCI_RESULTS=$results \
  KIWI_OCI_RUNTIMES=${KIWI_OCI_RUNTIMES:-kiwi=$build/src/kiwi-run,crun=/usr/bin/crun,runc=/usr/sbin/runc} \
  "$here/vm.sh" "$build" "$@"
status=$?
[ -s "$results" ] || { echo "compare.sh: no results (vm.sh exited $status)" >&2; exit 1; }
/usr/bin/python3 "$here/report.py" --out "${KIWI_OCI_REPORT:-$here/RESULTS.md}" \
  --notes "$here/RESULTS-notes.md" \
  --command "tests/oci/compare.sh${*:+ $*}   # $(date -u +%Y-%m-%dT%H:%MZ), $(git -C "$repo" rev-parse --short HEAD)" \
  "$results"
echo "compare.sh: wrote ${KIWI_OCI_REPORT:-$here/RESULTS.md} (suite exit status $status)"
