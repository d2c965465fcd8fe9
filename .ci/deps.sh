#!/usr/bin/env bash
# Installs every Debian package kiwi-run needs to build, test and benchmark.
# Idempotent: packages already present are skipped by apt-get.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
pkgs=(
  build-essential meson ninja-build pkg-config clang libclang-rt-14-dev
  libseccomp-dev libcap-dev libmnl-dev libnftnl-dev libyajl-dev libcriterion-dev
  libarchive-dev libzstd-dev libssl-dev libext2fs-dev
  busybox-static iproute2 nftables procps util-linux passwd python3 python3-pytest mandoc git strace tmux
  crun bubblewrap hyperfine linux-perf
  qemu-system-x86 cpio kmod xz-utils zstd
  umoci skopeo debootstrap
  runc containerd podman conmon python3-grpcio python3-grpc-tools
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
