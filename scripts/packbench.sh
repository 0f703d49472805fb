#!/usr/bin/env bash
# Pack speed against cp, side by side (issue floor: pre-shuffle >= 1/3 of cp, in order >= 2/3).
# Each row starts cold (page cache dropped) and ends with its output on disk (sync), since pack
# makes its dataset durable. Median of 3 runs. Run as root.
# usage: scripts/packbench.sh BIN [SIZE_MIB=2048] [WORKDIR=build/packbench]
set -euo pipefail
bin=$(realpath "$1"); mib=${2:-2048}; work=${3:-build/packbench}
mkdir -p "$work"; work=$(realpath "$work")
src=$work/input.bin
if [ ! -f "$src" ] || [ "$(stat -c %s "$src")" -ne $((mib << 20)) ]; then
	head -c $((mib << 20)) /dev/urandom > "$src"
fi
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
secs() { local t0 t1; drop; t0=$(date +%s.%N); "$@" >/dev/null; sync; t1=$(date +%s.%N); echo "$t0 $t1" | awk '{printf "%.2f", $2-$1}'; }
median() { printf '%s\n' "$@" | sort -n | sed -n 2p; }
row() { local name=$1; shift; local r=(); for i in 1 2 3; do rm -rf "$work/out"; r+=("$(secs "$@")"); done; rm -rf "$work/out"; echo "$name $(median "${r[@]}") ${r[*]}"; }
cp_s=$(row cp cp "$src" "$work/out" | cut -d' ' -f2)
sh_s=$(row shuffle "$bin" pack --quiet --record-size 4KiB "$src" "$work/out" | cut -d' ' -f2)
ns_s=$(row noshuffle "$bin" pack --quiet --record-size 4KiB --no-shuffle "$src" "$work/out" | cut -d' ' -f2)
awk -v m="$mib" -v c="$cp_s" -v s="$sh_s" -v n="$ns_s" 'BEGIN {
	printf "%-34s %7s %9s %8s\n", "row (" m " MiB of 4 KiB records)", "seconds", "MiB/s", "x cp"
	printf "%-34s %7.2f %9.0f %8.2f\n", "cp + sync", c, m/c, 1
	printf "%-34s %7.2f %9.0f %8.2f\n", "blockfs pack (pre-shuffle)", s, m/s, c/s
	printf "%-34s %7.2f %9.0f %8.2f\n", "blockfs pack --no-shuffle", n, m/n, c/n
}'
