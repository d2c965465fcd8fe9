#!/usr/bin/env bash
# What starting a process costs here before main() runs, by C library: a
# `return 0` program built four ways (no libc at all, musl static when
# musl-gcc is installed, glibc static, glibc dynamic) plus busybox, timed by
# bench/startbench.c in one interleaved run. On this project's VMs glibc's
# start-up (cache-size probing with CPUID, each a VM exit; or ld.so's
# loading and relocation) costs about 1 ms per exec, which is a large share
# of a sandbox start: see bench/RESULTS.md.
#
# usage: bench/libcstart.sh [--runs N]     (default 300; about 10 s)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
runs=300
while [ $# -gt 0 ]; do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "libcstart.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

work=$(mktemp -d /tmp/kiwi-libcstart.XXXXXX)
trap 'rm -rf "$work"' EXIT

cc -O2 -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -o "$work/startbench" "$here/startbench.c"
printf 'int main(void) { return 0; }\n' > "$work/ret0.c"
printf 'void _start(void) { __asm__ volatile("mov $60, %%eax\\n xor %%edi, %%edi\\n syscall"); }\n' > "$work/nolibc.c"
cc -O2 -static -nostdlib -o "$work/nolibc" "$work/nolibc.c"
cc -O2 -static -o "$work/glibc-static" "$work/ret0.c"
cc -O2 -o "$work/glibc-dynamic" "$work/ret0.c"
tools=("nolibc=$work/nolibc")
if command -v musl-gcc >/dev/null; then
  musl-gcc -O2 -static -o "$work/musl-static" "$work/ret0.c"
  tools+=("musl-static=$work/musl-static")
else
  echo "(musl-gcc not installed: no musl row; apt-get install musl-tools to add it)"
fi
tools+=("glibc-static=$work/glibc-static" "glibc-dynamic=$work/glibc-dynamic")
[ -x /bin/busybox ] && tools+=("busybox-true=/bin/busybox true")

echo "# libc start-up cost, $(date -u '+%Y-%m-%d %H:%M UTC'), kernel $(uname -r)"
echo
"$work/startbench" --runs "$runs" --batches none --rss-runs 10 --ref glibc-dynamic "${tools[@]}"
