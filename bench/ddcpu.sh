# ddcpu.sh: sourced by the benchmarks of the FUSE path's daemon CPU (fuse_requests.sh,
# fuse_splice.sh, fuse_uring.sh, readers_cache.sh); not run on its own.

# ddcpu_data BIN WORK: packs WORK/img once with BIN, 588 MiB of 147 KiB records (224x224x3 uint8
# images of random bytes), the data of issue 50's figures.
ddcpu_data() {
	local bin=$1 work=$2
	[ -f "$work/img/blockfs.json" ] && return
	head -c $((4096 * 150528)) /dev/urandom >"$work/img.bin"
	"$bin" pack --quiet --format raw --record-size 150528 "$work/img.bin" "$work/img"
	rm "$work/img.bin"
}

# since T0 T1: the seconds from T0 to T1 (date +%s.%N), with awk (a GPU machine may lack bc).
since() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6f\n", b - a }'; }

# cputicks PID: the process's CPU time so far (utime + stime of /proc/PID/stat), in clock ticks.
cputicks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# cpurate LABEL TICKS SECONDS BYTES: prints LABEL with TICKS of a daemon's CPU per GiB of the
# BYTES read in SECONDS, and their rate.
cpurate() {
	python3 -c "import sys; c, t, g = float(sys.argv[2]) / int(sys.argv[5]), float(sys.argv[3]), int(sys.argv[4]) / 2**30
print('%s daemon %.3f CPU s/GiB, %.2f GiB/s' % (sys.argv[1], c / g, g / t))" "$@" "$(getconf CLK_TCK)"
}

# waitall PID...: waits for every one of the processes; fails if any of them failed (wait with
# several PIDs returns the last one's status only).
waitall() {
	local p rc=0
	for p in "$@"; do wait "$p" || rc=1; done
	return $rc
}

# same KEY VALUE WHAT: the first VALUE given for KEY is the one every later one must equal;
# otherwise the run fails, saying WHAT (to check that variants serve the same bytes).
declare -A first
same() {
	if [ -z "${first[$1]:-}" ]; then
		first[$1]=$2
	elif [ "$2" != "${first[$1]}" ]; then
		echo "$(basename "$0"): $3" >&2
		exit 1
	fi
}

# ddcpu_epoch MNT E: dd bs=1M of epoch E of the mount at MNT; with DDCPU_READERS=N above 1, of
# its N shards at once (shard-R-of-N/epoch-E), one dd each. DDCPU_DD: more operands for each dd
# (iflag=direct: the reads answered straight into dd's buffer, no page cache).
ddcpu_epoch() {
	local mnt=$1 name n=${DDCPU_READERS:-1} r pids=()
	name=$(printf 'epoch-%04d' "$2")
	if [ "$n" -le 1 ]; then
		# shellcheck disable=SC2086 # DDCPU_DD is words
		dd if="$mnt/$name" of=/dev/null bs=1M status=none ${DDCPU_DD:-}
		return
	fi
	for r in $(seq 0 $((n - 1))); do
		# shellcheck disable=SC2086
		dd if="$mnt/shard-$r-of-$n/$name" of=/dev/null bs=1M status=none ${DDCPU_DD:-} &
		pids+=($!)
	done
	waitall "${pids[@]}"
}

# ddcpu LABEL EPOCHS BIN DATA [VAR=VALUE...]: mounts DATA with BIN (the daemon started with
# the variables given), reads epoch 0 with dd bs=1M (the cache warmed), then epochs 1 to
# EPOCHS (ddcpu_epoch: DDCPU_READERS readers at once; DDCPU_ARGS: more options for the
# mount), and prints LABEL with the daemon's CPU seconds per GiB over them (utime + stime of
# /proc/PID/stat) and their rate, and the time its drop-behind took per GiB (stats.json's
# page_cache_drop_seconds: at one worker's 1 s per second it is behind) and the drops it
# skipped (a binary older than those keys: "-"). With DDCPU_SUM set, DDCPU_SUM becomes the md5 of epoch 1 as
# the mount served it (to compare builds).
ddcpu() {
	local label=$1 epochs=$2 bin=$3 data=$4 mnt pid sz c0 c1 t0 t1 ep d0 d1
	shift 4
	mnt=$(mktemp -d)
	# shellcheck disable=SC2086 # DDCPU_ARGS is words
	env "$@" "$bin" mount --daemon ${DDCPU_ARGS:-} "$data" "$mnt"
	pid=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['daemon_pid'])" "$mnt/.blockfs/stats.json")
	dd if="$mnt/epoch-0000" of=/dev/null bs=1M status=none
	sz=$(stat -c %s "$mnt/epoch-0000")
	d0=$(dropstat "$mnt")
	c0=$(cputicks "$pid")
	t0=$(date +%s.%N)
	for ep in $(seq "$epochs"); do ddcpu_epoch "$mnt" "$ep"; done
	t1=$(date +%s.%N)
	c1=$(cputicks "$pid")
	sleep 0.5 # the drops of the last chunks, queued as the reads ended
	d1=$(dropstat "$mnt")
	if [ -n "${DDCPU_SUM+set}" ]; then
		DDCPU_SUM=$(md5sum <"$mnt/epoch-0001")
	fi
	"$bin" unmount "$mnt"
	rmdir "$mnt"
	cpurate "$label" "$((c1 - c0))" "$(since "$t0" "$t1")" "$((epochs * sz))" | tr -d '\n'
	python3 -c "import sys; a, b, g = sys.argv[1].split(), sys.argv[2].split(), int(sys.argv[3]) / 2**30
print('; drops -' if '-' in a + b else '; drops %.3f s/GiB, %d skipped' % ((float(b[0]) - float(a[0])) / g, int(b[1]) - int(a[1])))" \
		"$d0" "$d1" "$((epochs * sz))"
}

# dropstat MNT: stats.json's page_cache_drop_seconds and page_cache_drops_skipped ("- -"
# from a binary without them).
dropstat() {
	python3 -c "import json, sys; s = json.load(open(sys.argv[1]))
print(s.get('page_cache_drop_seconds', '-'), s.get('page_cache_drops_skipped', '-'))" "$1/.blockfs/stats.json"
}
