#!/bin/bash
# fuse_uring.sh ROUNDS [READERS]: what FUSE over io_uring would save the daemon against the
# /dev/fuse reads and writes go-fuse uses. bench/fuseuring, one minimal read-only FUSE server,
# serves files of pattern bytes six ways: over /dev/fuse with each reply written from the
# buffer it lies in, as blockfs writes from its cache (dev; dev-poll: /dev/fuse read through
# Go's poller instead of blocking reads; dev-clone: each reader past the first on a clone of
# /dev/fuse of its own, FUSE_DEV_IOC_CLONE), or from a copy (dev-gather); over io_uring, which
# takes a reply only from the ring entry's buffer, with each queue's thread on its CPU as
# libfuse does (uring) or not (uring-unpinned). blockfs itself, serving new epochs of a 588 MiB
# pack of 147 KiB records from its cache (5 after a first; with READERS above 1, each epoch as
# READERS shards read at once), is the reference.
# Variants run in an order rotated round by round, the page cache dropped before each. Each
# prints the daemon's CPU seconds per GiB (utime + stime of /proc/PID/stat) and the rate of
# READERS `dd bs=1M` at once, each of its own file of SIZE_MIB MiB (default 256) READS times
# (default 12) after a first; it fails if the server's variants serve a file differently.
# Needs root and a kernel with FUSE over io_uring (6.14 or later, CONFIG_FUSE_IO_URING); it
# sets the fuse module's enable_uring for the run and puts it back. Run from the checkout's
# root with bin/blockfs built; $WORK (default /tmp/fuse_uring) holds the server's build and
# blockfs's data. On a machine without Go, BLOCKFS and FUSEURING name static builds of blockfs
# and bench/fuseuring (CGO_ENABLED=0 go build) made elsewhere. VARIANTS="dev dev-clone" runs
# only those; SERVER_READERS (default 4) is the server's /dev/fuse readers.
set -euo pipefail
. "$(dirname "$0")/ddcpu.sh"
rounds=${1:-3}
readers=${2:-1}
reads=${READS:-12}
size_mib=${SIZE_MIB:-256}
work=${WORK:-/tmp/fuse_uring}
param=/sys/module/fuse/parameters/enable_uring
if [ ! -w "$param" ]; then
	echo "fuse_uring.sh: $param is missing or not writable: run as root on Linux 6.14 or later built with CONFIG_FUSE_IO_URING" >&2
	exit 1
fi
mkdir -p "$work"
blockfs=${BLOCKFS:-bin/blockfs}
fuseuring=${FUSEURING:-}
if [ -z "$fuseuring" ]; then
	fuseuring=$work/fuseuring
	go build -o "$fuseuring" ./bench/fuseuring
fi
ddcpu_data "$blockfs" "$work"
old=$(cat "$param")
# On any exit, even cut short by a timeout: enable_uring as it was, no server left mounted.
trap 'echo "$old" >"$param"; pkill -TERM -P $$ -x fuseuring 2>/dev/null' EXIT
trap 'exit 1' INT TERM
echo Y >"$param"

# server MODE: the dd readers' figures on bench/fuseuring over transport MODE; sets SUM to
# the md5 of f0 as served after the timed reads; fails if the server stopped or, over io_uring,
# answered no request on a ring. Reader r reads file fr READS times: each open drops the
# file's pages (no FOPEN_KEEP_CACHE), so the page cache stays at a file a reader and its
# pages are reused, as blockfs's are behind its readers (fresh pages cost this VM's host a
# fault each, charged to the daemon's copy: 10x the CPU once 3 GiB of new pages are in use).
server() {
	local label=$1 mode=${1%%-*} mnt pid c0 c1 t0 t1 out r dds=() flags=()
	[ "$label" = uring-unpinned ] && flags=(-pin=false)
	[ "$label" = dev-gather ] && flags=(-gather)
	[ "$label" = dev-poll ] && flags=(-poll)
	[ "$label" = dev-clone ] && flags=(-clone)
	mnt=$(mktemp -d)
	out=$(mktemp)
	"$fuseuring" -transport "$mode" "${flags[@]}" -readers "${SERVER_READERS:-4}" -files $((readers + 1)) -size $((size_mib << 20)) "$mnt" >"$out" 2>&1 &
	pid=$!
	for _ in $(seq 100); do grep -q ready "$out" && break; sleep 0.1; done
	grep -q ready "$out" || { cat "$out" >&2; kill "$pid"; exit 1; }
	for r in $(seq 0 $((readers - 1))); do dd if="$mnt/f$r" of=/dev/null bs=1M status=none; done
	c0=$(cputicks "$pid")
	t0=$(date +%s.%N)
	for r in $(seq 0 $((readers - 1))); do
		(for _ in $(seq "$reads"); do dd if="$mnt/f$r" of=/dev/null bs=1M status=none; done) &
		dds+=($!)
	done
	waitall "${dds[@]}"
	t1=$(date +%s.%N)
	c1=$(cputicks "$pid")
	SUM=$(md5sum <"$mnt/f0")
	kill -TERM "$pid"
	wait "$pid" || { cat "$out" >&2; exit 1; }
	rmdir "$mnt"
	if [ "$mode" = uring ] && ! grep -Eq ", [1-9][0-9]* requests on io_uring" "$out"; then
		echo "fuse_uring.sh: $label answered no request on an io_uring queue:" >&2
		cat "$out" >&2
		exit 1
	fi
	cpurate "$(printf '%-15s' "$label")" "$((c1 - c0))" "$(since "$t0" "$t1")" "$((readers * reads * size_mib << 20))"
	rm "$out"
}

read -ra variants <<<"${VARIANTS:-dev dev-poll dev-clone dev-gather uring uring-unpinned blockfs}"
for round in $(seq "$rounds"); do
	echo "round $round"
	for i in "${!variants[@]}"; do
		v=${variants[$(((i + round) % ${#variants[@]}))]}
		sync
		echo 3 >/proc/sys/vm/drop_caches # each variant from the same start: page cache state moves the figures
		if [ "$v" = blockfs ]; then
			DDCPU_SUM=""
			DDCPU_READERS=$readers ddcpu "$(printf '%-15s' blockfs)" 5 "$blockfs" "$work/img"
			same blockfs "$DDCPU_SUM" "blockfs served other bytes for epoch 1 than in round 1"
			continue
		fi
		server "$v"
		same server "$SUM" "$v served other bytes than the variant before it"
	done
done
