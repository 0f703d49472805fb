#!/usr/bin/env bash
# Quick side-by-side read figures for one dataset (the full benchmark is `make bench`):
# cat of the block files in storage order (the disk's ceiling) versus the mounted epoch read
# with dd at 1 MiB and 4 KiB, cold (page cache dropped before each row) and warm, 3 runs each.
# usage: scripts/quickbench.sh BIN DATASET MOUNTPOINT   (as root)
set -euo pipefail
bin=$1; data=$2; mnt=$3
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
bytes=$(du -b --apparent-size -c "$data"/blocks/*.bin | tail -1 | cut -f1)
mbps() { # command... -> MB/s of the dataset's bytes read by the command (output discarded)
	local t0 t1
	t0=$(date +%s.%N); "$@" >/dev/null; t1=$(date +%s.%N)
	echo "$bytes $t0 $t1" | awk '{printf "%.0f", $1/($3-$2)/1e6}'
}
median() { printf '%s\n' "$@" | sort -n | sed -n 2p; }
"$bin" mount --daemon --seed 1 "$data" "$mnt"
trap '"$bin" unmount "$mnt" || "$bin" unmount --lazy "$mnt"' EXIT
row() { # name, cold|warm, command...
	local name=$1 mode=$2; shift 2
	local r=()
	for i in 1 2 3; do
		if [ "$mode" = cold ]; then drop; "$bin" unmount "$mnt"; "$bin" mount --daemon --seed 1 "$data" "$mnt"; drop; else "$@" >/dev/null; fi
		r+=("$(mbps "$@")")
	done
	printf '%-34s %-5s %6s MB/s   (runs: %s)\n' "$name" "$mode" "$(median "${r[@]}")" "${r[*]}"
}
for mode in cold warm; do
	row "raw: cat block files" $mode sh -c "cat $data/blocks/*.bin"
	row "blockfs epoch-0000, dd bs=1M" $mode dd if="$mnt/epoch-0000" bs=1M status=none
	row "blockfs epoch-0000, dd bs=4k" $mode dd if="$mnt/epoch-0000" bs=4k status=none
done
