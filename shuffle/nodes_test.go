package shuffle

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// rrAt is the round-robin interleave by its definition: round j takes draw j of every source
// with more than j draws, in source order.
func rrAt(c []uint64) [][2]uint64 {
	var out [][2]uint64
	for j := uint64(0); ; j++ {
		any := false
		for i, n := range c {
			if j < n {
				out = append(out, [2]uint64{uint64(i), j})
				any = true
			}
		}
		if !any {
			return out
		}
	}
}

func TestRoundRobinInterleave(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 300; trial++ {
		c := make([]uint64, 1+r.IntN(9))
		for i := range c {
			c[i] = uint64(r.IntN(12))
		}
		c[r.IntN(len(c))]++ // at least one draw
		il := NewRoundRobin(c)
		want := rrAt(c)
		require.EqualValues(t, len(want), il.Len())
		for p, w := range want {
			i, j := il.At(uint64(p))
			require.Equal(t, w, [2]uint64{uint64(i), j}, "counts %v position %d", c, p)
			require.EqualValues(t, p, il.Position(int(w[0]), w[1]))
		}
		// Iter from every position walks the rest in order.
		for p := range want {
			it := il.Iter(uint64(p))
			for q := p; q < len(want); q++ {
				require.EqualValues(t, want[q][0], it.Next(), "counts %v from %d at %d", c, p, q)
			}
			require.Equal(t, -1, it.Next())
		}
	}
}

// TestNodeShares: a node's epoch is the round-robin of its parts, which is the whole
// interleave's positions of its parts; so a prefix of the whole interleave is a prefix of
// every node's epoch at any node count that divides the parts, and NodeShare says how long.
func TestNodeShares(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 40; trial++ {
		parts := []int{1, 2, 4, 6, 12, 24}[r.IntN(6)]
		rec := make([]uint64, parts)
		for i := range rec {
			rec[i] = uint64(3 + r.IntN(20))
		}
		whole := rrAt(rec)
		for _, nodes := range []int{1, 2, 3, 4, 6, 12, 24} {
			if parts%nodes != 0 {
				continue
			}
			for node := 0; node < nodes; node++ {
				var mine []uint64
				var ids []int
				for q := node; q < parts; q += nodes {
					mine = append(mine, rec[q])
					ids = append(ids, q)
				}
				local := rrAt(mine)
				// The node's epoch is the whole interleave's positions of its parts, in order.
				k := 0
				for x, w := range whole {
					if int(w[0])%nodes != node {
						continue
					}
					require.Equal(t, [2]uint64{uint64(ids[local[k][0]]), local[k][1]}, w)
					k++
					require.EqualValues(t, k, NodeShare(rec, nodes, node, uint64(x+1)))
				}
				require.Len(t, local, k)
			}
		}
	}
}

// TestNodeSharesLockstep: while every part has draws left, ranks that take the whole
// interleave's positions a step of S = nodes x b at a time take b from each node.
func TestNodeSharesLockstep(t *testing.T) {
	rec := make([]uint64, 48)
	for i := range rec {
		rec[i] = 1000 + uint64(i%3) // unequal parts: 1000 rounds in lockstep
	}
	for _, nodes := range []int{1, 2, 3, 4, 6, 8, 12, 16, 24, 48} {
		for _, b := range []uint64{1, 7, 64} {
			S := uint64(nodes) * b
			for x := uint64(0); x+S <= 48*1000; x += S * 37 {
				for node := 0; node < nodes; node++ {
					require.Equal(t, b, NodeShare(rec, nodes, node, x+S)-NodeShare(rec, nodes, node, x), "nodes %d b %d x %d", nodes, b, x)
				}
			}
		}
	}
}

func TestPartBlocks(t *testing.T) {
	for _, tc := range []struct{ blocks, parts int }{{256, 48}, {5, 5}, {100, 1}, {97, 24}} {
		pb := PartBlocks(tc.blocks, tc.parts, 7)
		seen := make([]bool, tc.blocks)
		for q, bs := range pb {
			require.Len(t, bs, tc.blocks/tc.parts+map[bool]int{true: 1}[q < tc.blocks%tc.parts])
			for _, b := range bs {
				require.False(t, seen[b])
				seen[b] = true
			}
		}
		require.Equal(t, pb, PartBlocks(tc.blocks, tc.parts, 7))
		require.NotEqual(t, pb, PartBlocks(tc.blocks, tc.parts, 8))
	}
	for _, tc := range [][3]int{{7, 8, 4}, {7, 7, 7}, {5, 6, 3}, {8, 21, 7}, {8, 22, 8}, {1, 9, 1}, {3, 1, 1}, {16, 4, 4}} {
		require.Equal(t, tc[2], PartWindow(tc[0], tc[1]), "window %d over %d blocks", tc[0], tc[1])
	}
	require.Equal(t, 48, ChooseParts(0, 256))
	require.Equal(t, 6, ChooseParts(0, 47))
	require.Equal(t, 24, ChooseParts(0, 191))
	require.Equal(t, 1, ChooseParts(0, 1))
	require.Equal(t, 96, ChooseParts(96, 256))
	require.Error(t, Nodes{Parts: 48, Nodes: 5}.Validate(256))
	require.Error(t, Nodes{Parts: 48, Nodes: 4, Node: 4}.Validate(256))
	require.Error(t, Nodes{Parts: 300, Nodes: 4}.Validate(256))
	require.NoError(t, Nodes{Parts: 48, Nodes: 16, Node: 15}.Validate(256))
}

// wholeEpochBlocks returns the stored block at each position of the whole epoch of a
// node-aware order: the round-robin interleave of the parts' own epochs.
func wholeEpochBlocks(t *testing.T, counts []uint64, parts, mix int, seed, epoch uint64) []int {
	pb := PartBlocks(len(counts), parts, seed)
	orders := make([]*Order, parts)
	recs := make([]uint64, parts)
	for q, bs := range pb {
		c := make([]uint64, len(bs))
		for i, b := range bs {
			c[i] = counts[b]
			recs[q] += c[i]
		}
		o, err := New(c, Options{Seed: PartSeed(seed, q), Epoch: epoch, Mode: Full, Mix: PartWindow(mix, len(bs))})
		require.NoError(t, err)
		orders[q] = o
	}
	il := NewRoundRobin(recs)
	it := il.Iter(0)
	var out []int
	for {
		q := it.Next()
		if q < 0 {
			return out
		}
		lb, _ := orders[q].At(it.Drawn()[q] - 1)
		out = append(out, pb[q][lb])
	}
}

// TestNodeBatchQuality: with the default window (1.5 x 256 / P blocks), a global batch (a run
// of the whole epoch) of 32 or 256 records draws from at least 0.7 x the distinct blocks a
// uniform shuffle's does (1024 is logged: it draws from about P x K blocks, the windows open at
// once, and needs a larger --mix for the same).
func TestNodeBatchQuality(t *testing.T) {
	for _, tc := range []struct {
		blocks, per, parts int
	}{{1024, 32, 48}, {256, 256, 48}, {4096, 16, 48}, {256, 256, 24}} {
		counts := make([]uint64, tc.blocks)
		for i := range counts {
			counts[i] = uint64(tc.per)
		}
		mix := max(1, min((3*256+2*tc.parts-1)/(2*tc.parts), tc.blocks/tc.parts))
		blocks := wholeEpochBlocks(t, counts, tc.parts, mix, 3, 1)
		require.Len(t, blocks, tc.blocks*tc.per)
		for _, s := range []int{32, 256, 1024} {
			var sum float64
			n := 0
			for at := 0; at+s <= len(blocks); at += s {
				seen := map[int]bool{}
				for _, b := range blocks[at : at+s] {
					seen[b] = true
				}
				sum += float64(len(seen))
				n++
			}
			got := sum / float64(n)
			b := float64(tc.blocks)
			uniform := b * (1 - math.Pow(1-1/b, float64(s)))
			t.Logf("%d blocks of %d, %d parts, mix %d: batch %d draws from %.1f blocks, a uniform shuffle's %.1f (%.2fx)", tc.blocks, tc.per, tc.parts, mix, s, got, uniform, got/uniform)
			if s <= 256 {
				require.GreaterOrEqual(t, got/uniform, 0.7, "batch %d", s)
			}
		}
	}
}
