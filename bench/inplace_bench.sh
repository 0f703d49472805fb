#!/usr/bin/env bash
# Usage: bench/inplace_bench.sh ROUNDS BLOCKFS [WORK]
#
# WebDataset shards served in place against the same samples packed, cold (the page cache
# dropped before each measurement; run as root). The shards are GIB GiB (default 2) of samples
# of a jpg of 64-192 KiB of random bytes and a cls, written by Python's tarfile in shards of
# 128 MiB. ROUNDS rounds of the disk's sequential rate, read buffered (cat of every shard) and
# direct (dd iflag=direct bs=4M, as index reads), against blockfs index of the shards (every
# byte read and summed), the three in rotating order (on this VM a buffered read right after a
# direct one runs at half speed: the host's cache); then ROUNDS rounds of
# a new epoch (one not read before) of each mount, every field read whole (cat of .jpg then
# .cls), the in-place mount and the packed one with the same --cache-size (MEM, default 512MiB,
# below the data's size, so every epoch reads the disk), in alternating order.
# Each measurement waits 2 s after a sync (the mounts settle) and drops the page cache.
# It prints each round's figures and the medians of the ratios index/disk (rates) and
# in-place/packed (rates).
set -euo pipefail
rounds=$1; bin=$(realpath "$2"); work=${3:-build/inplace}; gib=${GIB:-2}; mem=${MEM:-512MiB}
mkdir -p "$work"; work=$(realpath "$work")
if [ ! -f "$work/shards/.done-$gib" ]; then
	rm -rf "$work/shards"; mkdir -p "$work/shards"
	/usr/bin/python3 - "$work/shards" "$gib" <<'PY'
import io, os, random, sys, tarfile
out, gib = sys.argv[1], int(sys.argv[2])
random.seed(4)
total, s, k = 0, 0, 0
while total < gib << 30:
    with tarfile.open(os.path.join(out, "shard-%05d.tar" % s), "w") as t:
        size = 0
        while size < 128 << 20:
            data = os.urandom(random.randint(64 << 10, 192 << 10))
            for ext, v in (("jpg", data), ("cls", str(k % 1000).encode())):
                ti = tarfile.TarInfo("%08d.%s" % (k, ext)); ti.size = len(v)
                t.addfile(ti, io.BytesIO(v))
            size += len(data); k += 1
    total += size; s += 1
open(os.path.join(out, ".done-%d" % gib), "w").close()
PY
fi
rm -rf "$work/packed"; "$bin" pack --quiet "$work/shards" "$work/packed"
"$bin" index --force "$work/shards" "$work/idx" >/dev/null
mkdir -p "$work/m-in" "$work/m-pk"
"$bin" mount --daemon --cache-size "$mem" "$work/idx" "$work/m-in"
"$bin" mount --daemon --cache-size "$mem" "$work/packed" "$work/m-pk"
trap 'fusermount -u "$work/m-in"; fusermount -u "$work/m-pk"' EXIT

now() { date +%s.%N; }
cold() { sync; sleep 2; echo 3 >/proc/sys/vm/drop_caches; }
timed() { local t0; cold; t0=$(now); "$@" >/dev/null; echo "$(now) - $t0" | bc -l; }
epoch() { cat "$1/epoch-$(printf %04d "$2").jpg" "$1/epoch-$(printf %04d "$2").cls"; }
bytes=$(du -cb "$work"/shards/*.tar | tail -1 | cut -f1)
ri=(); rd=(); re=()
direct() { for f in "$work"/shards/*.tar; do dd if="$f" of=/dev/null bs=4M iflag=direct status=none; done; }
for ((r = 0; r < rounds; r++)); do # the index against the disk, read buffered (cat) and direct (dd)
	for k in 0 1 2; do
		case $(((r + k) % 3)) in
		0) d=$(timed cat "$work"/shards/*.tar) ;;
		1) dd_=$(timed direct) ;;
		2) i=$(timed "$bin" index --force "$work/shards" "$work/idx2") ;;
		esac
	done
	ri+=("$(echo "$d / $i" | bc -l)"); rd+=("$(echo "$dd_ / $i" | bc -l)")
	printf 'round %d: cat %.2f s (%.0f MB/s), dd iflag=direct bs=4M %.2f s (%.0f MB/s), index %.2f s (%.0f MB/s): %.3f of cat, %.3f of dd\n' \
		"$r" "$d" "$(echo "$bytes / $d / 1000000" | bc -l)" "$dd_" "$(echo "$bytes / $dd_ / 1000000" | bc -l)" \
		"$i" "$(echo "$bytes / $i / 1000000" | bc -l)" "${ri[-1]}" "${rd[-1]}"
done
for ((r = 0; r < rounds; r++)); do # a new epoch in place against packed
	if ((r % 2 == 0)); then
		a=$(timed epoch "$work/m-in" $r); p=$(timed epoch "$work/m-pk" $r)
	else
		p=$(timed epoch "$work/m-pk" $r); a=$(timed epoch "$work/m-in" $r)
	fi
	re+=("$(echo "$p / $a" | bc -l)")
	printf 'round %d: epoch %d in place %.2f s, packed %.2f s: %.3f\n' "$r" "$r" "$a" "$p" "${re[-1]}"
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
printf 'median of %d rounds, %.2f GB of shards: index/cat rate %.3f, index/dd-direct rate %.3f; new epoch in place/packed rate %.3f\n' \
	"$rounds" "$(echo "$bytes / 1000000000" | bc -l)" "$(median "${ri[@]}")" "$(median "${rd[@]}")" "$(median "${re[@]}")"
rm -rf "$work/idx2"
