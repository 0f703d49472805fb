#!/usr/bin/env bash
# Fails on a function that no build of the blockfs command reaches: golang.org/x/tools'
# deadcode (go.mod's tool), over the plain build and the one with Parquet and Arrow
# (-tags tables); a function either reaches is alive. Tests are not roots: what only tests
# use belongs in a _test.go file (export_test.go for another package's tests).
set -euo pipefail
cd "$(dirname "$0")/.."
go=${GO:-go}
plain=$("$go" tool deadcode ./cmd/blockfs | sort)
tables=$("$go" tool deadcode -tags tables ./cmd/blockfs | sort)
dead=$(comm -12 <(printf '%s\n' "$plain") <(printf '%s\n' "$tables") | sed '/^$/d')
if [ -n "$dead" ]; then
	printf '%s\n' "$dead"
	echo "deadcode: the functions above are reached by no build of blockfs: remove them, or move what only tests use into a _test.go file" >&2
	exit 1
fi
