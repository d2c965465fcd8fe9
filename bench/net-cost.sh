#!/usr/bin/env bash
# Cost of a sandbox's egress network: setup + teardown of the veth, its
# addresses and route, and the nftables table, as kiwi-run does it
# (netlink, through tests/net/egresstool) against the same built with
# ip(8) and nft(8) commands, interleaved in one run. With --kiwi-run, also
# the start of `kiwi-run run --network egress` against `--network none`.
# Everything happens in a scratch network namespace with no route out.
#
# usage: bench/net-cost.sh [-n N] [--build DIR] [--kiwi-run BIN --rootfs DIR]
# needs: root, iproute2, nftables; prints a markdown table.
set -euo pipefail
n=50 build=build kiwi_run="" rootfs=""
while [ $# -gt 0 ]; do
	case $1 in
	-n) n=$2; shift 2 ;;
	--build) build=$2; shift 2 ;;
	--kiwi-run) kiwi_run=$2; shift 2 ;;
	--rootfs) rootfs=$2; shift 2 ;;
	*) echo "usage: $0 [-n N] [--build DIR] [--kiwi-run BIN --rootfs DIR]" >&2; exit 2 ;;
	esac
done
tool=$build/tests/net/egresstool
[ -x "$tool" ] || { echo "net-cost: $tool missing: ninja -C $build tests/net/egresstool" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "net-cost: needs root" >&2; exit 1; }
host=kwbench$$
tmp=$(mktemp -d)
cleanup() {
	ip netns list | awk -v p="$host" 'index($1, p) == 1 {print $1}' | xargs -r -n1 ip netns del
	rm -rf "$tmp"
}
trap cleanup EXIT
ip netns add "$host"
ip -n "$host" link set lo up
hx() { ip netns exec "$host" "$@"; }
now() { date +%s%N; }

# The nft table egress builds, in nft's language (for the ip/nft variant).
cat > "$tmp/table.nft" <<'EOF'
table inet kiwi_bench {
	set never { type ipv4_addr; flags constant,interval;
		elements = { 0.0.0.0/8, 10.200.0.0/16, 127.0.0.0/8, 169.254.0.0/16, 224.0.0.0/3 }
	}
	set special { type ipv4_addr; flags constant,interval;
		elements = { 10.0.0.0/8, 100.64.0.0/10, 172.16.0.0/12, 192.0.0.0/24, 192.0.2.0/24,
			     192.88.99.0/24, 192.168.0.0/16, 198.18.0.0/15, 198.51.100.0/24, 203.0.113.0/24 }
	}
	set ports { type inet_service; flags constant; elements = { 80, 443 }
	}
	chain deny { counter log group 40000 snaplen 128
		meta l4proto tcp reject with tcp reset
		reject with icmpx admin-prohibited
	}
	chain decide {
		meta nfproto != ipv4 goto deny
		ip daddr @never goto deny
		meta l4proto != { tcp, udp } goto deny
		th dport 53 goto deny
		ip daddr @special goto deny
		th dport @ports accept
		goto deny
	}
	chain inbound { type filter hook forward priority 10; policy accept;
		oif "kiwib" ct state established,related accept
		oif "kiwib" counter drop
	}
	chain forward { type filter hook forward priority 0; policy accept;
		iif != "kiwib" accept
		ct state established,related accept
		goto decide
	}
	chain input { type filter hook input priority 0; policy accept;
		iif != "kiwib" accept
		ct state established,related accept
		goto deny
	}
	chain postrouting { type nat hook postrouting priority srcnat; policy accept;
		ip saddr 10.200.0.2 oif != "kiwib" masquerade
	}
}
EOF

# One sandbox's worth with commands: a named netns (the sandbox), the
# veth with its peer created in it, addresses, routes, the table; then
# all of it removed. "batch" is the floor (one ip process per namespace
# and one nft); "commands" is what a plain shell script does.
ip_batch() {
	local ns=${host}s
	ip netns add "$ns"
	ip -n "$host" -batch - <<EOF
link add kiwib type veth peer name eth0 netns $ns
addr add 10.200.0.1/30 dev kiwib
link set kiwib up
EOF
	ip -n "$ns" -batch - <<EOF
addr add 10.200.0.2/30 dev eth0
link set eth0 up
route add default via 10.200.0.1
EOF
	hx nft -f "$tmp/table.nft"
	hx nft delete table inet kiwi_bench
	ip -n "$host" link del kiwib
	ip netns del "$ns"
}

ip_commands() {
	local ns=${host}s
	ip netns add "$ns"
	ip -n "$host" link add kiwib type veth peer name eth0 netns "$ns"
	ip -n "$host" addr add 10.200.0.1/30 dev kiwib
	ip -n "$host" link set kiwib up
	ip -n "$ns" addr add 10.200.0.2/30 dev eth0
	ip -n "$ns" link set eth0 up
	ip -n "$ns" route add default via 10.200.0.1
	hx nft -f "$tmp/table.nft"
	hx nft delete table inet kiwi_bench
	ip -n "$host" link del kiwib
	ip netns del "$ns"
}

stats() {  # stdin: one ms value per line -> "min median"
	sort -n | awk '{v[NR]=$1} END {printf "%.2f %.2f", v[1], v[int((NR+1)/2)]}'
}

hx sysctl -qw net.ipv4.ip_forward=1
: > "$tmp/batch" ; : > "$tmp/cmds"
for _ in $(seq "$n"); do
	t0=$(now); ip_batch; t1=$(now); ip_commands; t2=$(now)
	echo "scale=3; ($t1 - $t0) / 1000000" | bc >> "$tmp/batch"
	echo "scale=3; ($t2 - $t1) / 1000000" | bc >> "$tmp/cmds"
done
kiwi=$(hx "$tool" bench "$n" --egress public_internet)
field() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print('%.2f %.2f' % (d[sys.argv[2]]['min'], d[sys.argv[2]]['median']))" "$kiwi" "$1"; }

echo "| $n sandboxes, one after the other | min ms | median ms |"
echo "| --- | ---: | ---: |"
for k in total setup teardown; do
	read -r mn md <<<"$(field $k)"
	echo "| kiwi-run egress (netlink): $k | $mn | $md |"
done
read -r mn md <<<"$(stats < "$tmp/batch")"
echo "| ip -batch + nft -f, setup and teardown | $mn | $md |"
read -r mn md <<<"$(stats < "$tmp/cmds")"
echo "| one ip command per step + nft -f | $mn | $md |"

if [ -n "$kiwi_run" ]; then
	[ -n "$rootfs" ] || { echo "net-cost: --kiwi-run needs --rootfs" >&2; exit 2; }
	[ -x "$rootfs/usr/local/bin/netprobe" ] || { echo "net-cost: $rootfs lacks /usr/local/bin/netprobe" >&2; exit 2; }
	# "start": from launching kiwi-run to the command's first instruction
	# (netprobe now prints CLOCK_REALTIME, which no namespace changes);
	# "whole": until kiwi-run has exited, teardown included.
	for mode in none egress; do : > "$tmp/start-$mode"; : > "$tmp/whole-$mode"; done
	for _ in $(seq "$n"); do
		for mode in none egress; do
			opts=(--network none)
			[ $mode = egress ] && opts=(--network egress --egress public_internet)
			t0=$(now)
			t1=$(hx "$kiwi_run" run --rootfs "$rootfs" "${opts[@]}" -- /usr/local/bin/netprobe now)
			t2=$(now)
			echo "scale=3; ($t1 - $t0) / 1000000" | bc >> "$tmp/start-$mode"
			echo "scale=3; ($t2 - $t0) / 1000000" | bc >> "$tmp/whole-$mode"
		done
	done
	echo
	echo "| kiwi-run run, $n each, interleaved | start min ms | start median ms | whole min ms | whole median ms |"
	echo "| --- | ---: | ---: | ---: | ---: |"
	for mode in none egress; do
		read -r smn smd <<<"$(stats < "$tmp/start-$mode")"
		read -r wmn wmd <<<"$(stats < "$tmp/whole-$mode")"
		echo "| --network $mode | $smn | $smd | $wmn | $wmd |"
	done
fi
