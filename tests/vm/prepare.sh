#!/usr/bin/env bash
# prepare.sh [CACHE_DIR]: builds and caches what the VM test lane boots.
#
#   CACHE_DIR/kernel/<package>_<version>/vmlinux   uncompressed kernel: qemu
#                                                  enters it through PVH, which
#                                                  under TCG boots ~2 s faster
#                                                  than the bzImage
#   CACHE_DIR/kernel/<package>_<version>/modules/  /lib/modules/<kver> with
#                                                  modules.dep, shared into the
#                                                  guest so modules load on
#                                                  demand (nf_tables, veth, loop)
#   CACHE_DIR/initramfs-<hash>.cpio                the guest's init (built
#                                                  here from guest/init.c),
#                                                  static busybox and the few
#                                                  modules needed to reach 9p
#   CACHE_DIR/current.env                          what run.sh sources
#
# The kernel is Debian's linux-image-amd64 (resolved to the versioned package)
# fetched with apt-get download; nothing touches the host's /boot. Everything
# is rebuilt only when an input changes (kernel package version, busybox, the
# guest's files, this script), so a cached run takes a fraction of a second.
# Environment: KIWI_VM_CACHE (default cache dir), KIWI_VM_KERNEL_PKG (pin a
# versioned kernel package), KIWI_VM_QUIET=1 (no progress messages).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${1:-${KIWI_VM_CACHE:-/var/cache/kiwi-vm}}
busybox_bin=/usr/bin/busybox
# Just enough to mount the 9p shares and the overlays before switch_root;
# everything else is loaded on demand by the host's modprobe in the guest.
initramfs_modules=(virtio_mmio virtio_console 9pnet_virtio 9p overlay)

die() { echo "prepare.sh: $*" >&2; exit 1; }
log() { [ -n "${KIWI_VM_QUIET:-}" ] || echo "prepare.sh: $*" >&2; }

# Prints the versioned kernel package behind the linux-image-amd64
# metapackage, refreshing apt's lists once if this machine has none yet.
kernel_package() {
  if [ -n "${KIWI_VM_KERNEL_PKG:-}" ]; then
    echo "$KIWI_VM_KERNEL_PKG"
    return
  fi
  local pkg
  pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
        awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }')
  if [ -z "$pkg" ]; then
    apt-get update -qq >&2
    pkg=$(apt-cache depends linux-image-amd64 |
          awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }')
  fi
  [ -n "$pkg" ] || die "cannot resolve linux-image-amd64 to a kernel package"
  echo "$pkg"
}

package_version() {
  apt-cache show --no-all-versions "$1" 2>/dev/null |
    awk '$1 == "Version:" { print $2; exit }'
}

# Prints "PACKAGE VERSION" of the kernel to boot. Asking apt costs 2 s here
# (Debian's container images keep no pkgcache.bin), so the answer is kept
# until apt's lists change or KIWI_VM_KERNEL_PKG does.
resolve_kernel() {
  local memo=$cache/kernel.resolved want=${KIWI_VM_KERNEL_PKG:-linux-image-amd64} pkg ver
  if [ -f "$memo" ] && [ "$(head -n 1 "$memo")" = "$want" ] &&
     [ -z "$(find /var/lib/apt/lists -maxdepth 1 -newer "$memo" -print -quit)" ]; then
    tail -n 1 "$memo"
    return
  fi
  pkg=$(kernel_package)
  ver=$(package_version "$pkg")
  [ -n "$ver" ] || die "apt knows no version of $pkg"
  printf '%s\n%s %s\n' "$want" "$pkg" "$ver" > "$memo.tmp"
  mv "$memo.tmp" "$memo"
  echo "$pkg $ver"
}

# Writes the uncompressed vmlinux held in a bzImage to stdout. The boot
# protocol header gives the payload's place: it starts at
# (setup_sects + 1) * 512 + payload_offset, and its last 4 bytes are the
# decompressed size the kernel build appends, not part of the stream.
extract_vmlinux() {
  local bz=$1 setup_sects payload_offset payload_length start magic
  setup_sects=$(od -An -tu1 -j $((0x1f1)) -N1 "$bz" | tr -d ' ')
  read -r payload_offset payload_length < <(od -An -tu4 -j $((0x248)) -N8 "$bz")
  start=$(( (setup_sects + 1) * 512 + payload_offset ))
  magic=$(od -An -tx1 -j "$start" -N4 "$bz" | tr -d ' ')
  local -a decompress
  case $magic in
    fd377a58) decompress=(xz -dc) ;;
    28b52ffd) decompress=(zstd -dcq) ;;
    1f8b08*)  decompress=(gzip -dc) ;;
    *) die "$bz: unknown kernel compression (magic $magic)" ;;
  esac
  dd if="$bz" bs=1M iflag=skip_bytes,count_bytes skip="$start" count=$((payload_length - 4)) status=none |
    "${decompress[@]}"
}

# Downloads one kernel package into the directory $3.
download_kernel() {
  local pkg=$1 ver=$2 tmp=$3
  # As root apt-get would drop to _apt, which cannot write into mktemp's
  # private directory; the download is checked against apt's lists anyway.
  log "fetching $pkg $ver"
  (cd "$tmp" && apt-get download -q -o APT::Sandbox::User=root "$pkg=$ver" >/dev/null)
}

# Unpacks the kernel package downloaded into $1 and moves the result to $2,
# so an interrupted run never leaves a half-made kernel directory behind.
unpack_kernel() {
  local tmp=$1 dest=$2 kver
  dpkg-deb -x "$tmp"/*.deb "$tmp/root"
  kver=$(ls "$tmp/root/lib/modules")
  [ -f "$tmp/root/boot/vmlinuz-$kver" ] || die "no vmlinuz-$kver in $(ls "$tmp"/*.deb)"
  # The package ships no modules.dep (its postinst runs depmod); the guest's
  # modprobe needs it.
  depmod -b "$tmp/root" "$kver"
  extract_vmlinux "$tmp/root/boot/vmlinuz-$kver" > "$tmp/vmlinux"
  [ "$(od -An -tx1 -N4 "$tmp/vmlinux" | tr -d ' ')" = 7f454c46 ] ||
    die "the vmlinux extracted from vmlinuz-$kver is not an ELF file"
  mv "$tmp/root/lib/modules/$kver" "$tmp/modules"
  mv "$tmp/root/boot/config-$kver" "$tmp/config"
  echo "$kver" > "$tmp/kver"
  chmod 0755 "$tmp"
  rm -rf "$tmp/root" "$tmp"/*.deb
  rm -rf "$dest"
  mv "$tmp" "$dest"
}

# Prints the modules' paths (relative to the modules dir) with every
# dependency before the module that needs it, each once: the order insmod
# needs, as busybox's insmod resolves nothing.
module_load_order() {
  local moddir=$1; shift
  awk -v want="$*" '
    { sub(":", "", $1); deps[$1] = ""; for (i = 2; i <= NF; i++) deps[$1] = deps[$1] " " $i
      n = $1; sub(".*/", "", n); sub("\\.ko.*", "", n); gsub("-", "_", n); path[n] = $1 }
    function visit(p,   d, k, i) {
      if (p in seen) return; seen[p] = 1
      k = split(deps[p], d, " "); for (i = 1; i <= k; i++) visit(d[i])
      print p
    }
    END { k = split(want, w, " ")
          for (i = 1; i <= k; i++) { if (!(w[i] in path)) { print "missing module " w[i] > "/dev/stderr"; exit 1 }
                                     visit(path[w[i]]) } }
  ' "$moddir/modules.dep"
}

# Copies module $1 to directory $2 without its signature: the kernel then
# skips checking it (and notes the module as unsigned, which the tests do
# not care about), which under TCG saves ~40 ms a module on every boot.
# The appended signature is: the signature, a 12-byte struct
# module_signature ending in the signature's big-endian length, and a
# 28-byte marker.
copy_unsigned_module() {
  local ko=$1 dest=$2/${1##*/} size siglen
  cp "$ko" "$dest"
  [ "$(tail -c 28 "$dest")" = "~Module signature appended~" ] || return 0
  size=$(stat -c %s "$dest")
  siglen=$(od -An -tu1 -j $((size - 32)) -N4 "$dest" |
           awk '{ print (($1 * 256 + $2) * 256 + $3) * 256 + $4 }')
  truncate -s $((size - 28 - 12 - siglen)) "$dest"
}

build_initramfs() {
  local kdir=$1 out=$2 stage rel
  stage=$(mktemp -d "$cache/.initramfs.XXXXXX")
  mkdir -p "$stage"/{bin,dev,proc,sys,newroot,modules,kiwi}
  # busybox is for the guest's helper scripts (/kiwi/as-user) and for
  # debugging; init itself is one static program.
  cp "$busybox_bin" "$stage/bin/busybox"
  cc -static -O2 -D_GNU_SOURCE -Wall -Wextra -Werror -o "$stage/init" "$here/guest/init.c"
  install -m 0755 "$here/guest/as-user" "$stage/kiwi/"
  module_load_order "$kdir/modules" "${initramfs_modules[@]}" > "$stage/modules/load"
  while read -r rel; do
    copy_unsigned_module "$kdir/modules/$rel" "$stage/modules"
  done < "$stage/modules/load"
  sed -i 's|.*/||' "$stage/modules/load"
  # Uncompressed: under TCG decompressing costs more than copying.
  (cd "$stage" && find . | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) > "$out.tmp"
  mv "$out.tmp" "$out"
  rm -rf "$stage"
}

# The initramfs' identity: everything that goes into it.
initramfs_key() {
  local kdir=$1
  { echo "$kdir" "${initramfs_modules[*]}"
    sha256sum "$busybox_bin" "$here"/guest/* "${BASH_SOURCE[0]}"
  } | sha256sum | cut -c1-16
}

main() {
  [ $# -le 1 ] || die "usage: prepare.sh [CACHE_DIR]"
  case $cache in /*) ;; *) cache=$PWD/$cache ;; esac
  [ -x "$busybox_bin" ] || die "$busybox_bin missing: apt-get install busybox-static"
  # ldd fails on a static binary.
  ! ldd "$busybox_bin" > /dev/null 2>&1 || die "$busybox_bin is not static: apt-get install busybox-static"
  command -v cc > /dev/null || die "no C compiler for the guest's init: apt-get install build-essential"
  mkdir -p "$cache/kernel"
  # Test runners start several lanes at once; one builds, the others wait.
  exec 9> "$cache/.lock"
  flock 9

  local resolved pkg ver kdir key initrd
  resolved=$(resolve_kernel)
  read -r pkg ver <<< "$resolved"
  kdir=$cache/kernel/${pkg}_$ver
  if [ ! -f "$kdir/vmlinux" ]; then
    local tmp
    tmp=$(mktemp -d "$cache/.kernel.XXXXXX")
    if ! download_kernel "$pkg" "$ver" "$tmp"; then
      rm -rf "$tmp"
      # Offline with an older kernel cached: use it rather than fail.
      [ -f "$cache/current.env" ] || die "apt-get download $pkg=$ver failed"
      log "download failed, keeping the cached kernel"
      return 0
    fi
    unpack_kernel "$tmp" "$kdir"
  fi
  key=$(initramfs_key "$kdir")
  initrd=$cache/initramfs-$key.cpio
  if [ ! -f "$initrd" ]; then
    log "building $initrd"
    build_initramfs "$kdir" "$initrd"
  fi
  cat > "$cache/current.env.tmp" <<EOF
KIWI_VM_KERNEL=$kdir/vmlinux
KIWI_VM_MODULES=$kdir/modules
KIWI_VM_KVER=$(cat "$kdir/kver")
KIWI_VM_INITRD=$initrd
EOF
  mv "$cache/current.env.tmp" "$cache/current.env"
  # Builds nobody has prepared for an hour are dead weight. Each run marks
  # what it uses, so a VM that another checkout is running right now keeps
  # its kernel, modules and initramfs.
  touch "$kdir" "$initrd"
  find "$cache" -maxdepth 1 -name 'initramfs-*.cpio' -mmin +60 -delete
  find "$cache/kernel" -mindepth 1 -maxdepth 1 -mmin +60 -exec rm -rf {} +
  log "ready: $kdir"
}

main "$@"
