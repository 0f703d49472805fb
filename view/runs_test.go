package view

import (
	"bytes"
	"fmt"
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/internal/dstest"
	"github.com/blockfs/blockfs/shuffle"
)

// TestRunCopiers: reads of many small records (more than MaxVecs pieces, so the run copiers
// serve them) and of their ids match the naive order byte for byte: whole files, shards, and
// random offsets and lengths that cut records, for record sizes with and without a fast copy,
// windows of one and several blocks, stored ids and computed ones, and caches from roomy down
// to MinPages pages (every slot pinned: the span path takes over).
func TestRunCopiers(t *testing.T) {
	for _, rs := range []int64{8, 16, 24, 64} {
		for _, pre := range []bool{false, true} {
			d := dstest.Fixed(t, filepath.Join(t.TempDir(), fmt.Sprint(rs, pre)), 9000, rs, 4096*3, pre)
			for _, opt := range []shuffle.Options{{Seed: 5, Epoch: 2}, {Seed: 5, Epoch: 1, Mix: 3}, {Mode: shuffle.Blocks, Epoch: 1}} {
				for _, cacheBytes := range []int64{256 * 4096, 4 * 4096} {
					name := fmt.Sprintf("rs%d-pre%v-%+v-cache%d", rs, pre, opt, cacheBytes)
					t.Run(name, func(t *testing.T) { checkRuns(t, d, opt, cacheBytes, rs) })
				}
			}
		}
	}
}

func checkRuns(t *testing.T, d *dstest.Dataset, opt shuffle.Options, cacheBytes, rs int64) {
	s := openSet(t, d.Dir, opt, cacheBytes)
	e, err := s.Epoch(opt.Epoch)
	require.NoError(t, err)
	r := rand.New(rand.NewSource(int64(rs)))
	for _, rg := range []Range{e.All(), e.Shard(1, 3)} {
		want, wantIDs, _ := d.Epoch(opt, rg.Start, rg.End)
		for k, w := range map[Kind][]byte{Data: want, IDs: wantIDs} {
			f, err := e.Open(bg, k, rg)
			require.NoError(t, err)
			all := make([]byte, len(w))
			n, err := f.ReadAt(all, 0)
			require.NoError(t, err)
			require.Equal(t, len(w), n)
			require.True(t, bytes.Equal(w, all), "kind %d whole file", k)
			for range 40 {
				off := r.Int63n(int64(len(w)))
				l := min(int64(len(w))-off, r.Int63n(40000)+1)
				buf := make([]byte, l)
				n, err := f.ReadAt(buf, off)
				require.NoError(t, err)
				require.EqualValues(t, l, n)
				require.True(t, bytes.Equal(w[off:off+l], buf), "kind %d [%d,+%d)", k, off, l)
			}
		}
	}
	requireNothingPinned(t, s)
}
