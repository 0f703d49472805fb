#!/usr/bin/env sh
# What a blockfs mount looks like from the shell.   usage: shell.sh MOUNT
set -eu
mnt=${1:?usage: shell.sh MOUNT}
echo "== the dataset"
cat "$mnt/.blockfs/info.json"
echo "== throughput: an epoch with dd (1 MiB reads), then cat"
dd if="$mnt/epoch-0000" of=/dev/null bs=1M 2>&1 | tail -1
start=$(date +%s.%N); cat "$mnt/epoch-0001" > /dev/null; end=$(date +%s.%N)
echo "cat epoch-0001: $(stat -c %s "$mnt/epoch-0001") bytes in $(echo "$end $start" | awk '{printf "%.2f", $1-$2}') s"
echo "== the first ten source ids of epoch 0 (uint64, little-endian)"
od -A d -t u8 -N 80 "$mnt/epoch-0000.ids"
echo "== shard 1 of 4 holds a quarter of the epoch"
stat -c '%n %s' "$mnt/shard-1-of-4/epoch-0000"
echo "== what the cache and the disk did"
cat "$mnt/.blockfs/stats.json"
