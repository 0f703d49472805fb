#!/usr/bin/env bash
# make demo: pack a small built-in dataset, mount it, read an epoch with dd, unmount.
set -euo pipefail
bin=$(realpath "$1"); work=$2; mb=${3:-256}
mkdir -p "$work"; work=$(realpath "$work")
mnt=$work/mnt
cleanup() {
	if grep -qs " $mnt " /proc/mounts; then "$bin" unmount "$mnt" || "$bin" unmount --lazy "$mnt" || true; fi
}
trap cleanup EXIT
if [ ! -f "$work/input.bin" ] || [ "$(stat -c %s "$work/input.bin")" -ne $((mb << 20)) ]; then
	echo "== making ${mb} MiB of 4 KiB records: $work/input.bin"
	head -c $((mb << 20)) /dev/urandom > "$work/input.bin"
fi
echo "== packing (pre-shuffle on; pack chooses the block size, and says it)"
"$bin" pack --format raw --record-size 4KiB --force "$work/input.bin" "$work/dataset"
"$bin" info "$work/dataset"
cleanup
mkdir -p "$mnt"
echo "== mounting at $mnt"
"$bin" mount --daemon --seed 1 "$work/dataset" "$mnt"
ls "$mnt" | head -6; echo "   ... ($(ls "$mnt" | wc -l) entries)"
echo "== .blockfs/info.json"; cat "$mnt/.blockfs/info.json"
echo "== reading epoch-0000 with dd bs=1M"
dd if="$mnt/epoch-0000" of=/dev/null bs=1M 2>&1 | tail -1
echo "== reading epoch-0001 with dd bs=4k (a record at a time)"
dd if="$mnt/epoch-0001" of=/dev/null bs=4k 2>&1 | tail -1
echo "== first source ids of epoch-0000 (od of epoch-0000.ids)"
od -A d -t u8 -N 64 "$mnt/epoch-0000.ids"
echo "== shard-0-of-4 holds a quarter: $(stat -c %s "$mnt/shard-0-of-4/epoch-0000") of $(stat -c %s "$mnt/epoch-0000") bytes"
echo "== stats"; grep -E '"(bytes_served|disk_reads|disk_bytes|cache_hits|readahead_hits)"' "$mnt/.blockfs/stats.json"
"$bin" unmount "$mnt"
echo "== unmounted; nothing left mounted: $(grep -c " $mnt " /proc/mounts || true) mounts at $mnt"
