#!/bin/sh
# Prints the Debian archive this machine's apt uses for the release (default
# bookworm): the first "deb" source, one-line or deb822, whose suites name
# the release itself (not -updates or -security) with component main. The
# project names no mirror of its own: debootstrap takes what apt already
# trusts here. KIWI_DEBIAN_MIRROR overrides it; KIWI_APT_ETC (default
# /etc/apt) is where the sources are read, for the tests.
#   debian-mirror.sh [RELEASE]       (exit 1 with one line when none is found)
set -eu
release=${1:-bookworm}
if [ -n "${KIWI_DEBIAN_MIRROR:-}" ]; then
	echo "$KIWI_DEBIAN_MIRROR"
	exit 0
fi
etc=${KIWI_APT_ETC:-/etc/apt}
files=
[ -f "$etc/sources.list" ] && files=$etc/sources.list
for f in "$etc"/sources.list.d/*.list "$etc"/sources.list.d/*.sources; do
	[ -f "$f" ] && files="$files $f"
done
# shellcheck disable=SC2086
mirror=$(awk -v rel="$release" '
function words(s, a) { return split(s, a, /[ \t]+/) }
function has(list, w,   a, n, i) { n = words(list, a); for (i = 1; i <= n; i++) if (a[i] == w) return 1; return 0 }
function stanza_end() {
	if (!off && has(types, "deb") && has(suites, rel) && has(comps, "main") && uris != "" && found == "") {
		words(uris, u); found = u[1]
	}
	types = uris = suites = comps = ""; off = 0
}
FNR == 1 { stanza_end() }
FILENAME ~ /\.sources$/ {
	if ($0 ~ /^[ \t]*#/) next
	line = $0
	if (line ~ /^[ \t]*$/) { stanza_end(); next }
	if (match(line, /^[A-Za-z-]+:/)) {
		key = tolower(substr(line, 1, RLENGTH - 1)); val = substr(line, RLENGTH + 1)
		gsub(/^[ \t]+|[ \t]+$/, "", val)
		if (key == "types") types = val; else if (key == "uris") uris = val
		else if (key == "suites") suites = val; else if (key == "components") comps = val
		else if (key == "enabled" && tolower(val) == "no") off = 1
	}
	next
}
{
	line = $0; sub(/#.*/, "", line)
	n = words(line, f); i = 1
	if (f[1] == "") i = 2
	if (f[i] != "deb") next
	i++
	if (f[i] ~ /^\[/) { while (i <= n && f[i] !~ /\]$/) i++; i++ }
	url = f[i]; suite = f[i + 1]; rest = ""
	for (j = i + 2; j <= n; j++) rest = rest " " f[j]
	if (suite == rel && has(rest, "main") && found == "") found = url
}
END { stanza_end(); if (found != "") print found }
' $files /dev/null)
if [ -z "$mirror" ]; then
	echo "debian-mirror.sh: no 'deb' source for $release main in $etc/sources.list{,.d/}: set KIWI_DEBIAN_MIRROR" >&2
	exit 1
fi
echo "$mirror"
