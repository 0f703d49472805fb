#!/bin/bash
# fuse_requests.sh ROUNDS: what larger FUSE read requests give where the kernel allows them.
# blockfs asks go-fuse for 1 MiB requests (fs.MountOptions' MaxWrite); the kernel caps a
# request at /proc/sys/fs/fuse/max_pages_limit pages (256 = 1 MiB by default; root may raise
# it). This script builds the checkout three times into $WORK (default /tmp/fuse_requests),
# with MaxWrite 1, 4 and 16 MiB, the kernel's readahead on the mount at twice that (at least
# 4 MiB), and the heap's soft limit raised by 40 requests' worth (go-fuse allocates a buffer
# of MaxWrite for each request reader and each read: below that the collector runs without
# end), raises max_pages_limit to 4096 for the run (restored on exit), and prints, round
# after round with the order rotated, the daemon's CPU seconds per GiB (utime + stime of
# /proc/PID/stat) and the rate of `dd bs=1M` of three new epochs each, a 588 MiB pack of
# 147 KiB records in the daemon's cache. Root only. Run from the checkout's root.
set -euo pipefail
. "$(dirname "$0")/ddcpu.sh"
rounds=${1:-3}
work=${WORK:-/tmp/fuse_requests}
[ "$(id -u)" = 0 ] || { echo "fuse_requests.sh: run as root (it raises max_pages_limit)" >&2; exit 2; }
mkdir -p "$work"
limit=/proc/sys/fs/fuse/max_pages_limit
old_limit=$(cat "$limit")
trap 'echo "$old_limit" >"$limit"' EXIT
echo 4096 >"$limit"
for mib in 1 4 16; do
	src="$work/src$mib"
	rm -rf "$src" && mkdir -p "$src"
	git archive HEAD | tar -x -C "$src"
	python3 - "$src" "$mib" <<'EOF'
import sys
src, mib = sys.argv[1], int(sys.argv[2])
def edit(path, old, new):
    p = f"{src}/{path}"; s = open(p).read()
    if old not in s:
        sys.exit(f"fuse_requests.sh: {path} no longer has {old!r}: update the script")
    open(p, "w").write(s.replace(old, new))
edit("fs/mount.go", "MaxWrite:   1 << 20,", f"MaxWrite:   {mib} << 20,")
edit("fs/mount.go", '[]byte("4096")', f'[]byte("{max(4096, 2048 * mib)}")')
edit("mount/serve.go", "+ p.mem.Decode)", f"+ p.mem.Decode + 40*{mib}<<20)")
EOF
	(cd "$src" && go build -o "$work/blockfs-$mib" ./cmd/blockfs)
done
ddcpu_data "$work/blockfs-1" "$work"
one() { ddcpu "$(printf 'requests %2d MiB:' "$1")" 3 "$work/blockfs-$1" "$work/img"; }
sizes=(1 4 16)
for r in $(seq "$rounds"); do
	echo "round $r"
	for i in 0 1 2; do one "${sizes[$(((i + r) % 3))]}"; done
done
