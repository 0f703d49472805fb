#!/usr/bin/env bash
# Usage: bench/ab.sh ROUNDS BIN_A BIN_B [WORK]    (as root: it drops the page cache)
#
# An A/B of two blockfs binaries on make bench's main rows, alternated: each round runs every
# row with A then B, or B then A on odd rounds (the order of runs moves a rate on a shared
# machine). Rows, in MB/s of an epoch never read before by that mount:
#   steady   1 GiB of 4 KiB records packed, page cache warm, after one warm-up epoch: dd bs=1M
#   python   the same mount, the next epoch read by Python f.read(4096) per record
#   cold     the same data, page cache dropped, a fresh mount: dd bs=1M
#   small16  256 MiB of 16 B records served in place, warm, after a warm-up epoch: dd bs=1M
#   vlines   256 MiB of variable-length lines packed, warm, after a warm-up epoch: dd bs=1M
# It prints one line per row and binary with every round's rate and the median, then the
# median of the per-round ratios B/A. ROWS="steady vlines" runs only those rows.
set -euo pipefail
rounds=$1; A=$(realpath "$2"); B=$(realpath "$3"); work=${4:-build/ab}
mkdir -p "$work"; work=$(realpath "$work")
mnt=$work/mnt; mkdir -p "$mnt"
py=/usr/bin/python3
cleanup() { grep -qs " $mnt " /proc/mounts && "$A" unmount --lazy "$mnt" || true; }
trap cleanup EXIT

[ -f "$work/4k.bin" ] || head -c $((1 << 30)) /dev/urandom >"$work/4k.bin"
[ -d "$work/4k" ] || "$A" pack --quiet --record-size 4KiB "$work/4k.bin" "$work/4k" >/dev/null
[ -f "$work/16.bin" ] || head -c $((256 << 20)) /dev/urandom >"$work/16.bin"
[ -f "$work/lines.txt" ] || $py -c "
import random, sys
r = random.Random(1)
with open(sys.argv[1], 'w') as f:
    n = 0
    while n < 256 << 20:
        s = 'x' * r.randrange(0, 512) + '\n'; f.write(s); n += len(s)
" "$work/lines.txt"
[ -d "$work/lines" ] || "$A" pack --quiet "$work/lines.txt" "$work/lines" >/dev/null

mbps() { # dd's rate of a file, MB/s
	dd if="$1" of=/dev/null bs=1M 2>&1 | tail -1 | awk '{printf "%d", $1 / $(NF-3) / 1e6}'
}
pyread() { # Python f.read(4096) per record, MB/s
	$py -c "
import sys, time
t = time.perf_counter(); n = 0
with open(sys.argv[1], 'rb') as f:
    while True:
        b = f.read(4096)
        if not b: break
        n += len(b)
print(int(n / (time.perf_counter() - t) / 1e6))" "$1"
}
row() { # row NAME BIN: prints the row's rate for BIN
	local name=$1 bin=$2 r
	case $name in
	steady) "$bin" mount --daemon --seed 1 "$work/4k" "$mnt"; cat "$mnt/epoch-0000" >/dev/null; r=$(mbps "$mnt/epoch-0001") ;;
	python) "$bin" mount --daemon --seed 1 "$work/4k" "$mnt"; cat "$mnt/epoch-0000" >/dev/null; r=$(pyread "$mnt/epoch-0002") ;;
	cold) sync; echo 3 >/proc/sys/vm/drop_caches; "$bin" mount --daemon --seed 1 "$work/4k" "$mnt"; r=$(mbps "$mnt/epoch-0003") ;;
	small16) "$bin" mount --daemon --seed 1 --record-size 16 "$work/16.bin" "$mnt"; cat "$mnt/epoch-0000" >/dev/null; r=$(mbps "$mnt/epoch-0001") ;;
	vlines) "$bin" mount --daemon --seed 1 "$work/lines" "$mnt"; cat "$mnt/epoch-0000" >/dev/null; r=$(mbps "$mnt/epoch-0001") ;;
	esac
	"$bin" unmount "$mnt"
	echo "$r"
}
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

for name in ${ROWS:-steady python cold small16 vlines}; do
	ra="" rb="" ratios=""
	for i in $(seq "$rounds"); do
		if [ $((i % 2)) -eq 1 ]; then a=$(row $name "$A"); b=$(row $name "$B"); else b=$(row $name "$B"); a=$(row $name "$A"); fi
		ra="$ra $a"; rb="$rb $b"; ratios="$ratios $(awk -v a="$a" -v b="$b" 'BEGIN{printf "%.3f", b/a}')"
	done
	printf '%-8s A %-28s median %s\n' "$name" "$ra" "$(echo $ra | median)"
	printf '%-8s B %-28s median %s\n' "$name" "$rb" "$(echo $rb | median)"
	printf '%-8s B/A per round:%s  median %s\n' "$name" "$ratios" "$(echo $ratios | median)"
done
