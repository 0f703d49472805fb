#!/bin/bash
# decode_cpu.sh OLD NEW ROUNDS: the daemon's CPU time, wall time, garbage collections and
# peak RSS for two epochs of a compressed pack read by dd one after the other, OLD and NEW
# binaries alternated (the machine is shared: read ratios within a round). The pack: 768 MiB of
# base64 text in 4 KiB records, blocks of 16 MiB, zstd level 1, made once in $WORK (default
# /tmp/decode_cpu), mounted with --cache-size 128MiB (six times smaller than the data: every
# epoch decompresses). As root, for the page cache drop between runs.
set -euo pipefail
old=$1 new=$2 rounds=${3:-3}
work=${WORK:-/tmp/decode_cpu}
mkdir -p "$work"
if [ ! -f "$work/ds/blockfs.json" ]; then
	head -c $((576 << 20)) /dev/urandom | base64 -w 0 | head -c $((768 << 20)) >"$work/text.bin"
	"$new" pack --quiet --format raw --record-size 4096 --block-size 16MiB --compress zstd:1 "$work/text.bin" "$work/ds"
fi
one() {
	local bin=$1 mnt
	mnt=$(mktemp -d)
	sync && echo 3 >/proc/sys/vm/drop_caches || true
	GODEBUG=gctrace=1 "$bin" mount --cache-size 128MiB "$work/ds" "$mnt" 2>"$work/log" &
	local pid=$!
	for _ in $(seq 100); do mountpoint -q "$mnt" && break; sleep 0.1; done
	local s e
	s=$(date +%s.%N)
	for ep in 0 1; do dd if="$mnt/epoch-000$ep" of=/dev/null bs=1M status=none; done
	e=$(date +%s.%N)
	read -r ut st < <(awk '{print $14, $15}' "/proc/$pid/stat")
	printf '%s wall %.2f s, daemon CPU %.2f s, GCs %d, peak RSS %d MiB\n' "$(basename "$bin")" \
		"$(echo "$e - $s" | bc)" "$(echo "($ut + $st) / $(getconf CLK_TCK)" | bc -l)" \
		"$(grep -c '^gc ' "$work/log")" "$(($(awk '/VmHWM/ {print $2}' "/proc/$pid/status") >> 10))"
	"$bin" unmount "$mnt"
	wait "$pid" || true
	rmdir "$mnt"
}
for r in $(seq "$rounds"); do
	if [ $((r % 2)) = 1 ]; then one "$old"; one "$new"; else one "$new"; one "$old"; fi
done
