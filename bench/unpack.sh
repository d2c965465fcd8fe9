#!/usr/bin/env bash
# Unpack benchmark: the same multi-layer image (a debootstrap'ed Debian split
# into 4 gzip layers, a few hundred MB) unpacked by kiwi-rootfs, by umoci, and
# by plain `tar -x` of the same layers, in the same run; medians of N runs.
#   usage: bench/unpack.sh [ITERATIONS]      (root; default 5 iterations)
#   env:   KIWI_ROOTFS  the binary (default: build/rootfs-tools/kiwi-rootfs)
#          BENCH_DIR    work dir, kept between runs (default /var/tmp/kiwi-bench)
# Needs debootstrap, umoci, gzip, python3 (all in .ci/deps.sh).
set -euo pipefail
iters=${1:-5}
here=$(cd "$(dirname "$0")/.." && pwd)
kiwi=${KIWI_ROOTFS:-$here/build/rootfs-tools/kiwi-rootfs}
dir=${BENCH_DIR:-/var/tmp/kiwi-bench}
[ "$(id -u)" = 0 ] || { echo "unpack.sh: run as root (debootstrap, umoci's reference unpack)" >&2; exit 1; }
[ -x "$kiwi" ] || { echo "unpack.sh: no kiwi-rootfs at $kiwi (set KIWI_ROOTFS)" >&2; exit 1; }
for t in debootstrap umoci python3 gzip; do
  command -v "$t" >/dev/null || { echo "unpack.sh: $t is missing (.ci/deps.sh)" >&2; exit 1; }
done
mkdir -p "$dir"
cd "$dir"

if [ ! -d base ]; then
  echo "building the base tree with debootstrap (once)..." >&2
  rm -rf base.tmp
  mirror=$("$here/.ci/debian-mirror.sh")   # this machine's own apt source
  debootstrap --variant=minbase --include=python3,perl,gcc,libc6-dev bookworm base.tmp \
    "$mirror" >debootstrap.log 2>&1
  mv base.tmp base
fi

# Four layers: the system without usr/lib and usr/share, then each of those,
# then a small change layer with a whiteout and an opaque directory.
mklayer() { # name, tar arguments...
  local name=$1; shift
  tar --sort=name --numeric-owner --format=pax --pax-option=delete=atime,delete=ctime \
      -C base -cf - "$@" | gzip -6 >"layers/$name.tar.gz"
}
if [ ! -f layers/4.tar.gz ]; then
  rm -rf layers && mkdir layers
  mklayer 1 --exclude=./usr/lib --exclude=./usr/share --exclude='./var/cache/apt/archives/*.deb' .
  mklayer 2 ./usr/lib
  mklayer 3 ./usr/share
  mkdir -p change/usr/share/doc change/etc
  : >change/usr/share/doc/.wh..wh..opq
  : >change/etc/.wh.motd
  echo "kiwi bench" >change/usr/share/doc/README
  tar --sort=name --numeric-owner --format=pax -C change -cf - . | gzip -6 >layers/4.tar.gz
  rm -rf change layout
fi

if [ ! -d layout ]; then
  python3 - <<'PY'
import gzip, hashlib, json, os, shutil
os.makedirs("layout/blobs/sha256")
def blob(data=None, path=None):
    h = hashlib.sha256()
    if path:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        size = os.path.getsize(path)
    else:
        h.update(data); size = len(data)
    dst = "layout/blobs/sha256/" + h.hexdigest()
    if path: shutil.copyfile(path, dst)
    else: open(dst, "wb").write(data)
    return {"digest": "sha256:" + h.hexdigest(), "size": size}
layers, diff_ids = [], []
for i in range(1, 5):
    p = f"layers/{i}.tar.gz"
    layers.append({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", **blob(path=p)})
    h = hashlib.sha256()
    with gzip.open(p) as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    diff_ids.append("sha256:" + h.hexdigest())
cfg = {"architecture": "amd64", "os": "linux", "config": {"Cmd": ["/bin/bash"]},
       "rootfs": {"type": "layers", "diff_ids": diff_ids}}
c = blob(json.dumps(cfg).encode())
m = blob(json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **c}, "layers": layers}).encode())
json.dump({"imageLayoutVersion": "1.0.0"}, open("layout/oci-layout", "w"))
json.dump({"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
    **m, "annotations": {"org.opencontainers.image.ref.name": "bench"}}]}, open("layout/index.json", "w"))
PY
fi

# Outputs go to a tmpfs: this machine's virtual disk makes write-back time
# vary 3x between identical runs, which would drown the unpackers' own cost.
# BENCH_ON_DISK=1 writes beside the layout instead.
out_dir=$dir
if [ "${BENCH_ON_DISK:-0}" != 1 ]; then
  mkdir -p "$dir/tmpfs"
  mountpoint -q "$dir/tmpfs" || mount -t tmpfs -o size=6g kiwi-bench "$dir/tmpfs"
  trap 'umount "$dir/tmpfs"' EXIT
  out_dir=$dir/tmpfs
fi
# Wall time, and CPU time (user + system, children included): on a shared,
# loaded machine the CPU time is the steadier measure of the work done.
declare -A times cpu
run() { # label, command...
  local label=$1; shift
  rm -rf "$out_dir/out" "$out_dir/bundle"; sync
  local r u s
  read -r r u s < <( { TIMEFORMAT='%R %U %S'; time "$@" >/dev/null 2>&1; } 2>&1 )
  times[$label]+="$r "
  cpu[$label]+="$(awk -v a="$u" -v b="$s" 'BEGIN {printf "%.2f", a + b}') "
}
tar_layers() {
  mkdir "$out_dir/out"
  for l in layers/1.tar.gz layers/2.tar.gz layers/3.tar.gz layers/4.tar.gz; do
    tar -xzf "$l" -C "$out_dir/out" --numeric-owner
  done
}
for i in $(seq "$iters"); do
  run kiwi "$kiwi" unpack layout:bench "$out_dir/out"
  run umoci umoci unpack --image layout:bench "$out_dir/bundle"
  run tar tar_layers
  echo "iteration $i/$iters done" >&2
done
unpacked=$(du -sm "$out_dir/out" | cut -f1)
files=$(find "$out_dir/out" | wc -l)
rm -rf "$out_dir/out" "$out_dir/bundle"

best() { tr ' ' '\n' | grep . | sort -n | head -1; }
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
k=$(echo "${times[kiwi]}" | median); u=$(echo "${times[umoci]}" | median); t=$(echo "${times[tar]}" | median)
kb=$(echo "${times[kiwi]}" | best); ub=$(echo "${times[umoci]}" | best); tb=$(echo "${times[tar]}" | best)
kc=$(echo "${cpu[kiwi]}" | median); uc=$(echo "${cpu[umoci]}" | median); tc=$(echo "${cpu[tar]}" | median)
size=$(du -sm layout/blobs | cut -f1)
echo "| tool | median wall (s) | best wall (s) | median CPU (s) | wall runs (s) |"
echo "|---|---|---|---|---|"
echo "| kiwi-rootfs unpack | $k | $kb | $kc | ${times[kiwi]}|"
echo "| umoci unpack | $u | $ub | $uc | ${times[umoci]}|"
echo "| tar -xzf (4 layers, no whiteouts) | $t | $tb | $tc | ${times[tar]}|"
echo
where=tmpfs; [ "$out_dir" = "$dir" ] && where="disk ($dir)"
echo "image: 4 gzip layers, ${size} MB compressed, ${unpacked} MB / ${files} entries unpacked into $where; $iters iterations; $(nproc) cores"
awk -v k="$k" -v u="$u" -v t="$t" -v kc="$kc" -v uc="$uc" -v tc="$tc" -v kb="$kb" -v ub="$ub" -v tb="$tb" 'BEGIN {
  printf "wall (median): kiwi %.2fx faster than umoci, %.2fx the time of tar -x\n", u / k, k / t
  printf "wall (best):   kiwi %.2fx faster than umoci, %.2fx the time of tar -x\n", ub / kb, kb / tb
  printf "CPU (median):  kiwi %.2fx less than umoci, %.2fx the CPU of tar -x\n", uc / kc, kc / tc }' 
