#!/bin/sh
# Builds a minimal rootfs from Debian's busybox-static: DEST gets a static
# busybox, its applet links, and the directories kiwi-run mounts over.
# Rebuilds only when the busybox binary changed (a stamp holds its checksum).
# usage: busybox-rootfs.sh DEST [EXTRA_FILE...]   (extra files land in /usr/local/bin)
set -eu
dest=${1:?usage: busybox-rootfs.sh DEST [EXTRA_FILE...]}
shift
bb=/bin/busybox
if ! [ -x "$bb" ]; then
  echo "busybox-rootfs: $bb is missing: apt-get install busybox-static" >&2
  exit 1
fi
if ldd "$bb" >/dev/null 2>&1; then
  echo "busybox-rootfs: $bb is dynamically linked: apt-get install busybox-static" >&2
  exit 1
fi
stamp=$(cat "$bb" "$@" 2>/dev/null | sha256sum | cut -c1-16)
if [ -f "$dest/.kiwi-rootfs-stamp" ] && [ "$(cat "$dest/.kiwi-rootfs-stamp")" = "$stamp" ]; then
  exit 0
fi
tmp="$dest.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp"
cd "$tmp"
mkdir -p bin sbin usr/bin usr/sbin usr/local/bin etc root tmp proc sys dev workspace var/tmp
chmod 1777 tmp var/tmp
chmod 700 root
cp "$bb" bin/busybox
for applet in $(./bin/busybox --list-full); do
  [ "$applet" = bin/busybox ] && continue
  [ -e "$applet" ] || ln -s /bin/busybox "$applet"
done
for extra in "$@"; do
  case $extra in /*) ;; *) extra="$OLDPWD/$extra" ;; esac
  cp "$extra" usr/local/bin/
done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' > etc/passwd
printf 'root:x:0:\nnogroup:x:65534:\n' > etc/group
printf '127.0.0.1\tlocalhost\n::1\tlocalhost\n' > etc/hosts
: > etc/resolv.conf
echo "$stamp" > .kiwi-rootfs-stamp
cd - >/dev/null
rm -rf "$dest"
mv "$tmp" "$dest"
