#!/usr/bin/env bash
# Usage: bench/parts_bench.sh ROUNDS BLOCKFS [WORK]
#
# Packing in parts on one machine: the wall time of one pack of the inputs (--part 0/1, then
# the merge) against two parts run at once (--part 0/2 and 1/2, then the merge), rounds
# alternated (one first on even rounds, two first on odd ones: the machine is shared). The
# inputs are GIB GiB (default 1) of 64-byte raw records in 4 files, pre-shuffled as pack does by
# default (the CPU-bound case); the page cache is warm (the inputs were just read). It prints
# each round's seconds and the median of the per-round ratios two/one, and the rate of one
# part per core (MB/s), from which docs/PERFORMANCE.md works out a cluster's cost on paper.
set -euo pipefail
rounds=$1; bin=$(realpath "$2"); work=${3:-build/parts}; gib=${GIB:-1}
mkdir -p "$work"; work=$(realpath "$work")
for i in 0 1 2 3; do
	f=$work/in-$i.bin
	[ -f "$f" ] && [ "$(stat -c %s "$f")" -eq $((gib << 28)) ] || head -c $((gib << 28)) /dev/urandom >"$f"
done
cat "$work"/in-*.bin >/dev/null

now() { date +%s.%N; }
# run N: packs the inputs in N parts at once, then merges; prints the seconds it took.
run() {
	local n=$1 out=$work/out-$1 t0 t1 i pids=()
	rm -rf "$out"
	t0=$(now)
	for ((i = 0; i < n; i++)); do
		"$bin" pack --quiet --part "$i/$n" --record-size 64 "$work/in-*.bin" "$out" >/dev/null &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p"; done
	"$bin" pack --merge "$out" >/dev/null
	t1=$(now)
	echo "$t1 - $t0" | bc -l
}

ones=(); twos=(); ratios=()
for ((r = 0; r < rounds; r++)); do
	if ((r % 2 == 0)); then a=$(run 1); b=$(run 2); else b=$(run 2); a=$(run 1); fi
	ones+=("$a"); twos+=("$b"); ratios+=("$(echo "$b / $a" | bc -l)")
	printf 'round %d: one part %.2f s, two parts %.2f s, ratio %.3f\n' "$r" "$a" "$b" "${ratios[-1]}"
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
m1=$(median "${ones[@]}"); m2=$(median "${twos[@]}"); mr=$(median "${ratios[@]}")
printf 'median: one part %.2f s, two parts %.2f s; two/one %.3f\n' "$m1" "$m2" "$mr"
printf 'one part, one core: %.0f MB/s of input\n' "$(echo "$gib * 1073.741824 / $m1" | bc -l)"
rm -rf "$work"/out-1 "$work"/out-2
