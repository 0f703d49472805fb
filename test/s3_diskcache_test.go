package test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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
	t.Parallel() // it mostly waits for the store's timeouts: beside the other tests that do (make test's -parallel)
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
		files, err := filepath.Glob(filepath.Join(ownDir(dc), "*", "*.blk"))
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
		{[]string{"mount", "--disk-cache", dc, local, t.TempDir()}, "--disk-cache is for a dataset in a store"},
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

// ownDir is where a mount by this user keeps its files in the --disk-cache directory dc.
func ownDir(dc string) string {
	return filepath.Join(dc, fmt.Sprintf("blockfs-cache-%d", os.Geteuid()))
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
	kept, err := filepath.Glob(filepath.Join(ownDir(dc), "*", "*.blk"))
	require.NoError(t, err)
	for _, f := range kept {
		st, err := os.Stat(f)
		require.NoError(t, err)
		used += st.Size()
	}
	require.LessOrEqual(t, used, bound)
	require.Greater(t, used, bound*3/4, "the set fills the bound")
}

// TestS3DiskCacheHostileDir: a --disk-cache directory that other users can write (a shared
// scratch disk, issue 26 items 2 and 5), through real mounts as root and a real MinIO:
// symbolic links to a 0600 file planted at every name the cache gives or gave its files leave
// that file intact (a mount wrote block data through NAME.blk.tmp), and a link or another
// user's directory in the place of the cache's own directory is refused in one line; other
// users' files are never deleted or evicted; nothing the cache writes is readable by others;
// a FIFO in place of a kept copy is EIO at once with the store gone and fetched again with it
// back (it blocked the reader forever); after rm -rf of the directory under a live mount, a
// second mount of it is still refused.
func TestS3DiskCacheHostileDir(t *testing.T) {
	t.Parallel() // it mostly waits for the store's timeouts: beside the other tests that do (make test's -parallel)
	requireFUSE(t)
	requireRoot(t, "to plant files as another user where root's mount keeps its disk cache")
	srv := startMinio(t)
	srv.bucket("data")
	dir := t.TempDir()
	ep := "--endpoint=" + srv.endpoint()
	url := "s3://data/hostile"
	local := packTwice(t, dir, ep, url, 8000, "256KiB")
	ml := mount(t, local, "--seed", "1")
	want := func(name string) []byte {
		b, err := os.ReadFile(ml.path(name))
		require.NoError(t, err)
		return b
	}
	args := func(dc, log string, extra ...string) []string {
		return append([]string{ep, "--seed", "1", "--cache-size", "4MiB", "--readahead", "512KiB", "--s3-concurrency", "2",
			"--s3-timeout", "2s", "--s3-retries", "1", "--disk-cache", dc, "--log", filepath.Join(dir, log)}, extra...)
	}
	exact := func(m *mounted, names ...string) {
		t.Helper()
		for _, name := range names {
			require.Zero(t, readAllOrEIO(t, m.path(name), want(name), 1<<20), name)
		}
	}

	// The names the cache gives its files, FINGERPRINT/NAME: a mount with a directory of its
	// own lists them (whatever the layout around them).
	scratch := filepath.Join(dir, "scratch")
	m0 := mountAt(t, url, t.TempDir(), args(scratch, "m0.log")...)
	exact(m0, "epoch-0000", "epoch-0000.ids")
	m0.stop()
	var copies []string
	for _, pat := range []string{"*/*.blk", "*/*/*.blk"} {
		found, err := filepath.Glob(filepath.Join(scratch, pat))
		require.NoError(t, err)
		for _, f := range found {
			copies = append(copies, filepath.Join(filepath.Base(filepath.Dir(f)), filepath.Base(f)))
		}
	}
	require.GreaterOrEqual(t, len(copies), 62, "every block's data and ids files")

	// The victim: a file only root may write. The attacker: nobody, with a directory anyone
	// may write (mode 1777, as /tmp).
	canary := filepath.Join(t.TempDir(), "canary")
	secret := []byte("root's secret: only root may write this file\n")
	require.NoError(t, os.WriteFile(canary, secret, 0o600))
	intact := func() {
		t.Helper()
		b, err := os.ReadFile(canary)
		require.NoError(t, err)
		require.Equal(t, string(secret), string(b), "the victim file was written")
		st, err := os.Stat(canary)
		require.NoError(t, err)
		require.Equal(t, fs.FileMode(0o600), st.Mode().Perm())
	}
	dc := filepath.Join(dir, "shared")
	require.NoError(t, os.Mkdir(dc, 0o755))
	require.NoError(t, os.Chmod(dc, 0o1777))
	asNobody := func(p string) { require.NoError(t, os.Lchown(p, nobody, nobody)) }
	mkdirs := func(base, rel string) { // the missing parents of rel under base, nobody's
		var parts []string
		for d := filepath.Dir(rel); d != "."; d = filepath.Dir(d) {
			parts = append([]string{d}, parts...)
		}
		for _, d := range parts {
			if err := os.Mkdir(filepath.Join(base, d), 0o777); err == nil {
				asNobody(filepath.Join(base, d))
			}
		}
	}
	logText := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		return string(b)
	}
	foreign := map[string]string{"alice-job/results.tmp": "alice's results", "bob/model.blk": "bob's model"}
	for rel, text := range foreign {
		mkdirs(dc, rel)
		require.NoError(t, os.WriteFile(filepath.Join(dc, rel), []byte(text), 0o644))
		asNobody(filepath.Join(dc, rel))
	}
	var planted []string
	plant := func(base, rel string) { // a link to the victim at base/rel, unless one is there
		p := filepath.Join(base, rel)
		if _, err := os.Lstat(p); err == nil {
			return
		}
		mkdirs(base, rel)
		require.NoError(t, os.Symlink(canary, p))
		asNobody(p)
		planted = append(planted, p)
	}
	plantAll := func() { // every name of the layout before the own directory, and the marker's
		plant(dc, ".lock")
		plant(dc, "CACHEDIR.TAG")
		for _, c := range copies {
			plant(dc, c)
			plant(dc, c+".tmp")
		}
	}

	// 1. Links everywhere, before the mount and again under it (a blockfs that deleted *.tmp
	// at mount wrote through the ones planted after): the victim intact, the links and the
	// other users' files where they were, every file the cache made private.
	plantAll()
	m1 := mountAt(t, url, t.TempDir(), args(dc, "m1.log")...)
	plantAll()
	exact(m1, "epoch-0001", "epoch-0001.ids", "epoch-0002")
	m1.stop()
	intact()
	for _, p := range planted {
		st, err := os.Lstat(p)
		require.NoError(t, err, "someone else's link, deleted")
		require.Equal(t, fs.ModeSymlink, st.Mode().Type(), p)
	}
	for rel, text := range foreign {
		b, err := os.ReadFile(filepath.Join(dc, rel))
		require.NoError(t, err, "%s: someone else's file, deleted", rel)
		require.Equal(t, text, string(b))
	}
	private := func() int {
		t.Helper()
		files := 0
		require.NoError(t, filepath.WalkDir(ownDir(dc), func(p string, d fs.DirEntry, err error) error {
			require.NoError(t, err)
			st, err := os.Lstat(p)
			require.NoError(t, err)
			if st.IsDir() {
				require.Equal(t, fs.FileMode(0o700), st.Mode().Perm(), p)
			} else {
				require.True(t, st.Mode().IsRegular(), p)
				require.Equal(t, fs.FileMode(0o600), st.Mode().Perm(), p)
				files++
			}
			return nil
		}))
		return files
	}
	require.GreaterOrEqual(t, private(), 62, "every block's data and ids files kept")
	require.NotContains(t, logText("m1.log"), "cannot keep")

	// 2. A FIFO in place of a kept copy, in fresh mounts (nothing in their page cache): EIO
	// at once with the store gone (the reads that need that block; the rest exact from the
	// disk cache), fetched again with it back.
	fifo := func(id int) string { // in place of file id's copy, a block's data
		t.Helper()
		found, err := filepath.Glob(filepath.Join(ownDir(dc), "*", fmt.Sprintf("%d-*.blk", id)))
		require.NoError(t, err)
		require.Len(t, found, 1, id)
		st, err := os.Stat(found[0])
		require.NoError(t, err)
		require.Greater(t, st.Size(), int64(200000), "%s: a block's data", found[0])
		require.NoError(t, os.Remove(found[0]))
		require.NoError(t, syscall.Mkfifo(found[0], 0o600))
		return found[0]
	}
	// timed reads name in 64 KiB chunks and fails if that takes over 20 s, opening the
	// FIFO's other end to let a reader blocked on it go.
	timed := func(m *mounted, name, fifo string) int {
		t.Helper()
		stuck := time.AfterFunc(20*time.Second, func() {
			if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
		})
		start := time.Now()
		failed := readAllOrEIO(t, m.path(name), want(name), 64<<10)
		require.True(t, stuck.Stop(), "a read of %s waited on the FIFO (%v)", name, time.Since(start))
		t.Logf("%s with a FIFO in place of %s: %d reads EIO, %v", name, filepath.Base(fifo), failed, time.Since(start))
		return failed
	}
	m2 := mountAt(t, url, t.TempDir(), args(dc, "m2.log")...)
	srv.kill()
	f0 := fifo(0) // block 0's data
	failed := timed(m2, "epoch-0004", f0)
	require.NotZero(t, failed, "block 0 is EIO with the store gone")
	require.Less(t, failed, len(want("epoch-0004"))/(64<<10)/2, "only block 0 fails")
	m2.stop()
	require.Contains(t, logText("m2.log"), "not a regular file")
	srv.start()
	m3 := mountAt(t, url, t.TempDir(), args(dc, "m3.log")...)
	f1 := fifo(3) // block 1's data (3*block + role)
	require.Zero(t, timed(m3, "epoch-0005", f1), "fetched again with the store back")
	for _, p := range []string{f0, f1} {
		st, err := os.Lstat(p)
		require.NoError(t, err)
		require.True(t, st.Mode().IsRegular(), "%s: a copy again", p)
	}

	// 3. rm -rf of the directory under the live mount: a second mount is still refused; the
	// first makes its directory again, private, and a mount after it is let in.
	require.NoError(t, os.RemoveAll(dc))
	busy := func() {
		t.Helper()
		_, errs, code := run(t, append([]string{"mount"}, append(args(dc, "x.log"), url, t.TempDir())...)...)
		require.Equal(t, 1, code, errs)
		require.Contains(t, errs, "in use by another blockfs mount")
		require.Equal(t, 1, strings.Count(strings.TrimSpace(errs), "\n")+1, errs)
	}
	busy()
	exact(m3, "epoch-0006")
	require.Positive(t, private(), "made again")
	busy()
	m3.stop()
	require.Contains(t, logText("m3.log"), "was deleted under the mount: made again")
	m4 := mountAt(t, url, t.TempDir(), args(dc, "m4.log")...)
	m4.stop()

	// 4. Something else in the place of the cache's own directory: a link to a directory of
	// nobody's, or nobody's directory with the marker and links inside, is refused in one line
	// and left as it is; the victim intact.
	theirs := filepath.Join(dir, "theirs")
	require.NoError(t, os.Mkdir(theirs, 0o777))
	require.NoError(t, os.WriteFile(filepath.Join(theirs, "CACHEDIR.TAG"),
		[]byte("Signature: 8a477f597d28d172789f06886806bc55\n# created by blockfs\n"), 0o644))
	for _, c := range copies {
		plant(theirs, c)
		plant(theirs, c+".tmp")
	}
	listing := func(root string) string {
		var b strings.Builder
		require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			require.NoError(t, err)
			st, err := os.Lstat(p)
			require.NoError(t, err)
			rel, _ := filepath.Rel(root, p)
			fmt.Fprintf(&b, "%s %v %d\n", rel, st.Mode(), st.Sys().(*syscall.Stat_t).Uid)
			return nil
		}))
		return b.String()
	}
	require.NoError(t, filepath.WalkDir(theirs, func(p string, d fs.DirEntry, err error) error {
		asNobody(p)
		return err
	}))
	before := listing(theirs)
	for _, c := range []struct {
		name string
		make func(own string) string // returns where their directory is
		why  string
	}{
		{"a link", func(own string) string { require.NoError(t, os.Symlink(theirs, own)); return theirs }, "is a symbolic link"},
		{"nobody's directory", func(own string) string { require.NoError(t, os.Rename(theirs, own)); return own }, "belongs to uid 65534"},
	} {
		dc := filepath.Join(dir, "shared-"+strings.ReplaceAll(c.name, " ", "-"))
		require.NoError(t, os.Mkdir(dc, 0o755))
		require.NoError(t, os.Chmod(dc, 0o1777))
		at := c.make(ownDir(dc))
		_, errs, code := run(t, append([]string{"mount"}, append(args(dc, "x.log"), url, t.TempDir())...)...)
		require.Equal(t, 1, code, "%s: %s", c.name, errs)
		require.Contains(t, errs, ownDir(dc)+" "+c.why, c.name)
		require.Contains(t, errs, "not a disk cache blockfs made for this user; remove it", c.name)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(errs), "\n")+1, errs)
		require.Equal(t, before, listing(at), "%s: left as it was", c.name)
		intact()
	}
}
