#!/bin/sh
# Renders `blockfs stats` as a person sees it: TestStatsUnderTmux runs it in a tmux window of
# 100x24 while two readers read, and captures the pane (tmux capture-pane) into FILE
# (default docs/stats-screen.txt). Needs root (or fusermount3) and tmux.
set -e
out=$(realpath -m "${1:-docs/stats-screen.txt}")
cd "$(dirname "$0")/.."
BLOCKFS_STATS_SCREEN="$out" go test -count=1 -run 'TestStatsUnderTmux$' ./test/ >/dev/null
echo "$out"
