package shuffle

import (
	"runtime"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLocateRun: LocateRun and the block table agree with a binary search over the window's
// blocks for every record, in every mode, with blocks smaller and larger than a bucket.
func TestLocateRun(t *testing.T) {
	counts := []uint64{1, 700, 3, 64, 65, 1000, 129, 2, 4096, 63}
	for _, opt := range []Options{{Seed: 3, Mix: 1}, {Seed: 3, Mix: 3}, {Seed: 4, Mix: 7}, {Mode: Blocks}, {Mode: None}, {Mix: 16}} {
		o, err := New(counts, opt)
		require.NoError(t, err)
		for w := 0; w < o.Windows(); w++ {
			win := o.Window(w)
			for _, from := range []uint64{0, win.Count / 3} {
				ks := make([]uint32, win.Count-from)
				locals := make([]uint64, win.Count-from)
				win.LocateRun(from, ks, locals)
				for j := range locals {
					i := from + uint64(j)
					v := i
					if win.perm != nil {
						v = uint64(win.perm[i])
					}
					k := sort.Search(len(win.Blocks), func(k int) bool { return win.prefix[k+1] > v })
					require.Equal(t, uint32(k), ks[j], "opt %+v window %d record %d", opt, w, i)
					require.Equal(t, v-win.prefix[k], locals[j])
					gk, gl := win.Locate(i)
					require.Equal(t, k, gk)
					require.Equal(t, locals[j], gl)
				}
			}
		}
	}
}

// TestWindowCacheMergesBuilds: concurrent readers of one window share one computation.
func TestWindowCacheMergesBuilds(t *testing.T) {
	o, err := New([]uint64{1 << 16, 1 << 16}, Options{Seed: 1})
	require.NoError(t, err)
	wins := make(chan *Window, 8)
	for range 8 {
		go func() { wins <- o.Window(1) }()
	}
	first := <-wins
	for range 7 {
		require.Same(t, first, <-wins)
	}
}

// TestWindowBuildCollectsOnlyForPermutations: a window without a permutation (Blocks, None)
// allocates O(blocks), so building one never forces a garbage collection, however many
// records it holds; a permuted window of as many records does.
func TestWindowBuildCollectsOnlyForPermutations(t *testing.T) {
	forced := func() uint32 {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.NumForcedGC
	}
	counts := []uint64{collectBefore, collectBefore}
	for _, mode := range []Mode{Blocks, None} {
		o, err := New(counts, Options{Seed: 1, Mode: mode})
		require.NoError(t, err)
		before := forced()
		o.Window(0)
		o.Window(1)
		require.Equal(t, before, forced(), "mode %s", mode)
	}
	o, err := New(counts, Options{Seed: 1})
	require.NoError(t, err)
	before := forced()
	o.Window(0)
	require.Greater(t, forced(), before)
}

// TestBijectiveWindow: a window of version 2 over more than BijectionFrom records, with a
// sliver of a block among large ones, holds every record once, LocateRun agrees with Locate,
// and its order state is a few hundred bytes, not 4 a record.
func TestBijectiveWindow(t *testing.T) {
	counts := []uint64{2_000_000, 7, 1_500_000, 1_200_000}
	o, err := New(counts, Options{Seed: 3, Epoch: 5, Mode: Full, Mix: 4})
	require.NoError(t, err)
	require.Equal(t, 1, o.Windows())
	w := o.Window(0)
	require.NotNil(t, w.bij)
	require.Less(t, w.Bytes(), uint64(4096), "order state of a bijective window")
	require.LessOrEqual(t, w.Bytes(), MaxWindowBytes(counts, o.Options()))
	// A short last window of a bijective order holds its permutation: counted.
	tail := slices.Repeat([]uint64{1 << 20}, 516)
	to, err := New(tail, Options{Mode: Full, Mix: 512})
	require.NoError(t, err)
	last := to.Window(to.Windows() - 1)
	require.Nil(t, last.bij)
	require.LessOrEqual(t, last.Bytes(), MaxWindowBytes(tail, to.Options()))
	require.Greater(t, MaxWindowBytes(tail, to.Options()), uint64(4<<20), "4 blocks of 2^20 records")
	seen := make([]bool, w.Count)
	start := map[int]uint64{0: 0, 1: 2_000_000, 2: 2_000_007, 3: 3_500_007}
	ks, locals := make([]uint32, 1000), make([]uint64, 1000)
	for i0 := uint64(0); i0 < w.Count; i0 += uint64(len(locals)) {
		n := min(uint64(len(locals)), w.Count-i0)
		w.LocateRun(i0, ks[:n], locals[:n])
		for j := range n { // plain checks: testify's, 4.7 million times, took a minute under -race
			k, l := w.Locate(i0 + j)
			if k != int(ks[j]) || l != locals[j] {
				t.Fatalf("position %d: Locate says (%d, %d), LocateRun (%d, %d)", i0+j, k, l, ks[j], locals[j])
			}
			b := w.Blocks[k]
			if l >= counts[b] {
				t.Fatalf("position %d: record %d of block %d, which has %d", i0+j, l, b, counts[b])
			}
			s := start[b] + l
			if seen[s] {
				t.Fatalf("record %d twice", s)
			}
			seen[s] = true
		}
	}
}
