#!/usr/bin/env bash
# Installs Azurite, the Azure Blob Storage emulator that the az:// tests (test/azure_test.go)
# run against, with Microsoft's JavaScript SDK (@azure/storage-blob) that they use as a client
# independent of blockfs's, once per machine from npm's registry, and prints the directory.
# Both are test-time tools only (MIT), never linked into blockfs. Azurite 3.33 is the last that
# runs on Node 20. The install takes about 30 seconds; it stays in BLOCKFS_AZURITE_DIR
# (default /var/cache/blockfs/azurite, or ~/.cache/blockfs/azurite when that is not writable).
set -euo pipefail
VERSION="azurite@3.33.0 @azure/storage-blob@12.26.0"
dir=${BLOCKFS_AZURITE_DIR:-/var/cache/blockfs/azurite}
if ! mkdir -p "$dir" 2>/dev/null || [ ! -w "$dir" ]; then
	dir=${XDG_CACHE_HOME:-$HOME/.cache}/blockfs/azurite
	mkdir -p "$dir"
fi
exec 9>"$dir/.lock"
flock 9
if [ -x "$dir/node_modules/.bin/azurite-blob" ] && [ "$(cat "$dir/version" 2>/dev/null)" = "$VERSION" ]; then
	echo "$dir"
	exit 0
fi
echo "installing $VERSION into $dir (once per machine)" >&2
# shellcheck disable=SC2086
npm install --no-audit --no-fund --prefix "$dir" $VERSION >&2
echo "$VERSION" >"$dir/version"
echo "$dir"
