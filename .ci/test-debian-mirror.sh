#!/bin/sh
# debian-mirror.sh against apt sources of both formats, in a tree of its own.
set -eu
m="$(dirname "$0")/debian-mirror.sh"
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fails=0
expect() {  # WANT (the sources under $t/etc/apt)
	got=$(KIWI_APT_ETC=$t/etc/apt sh "$m" 2>/dev/null || echo "exit $?")
	if [ "$got" = "$1" ]; then echo "ok: $1"; else echo "FAILED: want '$1', got '$got'"; fails=$((fails + 1)); fi
	rm -rf "$t/etc"
}
mk() { mkdir -p "$t/etc/apt/sources.list.d"; }

mk; printf '# a comment\ndeb-src http://src.example/debian bookworm main\ndeb [arch=amd64 signed-by=/k.gpg] http://pkgs.example.org/debian bookworm main contrib\n' >"$t/etc/apt/sources.list"
expect http://pkgs.example.org/debian

mk; cat >"$t/etc/apt/sources.list.d/debian.sources" <<'S'
Types: deb
# http://old.example/debian
URIs: http://sec.example/debian-security
Suites: bookworm-security
Components: main

Types: deb deb-src
URIs: http://pkgs.example.org/debian http://second.example/debian
Suites: bookworm bookworm-updates
Components: main
S
expect http://pkgs.example.org/debian

mk; printf 'Enabled: no\nTypes: deb\nURIs: http://off.example/debian\nSuites: bookworm\nComponents: main\n' >"$t/etc/apt/sources.list.d/a.sources"
printf 'deb http://pkgs.example.org/debian bookworm main\n' >"$t/etc/apt/sources.list.d/b.list"
printf 'deb http://ignored.example/debian bookworm main\n' >"$t/etc/apt/sources.list.d/c.list.disabled"
expect http://pkgs.example.org/debian

mk; printf 'deb http://pkgs.example.org/debian bookworm-updates main\n' >"$t/etc/apt/sources.list"
expect "exit 1"

got=$(KIWI_DEBIAN_MIRROR=http://override.example/debian KIWI_APT_ETC=$t/none sh "$m")
[ "$got" = http://override.example/debian ] && echo "ok: override" || { echo "FAILED: override"; fails=$((fails + 1)); }
[ "$fails" = 0 ]
