#!/bin/bash
# s3_ab.sh ROUNDS BIN_A BIN_B: two blockfs binaries against the store's ceiling, for the first
# epoch from s3:// (docs/PERFORMANCE.md). Each round runs the ceiling (bin/s3get whole), A and
# B, rotated by the round's number (on this machine a run's rate depends on what ran just
# before it), each cold: page cache dropped, a fresh mount, dd bs=1M of one 1 GiB epoch.
# Prints each round's MB/s and ratios to the ceiling, and each mount's CPU ticks (daemon, and
# MinIO's if MINIO_PID is set).
#
# Needs root, a running MinIO with the bench's dataset at s3://bench/4k (python3
# bench/s3bench.py packs it; or: blockfs pack --endpoint $EP --format raw --record-size 4096
# --block-size 16MiB FILE s3://bench/4k), and AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, EP
# (the endpoint URL) in the environment. DC=DIR adds --disk-cache DIR (emptied before each
# mount); DDFLAGS adds dd flags (iflag=direct).
set -euo pipefail
R=$1 A=$2 B=$3
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MNT=$(mktemp -d)
trap 'rmdir "$MNT"' EXIT
ticks() { awk '{print $14+$15}' /proc/$1/stat; }
run() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
	if [ "$1" = ceil ]; then
		"$ROOT/bin/s3get" -endpoint "$EP" -bucket bench -prefix 4k -workers 8 whole | awk '{printf "%.0f", $1/$2/1e6}'
		return
	fi
	local fl=()
	if [ -n "${DC:-}" ]; then
		rm -rf "$DC"
		fl=(--disk-cache "$DC")
	fi
	"$1" mount "${fl[@]}" --seed 1 --cache-size 256MiB --endpoint "$EP" --s3-concurrency 8 s3://bench/4k "$MNT" 2>/dev/null &
	local d=$! t
	for t in $(seq 1 100); do [ -e "$MNT/epoch-0000" ] && break; sleep 0.1; done
	local d0 m0=0 t0 t1 m1=0
	d0=$(ticks $d)
	[ -n "${MINIO_PID:-}" ] && m0=$(ticks "$MINIO_PID")
	t0=$(date +%s.%N)
	dd if="$MNT/epoch-0003" of=/dev/null bs=1M ${DDFLAGS:-} status=none
	t1=$(date +%s.%N)
	echo "  $(basename "$1"): daemon $(($(ticks $d) - d0)) ticks$([ -n "${MINIO_PID:-}" ] && echo ", MinIO $(($(ticks "$MINIO_PID") - m0)) ticks")" >&2
	"$1" unmount "$MNT"
	wait $d
	awk "BEGIN{printf \"%.0f\", 1073741824/($t1-$t0)/1e6}"
}
for i in $(seq 0 $((R - 1))); do
	names=(ceil "$A" "$B")
	declare -A v=()
	for k in 0 1 2; do
		x=${names[$(((i + k) % 3))]}
		v[$x]=$(run "$x")
	done
	echo "round $i: ceiling ${v[ceil]} MB/s, A ${v[$A]} ($(awk "BEGIN{printf \"%.2f\", ${v[$A]}/${v[ceil]}}")x), B ${v[$B]} ($(awk "BEGIN{printf \"%.2f\", ${v[$B]}/${v[ceil]}}")x)"
done
