#!/bin/bash
# device.sh prep DIR | device.sh run DIR: issue 50's many-core checks as one prepared script,
# for a session lent a many-core GPU machine (its run tool: a copy of the checkout, 10 minutes a
# command, 15 of device time in all, so the checks are bounded to fit one command).
#
#   prep (here, with Go): DIR/bin gets static builds (CGO_ENABLED=0) of blockfs, loopback and
#        fuseuring, DIR/py a copy of python/blockfs. Make DIR inside the checkout where git
#        ignores it (build/device), so that the run tool can carry it (under 64 MiB).
#   run  (there, as root): node_scaling.py DIR (each process count's aggregate against the
#        in-process gather, the steady state, dd readers), resnet_fed.py DIR (ResNet-18 fed by
#        the Loader against its ceiling), then fuse_uring.sh 2 16 (16 dd readers: /dev/fuse
#        against FUSE over io_uring's queue per CPU, and blockfs's 16 shards), each within a
#        bound of its own; everything it prints is also in $OUT/device.log when $OUT is set.
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
	rm -rf "$dir/py/blockfs"
	cp -r python/blockfs "$dir/py/blockfs"
	find "$dir/py" -name __pycache__ -prune -exec rm -rf {} +
	du -sh "$dir"
	;;
run)
	dir=$(cd "$dir" && pwd)
	log=${OUT:-/tmp}/device.log
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
		echo "== node_scaling.py (240 s at most)"
		timeout 240 python3 "$here/node_scaling.py" "$dir" "${small[@]}"
		echo "== resnet_fed.py (150 s at most)"
		timeout 150 python3 "$here/resnet_fed.py" "$dir"
		echo "== fuse_uring.sh 2 $readers (150 s at most)"
		(cd "$here/.." && BLOCKFS="$dir/bin/blockfs" FUSEURING="$dir/bin/fuseuring" WORK=/tmp/fuse_uring \
			timeout 150 bench/fuse_uring.sh 2 "$readers")
		date
	} 2>&1 | tee "$log"
	;;
esac
