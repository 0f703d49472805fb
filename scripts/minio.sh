#!/usr/bin/env bash
# Builds the MinIO server that the object store tests (test/s3_*_test.go) run against, once per
# machine, and prints the binary's path. MinIO is a test-time server only (AGPLv3): it is never
# linked into blockfs. The build takes about 5 minutes and both cores of a 2-vCPU VM; the binary
# (150 MB) stays in BLOCKFS_MINIO_DIR (default /var/cache/blockfs/minio-bin, or
# ~/.cache/blockfs/minio-bin when that is not writable) for every later run.
set -euo pipefail
VERSION=v0.0.0-20260212201848-7aac2a2c5b7c # MinIO has no semver tags; this one builds with Go 1.26
dir=${BLOCKFS_MINIO_DIR:-/var/cache/blockfs/minio-bin}
if ! mkdir -p "$dir" 2>/dev/null || [ ! -w "$dir" ]; then
	dir=${XDG_CACHE_HOME:-$HOME/.cache}/blockfs/minio-bin
	mkdir -p "$dir"
fi
bin=$dir/minio
exec 9>"$dir/.lock"
flock 9 # two builds at once would each take both cores
if [ -x "$bin" ] && [ "$(cat "$dir/version" 2>/dev/null)" = "$VERSION" ]; then
	echo "$bin"
	exit 0
fi
echo "building MinIO $VERSION into $dir (once per machine, about 5 minutes)" >&2
GOBIN=$dir GOFLAGS=-mod=mod go install "github.com/minio/minio@$VERSION" >&2
echo "$VERSION" >"$dir/version"
echo "$bin"
