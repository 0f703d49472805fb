#!/usr/bin/env bash
# Usage: bench/order_version_bench.sh ROUNDS BLOCKFS [WORK]
#
# Tiny records in place, order version 2 against version 1: 60 M uint16 tokens (120 MB, a
# counting sequence) served in place with default flags, mounted twice, --order-version 2 (one
# window of all 115 blocks, each position's record computed by the keyed bijection) and
# --order-version 1 (windows of 8 blocks, their permutations held). Each run reads a new epoch
# (one not read before) whole with cat, the two mounts in turn (A B A B ...), ROUNDS times
# each, by farm-bench; the file is in the page cache, so this is the daemon's record copy and
# order. Prints farm-bench's table: A is version 2, B version 1; A/B wall is the time ratio.
set -euo pipefail
rounds=$1; bin=$(realpath "$2"); work=${3:-build/order_version}
mkdir -p "$work"; work=$(realpath "$work")
tok="$work/tok.bin"
[ -f "$tok" ] || /usr/bin/python3 -c "import numpy as np; np.arange(60_000_000, dtype=np.uint64).astype(np.uint16).tofile('$tok')"
cat "$tok" > /dev/null
for v in 1 2; do
	mkdir -p "$work/m$v"; echo 0 > "$work/c$v"
	"$bin" mount "$tok" "$work/m$v" --dtype uint16 --order-version $v --epochs 1000 > "$work/m$v.log" 2>&1 &
done
trap 'fusermount3 -u "$work/m1" 2>/dev/null; fusermount3 -u "$work/m2" 2>/dev/null; wait' EXIT
for v in 1 2; do
	for _ in $(seq 50); do [ -f "$work/m$v/.blockfs/info.json" ] && break; sleep 0.2; done
done
cat > "$work/rd.sh" <<'SH'
#!/bin/sh
# rd.sh MNT COUNTER: read the mount's next epoch once, whole
n=$(cat "$2"); echo $((n+1)) > "$2"
exec cat "$1/epoch-$(printf %04d "$n")" > /dev/null
SH
chmod +x "$work/rd.sh"
farm-bench -n "$rounds" --timeout 600 --vs "$work/rd.sh $work/m1 $work/c1" -- "$work/rd.sh" "$work/m2" "$work/c2"
