package view

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/internal/dstest"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/shuffle"
	"github.com/blockfs/blockfs/source"
	"github.com/blockfs/blockfs/source/local"
)

func openSet(t *testing.T, dir string, opt shuffle.Options, cacheBytes int64) *Set {
	t.Helper()
	ds, err := local.Open(dir)
	require.NoError(t, err)
	return newSet(t, ds, nil, cache.Options{Size: cacheBytes, PageSize: 4096, MaxRead: 16384}, opt)
}

// newSet returns the Set of ds in order opt over a cache of co reading src (nil: ds's files,
// read buffered), closed when the test ends: the one dataset-plus-cache set-up of view's tests.
func newSet(t testing.TB, ds *layout.Dataset, src source.Blocks, co cache.Options, opt shuffle.Options) *Set {
	t.Helper()
	if src == nil {
		src = local.New(ds, false)
	}
	c, err := cache.New(src, co)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	s, err := NewSet(ds, c, SetOptions{Order: opt})
	require.NoError(t, err)
	return s
}

// checkFile reads f whole, then at random offsets and lengths, and compares with want.
func checkFile(t *testing.T, f io.ReaderAt, size int64, want []byte, r *rand.Rand) {
	t.Helper()
	require.EqualValues(t, len(want), size)
	all := make([]byte, size+10)
	n, err := f.ReadAt(all, 0)
	require.Equal(t, io.EOF, err)
	require.EqualValues(t, size, n)
	require.True(t, bytes.Equal(want, all[:n]), "whole file differs")
	for i := 0; i < 300; i++ {
		off := r.Int63n(size + 5)
		buf := make([]byte, r.Intn(3000)+1)
		n, err := f.ReadAt(buf, off)
		end := min(off+int64(len(buf)), size)
		if off >= size {
			require.Zero(t, n)
			require.Equal(t, io.EOF, err)
			continue
		}
		require.EqualValues(t, end-off, n)
		if end-off < int64(len(buf)) {
			require.Equal(t, io.EOF, err)
		} else {
			require.NoError(t, err)
		}
		require.True(t, bytes.Equal(want[off:end], buf[:n]), "[%d,%d) differs", off, end)
	}
}

func TestReferenceReads(t *testing.T) {
	type mk func(t *testing.T, dir string) *dstest.Dataset
	datasets := map[string]mk{
		"fixed": func(t *testing.T, dir string) *dstest.Dataset {
			return dstest.Fixed(t, dir, 1000, 100, 2000, false) // 20 per block
		},
		"fixed-preshuffled": func(t *testing.T, dir string) *dstest.Dataset {
			return dstest.Fixed(t, dir, 997, 64, 1024, true)
		},
		"variable": func(t *testing.T, dir string) *dstest.Dataset {
			r := rand.New(rand.NewSource(3))
			lengths := make([]int, 600)
			for i := range lengths {
				lengths[i] = r.Intn(200)
				if i%50 == 0 {
					lengths[i] = 0 // empty records
				}
				if i == 77 {
					lengths[i] = 5000 // larger than a block
				}
			}
			return dstest.Variable(t, dir, lengths, 1500, true)
		},
	}
	orders := []shuffle.Options{
		{Seed: 1, Mode: shuffle.Full},
		{Seed: 2, Epoch: 3, Mode: shuffle.Full, Mix: 3},
		{Seed: 1, Mode: shuffle.Blocks},
		{Mode: shuffle.None},
	}
	for name, make := range datasets {
		t.Run(name, func(t *testing.T) {
			d := make(t, filepath.Join(t.TempDir(), "ds"))
			for _, opt := range orders {
				t.Run(fmt.Sprintf("%s-mix%d-epoch%d", opt.Mode, opt.Mix, opt.Epoch), func(t *testing.T) {
					r := rand.New(rand.NewSource(int64(opt.Seed)))
					s := openSet(t, d.Dir, opt, 64*4096)
					e, err := s.Epoch(opt.Epoch)
					require.NoError(t, err)
					n := e.Records()
					require.EqualValues(t, len(d.Source), n)
					ranges := [][2]uint64{{0, n}}
					for _, w := range []uint64{1, 3, 7} {
						for sh := uint64(0); sh < w; sh++ {
							a, b := dstest.Shard(n, sh, w)
							ranges = append(ranges, [2]uint64{a, b})
							assert.Equal(t, Range{a, b}, e.Shard(sh, w))
						}
					}
					for _, rg := range ranges {
						data, ids, offs := d.Epoch(opt, rg[0], rg[1])
						for _, c := range []struct {
							k    Kind
							want []byte
						}{{Data, data}, {IDs, ids}, {Offsets, offs}} {
							if c.k == Offsets && d.Kind == layout.Fixed {
								continue
							}
							f, err := e.Open(bg, c.k, Range{rg[0], rg[1]})
							require.NoError(t, err)
							checkFile(t, f, f.Size(), c.want, r)
							// The same through a Reader with readahead.
							checkFile(t, NewReader(f, 8192), f.Size(), c.want, r)
						}
					}
				})
			}
		})
	}
}

// TestShardsPartition: the shards of W together are the epoch minus the remainder, in order.
func TestShardsPartition(t *testing.T) {
	d := dstest.Fixed(t, filepath.Join(t.TempDir(), "ds"), 103, 16, 160, false)
	opt := shuffle.Options{Seed: 4, Mode: shuffle.Full, Mix: 2}
	s := openSet(t, d.Dir, opt, 16*4096)
	e, err := s.Epoch(5)
	require.NoError(t, err)
	whole, err := e.Open(bg, Data, e.All())
	require.NoError(t, err)
	all := make([]byte, whole.Size())
	_, err = whole.ReadAt(all, 0)
	require.NoError(t, err)
	for _, w := range []uint64{1, 2, 4, 10, 103, 200} {
		var joined []byte
		for r := uint64(0); r < w; r++ {
			f, err := e.Open(bg, Data, e.Shard(r, w))
			require.NoError(t, err)
			assert.EqualValues(t, 16*(103/w), f.Size(), "equal lengths")
			buf := make([]byte, f.Size())
			_, err = f.ReadAt(buf, 0)
			if len(buf) > 0 {
				require.NoError(t, err)
			}
			joined = append(joined, buf...)
		}
		assert.True(t, bytes.Equal(all[:len(joined)], joined), "W=%d", w)
		assert.EqualValues(t, 16*(103-103%w), len(joined))
	}
}

// TestUnreadableBlockIsError: a block file that vanishes gives an error, never zeros.
func TestUnreadableBlockIsError(t *testing.T) {
	d := dstest.Fixed(t, filepath.Join(t.TempDir(), "ds"), 100, 64, 640, false)
	s := openSet(t, d.Dir, shuffle.Options{Mode: shuffle.None}, 16*4096)
	e, err := s.Epoch(0)
	require.NoError(t, err)
	f, err := e.Open(bg, Data, e.All())
	require.NoError(t, err)
	require.NoError(t, removeBlock(d.Dir, 3))
	buf := make([]byte, 640)
	_, err = f.ReadAt(buf, 3*640)
	assert.ErrorIs(t, err, fs.ErrNotExist, "the cause is kept")
	assert.ErrorContains(t, err, "000003.bin")
	_, err = f.ReadAt(buf, 2*640)
	assert.NoError(t, err, "other blocks keep working")
}
