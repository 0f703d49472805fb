#!/usr/bin/env bash
# Usage: bench/web_open.sh BIN_A BIN_B [ROUNDS] [DELAY]
#
# How long opening a dataset on a far web server takes: two datasets (985 fixed-size blocks
# with their ids files; 171 variable blocks with their offsets) packed into a directory that
# bench/slowweb serves with DELAY (default 20ms) before each answer, and `blockfs info URL` of
# both timed with each binary, the order alternated each round (default 3 rounds).
set -euo pipefail
A=$1 B=$2 ROUNDS=${3:-3} DELAY=${4:-20ms}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'kill $srv 2>/dev/null || true; rm -rf "$work"' EXIT
go build -o "$work/slowweb" "$here/slowweb"
head -c 64000000 /dev/urandom > "$work/rand.bin"
awk 'BEGIN{for(i=0;i<300000;i++) printf "line %d %s\n", i, substr("abcdefghijklmnopqrstuvwxyz0123456789", 1, i%36)}' > "$work/lines.txt"
mkdir -p "$work/www"
"$A" pack --quiet --format raw --record-size 1000 --block-size 64KiB "$work/rand.bin" "$work/www/fixed"
"$A" pack --quiet --block-size 64KiB "$work/lines.txt" "$work/www/lines"
port=$((20000 + RANDOM % 20000))
"$work/slowweb" -dir "$work/www" -addr "127.0.0.1:$port" -delay "$DELAY" &
srv=$!
sleep 1
one() {
	local s e
	s=$(date +%s.%N)
	"$1" info "http://127.0.0.1:$port/fixed" > /dev/null
	"$1" info "http://127.0.0.1:$port/lines" > /dev/null
	e=$(date +%s.%N)
	echo "$e - $s" | bc
}
ta=() tb=()
for r in $(seq 1 "$ROUNDS"); do
	if (( r % 2 )); then ta+=("$(one "$A")"); tb+=("$(one "$B")"); else tb+=("$(one "$B")"); ta+=("$(one "$A")"); fi
done
echo "A $A: ${ta[*]} s"
echo "B $B: ${tb[*]} s"
