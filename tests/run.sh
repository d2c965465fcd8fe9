#!/usr/bin/env bash
# The whole test suite: the README's test command, and what .ci/run calls.
#   1. installs what is missing (Debian packages), builds with -Werror
#   2. every meson suite: unit, integration (root + rootless), seccomp,
#      rootfs, man-page lint, and the cgroup v2 VM lane
#   3. the same suites (without the VM lane) under ASan+UBSan
#   4. the whole tree built with clang (-Werror), which refuses what gcc
#      lets pass (a goto past a cleanup variable's initialization)
#   5. a short run of every libFuzzer target
# Ends with one line: "kiwi-run tests: N passed, N failed, N skipped".
# KIWI_FUZZ_SECONDS (default 15) sets each fuzz target's budget; 0 skips.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
fuzz_seconds=${KIWI_FUZZ_SECONDS:-15}
passed=0 failed=0 skipped=0
failures=()

say() { printf '\n=== %s\n' "$*"; }

configure() {  # DIR [meson options...]
	local dir=$1
	shift
	if [ -f "$dir/build.ninja" ]; then
		meson configure "$dir" "$@" >/dev/null
	else
		meson setup "$dir" "$@" >/dev/null
	fi
	ninja -C "$dir"
}

# Adds one meson test run's results (testlog.json) to the totals.
count_meson() {  # BUILD_DIR LABEL
	local log=$1/meson-logs/testlog.json
	[ -f "$log" ] || return 0
	local counts
	counts=$(/usr/bin/python3 - "$log" "$2" <<'PY'
import json, sys
p = f = s = 0
names = []
for line in open(sys.argv[1]):
    t = json.loads(line)
    r = t["result"]
    if r in ("OK", "EXPECTEDFAIL"):
        p += 1
    elif r == "SKIP":
        s += 1
    else:
        f += 1
        names.append(sys.argv[2] + ":" + t["name"].replace(" ", ""))
print(p, f, s, " ".join(names))
PY
)
	read -r p f s names <<<"$counts"
	passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
	[ -n "${names:-}" ] && failures+=($names)
	return 0
}

run_meson_tests() {  # BUILD_DIR LABEL [meson test args...]
	local dir=$1 label=$2
	shift 2
	meson test -C "$dir" --no-rebuild --print-errorlogs "$@" || true
	count_meson "$dir" "$label"
}

run_fuzzers() {
	[ "$fuzz_seconds" -gt 0 ] || return 0
	# libFuzzer needs clang, and the compiler is fixed when a build dir is set up.
	[ -f build-fuzz/build.ninja ] || CC=clang meson setup build-fuzz -Dfuzz=true \
		-Dtests=disabled -Dbuildtype=debug -Dstatic_deps=false >/dev/null
	# Only the fuzz targets: the rest of the tree is built and tested above.
	local target name corpus work targets=()
	for target in tests/fuzz/fuzz_*.c; do
		targets+=("tests/fuzz/$(basename "$target" .c)")
	done
	ninja -C build-fuzz "${targets[@]}"
	for target in "${targets[@]}"; do
		target=build-fuzz/$target
		name=$(basename "$target")
		corpus=tests/fuzz/corpus/${name#fuzz_}
		work=$(mktemp -d)
		[ -d "$corpus" ] && cp -r "$corpus/." "$work/"
		local dict=()
		[ -f "tests/fuzz/$name.dict" ] && dict=(-dict="tests/fuzz/$name.dict")
		if "$target" -max_total_time="$fuzz_seconds" -timeout=10 -rss_limit_mb=2048 \
			-print_final_stats=0 "${dict[@]}" "$work" >"$work.log" 2>&1; then
			echo "fuzz $name: ok ($fuzz_seconds s)"
			passed=$((passed + 1))
		else
			echo "fuzz $name: FAILED"; tail -40 "$work.log"
			failed=$((failed + 1)); failures+=("fuzz:$name")
		fi
		rm -rf "$work" "$work.log"
	done
}

say "dependencies"
bash .ci/deps.sh
# The phase suite's Debian rootfs with nodejs and npm takes minutes to build
# the first time, nearly all of it downloading: start it now, beside the
# build. The suite waits on its lock, and reports its error if it failed.
if [ "$(id -u)" = 0 ]; then
	bash tests/phase/node-rootfs.sh >/dev/null 2>&1 &
fi

say "build (-Werror)"
configure build
# Root's sandboxes map onto kiwi's /etc/subuid and /etc/subgid range
# (kiwi-run(1), ID MAPPING): added once, as an installation would.
[ "$(id -u)" != 0 ] || build/src/kiwi-run doctor --fix >/dev/null

say "tests"
run_meson_tests build main

# A lane whose build fails counts as one failure; the other lanes still run.
lane_failed() {
	echo "FAILED to build: $1"
	failed=$((failed + 1))
	failures+=("build:$1")
}

say "tests under ASan+UBSan"
if configure build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug; then
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		run_meson_tests build-asan asan --no-suite vm --no-suite man --no-suite lint
else
	lane_failed asan
fi

say "build with clang (-Werror)"
CC=clang configure build-clang -Dtests=disabled || lane_failed clang

say "fuzzing (${fuzz_seconds}s per target)"
run_fuzzers || lane_failed fuzz

say "summary"
for f in "${failures[@]}"; do echo "FAILED: $f"; done
echo "kiwi-run tests: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
