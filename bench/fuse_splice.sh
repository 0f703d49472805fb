#!/bin/bash
# fuse_splice.sh ROUNDS: whether a read's reply spliced into /dev/fuse costs the daemon less
# than the writev blockfs uses. bench/fuse_splice.patch (an experiment, not blockfs) makes a
# build whose replies, with BLOCKFS_SPLICE=1, are the cache's pages vmspliced into a pipe
# (page references, no copy) that go-fuse splices behind the reply's header into /dev/fuse;
# BLOCKFS_MAXWRITE_KIB=960 keeps each request's reply inside go-fuse's pipe (at most
# /proc/sys/fs/pipe-max-size, 1 MiB by default). Three variants, order rotated round by round:
# writev of 1 MiB requests (blockfs as it is), writev of 960 KiB requests, splice of 960 KiB.
# Each prints the daemon's CPU seconds per GiB (utime + stime of /proc/PID/stat) and the rate
# of `dd bs=1M` of five new epochs after a first, a 588 MiB pack of 147 KiB records in the
# daemon's cache, and fails if an epoch's bytes differ between variants. Run from the
# checkout's root; $WORK (default /tmp/fuse_splice) holds the build and the data.
set -euo pipefail
. "$(dirname "$0")/ddcpu.sh"
rounds=${1:-3}
work=${WORK:-/tmp/fuse_splice}
root=$(pwd)
mkdir -p "$work"
src="$work/src"
rm -rf "$src" && mkdir -p "$src"
git archive HEAD | tar -x -C "$src"
if ! (cd "$src" && git apply --check "$root/bench/fuse_splice.patch"); then
	echo "fuse_splice.sh: bench/fuse_splice.patch no longer applies to fs/: update the patch" >&2
	exit 1
fi
(cd "$src" && git apply "$root/bench/fuse_splice.patch" && go build -o "$work/blockfs" ./cmd/blockfs)
ddcpu_data "$work/blockfs" "$work"
want=""
one() {
	local name=$1
	shift
	DDCPU_SUM=""
	ddcpu "$(printf '%-12s' "$name")" 5 "$work/blockfs" "$work/img" "$@"
	if [ -z "$want" ]; then
		want=$DDCPU_SUM
	elif [ "$DDCPU_SUM" != "$want" ]; then
		echo "fuse_splice.sh: $name served other bytes for epoch 1" >&2
		exit 1
	fi
}
for r in $(seq "$rounds"); do
	echo "round $r"
	for i in 0 1 2; do
		case $(((i + r) % 3)) in
		0) one writev-1024 BLOCKFS_SPLICE=0 ;;
		1) one writev-960 BLOCKFS_MAXWRITE_KIB=960 ;;
		2) one splice-960 BLOCKFS_MAXWRITE_KIB=960 BLOCKFS_SPLICE=1 ;;
		esac
	done
done
