package mount

import (
	"bytes"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/internal/dstest"
)

// TestGrowForReaders: a mount of one dataset larger than its budget grows its cache for
// readers at several places at once, to their windows and one more, once they have been
// there for growSteady looks, never past its budget less the order state; the resident set
// gives up what the cache takes and the claim says so. One reader, or readers of one file
// within a window of one another, change nothing. A dataset cached whole does not grow.
func TestGrowForReaders(t *testing.T) {
	ref := dstest.Fixed(t, filepath.Join(t.TempDir(), "ds"), 64<<10, 1024, 1<<20, true) // 64 blocks of 1 MiB
	p, err := New(Options{Data: ref.Dir, Mountpoint: t.TempDir(), CacheSize: 48 << 20, Readahead: 2 << 20})
	require.NoError(t, err)
	sv, err := p.build()
	require.NoError(t, err)
	defer sv.close()
	defer sv.cache.Close()
	require.True(t, p.grows)
	c := sv.cache
	order := sv.tree.(interface{ OrderBytes() int64 }).OrderBytes()
	planned, resident := c.Capacity(), p.mem.ResidentBlocks
	require.NotNil(t, p.cut, "a resident set the cache may take from")
	require.Greater(t, resident, 0)
	assert.EqualValues(t, 48<<20, p.growMax())
	w := p.need.Window
	var claims [][2]int64
	g := &grower{p: p, c: c, most: p.growMax() - order, order: order, resident: p.mem.Resident,
		claim: func(cache, resident int64) { claims = append(claims, [2]int64{cache, resident}) }}
	steps := func(at map[string][]int64) {
		for range growSteady {
			g.step(at)
		}
	}

	places, want := g.want(map[string][]int64{"epoch-0001": {5 << 20}})
	assert.Equal(t, 1, places)
	assert.Equal(t, 2*w, want, "one reader: the plan's two windows")
	places, want = g.want(map[string][]int64{"epoch-0001": {0, w, 2 * w, 10 * w}, "shard-0-of-2/epoch-0001": {0}})
	assert.Equal(t, 3, places, "readers of a file within a window of one another are one place")
	assert.Equal(t, (2*w+w)+w+w+w, want, "each place's span and a window, and one more")

	steps(map[string][]int64{"epoch-0001": {0, w / 2}})
	assert.Equal(t, planned, c.Capacity(), "readers at one place: the plan's two windows")
	shards := func(n int) map[string][]int64 {
		at := map[string][]int64{}
		for r := range n {
			at[fmt.Sprintf("shard-%d-of-%d/epoch-0001", r, n)] = []int64{int64(r)}
		}
		return at
	}
	ten := shards(10)
	g.step(ten)
	g.step(ten)
	assert.Equal(t, planned, c.Capacity(), "not before growSteady looks")
	g.step(map[string][]int64{"epoch-0001": {0}})
	g.step(ten)
	assert.Equal(t, planned, c.Capacity(), "the least of the last looks: a moment's readers do not count")
	steps(ten)
	assert.Equal(t, 11*w, c.Capacity(), "ten places: eleven windows")
	assert.Zero(t, c.Stats().Short, "the cache holds them")
	assert.Less(t, int(p.cut.Load()), resident, "the resident set gave up blocks")
	require.NotEmpty(t, claims)
	assert.Equal(t, [2]int64{11*w + order, g.resident}, claims[len(claims)-1], "the claim: the cache with the order state, and the resident set")

	// Grown to the least of the last looks, and the log says that look's places.
	var logged bytes.Buffer
	log.SetOutput(&logged)
	g.step(shards(12))
	g.step(shards(12))
	g.step(shards(14))
	log.SetOutput(os.Stderr)
	assert.Equal(t, 13*w, c.Capacity(), "twelve places, then fourteen: the least, thirteen windows")
	assert.Contains(t, logged.String(), "readers at 12 places of the order at once: cache", "the places of the least look")

	var far []int64
	for i := range 20 {
		far = append(far, int64(i)*10*w)
	}
	steps(map[string][]int64{"epoch-0001": far})
	assert.LessOrEqual(t, c.Capacity()+order, int64(48<<20), "within the budget, the order state's share included")
	assert.Greater(t, c.Capacity()+order, int64(48<<20-(2<<20)), "the budget less the order state, in whole pages")
	assert.Zero(t, p.cut.Load(), "no block resident beside a cache of the whole budget")
	assert.Zero(t, g.resident)
	assert.Equal(t, 21*w, g.told, "said that the budget is short")
	assert.Equal(t, 21*w-c.Capacity(), c.Stats().Short, "stats.json says by how much")
	steps(ten)
	assert.Zero(t, c.Stats().Short, "ten places again: the cache holds them")

	whole, err := New(Options{Data: ref.Dir, Mountpoint: t.TempDir(), CacheSize: 256 << 20})
	require.NoError(t, err)
	assert.False(t, whole.growable(), "cached whole: no growth")
	assert.Equal(t, whole.mem.CacheSize, whole.growMax())
}
