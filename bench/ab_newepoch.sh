#!/bin/sh
# A/B of binaries on the steady state: prints the dd bs=1M rates (GB/s) of three new epochs of
# build/bench/ds-ss (make bench's 1 GiB of 4 KiB records) mounted by blockfs binary $1 with
# default flags, after a warm-up epoch. Run it alternately with two binaries (as root).
set -eu
B=$1
M=$(mktemp -d)
"$B" mount --daemon --seed 1 "$(dirname "$0")/../build/bench/ds-ss" "$M"
cat "$M/epoch-0000" >/dev/null
out=""
for e in 1 2 3; do
	out="$out $(dd if="$M/epoch-000$e" of=/dev/null bs=1M 2>&1 | tail -1 | awk '{print $(NF-1)}')"
done
"$B" unmount "$M"
rmdir "$M"
echo "$(basename "$B"):$out"
