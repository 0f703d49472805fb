package shuffle

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ids lists every position's record as a global storage index (block start + local).
func ids(t testing.TB, counts []uint64, opt Options) []uint64 {
	t.Helper()
	o, err := New(counts, opt)
	require.NoError(t, err)
	start := make([]uint64, len(counts)+1)
	for i, c := range counts {
		start[i+1] = start[i] + c
	}
	out := make([]uint64, o.Len())
	for p := range out {
		b, l := o.At(uint64(p))
		require.Less(t, l, counts[b])
		out[p] = start[b] + l
	}
	return out
}

func sumCounts(c []uint64) (n uint64) {
	for _, x := range c {
		n += x
	}
	return n
}

var shapes = map[string][]uint64{
	"one block":   {7},
	"even":        {5, 5, 5, 5, 5, 5},
	"ragged last": {8, 8, 8, 8, 8, 3},
	"mixed":       {1, 9, 4, 13, 2, 7, 7, 1, 5},
}

func allOptions() []Options {
	var out []Options
	for _, m := range []Mode{Full, Blocks, None} {
		out = append(out, Options{Seed: 3, Epoch: 1, Mode: m, Mix: 1})
	}
	for _, k := range []int{2, 3, 4, 100} {
		out = append(out, Options{Seed: 3, Epoch: 1, Mode: Full, Mix: k})
	}
	return out
}

func TestEveryRecordExactlyOnce(t *testing.T) {
	for name, counts := range shapes {
		for _, opt := range allOptions() {
			t.Run(fmt.Sprintf("%s/%s/mix%d", name, opt.Mode, opt.Mix), func(t *testing.T) {
				got := ids(t, counts, opt)
				seen := make([]bool, sumCounts(counts))
				for _, id := range got {
					require.False(t, seen[id], "record %d twice", id)
					seen[id] = true
				}
				assert.Len(t, got, len(seen))
			})
		}
	}
}

func TestDeterministicAndDistinct(t *testing.T) {
	counts := []uint64{50, 50, 50, 50, 50, 50, 50, 20}
	base := Options{Seed: 11, Epoch: 2, Mode: Full, Mix: 2}
	a := ids(t, counts, base)
	assert.Equal(t, a, ids(t, counts, base), "same options must give the same order")
	other := base
	other.Epoch = 3
	assert.NotEqual(t, a, ids(t, counts, other), "epochs must differ")
	other = base
	other.Seed = 12
	assert.NotEqual(t, a, ids(t, counts, other), "seeds must differ")
}

// blockRuns returns the storage blocks in the order the epoch visits them, one entry per run.
func blockRuns(t *testing.T, counts []uint64, opt Options) []int {
	o, err := New(counts, opt)
	require.NoError(t, err)
	var runs []int
	for p := uint64(0); p < o.Len(); p++ {
		b, _ := o.At(p)
		if len(runs) == 0 || runs[len(runs)-1] != b {
			runs = append(runs, b)
		}
	}
	return runs
}

func TestBlockContiguity(t *testing.T) {
	counts := shapes["mixed"]
	for _, m := range []Mode{Full, Blocks, None} {
		runs := blockRuns(t, counts, Options{Seed: 5, Mode: m})
		assert.Len(t, runs, len(counts), "%s: each block must be one contiguous run", m)
	}
	o, err := New(counts, Options{Seed: 5, Mode: None})
	require.NoError(t, err)
	for p := uint64(0); p < o.Len(); p++ {
		b, l := o.At(p)
		o2, _ := New(counts, Options{Mode: None})
		b2, l2 := o2.At(p)
		assert.Equal(t, [2]uint64{uint64(b2), l2}, [2]uint64{uint64(b), l})
	}
	// blocks mode keeps records of each block in stored order.
	ob, _ := New(counts, Options{Seed: 5, Mode: Blocks})
	prevB, prevL := -1, uint64(0)
	for p := uint64(0); p < ob.Len(); p++ {
		b, l := ob.At(p)
		if b == prevB {
			assert.Equal(t, prevL+1, l)
		} else {
			assert.Zero(t, l)
		}
		prevB, prevL = b, l
	}
}

// TestMixWindows checks the K-window property: positions of window w draw only from the K
// blocks of that window, and together use them all, for each K.
func TestMixWindows(t *testing.T) {
	counts := []uint64{10, 10, 10, 10, 10, 10, 10, 4}
	for _, k := range []int{1, 2, 3, 8} {
		o, err := New(counts, Options{Seed: 9, Mode: Full, Mix: k})
		require.NoError(t, err)
		assert.Equal(t, (len(counts)+k-1)/k, o.Windows())
		for w := 0; w < o.Windows(); w++ {
			win := o.Window(w)
			want := map[int]bool{}
			for _, b := range win.Blocks {
				want[b] = true
			}
			assert.LessOrEqual(t, len(win.Blocks), k)
			got := map[int]bool{}
			for i := uint64(0); i < win.Count; i++ {
				b, _ := o.At(win.Start + i)
				got[b] = true
			}
			assert.Equal(t, want, got, "mix %d window %d", k, w)
		}
		if k > 1 {
			// Records of a window are interleaved, not left block after block.
			runs := blockRuns(t, counts, Options{Seed: 9, Mode: Full, Mix: k})
			assert.Greater(t, len(runs), len(counts))
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []Options{{Mix: -1}, {Mix: MaxMix + 1}, {Mode: Blocks, Mix: 2}, {Mode: Mode(7)}} {
		_, err := New([]uint64{1}, o)
		assert.Error(t, err, "%+v", o)
	}
	_, err := New(nil, Options{})
	assert.Error(t, err)
}

func TestParseMode(t *testing.T) {
	for _, m := range []Mode{Full, Blocks, None} {
		got, err := ParseMode(m.String())
		require.NoError(t, err)
		assert.Equal(t, m, got)
	}
	_, err := ParseMode("random")
	assert.ErrorContains(t, err, "full, blocks, none")
}

func TestBelowUniform(t *testing.T) {
	r := NewRNG(1)
	var hist [6]int
	for i := 0; i < 60000; i++ {
		hist[r.Below(6)]++
	}
	for _, h := range hist {
		assert.InDelta(t, 10000, h, 500)
	}
}

// TestGolden pins the algorithm of docs/SHUFFLE.md: a change here breaks every user's
// reproducibility and must be a deliberate new format.
func TestGolden(t *testing.T) {
	assert.Equal(t, uint64(0xe220a8397b1dcdaf), NewRNG(0).Uint64(), "SplitMix64 reference value")
	counts := []uint64{4, 4, 4, 3}
	for _, c := range []struct {
		opt  Options
		want []uint64
	}{
		{Options{Seed: 42, Epoch: 0, Mode: Full, Mix: 1}, goldenIDs[0]},
		{Options{Seed: 42, Epoch: 1, Mode: Full, Mix: 1}, goldenIDs[1]},
		{Options{Seed: 42, Epoch: 0, Mode: Full, Mix: 2}, goldenIDs[2]},
		{Options{Seed: 42, Epoch: 0, Mode: Blocks}, goldenIDs[3]},
	} {
		assert.Equal(t, c.want, ids(t, counts, c.opt), "%+v", c.opt)
	}
}

// TestGoldenVersion2 pins order version 2's Bijection: a window of more than BijectionFrom
// records, at positions computed one by one by docs/examples/shuffle_order.py (record_at), and
// version 1's Fisher-Yates permutation of the same window, which differs.
func TestGoldenVersion2(t *testing.T) {
	counts := []uint64{3_000_000, 2_500_000, 1000}
	pos := []uint64{0, 1, 2, 3, 4, 5_000_000, 5_499_999, 5_500_000, 5_500_999}
	want := []uint64{1232110, 90728, 2259777, 3690128, 1251463, 4751336, 2547569, 5500618, 5500083}
	o, err := New(counts, Options{Seed: 42, Mode: Full, Mix: 2, Version: Version2})
	require.NoError(t, err)
	old, err := New(counts, Options{Seed: 42, Mode: Full, Mix: 2, Version: Version1})
	require.NoError(t, err)
	start := []uint64{0, 3_000_000, 5_500_000}
	var same int
	for i, p := range pos {
		b, l := o.At(p)
		assert.Equal(t, want[i], start[b]+l, "position %d", p)
		if b1, l1 := old.At(p); b1 == b && l1 == l {
			same++
		}
	}
	assert.Less(t, same, 3, "version 1 permutes the large window otherwise")
	// The small last window (1000 records) is the same in both versions.
	for p := uint64(5_500_000); p < 5_501_000; p++ {
		b, l := o.At(p)
		b1, l1 := old.At(p)
		require.Equal(t, [2]uint64{uint64(b), l}, [2]uint64{uint64(b1), l1}, "position %d", p)
	}
	assert.Zero(t, Options{}.Version)
	assert.Equal(t, CurrentVersion, Options{}.OrderVersion())
}

// goldenIDs were produced by docs/examples/shuffle_order.py, an independent implementation of
// docs/SHUFFLE.md, and agree with this package.
var goldenIDs = [][]uint64{
	{5, 4, 7, 6, 2, 1, 0, 3, 9, 10, 11, 8, 13, 14, 12},
	{13, 14, 12, 2, 3, 1, 0, 9, 11, 8, 10, 7, 5, 6, 4},
	{0, 5, 1, 3, 7, 2, 4, 6, 12, 10, 9, 13, 8, 11, 14},
	{4, 5, 6, 7, 0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14},
}

// TestWindowCacheBounded: the cached windows hold at most the cache's bytes, or the one most
// recent window, while many windows are visited.
func TestWindowCacheBounded(t *testing.T) {
	counts := make([]uint64, 64)
	for i := range counts {
		counts[i] = DefaultWindowBytes / 4 / 8
	}
	o, err := New(counts, Options{Seed: 1, Mode: Full, Mix: 2})
	require.NoError(t, err)
	for w := 0; w < o.Windows(); w++ {
		o.Window(w)
		n, held := o.windows.Held()
		assert.True(t, held <= DefaultWindowBytes || n <= 1, "held %d in %d windows", held, n)
	}
	assert.Equal(t, windowKey{0, o.Windows() - 1}, o.windows.lru.Keys()[0], "most recent first")
}

// TestEvenWindowStarts: an order over even blocks (every block but a shorter last alike)
// computes its window starts instead of keeping a table; they must equal the sums of its
// windows' blocks, wherever the short block lands.
func TestEvenWindowStarts(t *testing.T) {
	for _, counts := range [][]uint64{{8, 8, 8, 8, 8, 3}, {5, 5, 5, 5}, {6, 6, 6, 6, 6, 6, 6, 1}, {4, 2}} {
		for _, opt := range allOptions() {
			for seed := range uint64(8) {
				opt.Seed = seed
				o, err := New(counts, opt)
				require.NoError(t, err)
				require.True(t, o.even, "counts %v", counts)
				var pos uint64
				for w := range o.Windows() {
					require.Equal(t, pos, o.WindowStart(w), "counts %v %+v window %d", counts, opt, w)
					for _, b := range o.WindowBlocks(w) {
						pos += counts[b]
					}
				}
				require.Equal(t, pos, o.WindowStart(o.Windows()))
				require.Equal(t, sumCounts(counts), o.Len())
				for p := range pos {
					w := o.WindowOf(p)
					require.True(t, o.WindowStart(w) <= p && p < o.WindowStart(w+1))
				}
			}
		}
	}
	for _, counts := range [][]uint64{{3, 8, 8}, {8, 3, 8}, {7}} {
		o, err := New(counts, Options{})
		require.NoError(t, err)
		assert.False(t, o.even, "counts %v keep a table", counts)
	}
}
