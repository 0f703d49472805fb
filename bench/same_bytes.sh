#!/usr/bin/env bash
# Usage: bench/same_bytes.sh OLD_BLOCKFS NEW_BLOCKFS [MINIO]
#
# Checks that two blockfs binaries serve the same bytes: for a packed dataset of fixed-size
# records, one of variable-length records, a raw file in place, windows over a .npy with
# segments, a mixture of two sources, a dataset with fields (a WebDataset written by Python's
# tarfile), a node's part of a node-aware mount, --verify, compressed packs (alone, under
# windows, in a node's parts), WebDataset shards served in place and (with MINIO, a MinIO
# server binary) a packed dataset in an object store, raw and compressed, it mounts the data with each binary under the same
# options and compares the SHA-256 of epochs 0 and 1 and a shard's epoch 2, with every
# sidecar of each (.ids, .offsets, .source, the fields' files). A refactoring that must not change
# the order (docs/SHUFFLE.md) is checked with it against the release before it.
set -euo pipefail
old=$(realpath "$1"); new=$(realpath "$2"); minio=${3:-}
work=$(mktemp -d /tmp/blockfs-same-XXXXXX)
mnt=$work/mnt; mkdir -p "$mnt"
minio_pid=""
cleanup() {
	if grep -qs " $mnt " /proc/mounts; then "$new" unmount --lazy "$mnt" || true; fi
	[ -n "$minio_pid" ] && kill "$minio_pid" 2>/dev/null && wait "$minio_pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

# digest BIN DATA FLAGS...: the SHA-256 of the files a mount of DATA serves.
digest() {
	local bin=$1 data=$2; shift 2
	"$bin" mount --daemon --seed 7 "$@" "$data" "$mnt"
	(cd "$mnt" && sha256sum epoch-0000* epoch-0001* shard-1-of-3/epoch-0002*)
	"$bin" unmount "$mnt"
}

# same NAME DATA FLAGS...: fails unless both binaries serve the same bytes.
same() {
	local name=$1; shift
	local a b
	a=$(digest "$old" "$@"); b=$(digest "$new" "$@")
	if [ "$a" != "$b" ]; then
		echo "DIFFERENT: $name"; diff <(echo "$a") <(echo "$b") || true; exit 1
	fi
	echo "same: $name ($(echo "$a" | wc -l) files)"
}

head -c $((8 << 20)) /dev/urandom >"$work/fixed.bin"
"$old" pack --quiet --record-size 4KiB --block-size 256KiB "$work/fixed.bin" "$work/fixed"
same "packed, fixed-size records" "$work/fixed" --mix 2
same "packed, --shuffle blocks" "$work/fixed" --shuffle blocks
/usr/bin/python3 - "$work" <<'EOF'
import json, random, sys
import numpy as np
w = sys.argv[1]
rnd = random.Random(1)
with open(f"{w}/lines.jsonl", "w") as f:
    for i in range(20000):
        f.write(json.dumps({"i": i, "pad": "x" * rnd.randrange(0, 300)}) + "\n")
np.save(f"{w}/rows.npy", np.arange(200000 * 3, dtype="<f4").reshape(200000, 3))
json.dump({"index_map": [{"start_row": 0, "end_row": 99999}, {"start_row": 100000, "end_row": 199999}]}, open(f"{w}/segments.json", "w"))
EOF
"$old" pack --quiet --block-size 256KiB "$work/lines.jsonl" "$work/lines"
same "packed, variable-length records" "$work/lines" --mix 3
same "raw file in place" "$work/fixed.bin" --record-size 4KiB --block-size 512KiB --mix 2
"$old" pack --quiet --no-shuffle --block-size 256KiB "$work/rows.npy" "$work/rows"
same "windows over a pack stored in order" "$work/rows" --window 16 --stride 5 --block-size 128KiB
same "windows over a .npy with segments" "$work/rows.npy" --window 64 --stride 3 --segments "$work/segments.json" --block-size 256KiB
cat >"$work/mixture.json" <<'MIX'
{"epoch_records": 30000, "sources": [{"data": "fixed", "weight": 2, "options": {"mix": 2}},
  {"data": "fixed.bin", "repeat": "1/2", "options": {"record_size": 4096, "block_size": "512KiB", "seed": 3}}]}
MIX
same "a mixture of a pack and a file in place" "$work/mixture.json"
/usr/bin/python3 - "$work" <<'EOF'
import io, random, sys, tarfile
w = sys.argv[1]
rnd = random.Random(2)
with tarfile.open(f"{w}/shard.tar", "w") as tar:
    for i in range(3000):
        for ext, data in (("jpg", rnd.randbytes(rnd.randrange(100, 3000))), ("cls", str(i % 10).encode())):
            info = tarfile.TarInfo(f"s{i:06d}.{ext}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
EOF
"$old" pack --quiet --block-size 256KiB "$work/shard.tar" "$work/fields"
same "a dataset with fields (WebDataset)" "$work/fields" --mix 2
"$old" pack --quiet --record-size 1KiB --block-size 64KiB "$work/fixed.bin" "$work/small"
same "a node's parts (--nodes 4 --node 1)" "$work/small" --nodes 4 --node 1 --parts 8
same "--verify" "$work/lines" --mix 3 --verify
"$old" pack --quiet --compress zstd --block-size 256KiB "$work/lines.jsonl" "$work/lines-z"
same "a compressed pack" "$work/lines-z" --mix 3
same "a compressed pack, --verify" "$work/lines-z" --verify
"$old" pack --quiet --compress zstd --no-shuffle --block-size 256KiB "$work/rows.npy" "$work/rows-z"
same "windows over a compressed pack" "$work/rows-z" --window 16 --stride 5 --block-size 128KiB
"$old" pack --quiet --compress zstd --block-size 64KiB "$work/lines.jsonl" "$work/small-z"
same "a node's parts of a compressed pack" "$work/small-z" --nodes 2 --node 1 --parts 4
mkdir -p "$work/shards" && cp "$work/shard.tar" "$work/shards/"
same "shards in place (WebDataset)" "$work/shards" --mix 2 --index "$work/shards-index"

if [ -n "$minio" ]; then
	port=$((20000 + RANDOM % 20000))
	export AWS_ACCESS_KEY_ID=blockfs AWS_SECRET_ACCESS_KEY=blockfs-secret AWS_REGION=us-east-1
	MINIO_BROWSER=off MINIO_ROOT_USER=$AWS_ACCESS_KEY_ID MINIO_ROOT_PASSWORD=$AWS_SECRET_ACCESS_KEY \
		"$minio" server "$work/minio" --address 127.0.0.1:$port --quiet >/dev/null 2>&1 &
	minio_pid=$!
	for _ in $(seq 60); do curl -sf "http://127.0.0.1:$port/minio/health/ready" && break; sleep 1; done
	mkdir -p "$work/minio/bucket"
	export AWS_ENDPOINT_URL=http://127.0.0.1:$port
	"$old" pack --quiet --record-size 4KiB --block-size 256KiB "$work/fixed.bin" s3://bucket/fixed
	same "s3:// packed dataset" s3://bucket/fixed --mix 2
	same "s3:// with a disk cache" s3://bucket/fixed --disk-cache "$work/dc"
	"$old" pack --quiet --compress zstd --block-size 256KiB "$work/lines.jsonl" s3://bucket/lines-z
	same "s3:// compressed, with a disk cache" s3://bucket/lines-z --disk-cache "$work/dcz"
fi
echo "all the same"
