#!/bin/sh
# Builds a minimal rootfs from Debian's busybox-static: DEST gets a static
# busybox, its applet links, and the directories kiwi-run mounts over.
# Rebuilds only when the busybox binary or the extra files changed (a stamp
# holds their checksum). DEST is a symlink to DEST.<stamp>, replaced by one
# rename, so a concurrent user of an older build never sees DEST missing.
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
tmp="$dest.$stamp.tmp.$$"
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
version="$dest.$stamp"
if [ -d "$version" ]; then
  rm -rf "$tmp"            # another run built the same version meanwhile
else
  mv -T "$tmp" "$version"
fi
# A real directory from before DEST became a symlink goes once.
[ -L "$dest" ] || rm -rf "$dest"
ln -sfn "$(basename "$version")" "$dest.link.$$"
mv -T "$dest.link.$$" "$dest"
# Runs still using the versions just replaced keep them: the three newest
# stay, older ones go.
ls -1dt "$dest".*/ 2>/dev/null | grep -v '\.tmp\.' | tail -n +4 | while read -r old; do
  rm -rf "$old"
done
