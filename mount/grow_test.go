package mount

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/internal/dstest"
)

// TestGrowForReaders: a mount of one dataset larger than its budget grows its cache for
// readers at once to a window each and one more, never past its budget less the order state,
// and the resident set gives up what the cache takes; one reader changes nothing. A dataset
// cached whole does not grow.
func TestGrowForReaders(t *testing.T) {
	ref := dstest.Fixed(t, filepath.Join(t.TempDir(), "ds"), 64<<10, 1024, 1<<20, true) // 64 blocks of 1 MiB
	p, err := New(Options{Data: ref.Dir, Mountpoint: t.TempDir(), CacheSize: 48 << 20, Readahead: 2 << 20})
	require.NoError(t, err)
	sv, err := p.build()
	require.NoError(t, err)
	defer sv.close()
	defer sv.cache.Close()
	c := sv.cache
	order := sv.tree.(interface{ OrderBytes() int64 }).OrderBytes()
	planned, resident := c.Capacity(), p.mem.ResidentBlocks
	require.NotNil(t, p.cut, "a resident set the cache may take from")
	require.Greater(t, resident, 0)
	assert.EqualValues(t, 48<<20, p.growMax())
	g := &grower{p: p, c: c, most: p.growMax() - order, order: order}
	g.step(1)
	assert.Equal(t, planned, c.Capacity(), "one reader: the plan's two windows")
	g.step(4)
	assert.Equal(t, planned, c.Capacity(), "four readers: five windows of %d fit in the plan's cache", p.need.Window)
	g.step(10)
	assert.Equal(t, 11*p.need.Window, c.Capacity(), "ten readers: eleven windows")
	assert.Less(t, int(p.cut.Load()), resident, "the resident set gave up blocks")
	g.step(1000)
	assert.LessOrEqual(t, c.Capacity()+order, int64(48<<20), "within the budget, the order state's share included")
	assert.Greater(t, c.Capacity()+order, int64(48<<20-(1<<20)-(1<<20)), "the budget less the order state, in whole pages")
	assert.Zero(t, p.cut.Load(), "no block resident beside a cache of the whole budget")
	assert.Equal(t, 1000, g.told, "said once that the budget is short")

	whole, err := New(Options{Data: ref.Dir, Mountpoint: t.TempDir(), CacheSize: 256 << 20})
	require.NoError(t, err)
	assert.Equal(t, whole.mem.CacheSize, whole.growMax(), "cached whole: no growth")
}
