#!/bin/bash
# fuse_background.sh ROUNDS READERS VALUE...: how many FUSE requests the kernel keeps in
# flight for readahead (blockfs's hidden --max-background, the INIT reply's max_background;
# its congestion threshold is three quarters of it) moves READERS `dd bs=1M` of their shards
# of new epochs at once. Above the threshold the kernel skips a file's asynchronous readahead,
# so each reader waits for its next request's round trip. For each VALUE, in an order rotated
# round by round with the page cache dropped before each: the daemon's CPU seconds per GiB and
# the rate over 5 epochs (each value must serve epoch 1 as the first did) of a 588 MiB pack of 147 KiB records (ddcpu_data) after a first.
# Run as root from the checkout's root with bin/blockfs built (BLOCKFS: another build); $WORK
# (default /tmp/fuse_background) holds the data.
set -euo pipefail
. "$(dirname "$0")/ddcpu.sh"
if [ $# -lt 3 ]; then
	echo "usage: bench/fuse_background.sh ROUNDS READERS VALUE... (e.g. 2 16 16 64)" >&2
	exit 2
fi
rounds=$1 readers=$2
shift 2
values=("$@")
blockfs=${BLOCKFS:-bin/blockfs}
work=${WORK:-/tmp/fuse_background}
mkdir -p "$work"
ddcpu_data "$blockfs" "$work"
sum0=""
for round in $(seq "$rounds"); do
	echo "round $round"
	for i in "${!values[@]}"; do
		v=${values[$(((i + round) % ${#values[@]}))]}
		sync
		echo 3 >/proc/sys/vm/drop_caches
		DDCPU_SUM=""
		DDCPU_READERS=$readers DDCPU_ARGS="--max-background $v" \
			ddcpu "$(printf 'max-background %-4s' "$v")" 5 "$blockfs" "$work/img"
		sum0=${sum0:-$DDCPU_SUM}
		if [ "$DDCPU_SUM" != "$sum0" ]; then
			echo "fuse_background.sh: --max-background $v served other bytes for epoch 1 than the first" >&2
			exit 1
		fi
	done
done
