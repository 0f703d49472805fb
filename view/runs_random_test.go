package view

import (
	"bytes"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/internal/dstest"
	"github.com/blockfs/blockfs/shuffle"
	"github.com/blockfs/blockfs/source/local"
)

// trialsRandom is how many datasets TestRunCopiersRandom tries.
var trialsRandom = 8

// openSetPS is openSet with pages of ps bytes.
func openSetPS(t *testing.T, dir string, opt shuffle.Options, cacheBytes int64, ps int) *Set {
	t.Helper()
	ds, err := local.Open(dir)
	require.NoError(t, err)
	return newSet(t, ds, nil, cache.Options{Size: cacheBytes, PageSize: ps, MaxRead: 4 * ps}, opt)
}

// TestRunCopiersRandom: random record sizes (with and without a fast copy, records across
// pages, records larger than a page), block sizes, modes, mixes, page sizes (one not a power of
// two) and shards; several epochs of one Set read at once by several goroutines, so that the
// shared window cache evicts and rebuilds windows under the readers.
func TestRunCopiersRandom(t *testing.T) {
	r := rand.New(rand.NewSource(17))
	for trial := range trialsRandom {
		rs := []int64{1, 2, 4, 8, 12, 16, 24, 32, 64, 100, 128, 5000}[r.Intn(12)]
		n := int64(2000 + r.Intn(12000))
		if rs == 5000 {
			n = 300
		}
		bs := rs * int64(1+r.Intn(3000))
		pre := r.Intn(2) == 0
		ps := []int{4096, 8192, 12288}[r.Intn(3)]
		opt := []shuffle.Options{{Seed: 9}, {Seed: 9, Mix: 1 + r.Intn(5)}, {Mode: shuffle.Blocks, Seed: 3}, {Mode: shuffle.None}}[r.Intn(4)]
		cacheBytes := int64(ps) * int64([]int{4, 16, 256}[r.Intn(3)])
		name := fmt.Sprintf("%d-rs%d-n%d-bs%d-pre%v-ps%d-%+v-cache%d", trial, rs, n, bs, pre, ps, opt, cacheBytes)
		t.Run(name, func(t *testing.T) {
			d := dstest.Fixed(t, filepath.Join(t.TempDir(), "ds"), n, rs, bs, pre)
			s := openSetPS(t, d.Dir, opt, cacheBytes, ps)
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- readRandom(s, d, opt, uint64(g%3), int64(trial*10+g))
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			requireNothingPinned(t, s)
		})
	}
}

// readRandom reads the data and ids of epoch of s, whole and by shard, at random offsets and
// lengths (half of them through a Reader), and compares them with the naive order of d.
func readRandom(s *Set, d *dstest.Dataset, opt shuffle.Options, epoch uint64, seed int64) error {
	r := rand.New(rand.NewSource(seed))
	opt.Epoch = epoch
	e, err := s.Epoch(epoch)
	if err != nil {
		return err
	}
	ranges := []Range{e.All(), e.Shard(1, 3), e.Shard(2, 7)}
	for _, rg := range ranges {
		want, wantIDs, _ := d.Epoch(opt, rg.Start, rg.End)
		for k, w := range map[Kind][]byte{Data: want, IDs: wantIDs} {
			f, err := e.Open(bg, k, rg)
			if err != nil {
				return err
			}
			for i := range 30 {
				off := r.Int63n(int64(len(w)))
				l := min(int64(len(w))-off, r.Int63n(200000)+1)
				if i == 0 {
					off, l = 0, int64(len(w))
				}
				buf := make([]byte, l)
				rd := File(f)
				if i%2 == 1 {
					rd = NewReader(f, 1<<16)
				}
				n, err := rd.ReadAt(buf, off)
				if err != nil {
					return err
				}
				if int64(n) != l || !bytes.Equal(w[off:off+l], buf) {
					return fmt.Errorf("epoch %d range %v kind %d [%d,+%d) differs", epoch, rg, k, off, l)
				}
			}
		}
	}
	return nil
}

// TestRunCopiersErrors: a block file gone fails a read of many small
// records (data and stored ids, the run copiers) with that cause, and leaves nothing pinned.
func TestRunCopiersErrors(t *testing.T) {
	d := dstest.Fixed(t, filepath.Join(t.TempDir(), "ds"), 20000, 8, 8*2000, true)
	s := openSetPS(t, d.Dir, shuffle.Options{Seed: 2, Mix: 2}, 64*4096, 4096)
	e, err := s.Epoch(0)
	require.NoError(t, err)
	for _, name := range []string{"blocks/000003.bin", "blocks/000003.ids"} {
		require.NoError(t, os.Rename(filepath.Join(d.Dir, name), filepath.Join(d.Dir, name+".gone")))
	}
	for _, k := range []Kind{Data, IDs} {
		f, err := e.Open(bg, k, e.All())
		require.NoError(t, err)
		buf := make([]byte, f.Size())
		_, err = f.ReadAt(buf, 0)
		require.ErrorIs(t, err, fs.ErrNotExist, "kind %d", k)
		// Again through a Reader's Gather (the FUSE path), from the middle of a record.
		g := NewGather()
		_, err = NewReader(f, 1<<16).Gather(bg, nil, g, buf[:len(buf)-13], 13)
		g.Release()
		require.ErrorIs(t, err, fs.ErrNotExist, "kind %d", k)
	}
	for _, name := range []string{"blocks/000003.bin", "blocks/000003.ids"} {
		require.NoError(t, os.Rename(filepath.Join(d.Dir, name+".gone"), filepath.Join(d.Dir, name)))
	}
	requireNothingPinned(t, s)
}
