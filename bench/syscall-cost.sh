#!/usr/bin/env bash
# Per-system-call cost inside a sandbox (issue 4): the same tight loop
# (bench/sysloop.c: getpid, read of one byte, ioctl FIONREAD) on the host,
# in kiwi-run with its default seccomp profile, in kiwi-run with
# --seccomp unconfined, and under crun with the same profile in its
# config.json. Best of REPS runs of N calls each, CPU ns per call.
#   bench/syscall-cost.sh [--kiwi PATH] [--reps 5] [--calls 2000000]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
kiwi=$repo/build/src/kiwi-run reps=5 calls=2000000
while [ $# -gt 0 ]; do
	case $1 in
	--kiwi) kiwi=$2; shift 2 ;;
	--reps) reps=$2; shift 2 ;;
	--calls) calls=$2; shift 2 ;;
	*) echo "usage: $0 [--kiwi PATH] [--reps N] [--calls N]" >&2; exit 2 ;;
	esac
done
work=$(mktemp -d /tmp/kiwi-syscost.XXXXXX)
trap 'rm -rf "$work"' EXIT
cc -O2 -static -std=gnu11 -Wall -Wextra -Werror -o "$work/sysloop" "$here/sysloop.c"
"$repo/rootfs-tools/busybox-rootfs.sh" "$work/rootfs" "$work/sysloop"
rootfs=$(readlink -f "$work/rootfs")

# crun: the same rootfs, read-only, the same namespaces and kiwi-run's
# default profile. crun 1.8 refuses every container on a hybrid-cgroup
# host unless it cannot see /sys/fs/cgroup/unified, hence the private
# mount namespace it runs in (see bench/RESULTS.md).
mkdir -p "$work/bundle"
python3 - "$rootfs" "$repo/seccomp-profiles/default.json" "$work/bundle/config.json" <<'PY'
import json, sys
rootfs, profile, out = sys.argv[1:]
json.dump({
  "ociVersion": "1.0.0",
  "process": {"user": {"uid": 0, "gid": 0}, "args": ["sysloop"], "cwd": "/",
              "env": ["PATH=/usr/local/bin:/usr/bin:/bin"], "noNewPrivileges": True,
              "capabilities": {k: [] for k in ("bounding", "effective", "inheritable", "permitted", "ambient")}},
  "root": {"path": rootfs, "readonly": True},
  "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"},
             {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "mode=755"]}],
  "linux": {"uidMappings": [{"containerID": 0, "hostID": 0, "size": 1}],
            "gidMappings": [{"containerID": 0, "hostID": 0, "size": 1}],
            "namespaces": [{"type": t} for t in ("pid", "network", "ipc", "uts", "user", "mount", "cgroup")],
            "seccomp": json.load(open(profile))},
}, open(out, "w"))
PY

crun_loop() {  # WHAT N
	python3 - "$work/bundle/config.json" "$1" "$2" <<'PY'
import json, sys
p, what, n = sys.argv[1:]
c = json.load(open(p)); c["process"]["args"] = ["sysloop", what, n]; json.dump(c, open(p, "w"))
PY
	unshare -m sh -c 'umount -l /sys/fs/cgroup/unified 2>/dev/null; exec crun --root "$1/crun-state" --cgroup-manager=disabled run --bundle "$1/bundle" "syscost-$$"' sh "$work"
}

best() {  # runs "$@" REPS times, prints the smallest figure
	local b="" v
	for _ in $(seq "$reps"); do
		v=$("$@")
		if [ -z "$b" ] || awk -v v="$v" -v b="$b" 'BEGIN{exit !(v<b)}'; then b=$v; fi
	done
	echo "$b"
}

printf '| call | host, no sandbox | kiwi-run, default profile | kiwi-run --seccomp unconfined | crun, same profile |\n'
printf '|---|---:|---:|---:|---:|\n'
for what in getpid read ioctl; do
	host=$(best "$work/sysloop" "$what" "$calls")
	kiwi_on=$(best "$kiwi" run --rootfs "$rootfs" -- sysloop "$what" "$calls")
	kiwi_off=$(best "$kiwi" run --rootfs "$rootfs" --seccomp unconfined -- sysloop "$what" "$calls" 2>/dev/null)
	crun_on=$(best crun_loop "$what" "$calls")
	printf '| %s | %s | %s | %s | %s |\n' "$what" "$host" "$kiwi_on" "$kiwi_off" "$crun_on"
done
