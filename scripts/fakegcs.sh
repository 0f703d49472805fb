#!/usr/bin/env bash
# Builds fake-gcs-server, the Google Cloud Storage emulator that the gs:// tests
# (test/gcs_test.go) run against, once per machine, and prints the binary's path. It is a
# test-time server only (BSD-2-Clause), never linked into blockfs: an implementation of the
# JSON API independent of blockfs's client. The build takes about 3 minutes of a 2-vCPU VM;
# the binary stays in BLOCKFS_FAKE_GCS_DIR (default /var/cache/blockfs/fake-gcs-bin, or
# ~/.cache/blockfs/fake-gcs-bin when that is not writable) for every later run.
set -euo pipefail
VERSION=v1.52.3
dir=${BLOCKFS_FAKE_GCS_DIR:-/var/cache/blockfs/fake-gcs-bin}
if ! mkdir -p "$dir" 2>/dev/null || [ ! -w "$dir" ]; then
	dir=${XDG_CACHE_HOME:-$HOME/.cache}/blockfs/fake-gcs-bin
	mkdir -p "$dir"
fi
bin=$dir/fake-gcs-server
exec 9>"$dir/.lock"
flock 9 # two builds at once would each take both cores
if [ -x "$bin" ] && [ "$(cat "$dir/version" 2>/dev/null)" = "$VERSION" ]; then
	echo "$bin"
	exit 0
fi
echo "building fake-gcs-server $VERSION into $dir (once per machine, about 3 minutes)" >&2
GOBIN=$dir GOFLAGS=-mod=mod go install "github.com/fsouza/fake-gcs-server@$VERSION" >&2
echo "$VERSION" >"$dir/version"
echo "$bin"
