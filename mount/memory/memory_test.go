package memory

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/internal/dstest"
	"github.com/blockfs/blockfs/internal/sysmem"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/source/local"
	"github.com/blockfs/blockfs/source/stack"
)

// TestFootprint: each file of each block (data, ids, offsets) counts as whole pages.
func TestFootprint(t *testing.T) {
	// 50 blocks of 20 records of 100 bytes: a 2000-byte data file and a 160-byte ids file each.
	fixed := dstest.Fixed(t, filepath.Join(t.TempDir(), "fixed"), 1000, 100, 2000, true)
	ds, err := local.Open(fixed.Dir)
	require.NoError(t, err)
	assert.EqualValues(t, 50*2*4096, Footprint(ds, 4096))
	assert.EqualValues(t, 50*2*(1<<20), Footprint(ds, 1<<20))
	assert.EqualValues(t, 50*3*1024, Footprint(ds, 1024), "2000 data bytes are 2 pages of 1 KiB, 160 ids bytes 1")

	// Not pre-shuffled: no ids files.
	plain := dstest.Fixed(t, filepath.Join(t.TempDir(), "plain"), 1000, 100, 2000, false)
	ds, err = local.Open(plain.Dir)
	require.NoError(t, err)
	assert.EqualValues(t, 50*4096, Footprint(ds, 4096))

	// Variable: data and offsets files, no ids.
	lengths := []int{3000, 3000, 3000, 3000, 3000}
	v := dstest.Variable(t, filepath.Join(t.TempDir(), "var"), lengths, 6000, false)
	ds, err = local.Open(v.Dir)
	require.NoError(t, err)
	var want int64
	for b := 0; b < ds.Blocks(); b++ {
		want += (int64(ds.BlockBytes(b))+4095)/4096*4096 + 4096 // data, and its small offsets file
	}
	assert.EqualValues(t, want, Footprint(ds, 4096))
}

// sparseFlat returns a dataset served in place from a sparse file of size bytes (no disk
// space): a footprint above DefaultCacheSize for the branches a small dataset cannot reach.
func sparseFlat(t *testing.T, size int64) *layout.Dataset {
	t.Helper()
	p := filepath.Join(t.TempDir(), "flat.bin")
	f, err := os.Create(p)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(size))
	require.NoError(t, f.Close())
	ds, err := layout.OpenFlat(p, layout.FlatOptions{RecordSize: 4096, BlockSize: 16 << 20})
	require.NoError(t, err)
	return ds
}

// ram returns the memory of a machine with n bytes of RAM, all of it available.
func ram(n int64) sysmem.Memory { return sysmem.Memory{RAM: n, Available: n} }

// TestHeadroom: a quarter of the memory, at least 1 GiB, at most half.
func TestHeadroom(t *testing.T) {
	const gib = 1 << 30
	assert.EqualValues(t, 6*gib, Headroom(24*gib))
	assert.EqualValues(t, 1536<<20, Headroom(6*gib))
	assert.EqualValues(t, 1*gib, Headroom(2*gib))
	assert.EqualValues(t, 1*gib, Headroom(3*gib), "at least 1 GiB")
	assert.EqualValues(t, 256<<20, Headroom(512<<20), "at most half")
	assert.Zero(t, Headroom(0))
}

// TestPlanMemory checks the memory rules (PlanFor): the budget from the RAM, the
// cgroup's limit and what is free, its split between the daemon's cache and the blocks kept
// resident in the kernel's page cache, and which blocks stream with O_DIRECT. A sparse 1 GiB
// dataset of 64 blocks of 16 MiB served in place, against fake memories.
func TestPlanMemory(t *testing.T) {
	const mib, gib = 1 << 20, 1 << 30
	bds := sparseFlat(t, gib)
	require.EqualValues(t, gib, Footprint(bds, mib))
	require.Equal(t, 64, bds.Blocks())
	const need = 80 * mib

	cases := []struct {
		name      string
		cacheSize int64 // 0: auto
		need      int64
		direct    Direct
		mem       sysmem.Memory
		claimed   int64

		budget       int64
		budgetReason string // a part of BudgetReason
		cache        int64
		cacheReason  string
		resident     int // blocks
		wantDirect   bool
		directReason string
	}{
		{name: "1 GiB in 4 GiB of RAM: cached whole", mem: ram(4 * gib), need: need,
			budget: 3 * gib, budgetReason: "RAM (4.0 GiB) less 1.0 GiB", cache: gib, cacheReason: "cached whole", wantDirect: true, directReason: "holds the whole dataset"},
		{name: "1 GiB in 3 GiB: the kernel keeps every block", mem: ram(3 * gib), need: need,
			budget: 2 * gib, budgetReason: "RAM", cache: DefaultCacheSize, cacheReason: "windows and readahead", resident: 64, directReason: "keeps every block"},
		{name: "1 GiB in 1.5 GiB: 24 blocks resident, 40 stream", mem: ram(3 * gib / 2), need: need,
			budget: 768 * mib, cache: 384 * mib, resident: 24, wantDirect: true, directReason: "blocks 0-23 (384 MiB) stay resident"},
		{name: "a 2 GiB cgroup on a 24 GiB machine", mem: sysmem.Memory{RAM: 24 * gib, Available: 23 * gib, Version: 1, Cgroup: "/job", Limit: 2 * gib, Usage: 100 * mib},
			need: need, budget: gib, budgetReason: "cgroup v1 limit of /job (2.0 GiB) less 1.0 GiB", cache: DefaultCacheSize, resident: 32, wantDirect: true, directReason: "blocks 0-31"},
		{name: "a full cgroup: what is free binds", mem: sysmem.Memory{RAM: 24 * gib, Available: 23 * gib, Version: 2, Cgroup: "/job", Limit: 4 * gib, Usage: 3584 * mib, Reclaimable: 256 * mib},
			need: need, budget: 768 * mib, budgetReason: "what is free now (768 MiB of 4.0 GiB, cgroup v2", cache: 384 * mib, resident: 24, wantDirect: true},
		{name: "little available on a big machine", mem: sysmem.Memory{RAM: 24 * gib, Available: 900 * mib}, need: need,
			budget: 900 * mib, budgetReason: "what is free now (900 MiB", cache: 450 * mib, resident: 28, wantDirect: true, directReason: "blocks 0-27"},
		{name: "1 GiB free of 24 GiB: cached whole, within what is free", mem: sysmem.Memory{RAM: 24 * gib, Available: 2 * gib}, need: need,
			budget: 2 * gib, cache: gib, cacheReason: "cached whole", wantDirect: true},
		{name: "another mount's claim comes off the budget", mem: ram(4 * gib), claimed: 5 * gib / 2, need: need,
			budget: gib / 2, budgetReason: "and 2.5 GiB the other blockfs mounts planned", cache: 256 * mib, resident: 16, wantDirect: true},
		{name: "other mounts took everything: the need", mem: ram(4 * gib), claimed: 8 * gib, need: need,
			budget: need, budgetReason: "raised to 80 MiB", cache: need, wantDirect: true, directReason: "no block fits"},
		{name: "need above the budget: raised, nothing resident", mem: ram(3 * gib / 2), need: 900 * mib,
			budget: 900 * mib, budgetReason: "raised to 900 MiB", cache: 900 * mib, wantDirect: true, directReason: "no block fits"},
		{name: "--cache-size below the data: twice the need to the cache, the rest resident", cacheSize: 256 * mib, mem: ram(24 * gib), need: need,
			budget: 256 * mib, budgetReason: "--cache-size", cache: 160 * mib, resident: 6, wantDirect: true, directReason: "blocks 0-5"},
		{name: "--cache-size between the need and twice it: all of it the cache", cacheSize: 120 * mib, mem: ram(24 * gib), need: need,
			budget: 120 * mib, cache: 120 * mib, cacheReason: "--cache-size", wantDirect: true, directReason: "no block fits"},
		{name: "--cache-size above the data: cached whole", cacheSize: 2 * gib, mem: ram(2 * gib), need: need,
			budget: 2 * gib, budgetReason: "--cache-size", cache: 2 * gib, cacheReason: "--cache-size", wantDirect: true, directReason: "holds the whole dataset"},
		{name: "--cache-size at the need: all of it the cache", cacheSize: need, mem: ram(24 * gib), need: need,
			budget: need, cache: need, cacheReason: "--cache-size", wantDirect: true, directReason: "no block fits"},
		{name: "--direct on: the budget is the cache", direct: DirectOn, mem: ram(3 * gib / 2), need: need,
			budget: 768 * mib, cache: 768 * mib, cacheReason: "--direct on", wantDirect: true, directReason: "--direct on"},
		{name: "--direct off: the cache's share, every block buffered", direct: DirectOff, mem: ram(3 * gib / 2), need: need,
			budget: 768 * mib, cache: 384 * mib, resident: 24, directReason: "--direct off"},
		{name: "memory unknown: the default budget", mem: sysmem.Memory{}, need: need,
			budget: DefaultCacheSize, budgetReason: "unknown", cache: 256 * mib, resident: 16, wantDirect: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := PlanFor(bds, mib, c.cacheSize, c.need, c.direct, c.mem, c.claimed)
			assert.Equal(t, c.budget, p.Budget, "budget (%s)", p.BudgetReason)
			assert.Contains(t, p.BudgetReason, c.budgetReason)
			assert.Equal(t, c.cache, p.CacheSize, "cache (%s)", p.CacheReason)
			assert.Contains(t, p.CacheReason, c.cacheReason)
			assert.Equal(t, c.resident, p.ResidentBlocks, "resident blocks")
			assert.EqualValues(t, int64(c.resident)*16*mib, p.Resident)
			assert.Equal(t, c.wantDirect, p.Direct, "direct (%s)", p.Reason)
			assert.Contains(t, p.Reason, c.directReason)
			// Whatever the case: whole pages, at least MinPages, never below need, and the
			// cache and the resident set within the budget (the cache raised to need aside).
			assert.Zero(t, p.CacheSize%mib)
			assert.GreaterOrEqual(t, p.CacheSize, c.need)
			assert.LessOrEqual(t, p.CacheSize+p.Resident, max(p.Budget, c.need))
			if p.Memory.Total() > 0 && c.cacheSize == 0 {
				assert.LessOrEqual(t, p.Budget, max(p.Total-p.Headroom, c.need), "the headroom is left to the trainer")
			}
			// Which files stream: with a resident set, exactly the blocks past it.
			for b := 0; b < bds.Blocks(); b++ {
				want := p.Direct && b >= p.ResidentBlocks
				assert.Equal(t, want, p.Streams(layout.DataFile(b)), "block %d", b)
				assert.Equal(t, want, p.Streams(layout.IDsFile(b)), "block %d ids", b)
			}
			o := cache.Options{Size: p.CacheSize, PageSize: mib}
			assert.NoError(t, o.Validate())
			facts := p.Facts()
			assert.Equal(t, p.Budget, facts["budget"])
			assert.Equal(t, p.ResidentBlocks, facts["resident_blocks"])
		})
	}
}

// TestPlanMemorySmall: a dataset of 105 KiB of files, 150 pages of 1 KiB, against tiny
// memories reaches the rules' edges: its size a quarter of the memory exactly, and the least
// cache.
func TestPlanMemorySmall(t *testing.T) {
	const pg = 1024
	small := dstest.Fixed(t, filepath.Join(t.TempDir(), "small"), 1000, 100, 2000, true)
	sds, err := local.Open(small.Dir)
	require.NoError(t, err)
	S, F := DataBytes(sds), Footprint(sds, pg)
	require.EqualValues(t, 50*(2000+160), S)
	require.EqualValues(t, 150*pg, F)
	p := PlanFor(sds, pg, 0, 2*pg, DirectAuto, ram(4*S), 0)
	assert.Equal(t, F, p.CacheSize, "a dataset of exactly a quarter of the memory is cached whole")
	assert.True(t, p.Direct)
	p = PlanFor(sds, pg, 0, 2*pg, DirectAuto, ram(4*S-4), 0)
	assert.NotContains(t, p.CacheReason, "cached whole", "just over a quarter")
	assert.Positive(t, p.ResidentBlocks)
	p = PlanFor(sds, pg, 1, 1, DirectAuto, ram(100*F), 0)
	assert.EqualValues(t, cache.MinPages*pg, p.CacheSize, "at least MinPages pages")
	p = PlanFor(sds, pg, F/2, 2*pg, DirectAuto, ram(100*F), 0)
	assert.Equal(t, F/2, p.Budget)
	assert.LessOrEqual(t, p.CacheSize+p.Resident, F/2)
}

// TestPlanMemoryRealSize: the plan's dataset size is the bytes of its files, not each file
// rounded up to whole cache pages (a 1.5 MiB pack of 17 blocks with ids and offsets files
// used to count as 51 MiB; a 2 MB file in place cut into 4 KiB blocks as 489 MiB, and with
// --block-size 1 as 977 GiB), so that a small dataset is cached whole and said to be small.
func TestPlanMemoryRealSize(t *testing.T) {
	const mib = 1 << 20
	lengths := make([]int, 1536)
	for i := range lengths {
		lengths[i] = 1024
	}
	v := dstest.Variable(t, filepath.Join(t.TempDir(), "var"), lengths, 96<<10, true)
	pack, err := local.Open(v.Dir)
	require.NoError(t, err)
	require.Equal(t, 17, pack.Blocks())
	p := filepath.Join(t.TempDir(), "two.bin")
	require.NoError(t, os.WriteFile(p, make([]byte, 2_000_000), 0o644))
	flat, err := layout.OpenFlat(p, layout.FlatOptions{RecordSize: 2, BlockSize: 4096})
	require.NoError(t, err)
	for _, c := range []struct {
		name       string
		ds         *layout.Dataset
		size, most int64 // DataBytes and the most it may be
		pages      int64 // Footprint in 1 MiB pages
		says       string
	}{
		{"a 1.5 MiB pack", pack, 0, 1600 << 10, 17 * 3, "1.5 MiB"},
		{"a 2 MB file in 4 KiB blocks", flat, 2_000_000, 2_000_000, 489, "1.9 MiB"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, mem := range []sysmem.Memory{ram(128 * mib), ram(24 << 30)} {
				plan := PlanFor(c.ds, mib, 0, 2*mib, DirectAuto, mem, 0)
				if c.size > 0 {
					assert.EqualValues(t, c.size, plan.Size)
				}
				assert.LessOrEqual(t, plan.Size, c.most)
				assert.EqualValues(t, c.pages*mib, plan.Footprint, "what the cache needs to hold it whole")
				assert.Equal(t, plan.Size, plan.Facts()["dataset_bytes"])
				if plan.Footprint > plan.Budget {
					assert.Contains(t, plan.CacheReason, "the dataset's "+c.says+" (")
					continue
				}
				assert.Contains(t, plan.CacheReason, "the dataset's "+c.says+" (", "RAM %s", ibytes(mem.RAM))
				assert.Contains(t, plan.CacheReason, "cached whole", "RAM %s", ibytes(mem.RAM))
				assert.True(t, plan.Direct)
			}
		})
	}
}

func TestParseDirect(t *testing.T) {
	for s, want := range map[string]Direct{"auto": DirectAuto, "on": DirectOn, "off": DirectOff} {
		d, err := ParseDirect(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, d, s)
	}
	for _, s := range []string{"", "yes", "ON", "true", "1", " on"} {
		_, err := ParseDirect(s)
		require.Error(t, err, "%q", s)
		assert.Contains(t, err.Error(), "want auto, on or off")
	}
}

// TestPlanMemoryDecode: a budget of the plan's own choosing leaves out what decompressing a
// compressed pack's frames holds; --cache-size is the cache, as given.
func TestPlanMemoryDecode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "zst")
	w, err := layout.Create(dir, layout.WriterOptions{Kind: layout.Fixed, RecordSize: 64, BlockSize: 64 << 10, IDs: true,
		Compress: &layout.Compression{Codec: layout.CodecZstd, Level: 1, Frame: 16 << 10}}, false)
	require.NoError(t, err)
	rec := make([]byte, 64)
	for i := range 4096 {
		rec[0] = byte(i)
		require.NoError(t, w.Append(uint64(i), rec))
	}
	_, err = w.Commit()
	require.NoError(t, err)
	ds, err := local.Open(dir)
	require.NoError(t, err)
	mem := sysmem.Memory{RAM: 8 << 30, Available: 8 << 30}
	p := PlanFor(ds, cache.DefaultPageSize, 0, 4<<20, DirectAuto, mem, 0)
	require.Equal(t, stack.DecodeMemory(16<<10), p.Decode)
	assert.Equal(t, mem.Total()-Headroom(mem.Total())-p.Decode, p.Budget)
	assert.Contains(t, p.BudgetReason, "to decompress frames")
	assert.Equal(t, p.Decode, p.Facts()["decode"])
	p = PlanFor(ds, cache.DefaultPageSize, 64<<20, 4<<20, DirectAuto, mem, 0)
	assert.Equal(t, int64(64<<20), p.Budget, "--cache-size as given")

	raw := dstest.Fixed(t, filepath.Join(t.TempDir(), "raw"), 1000, 100, 2000, true)
	rds, err := local.Open(raw.Dir)
	require.NoError(t, err)
	assert.Zero(t, PlanFor(rds, cache.DefaultPageSize, 0, 4<<20, DirectAuto, mem, 0).Decode)
}

// TestFieldCache: what pack counts a mount's cache to take for each field is the cache's
// least pages.
func TestFieldCache(t *testing.T) {
	require.EqualValues(t, int64(cache.MinPages)*cache.DefaultPageSize, layout.FieldCache)
}
