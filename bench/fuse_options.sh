#!/bin/bash
# fuse_options.sh ROUNDS READERS OPTIONS...: how mount options of the FUSE path move READERS
# `dd bs=1M` of their shards of new epochs at once. Each OPTIONS is one quoted string of mount
# options ("" for the defaults), e.g. the hidden --max-background N (the kernel's requests in
# flight for readahead, the INIT reply's max_background; above three quarters of it the kernel
# skips a file's asynchronous readahead) and --fuse-readers N (requests the daemon serves at
# once; go-fuse's default is one a CPU, at most 16). For each, in an order rotated round by
# round with the page cache dropped before each: the daemon's CPU seconds per GiB and the rate
# over 5 epochs of a 588 MiB pack of 147 KiB records (ddcpu_data) after a first; each must
# serve epoch 1 as the first did. DDCPU_DD=iflag=direct: the readers open with O_DIRECT (no
# page cache). Run as root from the checkout's root with bin/blockfs built
# (BLOCKFS: another build); $WORK (default /tmp/fuse_options) holds the data.
#
#   bench/fuse_options.sh 2 16 "--max-background 16" "--max-background 64"
#   bench/fuse_options.sh 2 16 "" "--fuse-readers 4" "--fuse-readers 8"
set -euo pipefail
. "$(dirname "$0")/ddcpu.sh"
if [ $# -lt 3 ]; then
	echo "usage: bench/fuse_options.sh ROUNDS READERS OPTIONS... (e.g. 2 16 \"\" \"--max-background 64\")" >&2
	exit 2
fi
rounds=$1 readers=$2
shift 2
variants=("$@")
blockfs=${BLOCKFS:-bin/blockfs}
work=${WORK:-/tmp/fuse_options}
mkdir -p "$work"
ddcpu_data "$blockfs" "$work"
for round in $(seq "$rounds"); do
	echo "round $round"
	for i in "${!variants[@]}"; do
		v=${variants[$(((i + round) % ${#variants[@]}))]}
		sync
		echo 3 >/proc/sys/vm/drop_caches
		DDCPU_SUM=""
		DDCPU_READERS=$readers DDCPU_ARGS="$v" ddcpu "$(printf '%-24s' "${v:-(defaults)}")" 5 "$blockfs" "$work/img"
		same epoch1 "$DDCPU_SUM" "${v:-the defaults} served other bytes for epoch 1 than the first variant"
	done
done
