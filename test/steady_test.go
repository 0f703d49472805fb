package test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/internal/dstest"
	"github.com/blockfs/blockfs/internal/sysmem"
	"github.com/blockfs/blockfs/mount/memory"
	"github.com/blockfs/blockfs/shuffle"
	"github.com/blockfs/blockfs/source/local"
)

// What fs drops behind readers (fs/drop.go): the kernel keeps at most about the slack, a chunk
// and its own readahead (raised to 4 MiB on the mount) of an open epoch file.
const (
	dropSlack   = 8 << 20
	dropChunk   = 16 << 20
	kernelAhead = 4 << 20
	// refault is what the kernel may read again of a range dropped while its own readahead
	// was in flight (a loaded machine gave 16 KiB): served twice, never less than once.
	refault        = 1 << 20
	closeDropDelay = 2 * time.Second
)

// steadyRecords is 64 MiB of 4 KiB records: four drop chunks, so the drop behind a reader
// fires three times while it reads one epoch.
const steadyRecords = 16384

// readWhole reads path sequentially with reads of bs bytes and returns its bytes.
func readWhole(t *testing.T, path string, bs int) []byte {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out bytes.Buffer
	_, err = io.CopyBuffer(struct{ io.Writer }{&out}, struct{ io.Reader }{f}, make([]byte, bs)) // no ReadFrom: reads of bs
	require.NoError(t, err)
	return out.Bytes()
}

// servedDelta returns how many epoch data bytes the daemon served while fn ran.
func servedDelta(t *testing.T, m *mounted, fn func()) int64 {
	t.Helper()
	before := readStats(t, m)["bytes_served"]
	fn()
	return int64(readStats(t, m)["bytes_served"] - before)
}

// TestDropBehind mounts 64 MiB of 4 KiB records in 1 MiB blocks with a cache smaller than the
// dataset and reads epochs the way trainers do, while fs drops the pages readers have passed
// from the kernel's page cache (and the whole file 2 s after its last close). Every byte must
// stay exact: a dropped range is served again by the daemon, from its cache or the disk.
func TestDropBehind(t *testing.T) {
	p := packRaw(t, steadyRecords, "1MiB")
	d := dstest.FromDir(t, p.dir, p.records)
	m := mount(t, p.dir, "--seed", "13", "--cache-size", "16MiB", "--readahead", "4MiB")
	size := int64(steadyRecords * recordSize)

	t.Run("exact bytes after invalidation", func(t *testing.T) {
		want, wantIDs, _ := d.Epoch(shuffle.Options{Seed: 13, Epoch: 0}, 0, steadyRecords)
		name := m.path("epoch-0000")

		// The .ids sidecar, and each record of the epoch is the source record it names.
		ids, err := os.ReadFile(name + ".ids")
		require.NoError(t, err)
		require.Equal(t, wantIDs, ids)
		checkByIDs := func(got []byte, how string) {
			t.Helper()
			require.Len(t, got, int(size), how)
			for i := 0; i < steadyRecords; i++ {
				id := binary.LittleEndian.Uint64(ids[8*i:])
				if !bytes.Equal(p.records[id], got[i*recordSize:(i+1)*recordSize]) {
					t.Fatalf("%s: record %d (source id %d) differs", how, i, id)
				}
			}
			require.Equal(t, sum(want), sum(got), how)
		}

		// First read: nothing of the file is in the kernel's cache; the daemon serves it all,
		// and drops what the reader passed as it goes.
		var got []byte
		first := servedDelta(t, m, func() { got = readWhole(t, name, 1<<20) })
		checkByIDs(got, "first read, 1 MiB reads")
		assert.GreaterOrEqual(t, first, size, "the first read is served whole by the daemon")
		assert.LessOrEqual(t, first, size+refault, "the first read is served once (a dropped page read again at most)")
		// Dropped in 16 MiB chunks as the reader passed them, up to the slack: 16, 32 and 48
		// MiB (stats.json counts each once the kernel has dropped it).
		drops := func() float64 { return readStats(t, m)["page_cache_drops"] }
		require.Eventually(t, func() bool { return drops() >= 3 }, 10*time.Second, 10*time.Millisecond,
			"stats.json's page_cache_drops after one epoch: %v", drops())

		// At once, in smaller reads: what was dropped behind the first reader comes from the
		// daemon again. Without the drop, the kernel (FOPEN_KEEP_CACHE) would serve it all.
		second := servedDelta(t, m, func() { got = readWhole(t, name, 128<<10) })
		checkByIDs(got, "second read, 128 KiB reads")
		t.Logf("second read: %d MiB of %d served by the daemon", second>>20, size>>20)
		assert.GreaterOrEqual(t, second, size-dropSlack-dropChunk-kernelAhead, "what the first reader passed was dropped")
		assert.LessOrEqual(t, second, size+refault)

		// After the last close, the whole file goes: dd is served everything by the daemon.
		time.Sleep(closeDropDelay + 500*time.Millisecond)
		out := filepath.Join(t.TempDir(), "dd.out")
		third := servedDelta(t, m, func() {
			sh(t, fmt.Sprintf("dd if=%s of=%s bs=64k status=none", name, out))
		})
		got, err = os.ReadFile(out)
		require.NoError(t, err)
		checkByIDs(got, "dd bs=64k after the file was dropped whole")
		t.Logf("dd after %v idle: %d MiB of %d served by the daemon", closeDropDelay, third>>20, size>>20)
		assert.GreaterOrEqual(t, third, size, "the whole file was dropped after its last close")
		assert.LessOrEqual(t, third, size+refault)
		st := readStats(t, m)
		assert.GreaterOrEqual(t, st["page_cache_drops"], 6.0, "two reads' chunks and the whole file")
		assert.Positive(t, st["page_cache_drop_seconds"])
		assert.Zero(t, st["page_cache_drops_skipped"], "one reader never outruns the drop workers")
	})

	t.Run("two readers at different offsets", func(t *testing.T) {
		opt := shuffle.Options{Seed: 13, Epoch: 3}
		want, _, _ := d.Epoch(opt, 0, steadyRecords)
		name := m.path("epoch-0003")
		a, err := os.Open(name)
		require.NoError(t, err)
		defer a.Close()
		b, err := os.Open(name)
		require.NoError(t, err)
		defer b.Close()
		read := func(who string, f *os.File, buf []byte, off int64) int64 {
			t.Helper()
			n, err := f.ReadAt(buf, off)
			if err != io.EOF {
				require.NoError(t, err, "%s at %d", who, off)
			}
			wantN := min(int64(len(buf)), size-off)
			require.EqualValues(t, wantN, n, "%s: read at %d", who, off)
			if !bytes.Equal(want[off:off+wantN], buf[:n]) {
				t.Fatalf("%s: [%d,+%d) differs", who, off, n)
			}
			return int64(n)
		}
		bufA, bufB := make([]byte, 1<<20), make([]byte, 128<<10)
		dropped := (size - dropSlack) / dropChunk * dropChunk // what a reader at the end leaves

		// a reads the whole file while b is open and has not read yet: what a passed is
		// dropped behind it.
		served := servedDelta(t, m, func() {
			for off := int64(0); off < size; {
				off += read("reader a", a, bufA, off)
			}
		})
		assert.Equal(t, size, served)
		assert.Zero(t, residentEventually(t, name, 0, dropped, 0), "[0, %d MiB) dropped behind reader a", dropped>>20)

		// Interleaved: b starts at 0, below what was dropped, in 128 KiB reads; a goes back to
		// 32 MiB, far ahead, in 1 MiB reads, to the end and then round to 32 MiB again.
		offA, doneA, offB := int64(32<<20), int64(0), int64(0)
		served = servedDelta(t, m, func() {
			for offB < size {
				if doneA < size {
					n := read("reader a", a, bufA, offA)
					offA, doneA = (offA+n)%size, doneA+n
				}
				offB += read("reader b", b, bufB, offB)
			}
		})
		t.Logf("two readers interleaved, 2 x %d MiB: the daemon served %d MiB", size>>20, served>>20)
		assert.GreaterOrEqual(t, served, dropped-kernelAhead, "what a left behind was served again")
		assert.LessOrEqual(t, served, 2*size)
	})
	t.Run("O_DIRECT reader", func(t *testing.T) {
		// A loader that reads large batches once opens with O_DIRECT: every read goes to the
		// daemon, straight into its buffer, and nothing of the file enters the page cache,
		// while a buffered reader of the same file still gets its bytes through it.
		opt := shuffle.Options{Seed: 13, Epoch: 5}
		want, _, _ := d.Epoch(opt, 0, steadyRecords)
		name := m.path("epoch-0005")
		f, err := os.OpenFile(name, os.O_RDONLY|unix.O_DIRECT, 0)
		require.NoError(t, err)
		defer f.Close()
		for pass := 0; pass < 2; pass++ {
			var got []byte
			served := servedDelta(t, m, func() { got = readAll(t, f, 1<<20) })
			require.Equal(t, sum(want), sum(got), "pass %d", pass)
			assert.Equal(t, size, served, "pass %d: every byte came from the daemon", pass)
			assert.Zero(t, residentPages(t, name, 0, size), "pass %d: nothing in the page cache", pass)
		}
		// Unaligned offsets and lengths need no alignment on a FUSE file.
		buf := make([]byte, 10007)
		for _, off := range []int64{1, 4095, 12345, size - 10007, size - 5000} {
			n, err := f.ReadAt(buf, off)
			if err != io.EOF {
				require.NoError(t, err)
			}
			require.Equal(t, want[off:off+int64(n)], buf[:n], "at %d", off)
			require.EqualValues(t, min(int64(len(buf)), size-off), n, "at %d", off)
		}
		// A buffered reader alongside.
		got := readWhole(t, name, 128<<10)
		require.Equal(t, sum(want), sum(got))

		// An O_DIRECT open leaves what buffered readers have in the page cache (FOPEN_KEEP_CACHE):
		// a reader holding the file open has read its first 4 MiB (less than the drop-behind's
		// slack, so none of it is dropped behind it).
		other := m.path("epoch-0006")
		b, err := os.Open(other)
		require.NoError(t, err)
		defer b.Close()
		_, err = b.ReadAt(make([]byte, 4<<20), 0)
		require.NoError(t, err)
		before := residentPages(t, other, 0, 4<<20)
		require.Positive(t, before, "the buffered read is in the page cache")
		d, err := os.OpenFile(other, os.O_RDONLY|unix.O_DIRECT, 0)
		require.NoError(t, err)
		_, err = d.ReadAt(make([]byte, 1<<20), 8<<20)
		require.NoError(t, err)
		require.NoError(t, d.Close())
		assert.Equal(t, before, residentPages(t, other, 0, 4<<20), "an O_DIRECT open dropped the buffered reader's pages")
	})
}

// readAll reads f from offset 0 to its end with reads of bs bytes.
func readAll(t *testing.T, f *os.File, bs int) []byte {
	t.Helper()
	var out bytes.Buffer
	buf := make([]byte, bs)
	for off := int64(0); ; {
		n, err := f.ReadAt(buf, off)
		out.Write(buf[:n])
		off += int64(n)
		if err == io.EOF {
			return out.Bytes()
		}
		require.NoError(t, err)
	}
}

// pageSize is the kernel's page size.
var pageSize = int64(os.Getpagesize())

// residentEventually waits up to 2 s (fs drops pages off the request path) for the number of
// pages of [off, off+n) of path in the kernel's page cache to be want, and returns the last
// count.
func residentEventually(t *testing.T, path string, off, n int64, want int64) int64 {
	t.Helper()
	var got int64
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if got = residentPages(t, path, off, n); got == want || time.Now().After(deadline) {
			return got
		}
	}
}

// mountInfo returns the mount's .blockfs/info.json.
func mountInfo(t *testing.T, m *mounted) map[string]any {
	t.Helper()
	b, err := os.ReadFile(m.path(".blockfs/info.json"))
	require.NoError(t, err)
	var info map[string]any
	require.NoError(t, json.Unmarshal(b, &info))
	return info
}

// ownCached returns the bytes of the kernel's page cache that a mount's own files hold: the
// epoch files given and the dataset's block files (mincore of each), so that a test of the
// page cache measures its own mount, not a machine that other work fills ("Cached:" in
// /proc/meminfo is machine-wide).
func ownCached(t *testing.T, dataset string, epochFiles []string) int64 {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dataset, "blocks", "*"))
	require.NoError(t, err)
	var pages int64
	for _, f := range append(files, epochFiles...) {
		st, err := os.Stat(f)
		require.NoError(t, err)
		pages += residentPages(t, f, 0, st.Size())
	}
	return pages * pageSize
}

// TestPageCacheAcrossEpochs reads 12 epochs of a 96 MiB dataset with dd, with the mount's
// default (auto) memory settings. Each epoch is dropped from the kernel's page cache behind its
// reader but for its last dropSlack + dropChunk (here 16 MiB), and whole 2 s after it closes:
// "Cached:" in /proc/meminfo must grow by well under the bytes read, and each epoch file must
// hold no more than that in the page cache; once closed, none. The daemon's peak RSS must stay
// within its cache + 64 MiB.
func TestPageCacheAcrossEpochs(t *testing.T) {
	const records = 24576
	size := int64(records * recordSize)
	p := packRaw(t, records, "1MiB")
	m := mount(t, p.dir, "--readahead", "8MiB")
	info := mountInfo(t, m)
	cacheSize := int64(info["cache_size"].(float64))
	t.Logf("cache %d MiB (%v); direct I/O %v (%v)", cacheSize>>20, info["cache_size_reason"], info["direct_io"], info["direct_io_reason"])
	const epochs = 12
	epoch := func(e int) string { return m.path(fmt.Sprintf("epoch-%04d", e)) }

	// The first epoch loads the dataset (into the cache, and with buffered reads into the
	// kernel's cache too, once); growth is measured from there.
	sh(t, fmt.Sprintf("dd if=%s of=/dev/null bs=1M status=none", epoch(0)))
	var opened []string
	before := ownCached(t, p.dir, nil)
	var served, peak int64
	for e := 1; e < epochs; e++ {
		served += servedDelta(t, m, func() {
			sh(t, fmt.Sprintf("dd if=%s of=/dev/null bs=1M status=none", epoch(e)))
		})
		opened = append(opened, epoch(e))
		peak = max(peak, ownCached(t, p.dir, opened)-before)
	}
	read := int64(epochs-1) * size
	var most, total int64
	for e := 1; e < epochs; e++ {
		n := residentPages(t, epoch(e), 0, size) * pageSize
		most, total = max(most, n), total+n
	}
	t.Logf("%d epochs, %d MiB read: the mount's files in the page cache grew by at most %d MiB; the epoch files hold %d MiB of it, at most %d MiB each",
		epochs-1, read>>20, peak>>20, total>>20, most>>20)
	// Every epoch byte went through the daemon (none came from an earlier epoch's pages in the
	// kernel's cache). A page dropped behind a reader while the kernel's readahead had it in
	// flight is asked for again: under load a few pages of the 1 GiB were (8 KiB, 1 run in 10).
	assert.GreaterOrEqual(t, served, read, "every epoch byte went through the daemon")
	assert.LessOrEqual(t, served, read+1<<20, "the daemon served epochs about once")
	assert.Less(t, peak, read/3, "the page cache keeps a fraction of the epochs read")
	assert.LessOrEqual(t, most, int64(dropSlack+dropChunk+kernelAhead), "an epoch keeps at most its tail in the page cache")

	time.Sleep(closeDropDelay + 500*time.Millisecond)
	idle := ownCached(t, p.dir, opened) - before
	total = 0
	for e := 1; e < epochs; e++ {
		total += residentEventually(t, epoch(e), 0, size, 0) * pageSize
	}
	t.Logf("%v after the last close: the mount's files %+d MiB, the epoch files %d MiB", closeDropDelay, idle>>20, total>>20)
	assert.Zero(t, total, "closed epochs leave the page cache")
	assert.Less(t, idle, read/8, "closed epochs leave the page cache")

	hwm := peakRSS(t, m.cmd.Process.Pid)
	t.Logf("daemon peak RSS %d MiB with a %d MiB cache", hwm>>10, cacheSize>>20)
	assert.LessOrEqual(t, hwm<<10, cacheSize+64<<20, "peak RSS within the cache + 64 MiB")
}

// residentPages returns how many pages of [off, off+n) of a file are in the kernel's page
// cache (dstest.CachedPages).
func residentPages(t *testing.T, path string, off, n int64) int64 {
	t.Helper()
	var pages int64
	for _, in := range dstest.CachedPages(t, path, off, n) {
		if in {
			pages++
		}
	}
	return pages
}

// evictBlocks drops a dataset's block files from the kernel's page cache.
func evictBlocks(t *testing.T, blocks []string) {
	t.Helper()
	for _, b := range blocks {
		f, err := os.Open(b)
		require.NoError(t, err)
		require.NoError(t, f.Sync())
		require.NoError(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
		f.Close()
	}
}

// TestDirectIOInfo: .blockfs/info.json says whether block data is read with O_DIRECT and why,
// as memory.PlanFor decides for this dataset and machine; --direct on and off override it
// (and the block files then stay out of, or come into, the kernel's page cache); a bad value
// is a usage error of one line.
func TestDirectIOInfo(t *testing.T) {
	p := packRaw(t, 2048, "1MiB") // 8 MiB, 8 blocks
	ds, err := local.Open(p.dir)
	require.NoError(t, err)
	const readahead = 4 << 20
	m := mount(t, p.dir, "--readahead", "4MiB")
	info := mountInfo(t, m)
	// The plan from the memory the mount itself saw (its info.json), not this process's view
	// a moment earlier: another process filling the page cache, or another mount on the
	// machine, changes what is free and what is claimed in between.
	mem, claimed := planInputs(t, info)
	auto := memory.PlanFor(ds, cache.DefaultPageSize, 0, 1<<20+readahead, memory.DirectAuto, mem, claimed)
	assert.Equal(t, auto.Direct, info["direct_io"], "direct_io: %v", info["direct_io_reason"])
	assert.Equal(t, auto.Reason, info["direct_io_reason"])
	assert.EqualValues(t, auto.CacheSize, info["cache_size"])
	assert.Equal(t, auto.CacheReason, info["cache_size_reason"])
	assert.NotEmpty(t, info["direct_io_reason"])

	blocks, err := filepath.Glob(filepath.Join(p.dir, "blocks", "*.bin"))
	require.NoError(t, err)
	require.Len(t, blocks, 8)
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(p.dir, &st))
	checkCache := st.Type != unix.TMPFS_MAGIC // tmpfs files are always in memory
	for _, c := range []struct {
		flag   string
		direct bool
	}{{"off", false}, {"on", true}} {
		t.Run("--direct "+c.flag, func(t *testing.T) {
			evictBlocks(t, blocks)
			m := mount(t, p.dir, "--direct", c.flag, "--cache-size", "32MiB", "--readahead", "4MiB")
			info := mountInfo(t, m)
			assert.Equal(t, c.direct, info["direct_io"])
			assert.Equal(t, "--direct "+c.flag, info["direct_io_reason"])
			assert.Equal(t, "--cache-size", info["cache_size_reason"])
			assert.EqualValues(t, 32<<20, info["cache_size"])
			got, err := os.ReadFile(m.path("epoch-0000"))
			require.NoError(t, err)
			assert.Len(t, got, 2048*recordSize)
			if !checkCache {
				return
			}
			var resident int64
			for _, b := range blocks {
				resident += residentPages(t, b, 0, 1<<20)
			}
			total := 8 << 20 / pageSize
			t.Logf("--direct %s: %d of %d block file pages in the kernel's cache", c.flag, resident, total)
			if c.direct {
				assert.Less(t, resident, total/8, "O_DIRECT keeps the block files out of the kernel's cache")
			} else {
				assert.Greater(t, resident, total/2, "buffered reads leave the block files in the kernel's cache")
			}
		})
	}

	_, errs, code := run(t, "mount", "--direct", "maybe", p.dir, t.TempDir())
	assert.Equal(t, 2, code)
	assert.Equal(t, 1, strings.Count(errs, "\n"), "one line: %q", errs)
	assert.Contains(t, errs, "--direct")
	assert.Contains(t, errs, `"maybe"`)
	assert.Contains(t, errs, "auto, on or off")
}

// TestManyEpochsRace reads 30 epochs in a row, as a training run does, through a daemon built
// with the race detector: every epoch's checksum must match the order, the page cache must
// not grow with the epochs, the daemon's RSS must be as large after the last epoch as after
// the fifth (nothing grows per epoch), and the race detector must report nothing.
func TestManyEpochsRace(t *testing.T) {
	requireFUSE(t)
	const records, epochs = 12288, 30 // 48 MiB: the drop behind a reader fires each epoch
	size := int64(records * recordSize)
	p := packRaw(t, records, "1MiB")
	d := dstest.FromDir(t, p.dir, p.records)
	m := mountBinary(t, raceBinary(t), p.dir, t.TempDir(), "--seed", "5", "--readahead", "8MiB")
	epoch := func(e int) string { return m.path(fmt.Sprintf("epoch-%04d", e)) }
	sh(t, fmt.Sprintf("dd if=%s of=/dev/null bs=1M status=none", epoch(0)))
	var opened []string
	before := ownCached(t, p.dir, nil)
	var peak, rss5, cached10 int64
	for e := 1; e <= epochs; e++ {
		opened = append(opened, epoch(e))
		got := readWhole(t, epoch(e), 1<<20)
		if e%10 == 0 {
			want, _, _ := d.Epoch(shuffle.Options{Seed: 5, Epoch: uint64(e)}, 0, records)
			require.Equal(t, sum(want), sum(got), "epoch %d", e)
		}
		require.EqualValues(t, size, len(got), "epoch %d", e)
		peak = max(peak, ownCached(t, p.dir, opened)-before)
		if e == 5 {
			rss5 = currentRSS(t, m.cmd.Process.Pid)
		}
		if e == 10 {
			cached10 = ownCached(t, p.dir, opened)
		}
	}
	rss := currentRSS(t, m.cmd.Process.Pid)
	late := ownCached(t, p.dir, opened) - cached10
	// Closed epochs keep their tail (the slack and a chunk) for closeDropDelay after their
	// last reader closes them: once that has passed, every one of them is gone. (Opening a
	// file to ask what of it is cached, as ownCached does, reads nothing and does not put
	// that off.) Keeping the epochs would add 960 MiB over the last 20. Measured on the
	// mount's own files (mincore), not the machine's Cached, which other work fills.
	time.Sleep(closeDropDelay + time.Second)
	settled := ownCached(t, p.dir, opened) - cached10
	t.Logf("%d epochs of %d MiB: the mount's files in the page cache grew by at most %d MiB, %+d MiB over epochs 11-%d (%+d MiB %v after the last closed); daemon RSS %d MiB after epoch 5, %d MiB after epoch %d",
		epochs, size>>20, peak>>20, late>>20, epochs, settled>>20, closeDropDelay+time.Second, rss5>>20, rss>>20, epochs)
	assert.Less(t, late, int64(epochs-10)*size/2, "the page cache does not grow with the epochs")
	assert.Less(t, settled, size/2, "every closed epoch was dropped whole")
	assert.LessOrEqual(t, rss, rss5+32<<20, "the daemon's RSS does not grow with the epochs")
	m.stop() // requires exit 0: the race detector exits 66 on a race
	assert.NotContains(t, m.stderr.String(), "DATA RACE")
}

// planInputs returns what a mount planned its memory from, as its info.json says: the memory
// it saw and what the other mounts had claimed.
func planInputs(t *testing.T, info map[string]any) (sysmem.Memory, int64) {
	t.Helper()
	f := info["memory"].(map[string]any)
	n := func(k string) int64 {
		v, ok := f[k].(float64)
		require.True(t, ok, "memory.%s in info.json", k)
		return int64(v)
	}
	mem := sysmem.Memory{RAM: n("ram"), Available: n("available"), Cgroup: f["cgroup"].(string), Version: int(n("cgroup_version")),
		Limit: n("cgroup_limit"), Usage: n("cgroup_usage"), Reclaimable: n("cgroup_reclaimable")}
	return mem, n("claimed_by_other_mounts")
}

// currentRSS returns a process's resident set (VmRSS) in bytes.
func currentRSS(t *testing.T, pid int) int64 { return procStatusKiB(t, pid, "VmRSS") << 10 }
