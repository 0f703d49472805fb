package view

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/internal/dstest"
	"github.com/blockfs/blockfs/layout"
)

// TestFootprint: each file of each block (data, ids, offsets) counts as whole pages.
func TestFootprint(t *testing.T) {
	// 50 blocks of 20 records of 100 bytes: a 2000-byte data file and a 160-byte ids file each.
	fixed := dstest.Fixed(t, filepath.Join(t.TempDir(), "fixed"), 1000, 100, 2000, true)
	ds, err := layout.Open(fixed.Dir)
	require.NoError(t, err)
	assert.EqualValues(t, 50*2*4096, Footprint(ds, 4096))
	assert.EqualValues(t, 50*2*(1<<20), Footprint(ds, 1<<20))
	assert.EqualValues(t, 50*3*1024, Footprint(ds, 1024), "2000 data bytes are 2 pages of 1 KiB, 160 ids bytes 1")

	// Not pre-shuffled: no ids files.
	plain := dstest.Fixed(t, filepath.Join(t.TempDir(), "plain"), 1000, 100, 2000, false)
	ds, err = layout.Open(plain.Dir)
	require.NoError(t, err)
	assert.EqualValues(t, 50*4096, Footprint(ds, 4096))

	// Variable: data and offsets files, no ids.
	lengths := []int{3000, 3000, 3000, 3000, 3000}
	v := dstest.Variable(t, filepath.Join(t.TempDir(), "var"), lengths, 6000, false)
	ds, err = layout.Open(v.Dir)
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

// TestPlanMemory checks the --cache-size auto and --direct auto rules (view.PlanMemory) with
// a fake RAM size: tiny against a small dataset, so that every branch is reached without a
// machine of that size, and a few GiB against a sparse 1 GiB dataset where the rule needs a
// footprint above the 512 MiB default budget.
func TestPlanMemory(t *testing.T) {
	const pg = 4096
	small := dstest.Fixed(t, filepath.Join(t.TempDir(), "small"), 1000, 100, 2000, true)
	sds, err := layout.Open(small.Dir)
	require.NoError(t, err)
	F := Footprint(sds, pg) // 100 pages
	require.EqualValues(t, 100*pg, F)
	const big = 1 << 30
	bds := sparseFlat(t, big)
	const mib = 1 << 20
	require.EqualValues(t, big, Footprint(bds, mib))

	cases := []struct {
		name      string
		ds        *layout.Dataset
		pageSize  int64
		cacheSize int64 // 0: auto
		need      int64
		direct    Direct
		mem       int64

		wantCache    int64
		cacheReason  string // a part of CacheReason
		wantDirect   bool
		directReason string // a part of Reason
	}{
		{name: "small: cached whole, direct on", ds: sds, pageSize: pg, need: 2 * pg, mem: 8 * F,
			wantCache: F, cacheReason: "cached whole", wantDirect: true, directReason: "holds the whole dataset"},
		{name: "footprint exactly a quarter of RAM: cached whole", ds: sds, pageSize: pg, need: 2 * pg, mem: 4 * F,
			wantCache: F, cacheReason: "fit in a quarter of RAM", wantDirect: true, directReason: "holds the whole dataset"},
		{name: "small, need above the footprint: need, rounded to pages", ds: sds, pageSize: pg, need: F + 5000, mem: 8 * F,
			wantCache: F + 2*pg, cacheReason: "cached whole", wantDirect: true, directReason: "holds the whole dataset"},
		{name: "just over a quarter of RAM: the default budget (which holds a small dataset whole)", ds: sds, pageSize: pg, need: 2 * pg, mem: 4*F - 4,
			wantCache: DefaultCacheSize, cacheReason: "exceed a quarter of RAM", wantDirect: true, directReason: "holds the whole dataset"},
		{name: "between a quarter and half of RAM, cache below the footprint: direct off", ds: sds, pageSize: pg, cacheSize: F / 2, need: 2 * pg, mem: 3 * F,
			wantCache: F / 2, cacheReason: "--cache-size", wantDirect: false, directReason: "fits in half of RAM"},
		{name: "exactly half of RAM: direct off", ds: sds, pageSize: pg, cacheSize: F / 2, need: 2 * pg, mem: 2 * F,
			wantCache: F / 2, cacheReason: "--cache-size", wantDirect: false, directReason: "fits in half of RAM"},
		{name: "larger than half of RAM: direct on", ds: sds, pageSize: pg, cacheSize: F / 2, need: 2 * pg, mem: 2*F - 2*pg,
			wantCache: F / 2, cacheReason: "--cache-size", wantDirect: true, directReason: "larger than half of RAM"},
		{name: "explicit --cache-size, rounded up to whole pages", ds: sds, pageSize: pg, cacheSize: 5*pg + 1, need: 2 * pg, mem: 100 * F,
			wantCache: 6 * pg, cacheReason: "--cache-size", wantDirect: false, directReason: "fits in half of RAM"},
		{name: "explicit --cache-size below the minimum: MinPages pages", ds: sds, pageSize: pg, cacheSize: 1, need: 1, mem: 100 * F,
			wantCache: cache.MinPages * pg, cacheReason: "--cache-size", wantDirect: false, directReason: "fits in half of RAM"},
		{name: "explicit --cache-size holding the dataset: direct on even with little RAM", ds: sds, pageSize: pg, cacheSize: 2 * F, need: 2 * pg, mem: F,
			wantCache: 2 * F, cacheReason: "--cache-size", wantDirect: true, directReason: "holds the whole dataset"},
		{name: "--direct on where auto is off", ds: sds, pageSize: pg, cacheSize: F / 2, need: 2 * pg, direct: DirectOn, mem: 3 * F,
			wantCache: F / 2, cacheReason: "--cache-size", wantDirect: true, directReason: "--direct on"},
		{name: "--direct off where auto is on", ds: sds, pageSize: pg, need: 2 * pg, direct: DirectOff, mem: 8 * F,
			wantCache: F, cacheReason: "cached whole", wantDirect: false, directReason: "--direct off"},
		{name: "RAM unknown: the default budget", ds: sds, pageSize: pg, need: 2 * pg, mem: 0,
			wantCache: DefaultCacheSize, cacheReason: "the default budget", wantDirect: true, directReason: "holds the whole dataset"},
		{name: "RAM unknown, cache below the footprint: direct on", ds: sds, pageSize: pg, cacheSize: F / 2, need: 2 * pg, mem: 0,
			wantCache: F / 2, cacheReason: "--cache-size", wantDirect: true},

		{name: "1 GiB in 4 GiB: cached whole", ds: bds, pageSize: mib, need: 80 * mib, mem: 4 << 30,
			wantCache: big, cacheReason: "cached whole", wantDirect: true, directReason: "holds the whole dataset"},
		{name: "1 GiB in 3 GiB: 512 MiB, the kernel keeps the blocks", ds: bds, pageSize: mib, need: 80 * mib, mem: 3 << 30,
			wantCache: DefaultCacheSize, cacheReason: "exceed a quarter of RAM", wantDirect: false, directReason: "fits in half of RAM"},
		{name: "1 GiB in 3 GiB, need above the default", ds: bds, pageSize: mib, need: 700*mib - 10, mem: 3 << 30,
			wantCache: 700 * mib, cacheReason: "the default budget", wantDirect: false, directReason: "fits in half of RAM"},
		{name: "1 GiB in 1.5 GiB: 512 MiB, direct on", ds: bds, pageSize: mib, need: 80 * mib, mem: 3 << 29,
			wantCache: DefaultCacheSize, cacheReason: "exceed a quarter of RAM", wantDirect: true, directReason: "larger than half of RAM"},
		{name: "1 GiB in 1.5 GiB, --direct off", ds: bds, pageSize: mib, need: 80 * mib, direct: DirectOff, mem: 3 << 29,
			wantCache: DefaultCacheSize, cacheReason: "exceed a quarter of RAM", wantDirect: false, directReason: "--direct off"},
		{name: "1 GiB, need above the whole footprint", ds: bds, pageSize: mib, need: big + 3*mib, mem: 3 << 29,
			wantCache: big + 3*mib, cacheReason: "the default budget", wantDirect: true, directReason: "holds the whole dataset"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := PlanMemory(c.ds, c.pageSize, c.cacheSize, c.need, c.direct, c.mem)
			assert.Equal(t, Footprint(c.ds, c.pageSize), p.Footprint)
			assert.Equal(t, c.mem, p.MemTotal)
			assert.Equal(t, c.wantCache, p.CacheSize, "cache size")
			assert.Contains(t, p.CacheReason, c.cacheReason)
			assert.Equal(t, c.wantDirect, p.Direct, "direct I/O (%s)", p.Reason)
			assert.Contains(t, p.Reason, c.directReason)
			// Whatever the case: whole pages, at least MinPages of them, never below need.
			assert.Zero(t, p.CacheSize%c.pageSize)
			assert.GreaterOrEqual(t, p.CacheSize, int64(cache.MinPages)*c.pageSize)
			assert.GreaterOrEqual(t, p.CacheSize, c.need)
			if c.cacheSize == 0 && c.mem > 0 && p.Footprint <= c.mem/4 {
				assert.GreaterOrEqual(t, p.CacheSize, p.Footprint, "a dataset in a quarter of RAM is cached whole")
			}
			// The plan is a valid cache configuration.
			o := cache.Options{Size: p.CacheSize, PageSize: int(c.pageSize)}
			assert.NoError(t, o.Validate())
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
