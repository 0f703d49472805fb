#!/bin/bash
# readers_cache.sh OLD NEW ROUNDS: readers at once through one cache. R readers (R = 4, then 8)
# each read their shard (shard-r-of-R) of epochs 0, 1 and 2 with dd, all at once, through a
# mount of a compressed pack larger than its budget (--cache-size $CACHE, default 512MiB: the
# cache's planned share is half of it, the rest keeps blocks resident in the kernel's page
# cache). $BLOCK (default 16MiB) is the pack's block size. Prints, per
# binary and R, the wall time, the daemon's CPU time, the cache's loads per byte served
# (stats.json disk_bytes / bytes_served: a page evicted before its reader came is loaded, and
# its frame decompressed, again) and the daemon's peak RSS. OLD and NEW alternate within each
# round (the machine is shared: read ratios within a round). The pack: 1 GiB of base64 text in
# 4 KiB records, blocks of $BLOCK, zstd level 1, made once in $WORK/$BLOCK (WORK default
# /tmp/readers_cache). As root, for the page cache drop before each run.
set -euo pipefail
. "$(dirname "$0")/ddcpu.sh"
old=$1 new=$2 rounds=${3:-3}
block=${BLOCK:-16MiB} cachesize=${CACHE:-512MiB}
work=${WORK:-/tmp/readers_cache}/$block
mkdir -p "$work"
if [ ! -f "$work/ds/blockfs.json" ]; then
	head -c $((768 << 20)) /dev/urandom | base64 -w 0 | head -c $((1024 << 20)) >"$work/text.bin"
	"$new" pack --quiet --format raw --record-size 4096 --block-size "$block" --compress zstd:1 "$work/text.bin" "$work/ds"
	rm "$work/text.bin"
fi
one() {
	local bin=$1 readers=$2 mnt pid s e
	mnt=$(mktemp -d)
	sync && echo 3 >/proc/sys/vm/drop_caches || true
	"$bin" mount --cache-size "$cachesize" "$work/ds" "$mnt" 2>"$work/log" &
	pid=$!
	for _ in $(seq 100); do mountpoint -q "$mnt" && break; sleep 0.1; done
	s=$(date +%s.%N)
	local pids=()
	for r in $(seq 0 $((readers - 1))); do
		(for ep in 0 1 2; do dd if="$mnt/shard-$r-of-$readers/epoch-000$ep" of=/dev/null bs=1M status=none; done) &
		pids+=($!)
	done
	waitall "${pids[@]}"
	e=$(date +%s.%N)
	python3 - "$mnt/.blockfs/stats.json" "$(basename "$bin")" "$readers" "$(since "$s" "$e")" \
		"$(echo "$(cputicks "$pid") / $(getconf CLK_TCK)" | bc -l)" "$(($(awk '/VmHWM/ {print $2}' "/proc/$pid/status") >> 10))" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
print("%s %s readers: wall %.2f s, daemon CPU %.2f s, loads %.2f a byte served, cache %d MiB, peak RSS %s MiB"
      % (sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5]), s["disk_bytes"] / s["bytes_served"],
         s["cache_capacity"] >> 20, sys.argv[6]))
EOF
	"$bin" unmount "$mnt"
	wait "$pid" || true
	rmdir "$mnt"
}
for r in $(seq "$rounds"); do
	for readers in 4 8; do
		if [ $((r % 2)) = 1 ]; then one "$old" $readers; one "$new" $readers; else one "$new" $readers; one "$old" $readers; fi
	done
done
