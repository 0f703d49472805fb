#!/bin/bash
# device.sh prep DIR | device.sh run DIR: issue 50's many-core checks as one prepared script,
# for a session lent a many-core GPU machine (its run tool: a copy of the checkout, 10 minutes a
# command, 15 of device time in all, so the checks are bounded to fit one command).
#
#   prep (here, with Go): DIR/bin gets static builds (CGO_ENABLED=0) of blockfs, loopback,
#        fuseuring and fs's tests (fs.test), DIR/py a copy of python/blockfs. Make DIR inside
#        the checkout where git ignores it (build/device), so that the run tool can carry it
#        (under 64 MiB).
#   run  (there, as root): node_scaling.py DIR at AGG_W processes (default 1,8,16: each
#        count's aggregate against the in-process gather, the steady state, dd readers; the
#        daemon's CPU and lock profiles over them in $OUT/node_scaling.pprof and .mutex),
#        resnet_fed.py DIR (ResNet-18 fed by the Loader, with and without device="cuda",
#        against its ceiling), fuse_uring.sh 1 16 with VARIANTS="dev dev-clone blockfs" (16 dd
#        readers: the minimal server's 8 readers on one /dev/fuse descriptor against 8 on clones
#        of it, FUSE_DEV_IOC_CLONE, and blockfs's 16 shards; io_uring was measured on
#        2026-11-30 and lost), then fuse_options.sh 2 16
#        (blockfs with go-fuse's 16 request readers, 4 and 8) and the same with dd iflag=direct
#        (16 and 8 request readers), and fs's BenchmarkPopulateTogether (the daemon's fill of
#        new buffers of 16 clients at once), each within a bound of its own (about 9 minutes in
#        all); everything it prints is also in $OUT/device.log when $OUT is set.
#        SMALL=1 makes it a rehearsal for a small machine (node_scaling.py --small, 2 readers).
#
# For example: bench/device.sh prep build/device, then the run tool with carry
# ["build/device"] and command "bench/device.sh run build/device" (timeout_s 600).
set -uo pipefail
cmd=${1:-}
dir=${2:-}
if [ -z "$dir" ] || { [ "$cmd" != prep ] && [ "$cmd" != run ]; }; then
	echo "usage: bench/device.sh prep DIR | bench/device.sh run DIR" >&2
	exit 2
fi
case $cmd in
prep)
	set -e
	mkdir -p "$dir/bin" "$dir/py"
	for p in blockfs:./cmd/blockfs loopback:./bench/loopback fuseuring:./bench/fuseuring; do
		CGO_ENABLED=0 go build -trimpath -o "$dir/bin/${p%%:*}" "${p#*:}"
	done
	CGO_ENABLED=0 go test -c -trimpath -o "$dir/bin/fs.test" ./fs/
	rm -rf "$dir/py/blockfs"
	cp -r python/blockfs "$dir/py/blockfs"
	find "$dir/py" -name __pycache__ -prune -exec rm -rf {} +
	du -sh "$dir"
	;;
run)
	dir=$(cd "$dir" && pwd)
	out=${OUT:-/tmp}
	log=$out/device.log
	here=$(cd "$(dirname "$0")" && pwd)
	small=() readers=16
	if [ -n "${SMALL:-}" ]; then
		small=(--small) readers=2
	fi
	{
		date
		nproc
		uname -r
		cat /proc/sys/fs/fuse/max_pages_limit 2>/dev/null
		nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null
		# The daemon's CPU and lock profiles over node_scaling's phases, for go tool pprof.
		echo "== node_scaling.py (220 s at most)"
		AGG_W=${AGG_W:-1,8,16} MOUNT_ARGS="--cpuprofile $out/node_scaling.pprof" TRAIN=0 timeout 220 python3 "$here/node_scaling.py" "$dir" "${small[@]}"
		"$dir/bin/blockfs" unmount "${GPUW:-/tmp/gpuw2}/m" 2>/dev/null # cut short by its bound
		echo "== resnet_fed.py (100 s at most)"
		timeout 100 python3 "$here/resnet_fed.py" "$dir"
		echo "== fuse_uring.sh 1 $readers, READS=6, dev against dev-clone (90 s at most)"
		(cd "$here/.." && BLOCKFS="$dir/bin/blockfs" FUSEURING="$dir/bin/fuseuring" WORK=/tmp/fuse_uring READS=6 \
			VARIANTS="dev dev-clone blockfs" SERVER_READERS=8 timeout 90 bench/fuse_uring.sh 1 "$readers")
		echo "== fuse_options.sh 2 $readers: go-fuse's request readers (70 s at most)"
		(cd "$here/.." && BLOCKFS="$dir/bin/blockfs" WORK=/tmp/fuse_uring \
			timeout 70 bench/fuse_options.sh 2 "$readers" "" "--fuse-readers 4" "--fuse-readers 8")
		echo "== fuse_options.sh 2 $readers, dd iflag=direct: O_DIRECT readers, no page cache (40 s at most)"
		(cd "$here/.." && BLOCKFS="$dir/bin/blockfs" WORK=/tmp/fuse_uring DDCPU_DD=iflag=direct \
			timeout 40 bench/fuse_options.sh 2 "$readers" "" "--fuse-readers 8")
		echo "== BenchmarkPopulateTogether: new buffers of 8 and 16 clients at once, filled with MADV_POPULATE_WRITE or _READ (30 s at most)"
		timeout 30 "$dir/bin/fs.test" -test.run '^$' -test.bench 'PopulateTogether/buffers=(8|16)$' -test.benchtime 3x
		date
	} 2>&1 | tee "$log"
	;;
esac
