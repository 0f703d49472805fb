package view

import (
	"bytes"
	"fmt"
	"math/rand"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/internal/dstest"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/shuffle"
)

// gatherDatasets are the datasets of the Gather tests: fixed records that straddle cache pages,
// records so small that a read is more pieces than one writev takes (MaxVecs), more of them
// than one runChunk (a window's run is decoded in chunks), and variable lengths with empty records and a
// record larger than a block. All store ids (pre-shuffled), so ids are pinned too.
var gatherDatasets = map[string]func(t *testing.T, dir string) *dstest.Dataset{
	"fixed-100": func(t *testing.T, dir string) *dstest.Dataset {
		return dstest.Fixed(t, dir, 3000, 100, 8192, true) // 81 a block, 38 blocks
	},
	"fixed-16": func(t *testing.T, dir string) *dstest.Dataset {
		return dstest.Fixed(t, dir, 9000, 16, 4096, true) // 256 a block, 36 blocks
	},
	"variable": func(t *testing.T, dir string) *dstest.Dataset {
		r := rand.New(rand.NewSource(8))
		lengths := make([]int, 1500)
		for i := range lengths {
			lengths[i] = r.Intn(300)
			if i%40 == 0 {
				lengths[i] = 0
			}
		}
		lengths[99] = 20000 // several blocks' worth, several pages
		return dstest.Variable(t, dir, lengths, 4096, true)
	},
}

// gatherOrders are the orders of the Gather tests: windows of one and of several blocks.
var gatherOrders = []shuffle.Options{
	{Seed: 5, Epoch: 2, Mode: shuffle.Full, Mix: 1},
	{Seed: 6, Epoch: 1, Mode: shuffle.Full, Mix: 3},
	{Seed: 7, Mode: shuffle.Blocks},
}

// gathered is what one Gather gave: its bytes, and whether they were copied into the
// caller's buffer (the fallback) rather than handed out as cache pages.
type gathered struct {
	n      int
	bytes  []byte
	copied bool
}

// gatherAt gathers [off, off+n) through r and returns the bytes, checking g.Len; g is released.
func gatherAt(t *testing.T, r *Reader, off int64, n int) gathered {
	t.Helper()
	g := NewGather()
	defer g.Release()
	buf := make([]byte, n)
	got, err := r.Gather(bg, nil, g, buf, off)
	require.NoError(t, err, "Gather(%d, %d)", off, n)
	require.Equal(t, got, g.Len())
	out := gathered{n: got, bytes: make([]byte, got)}
	require.Equal(t, got, g.CopyTo(out.bytes))
	out.copied = len(g.Vecs) == 1 && &g.Vecs[0][0] == &buf[0]
	for _, v := range g.Vecs {
		require.NotEmpty(t, v, "no empty slice in Vecs")
	}
	require.LessOrEqual(t, len(g.Vecs), MaxVecs)
	return out
}

// TestGatherReference: Reader.Gather, its slices concatenated, equals ReadAt and the order built
// naively in memory, at random offsets and lengths (short, page-sized, longer than MaxVecs
// records, past the end), for epoch data, ids and offsets, whole and sharded, on a roomy cache
// (slices of pinned pages) and on one of MinPages pages (the copy, ErrFull and page-by-page
// fallbacks). After the reads no page is left pinned.
func TestGatherReference(t *testing.T) {
	caches := map[string]int64{"roomy": 256 * 4096, "tiny": cache.MinPages * 4096}
	for name, mk := range gatherDatasets {
		t.Run(name, func(t *testing.T) {
			d := mk(t, filepath.Join(t.TempDir(), "ds"))
			for _, opt := range gatherOrders {
				for cname, cbytes := range caches {
					t.Run(fmt.Sprintf("%s-mix%d-%s", opt.Mode, opt.Mix, cname), func(t *testing.T) {
						s := openSet(t, d.Dir, opt, cbytes)
						e, err := s.Epoch(opt.Epoch)
						require.NoError(t, err)
						r := rand.New(rand.NewSource(int64(opt.Seed) + cbytes))
						var copied, pinned int
						for _, rg := range []Range{e.All(), e.Shard(1, 3)} {
							data, ids, offs := d.Epoch(opt, rg.Start, rg.End)
							for _, c := range []struct {
								k    Kind
								want []byte
							}{{Data, data}, {IDs, ids}, {Offsets, offs}} {
								if c.k == Offsets && d.Kind == layout.Fixed {
									continue
								}
								f, err := e.Open(bg, c.k, rg)
								require.NoError(t, err)
								size := f.Size()
								require.EqualValues(t, len(c.want), size)
								rd := NewReader(f, 8192)
								lengths := []int{1, 7, 100, 4096, 5000, 30000, 70000}
								offsets := []int64{0, size - 1, size, size + 3}
								for i := 0; i < 50; i++ {
									offsets = append(offsets, r.Int63n(size+10))
								}
								for i, off := range offsets {
									l := lengths[i%len(lengths)]
									if i%3 == 0 {
										l = 1 + r.Intn(80000)
									}
									gd := gatherAt(t, rd, off, l)
									end := min(off+int64(l), size)
									if off >= size {
										require.Zero(t, gd.n, "at or past the end: nothing")
										continue
									}
									require.EqualValues(t, end-off, gd.n, "%v [%d,+%d)", c.k, off, l)
									require.True(t, bytes.Equal(c.want[off:end], gd.bytes), "%v: Gather [%d,%d) differs from the naive order", c.k, off, end)
									p := make([]byte, l)
									got, _ := rd.ReadAt(p, off)
									require.EqualValues(t, gd.n, got)
									require.True(t, bytes.Equal(gd.bytes, p[:got]), "%v: Gather [%d,%d) differs from ReadAt", c.k, off, end)
									if c.k == Data {
										if gd.copied {
											copied++
										} else {
											pinned++
										}
									}
								}
								// The whole file in one Gather.
								whole := gatherAt(t, rd, 0, int(size))
								require.True(t, bytes.Equal(c.want, whole.bytes), "%v: whole file differs", c.k)
							}
						}
						switch {
						case cname == "tiny":
							assert.Positive(t, copied, "a tiny cache takes the copy path")
						case name == "fixed-16" && opt.Mode == shuffle.Full:
							assert.Positive(t, copied, "reads in more than MaxVecs pieces are copied")
							fallthrough
						default:
							assert.Positive(t, pinned, "some reads were served from pinned pages")
						}
						requireNothingPinned(t, s)
					})
				}
			}
		})
	}
}

// TestGatherMaxVecs: a read whose records are at most MaxVecs spans but more than MaxVecs
// slices (spans that cross cache pages) is copied, never handed out as too many slices for
// one writev; reads just below the limit are slices. Lengths sweep across the limit.
func TestGatherMaxVecs(t *testing.T) {
	d := gatherDatasets["fixed-100"](t, filepath.Join(t.TempDir(), "ds"))
	opt := gatherOrders[0]
	s := openSet(t, d.Dir, opt, 256*4096)
	e, err := s.Epoch(opt.Epoch)
	require.NoError(t, err)
	want, _, _ := d.Epoch(opt, 0, e.Records())
	f, err := e.Open(bg, Data, e.All())
	require.NoError(t, err)
	rd := NewReader(f, 0)
	var pinned, copiedBySlices, copiedBySpans int
	for l := 95000; l <= 110000; l += 100 {
		for _, off := range []int64{0, 12345} {
			// How many spans the read is, as gatherData locates them.
			g := NewGather()
			pos, skip, err := e.positionOf(background(), uint64(off))
			require.NoError(t, err)
			covered, _, _, err := g.plan.locate(background(), e, pos, skip, uint64(l), MaxVecs)
			require.NoError(t, err)
			g.Release()

			gd := gatherAt(t, rd, off, l) // requires at most MaxVecs slices
			require.True(t, bytes.Equal(want[off:off+int64(l)], gd.bytes), "[%d,+%d)", off, l)
			switch {
			case !gd.copied:
				pinned++
			case covered == uint64(l):
				copiedBySlices++
			default:
				copiedBySpans++
			}
		}
	}
	t.Logf("pinned %d, copied for too many slices %d, for too many spans %d", pinned, copiedBySlices, copiedBySpans)
	assert.Positive(t, pinned)
	assert.Positive(t, copiedBySlices, "some reads fit MaxVecs spans but not MaxVecs slices")
	assert.Positive(t, copiedBySpans)
}

// requireNothingPinned requires that as many pages as the cache has slots (or as the dataset
// has, if fewer) can be pinned strictly at once, and that the cache is not crowded: no Gather
// left a page pinned. Readahead workers pin pages for a moment while they load them, so it
// tries for a while.
func requireNothingPinned(t *testing.T, s *Set) {
	t.Helper()
	c := s.Cache
	ps := int64(c.PageSize())
	slots := int(c.Capacity() / ps)
	try := func() error {
		if c.Crowded() {
			return fmt.Errorf("the cache is crowded")
		}
		var pins cache.Pins
		defer pins.Release()
		pinned := 0
		for b := 0; b < s.DS.Blocks() && pinned < slots; b++ {
			for _, id := range []layout.FileID{layout.DataFile(b), layout.IDsFile(b), layout.OffsetsFile(b)} {
				pages := int((s.DS.Size(id) + ps - 1) / ps)
				if take := min(pages, slots-pinned); take > 0 {
					if _, err := c.PinPages(bg, nil, &pins, id, 0, int64(take), nil); err != nil {
						return fmt.Errorf("pinning %d pages after %d of %d slots: %w", take, pinned, slots, err)
					}
					pinned += take
				}
			}
		}
		return nil
	}
	deadline := time.Now().Add(5 * time.Second)
	err := try()
	for err != nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		err = try()
	}
	require.NoError(t, err, "a page was left pinned: %+v", c.Stats())
}

// TestGatherConcurrent: goroutines gather at random places of an epoch and its shards at once,
// each keeping a few Gathers (their pages pinned) before checking and releasing them, on
// caches from MinPages pages (every slot pinned: pages read into buffers of their own) to
// roomy. Every byte must match the naive order, also after the other goroutines' reads.
func TestGatherConcurrent(t *testing.T) {
	for _, name := range []string{"fixed-100", "variable"} {
		d := gatherDatasets[name](t, filepath.Join(t.TempDir(), name))
		opt := shuffle.Options{Seed: 11, Epoch: 4, Mode: shuffle.Full, Mix: 2}
		for _, pages := range []int64{cache.MinPages, 12, 256} {
			t.Run(fmt.Sprintf("%s-%dpages", name, pages), func(t *testing.T) {
				s := openSet(t, d.Dir, opt, pages*4096)
				e, err := s.Epoch(opt.Epoch)
				require.NoError(t, err)
				type file struct {
					f    File
					want []byte
				}
				var files []file
				for _, rg := range []Range{e.All(), e.Shard(0, 2), e.Shard(1, 2)} {
					data, ids, _ := d.Epoch(opt, rg.Start, rg.End)
					fd, err := e.Open(bg, Data, rg)
					require.NoError(t, err)
					fi, err := e.Open(bg, IDs, rg)
					require.NoError(t, err)
					files = append(files, file{fd, data}, file{fi, ids})
				}
				var wg sync.WaitGroup
				for gr := 0; gr < 6; gr++ {
					wg.Add(1)
					go func(gr int) {
						defer wg.Done()
						r := rand.New(rand.NewSource(int64(gr)))
						type held struct {
							g    *Gather
							want []byte
						}
						var hold []held
						check := func(h held) bool {
							got := make([]byte, h.g.Len())
							h.g.CopyTo(got)
							h.g.Release()
							return assert.True(t, bytes.Equal(h.want, got), "goroutine %d: held gather differs", gr)
						}
						for i := 0; i < 100; i++ {
							fl := files[r.Intn(len(files))]
							rd := NewReader(fl.f, int64(r.Intn(3))*8192)
							size := fl.f.Size()
							off := r.Int63n(size)
							l := 1 + r.Intn(20000)
							g := NewGather()
							buf := make([]byte, l)
							n, err := rd.Gather(bg, nil, g, buf, off)
							if !assert.NoError(t, err) {
								g.Release()
								return
							}
							hold = append(hold, held{g, fl.want[off : off+int64(n)]})
							if len(hold) > r.Intn(4) {
								if !check(hold[0]) {
									return
								}
								hold = hold[1:]
							}
						}
						for _, h := range hold {
							check(h)
						}
					}(gr)
				}
				wg.Wait()
				st := s.Cache.Stats()
				t.Logf("%d pages: hits %d misses %d uncached pages %d", pages, st.Hits, st.Misses, st.Overflow)
				if pages == cache.MinPages {
					assert.Positive(t, st.Overflow, "with every slot pinned, pages were read into buffers of their own")
				}
				requireNothingPinned(t, s)
			})
		}
	}
}
