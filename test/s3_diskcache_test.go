package test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestS3DiskCache mounts an s3:// dataset with --disk-cache and checks, through real FUSE
// mounts and a real MinIO: a second mount serves exact bytes with MinIO killed (every block
// file from the disk cache); a damaged disk cache file is never served (EIO while the store is
// gone, fetched again and exact once it is back); --disk-cache-size bounds the directory; the
// directory can be deleted between mounts; the daemon's RSS stays within --cache-size + 64 MiB;
// bad flags and a directory in use fail in one line.
func TestS3DiskCache(t *testing.T) {
	requireFUSE(t)
	srv := startMinio(t)
	srv.bucket("data")
	dir := t.TempDir()
	ep := "--endpoint=" + srv.endpoint()
	url := "s3://data/dc"
	local := packTwice(t, dir, ep, url, 8000, "256KiB")
	ml := mount(t, local, "--seed", "1")
	want := func(name string) []byte {
		b, err := os.ReadFile(ml.path(name))
		require.NoError(t, err)
		return b
	}
	dc := filepath.Join(dir, "disk-cache")
	// A page cache of 4 MiB under 8 MB of data: every epoch goes back below it.
	args := func(log string, extra ...string) []string {
		return append([]string{ep, "--seed", "1", "--cache-size", "4MiB", "--readahead", "512KiB", "--s3-concurrency", "2",
			"--s3-timeout", "2s", "--s3-retries", "1", "--disk-cache", dc, "--log", filepath.Join(dir, log)}, extra...)
	}
	logText := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		return string(b)
	}
	blk := func() []string {
		files, err := filepath.Glob(filepath.Join(dc, "*", "*.blk"))
		require.NoError(t, err)
		return files
	}
	du := func() int64 {
		var n int64
		for _, f := range blk() {
			st, err := os.Stat(f)
			if errors.Is(err, fs.ErrNotExist) {
				continue // evicted between the listing and the stat: readahead may still run
			}
			require.NoError(t, err)
			n += st.Size()
		}
		return n
	}

	// First mount: the store fills the disk cache with every file an epoch reads.
	m1 := mountAt(t, url, t.TempDir(), args("m1.log")...)
	require.Zero(t, readAllOrEIO(t, m1.path("epoch-0000"), want("epoch-0000"), 1<<20))
	require.Zero(t, readAllOrEIO(t, m1.path("epoch-0000.ids"), want("epoch-0000.ids"), 1<<20))
	var info map[string]any
	b, err := os.ReadFile(m1.path(".blockfs/info.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &info))
	require.Equal(t, dc, info["disk_cache"])
	st := diskStats(t, m1)
	t.Logf("stats.json disk_cache after the first epoch: %v", st)
	require.GreaterOrEqual(t, st["fetches"], float64(62), "every block's data and ids files fetched")
	require.Positive(t, st["files"])
	require.Positive(t, st["bytes"])
	require.Zero(t, st["bad"])
	// Another mount cannot use the directory at the same time: one line, exit 1.
	_, errs, code := run(t, append([]string{"mount"}, append(args("x.log"), url, t.TempDir())...)...)
	require.Equal(t, 1, code, errs)
	require.Contains(t, errs, "in use by another blockfs mount")
	require.Equal(t, 1, strings.Count(strings.TrimSpace(errs), "\n")+1, errs)
	m1.stop()
	files := blk()
	require.GreaterOrEqual(t, len(files), 62, "every block's data and ids files in the disk cache")
	require.Contains(t, logText("m1.log"), "files fetched")

	// Second mount; then MinIO killed: every byte still comes, from the disk cache.
	m2 := mountAt(t, url, t.TempDir(), args("m2.log")...)
	srv.kill()
	for _, name := range []string{"epoch-0001", "epoch-0002", "epoch-0001.ids", "shard-1-of-3/epoch-0003"} {
		require.Zero(t, readAllOrEIO(t, m2.path(name), want(name), 1<<20), name)
	}
	sum := func(p string) string { return strings.Fields(sh(t, "dd if="+p+" bs=1M status=none | sha256sum"))[0] }
	require.Equal(t, sum(ml.path("epoch-0004")), sum(m2.path("epoch-0004")))
	require.LessOrEqual(t, procStatusKiB(t, m2.cmd.Process.Pid, "VmHWM"), int64(4+64)<<10, "RSS within --cache-size + 64 MiB")
	st = diskStats(t, m2)
	require.Zero(t, st["fetches"], "the second mount fetched nothing")
	require.Positive(t, st["hits"])
	m2.stop()
	require.Contains(t, logText("m2.log"), " 0 files fetched")

	// A damaged file in the disk cache (block 0's data, file id 0), with the store gone: EIO
	// for the reads that need it, exact bytes for the rest, never the damaged bytes.
	var block0 string
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), "0-") {
			block0 = f
		}
	}
	require.NotEmpty(t, block0)
	data, err := os.ReadFile(block0)
	require.NoError(t, err)
	data[len(data)/2] ^= 0x40
	require.NoError(t, os.WriteFile(block0, data, 0o644))
	srv.start() // a mount opens the dataset in the store (manifest, sizes and ETags)
	m3 := mountAt(t, url, t.TempDir(), args("m3.log")...)
	srv.kill()
	failed := readAllOrEIO(t, m3.path("epoch-0005"), want("epoch-0005"), 64<<10)
	require.NotZero(t, failed, "the damaged block must fail while the store is gone")
	require.Less(t, failed, len(want("epoch-0005"))/(64<<10)/2, "only the damaged block fails")
	require.Contains(t, logText("m3.log"), "disk cache")
	require.Contains(t, logText("m3.log"), "CRC32C")
	require.NoFileExists(t, block0, "a damaged file is deleted")
	// The store back: fetched again, exact bytes, and kept.
	srv.start()
	require.Zero(t, readAllOrEIO(t, m3.path("epoch-0005"), want("epoch-0005"), 64<<10))
	require.FileExists(t, block0)
	m3.stop()

	// --disk-cache-size bounds the directory; least recently used files go.
	m4 := mountAt(t, url, t.TempDir(), args("m4.log", "--disk-cache-size", "1MiB")...)
	require.LessOrEqual(t, du(), int64(1<<20), "evicted down to the bound at mount")
	require.Zero(t, readAllOrEIO(t, m4.path("epoch-0006"), want("epoch-0006"), 1<<20))
	// Readahead may still be keeping a file: one being made room for is removed just after
	// another takes its place, so the bound holds once the mount is quiet.
	require.Eventually(t, func() bool { return du() <= 1<<20 }, 5*time.Second, 50*time.Millisecond, "cached %d bytes", du())
	require.NotEmpty(t, blk())
	m4.stop()
	require.Contains(t, logText("m4.log"), "evicted")

	// The directory deleted while unmounted: made again, filled again.
	require.NoError(t, os.RemoveAll(dc))
	m5 := mountAt(t, url, t.TempDir(), args("m5.log")...)
	require.Zero(t, readAllOrEIO(t, m5.path("epoch-0007"), want("epoch-0007"), 1<<20))
	require.GreaterOrEqual(t, len(blk()), 31)
	m5.stop()

	// Bad flags: one line, exit 2.
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"mount", "--disk-cache", dc, local, t.TempDir()}, "--disk-cache is for a dataset in an object store"},
		{[]string{"mount", ep, "--disk-cache-size", "1GiB", url, t.TempDir()}, "--disk-cache-size goes with --disk-cache"},
		{[]string{"mount", ep, "--disk-cache", dc, "--disk-cache-size", "100KiB", url, t.TempDir()}, "smaller than the dataset's largest file"},
		{[]string{"mount", ep, "--disk-cache", dc, "--disk-cache-size", "lots", url, t.TempDir()}, "not a size"},
	} {
		_, errs, code := run(t, c.args...)
		require.Equal(t, 2, code, "%v: %s", c.args, errs)
		require.Contains(t, errs, c.msg, "%v", c.args)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(errs), "\n")+1, "%v: %s", c.args, errs)
	}
	mnt := t.TempDir()
	_, errs, code = run(t, "mount", ep, "--disk-cache", filepath.Join(mnt, "dc"), url, mnt)
	require.Equal(t, 2, code, errs)
	require.Contains(t, errs, "must not be inside one another")
}

// packTwice packs records raw records of 1000 bytes (s3Sources) in blocks of blockSize into
// DIR/local and into url at the store ep, with the same flags, and returns the local copy:
// the reference an s3:// mount's epochs are compared with.
func packTwice(t *testing.T, dir, ep, url string, records int, blockSize string) string {
	t.Helper()
	raw, _ := s3Sources(t, dir, records, 0)
	flags := []string{"--format", "raw", "--record-size", "1000", "--block-size", blockSize, "--seed", "2"}
	local := filepath.Join(dir, "local")
	mustRun(t, append(append([]string{"pack", "--quiet"}, flags...), raw, local)...)
	mustRun(t, append(append([]string{"pack", "--quiet", ep}, flags...), raw, url)...)
	return local
}

// diskStats returns the disk cache's counters from a mount's stats.json.
func diskStats(t *testing.T, m *mounted) map[string]float64 {
	t.Helper()
	var st struct {
		DiskCache map[string]float64 `json:"disk_cache"`
	}
	b, err := os.ReadFile(m.path(".blockfs/stats.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &st))
	require.NotNil(t, st.DiskCache, "stats.json has the disk cache's counters: %s", b)
	return st.DiskCache
}

// TestS3DiskCacheFixedSet: an s3:// dataset twice the --disk-cache-size keeps a fixed set on
// disk, so each epoch after the first fetches from the store only the data less the disk cache
// (at most 0.6 x the data, the floor; a least-recently-used cache fetched most of it
// again), every epoch exact, the directory within its bound.
func TestS3DiskCacheFixedSet(t *testing.T) {
	requireFUSE(t)
	srv := startMinio(t)
	srv.bucket("data")
	dir := t.TempDir()
	ep := "--endpoint=" + srv.endpoint()
	url := "s3://data/fixed"
	local := packTwice(t, dir, ep, url, 32000, "1MiB")
	var data int64 // the dataset's block files, as the store holds them
	files, err := filepath.Glob(filepath.Join(local, "blocks", "*"))
	require.NoError(t, err)
	for _, f := range files {
		st, err := os.Stat(f)
		require.NoError(t, err)
		data += st.Size()
	}
	ml := mount(t, local, "--seed", "1")
	dc := filepath.Join(dir, "disk-cache")
	bound := data / 2
	m := mountAt(t, url, t.TempDir(), ep, "--seed", "1", "--cache-size", "24MiB", "--readahead", "2MiB",
		"--disk-cache", dc, "--disk-cache-size", fmt.Sprint(bound))
	fetched := func() int64 { return int64(diskStats(t, m)["fetched_bytes"]) }
	for e := 0; e < 4; e++ {
		name := fmt.Sprintf("epoch-%04d", e)
		want, err := os.ReadFile(ml.path(name))
		require.NoError(t, err)
		before := fetched()
		require.Zero(t, readAllOrEIO(t, m.path(name), want, 1<<20), "epoch %d exact", e)
		got := fetched() - before
		t.Logf("epoch %d: %d of %d bytes fetched from the store", e, got, data)
		if e > 0 {
			require.LessOrEqual(t, float64(got), 0.6*float64(data), "epoch %d fetches at most 0.6 x the data", e)
			require.Greater(t, got, int64(0), "the files outside the set are fetched")
		}
	}
	var used int64
	kept, err := filepath.Glob(filepath.Join(dc, "*", "*.blk"))
	require.NoError(t, err)
	for _, f := range kept {
		st, err := os.Stat(f)
		require.NoError(t, err)
		used += st.Size()
	}
	require.LessOrEqual(t, used, bound)
	require.Greater(t, used, bound*3/4, "the set fills the bound")
}
