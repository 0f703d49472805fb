package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/blockfs/blockfs/internal/fuseread"
	"github.com/blockfs/blockfs/internal/userfile"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/mount"
	"github.com/blockfs/blockfs/mount/daemon"
	"github.com/blockfs/blockfs/shuffle"
)

// mountFacts is what order and info read from a mountpoint's .blockfs/info.json: the data the
// mount serves, the flags that opened it, and its order options.
type mountFacts struct {
	Dir       string   `json:"-"`
	OpenData  string   `json:"open_data"`
	OpenFlags []string `json:"open_flags"`
	Seed      uint64   `json:"seed"`
	Shuffle   string   `json:"shuffle"`
	Mix       int      `json:"mix"`
	// OrderVersion is 0 in the info.json of a blockfs from before order versions: version 1.
	OrderVersion int    `json:"order_version"`
	Records      uint64 `json:"records"`
	Mixture      any    `json:"mixture"` // set for a mixture's mount
	// Sources are a mixture's sources' orders as the mount serves them.
	Sources []sourceOrder `json:"sources"`
}

// sourceOrder is a mixture's source's order in its mount's info.json.
type sourceOrder struct {
	Seed         uint64 `json:"seed"`
	Shuffle      string `json:"shuffle"`
	Mix          int    `json:"mix"`
	OrderVersion int    `json:"order_version"`
}

// orderVersion returns the order version an info.json's order_version v names: 0 is a mount of
// a blockfs from before order versions, which served version 1.
func orderVersion(v int) string { return strconv.Itoa(max(shuffle.Version1, v)) }

// maxInfoBytes bounds a mountpoint's .blockfs/info.json: 2 KiB a dataset, 1.7 KiB more a
// source of a mixture (at most shuffle.MaxSources, each with up to three 4 KiB paths: 55 MiB),
// 1 KiB more a field (each needs 4 MiB of cache). The Python package reads it within the same
// bound (MAX_INFO_FILE).
const maxInfoBytes = 64 << 20

// mountAnswerTime is how long a command waits for a mount's daemon to answer one request (a
// look-up, an open, a read of info.json, stats.json or an .ids file) before it gives up on the
// mount, saying so: a daemon that is stopped, hung or deadlocked never answers.
const mountAnswerTime = 5 * time.Second

// readMountpoint reads the facts of the blockfs mount at dir; ok is false when dir is not one
// (no .blockfs/info.json). A directory with an info.json that is not a live blockfs mount (a
// fuse.blockfs mount at dir in /proc/self/mountinfo) is refused: anyone can write such a file,
// and its open_data and open_flags would name what order and info open (a FIFO, /dev/zero).
// The file itself must be a regular file of at most maxInfoBytes. Everything under dir is
// touched through internal/fuseread: a mount that does not answer within mountAnswerTime is
// an error naming it, and never holds up Ctrl-C.
func readMountpoint(dir string) (m *mountFacts, ok bool, err error) {
	ctx := context.Background()
	mnt, err := blockfsMountAt(ctx, dir)
	if err != nil {
		return nil, true, err
	}
	if mnt == "" {
		path := filepath.Join(dir, mount.MetaDir, mount.InfoName)
		var has bool
		if err := fuseread.Do(ctx, mountAnswerTime, func() error { _, err := os.Lstat(path); has = err == nil; return nil }); err != nil {
			return nil, true, noAnswer(dir, "a look-up of "+path, err)
		}
		if !has {
			return nil, false, nil
		}
		return nil, true, fmt.Errorf("%s has a %s/%s but is not a blockfs mount (no fuse.blockfs mount there in /proc/self/mountinfo); name the dataset, or the mount point of a live mount",
			dir, mount.MetaDir, mount.InfoName)
	}
	data, err := fuseread.ReadFile(ctx, filepath.Join(mnt, mount.MetaDir, mount.InfoName), maxInfoBytes, mountAnswerTime)
	if err != nil {
		if errors.Is(err, fuseread.ErrTimeout) {
			return nil, true, noAnswer(mnt, "a read of its "+mount.MetaDir+"/"+mount.InfoName, err)
		}
		return nil, true, fmt.Errorf("%s: cannot read its %s/%s: %v", dir, mount.MetaDir, mount.InfoName, userfile.PathCause(err))
	}
	m = &mountFacts{Dir: dir}
	if err := json.Unmarshal(data, m); err != nil {
		return nil, true, fmt.Errorf("%s: cannot read its .blockfs/info.json: %v", dir, err)
	}
	if m.OpenData == "" {
		return nil, true, fmt.Errorf("%s is mounted by an older blockfs that does not say how it opened its data; name the dataset instead", dir)
	}
	return m, true, nil
}

// blockfsMountAt returns where the blockfs mount at dir is (absolute, symlinks resolved), or
// "" when dir is not one: the topmost mount there is a fuse.blockfs one in
// /proc/self/mountinfo. A mount point named as it is needs no look-up under it; a path with
// symlinks is resolved through fuseread (it may pass through a mount that does not answer).
func blockfsMountAt(ctx context.Context, dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if daemon.IsBlockfsMountpoint(abs) {
		return abs, nil
	}
	var real string
	err = fuseread.Do(ctx, mountAnswerTime, func() error {
		var err error
		real, err = filepath.EvalSymlinks(abs)
		return err
	})
	if errors.Is(err, fuseread.ErrTimeout) || ctx.Err() != nil {
		return "", noAnswer(dir, "a look-up of "+abs, err)
	}
	if err != nil || !daemon.IsBlockfsMountpoint(real) {
		return "", nil
	}
	return real, nil
}

// noAnswer returns the error for a request to the mount at mnt (what) that has not answered:
// err is fuseread's. It names the mount and, where the registry knows it, its daemon and
// whether it is stopped. It returns err as it is when err is not one of not answering, and
// nil for nil.
func noAnswer(mnt, what string, err error) error {
	if !errors.Is(err, fuseread.ErrTimeout) {
		return err
	}
	who, hint := "its daemon", fmt.Sprintf("if it stays so, detach it: blockfs unmount --lazy %s", mnt)
	if pid, stopped := daemon.Daemon(mnt); pid > 0 {
		who = fmt.Sprintf("its daemon (pid %d)", pid)
		if stopped {
			who += ", which is stopped,"
			hint = fmt.Sprintf("resume it (kill -CONT %d), or detach the mount (blockfs unmount --lazy %s)", pid, mnt)
		}
	}
	return fmt.Errorf("%s does not answer: %s gave no answer to %s in %v; %s", mnt, who, what, mountAnswerTime, hint)
}

// inPlace returns the in-place and window flags the mount was started with.
func (m *mountFacts) inPlace() (inPlaceFlags, error) {
	var f inPlaceFlags
	fl := pflag.NewFlagSet("mount", pflag.ContinueOnError)
	fl.SetOutput(io.Discard)
	f.register(fl)
	if err := fl.Parse(m.OpenFlags); err != nil {
		return f, fmt.Errorf("%s: its info.json has flags this blockfs does not know (%v); name the dataset instead", m.Dir, err)
	}
	return f, nil
}

// refuseOrderFlags refuses order flags that would contradict a mount's own order.
func (m *mountFacts) refuseOrderFlags(fl *pflag.FlagSet) error {
	for _, name := range []string{"seed", "shuffle", "mix", "order-version", "record-size", "block-size", "offset", "records", "window", "stride", "segments"} {
		if f := fl.Lookup(name); f != nil && f.Changed {
			return usagef("--%s: %s is a mount, whose order its own options fix (seed %d, shuffle %s, mix %d); drop --%s, or name the dataset (%s) to compute another order",
				name, m.Dir, m.Seed, m.Shuffle, m.Mix, name, m.OpenData)
		}
	}
	return nil
}

// copyMountIDs prints the ids of an epoch (or of shard "R/W" of it) of the mount at dir, one
// per line, read from the mount's own .ids file through fuseread (each read bounded by
// mountAnswerTime).
func copyMountIDs(dir string, epoch uint64, shard string) error {
	var sh mount.Shard
	if shard != "" {
		var ok bool
		if sh, ok = parseShard(shard); !ok {
			return usagef("--shard %q is not R/W with 0 <= R < W", shard)
		}
	}
	name := mount.ColumnFile(epoch, mount.IDs, sh)
	f, err := openUnder(dir, name)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := printIDStream(f); err != nil {
		return noAnswer(dir, "a read of its "+name, fmt.Errorf("%s: %w", filepath.Join(dir, name), err))
	}
	return nil
}

// openUnder opens file name of the mount at dir through fuseread.
func openUnder(dir, name string) (*fuseread.Reader, error) {
	f, err := fuseread.Open(context.Background(), filepath.Join(dir, name), mountAnswerTime)
	if err != nil {
		return nil, noAnswer(dir, "an open of its "+name, err)
	}
	return f, nil
}

// copyMixtureIDs prints "SOURCE ID" for each record of an epoch (or shard) of the mixture
// mounted at dir, from its .source and .ids files.
func copyMixtureIDs(dir string, epoch uint64, shard string) error {
	var sh mount.Shard
	if shard != "" {
		var ok bool
		if sh, ok = parseShard(shard); !ok {
			return usagef("--shard %q is not R/W with 0 <= R < W", shard)
		}
	}
	srcs, err := openUnder(dir, mount.ColumnFile(epoch, mount.Sources, sh))
	if err != nil {
		return err
	}
	defer srcs.Close()
	ids, err := openUnder(dir, mount.ColumnFile(epoch, mount.IDs, sh))
	if err != nil {
		return err
	}
	defer ids.Close()
	return noAnswer(dir, "a read of its "+mount.ColumnFile(epoch, mount.IDs, mount.Shard{})+" or .source", printSourceIDs(srcs, ids))
}

// maxLabelsBytes bounds a --labels file: a line of digits or 8 bytes a record of a dataset
// of up to 2^32 records.
const maxLabelsBytes = 32 << 30

// readLabels reads the labels of n records, label i for record id i: a .npy of one integer
// per record, or a text file of one integer per line.
func readLabels(path string, n uint64) ([]int32, error) {
	f, _, err := userfile.Open(path, maxLabelsBytes)
	if err != nil {
		return nil, fmt.Errorf("--labels: %w", err)
	}
	defer f.Close()
	if layout.IsNpy(f) {
		return readNpyLabels(path, f, n)
	}
	labels := make([]int32, 0, n)
	sc := bufio.NewScanner(userfile.Reader(f, maxLabelsBytes))
	for sc.Scan() {
		if uint64(len(labels)) == n {
			return nil, fmt.Errorf("--labels %s has more lines than the dataset has records (%d)", path, n)
		}
		v, err := strconv.ParseInt(strings.TrimSpace(sc.Text()), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("--labels %s: line %d: %q is not an integer", path, len(labels)+1, sc.Text())
		}
		labels = append(labels, int32(v))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--labels: %w", err)
	}
	if uint64(len(labels)) != n {
		return nil, fmt.Errorf("--labels %s has %d lines, the dataset has %d records", path, len(labels), n)
	}
	return labels, nil
}

// readNpyLabels reads a one-axis .npy of integers (1 to 8 bytes, either byte order).
func readNpyLabels(path string, f *os.File, n uint64) ([]int32, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("--labels: %w", err)
	}
	h, err := layout.ParseNpy(path, f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("--labels: %w", err)
	}
	size := h.IntSize()
	if size == 0 {
		return nil, fmt.Errorf("--labels %s: want a one-axis array of integers, not %s shaped %v per row", path, h.DType, h.Shape)
	}
	if uint64(h.Records) != n {
		return nil, fmt.Errorf("--labels %s has %d labels, the dataset has %d records", path, h.Records, n)
	}
	raw := make([]byte, int64(size)*h.Records)
	if _, err := f.ReadAt(raw, h.DataOffset); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("--labels: %w", err)
	}
	labels := make([]int32, h.Records)
	for i, v := range h.Ints(raw) {
		if v < math.MinInt32 || v > math.MaxInt32 {
			return nil, fmt.Errorf("--labels %s: label %d of record %d does not fit in 32 bits", path, v, i)
		}
		labels[i] = int32(v)
	}
	return labels, nil
}
