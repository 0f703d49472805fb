package cache

import (
	"bytes"
	"errors"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// joined concatenates the bytes [off, off+n) of a run, as Append hands them out.
func joined(r Run, off, n int64) []byte {
	var b []byte
	for _, v := range r.Append(nil, off, n) {
		b = append(b, v...)
	}
	return b
}

// slotsSettled requires that no page is pinned and every slot is free or holds a loaded page:
// nothing leaked. Readahead workers pin pages while they load them, so it waits up to 2 s for
// the pins to go.
func slotsSettled(t *testing.T, c *Cache) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		c.mu.Lock()
		pinned := c.pinned
		c.mu.Unlock()
		if pinned == 0 {
			break
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	assert.Zero(t, c.pinned, "pinned slots")
	assert.Zero(t, c.loading, "loading slots")
	assert.Equal(t, 2*(c.pinned-c.loading) > c.slots, c.crowded.Load(), "Crowded follows the counts")
	assert.Equal(t, c.slots, len(c.free)+c.lru.Len()+c.ahead.Len(), "every slot is free or holds a loaded page")
	for _, e := range c.pages {
		assert.Zero(t, e.refs, "page %v still referenced", e.key)
	}
}

// TestPinMatchesSource: the bytes of pinned runs, as slices (Append) and as Bytes, equal the
// source at random offsets and lengths, including a file's short last page; a slice per page
// touched, none empty.
func TestPinMatchesSource(t *testing.T) {
	src := newSource(10*ps+123, 3*ps, 17)
	c := newCache(t, src, 16)
	r := rand.New(rand.NewSource(5))
	var pins Pins
	for i := 0; i < 1000; i++ {
		id := FileID(r.Intn(3))
		size := src.Size(id)
		off := r.Int63n(size)
		n := 1 + r.Int63n(min(size-off, 4*ps))
		run, err := c.Pin(bg, nil, &pins, id, off, n)
		require.NoError(t, err)
		want := src.files[id][off : off+n]
		vecs := run.Append(nil, off, n)
		assert.Len(t, vecs, int((off+n-1)/ps-off/ps+1), "one slice per page")
		for _, v := range vecs {
			require.NotEmpty(t, v)
		}
		require.True(t, bytes.Equal(want, joined(run, off, n)), "file %d [%d,+%d)", id, off, n)
		// A sub-range of the run, as Bytes.
		a := off + r.Int63n(n)
		m := 1 + r.Int63n(off+n-a)
		scratch := make([]byte, m)
		require.True(t, bytes.Equal(src.files[id][a:a+m], run.Bytes(a, m, scratch)), "Bytes [%d,+%d)", a, m)
		if i%3 == 0 { // several runs in one Pins
			pins.Release()
		}
	}
	pins.Release()
	slotsSettled(t, c)

	_, err := c.Pin(bg, nil, &pins, 0, src.Size(0)-5, 10)
	assert.ErrorIs(t, err, ErrRange)
	_, err = c.Pin(bg, nil, &pins, 0, 0, 0)
	assert.ErrorIs(t, err, ErrRange)
	_, err = c.PinPages(bg, nil, &pins, 1, 2, 4, nil)
	assert.ErrorIs(t, err, ErrRange, "page 3 is past the end of a 3-page file")
	_, err = c.PinPage(bg, nil, &pins, 2, 1)
	assert.ErrorIs(t, err, ErrRange)
	pins.Release()
	slotsSettled(t, c)
}

// TestBytesAliasesOnePage: Bytes returns the cache's own bytes when they lie in one page, and
// a copy in scratch when they cross pages.
func TestBytesAliasesOnePage(t *testing.T) {
	src := newSource(4 * ps)
	c := newCache(t, src, 8)
	var pins Pins
	defer pins.Release()
	run, err := c.Pin(bg, nil, &pins, 0, 0, 4*ps)
	require.NoError(t, err)
	scratch := make([]byte, 16)
	b := run.Bytes(ps+8, 8, scratch)
	assert.Equal(t, src.files[0][ps+8:ps+16], b)
	assert.NotSame(t, &scratch[0], &b[0], "inside one page: no copy")
	b = run.Bytes(2*ps-4, 8, scratch)
	assert.Equal(t, src.files[0][2*ps-4:2*ps+4], b)
	assert.Same(t, &scratch[0], &b[0], "across pages: copied into scratch")
}

// TestPinnedPagesSurviveEviction: pages stay in memory, unchanged, while pinned, whatever
// other readers load meanwhile; once released they can be evicted.
func TestPinnedPagesSurviveEviction(t *testing.T) {
	src := newSource(64*ps, 64*ps)
	c := newCache(t, src, 8)
	var pins Pins
	run, err := c.Pin(bg, nil, &pins, 0, ps/2, 3*ps) // pages 0..3
	require.NoError(t, err)
	vecs := run.Append(nil, ps/2, 3*ps)
	want := append([]byte(nil), src.files[0][ps/2:ps/2+3*ps]...)

	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(g)))
			for i := 0; i < 300; i++ {
				id := FileID(r.Intn(2))
				off := r.Int63n(60 * ps)
				if id == 0 {
					off += 4 * ps // never the pinned pages: they must not be evicted, not be hit
				}
				buf := make([]byte, 1+r.Intn(ps))
				off = min(off, src.Size(id)-int64(len(buf)))
				err := c.Fill(bg, nil, id, off, buf)
				if !assert.NoError(t, err) || !assert.Equal(t, src.files[id][off:off+int64(len(buf))], buf) {
					return
				}
			}
		}(g)
	}
	wg.Wait()
	assert.Positive(t, c.Stats().Evictions, "the other reads evicted pages")
	var got []byte
	for _, v := range vecs {
		got = append(got, v...)
	}
	require.True(t, bytes.Equal(want, got), "pinned pages changed under eviction pressure")
	misses := c.Stats().Misses
	err = c.Fill(bg, nil, 0, ps/2, make([]byte, 3*ps))
	require.NoError(t, err)
	assert.Equal(t, misses, c.Stats().Misses, "the pinned pages are still cached")

	pins.Release()
	// Unpinned, the four pages give way to others.
	for p := int64(0); p < 16; p++ {
		err := c.Fill(bg, nil, 1, 40*ps+p*ps, make([]byte, 1))
		require.NoError(t, err)
	}
	c.mu.Lock()
	for p := int64(0); p < 4; p++ {
		assert.Nil(t, c.pages[key{0, p}], "page %d evicted once released", p)
	}
	c.mu.Unlock()
	slotsSettled(t, c)
}

// TestPinPagesWanted: PinPages pins only the pages set in want, reading each gap-free run of
// missing pages with one disk read, and the run serves exactly those pages.
func TestPinPagesWanted(t *testing.T) {
	src := newSource(20 * ps)
	c := newCache(t, src, 16)
	var pins Pins
	want := []uint64{0}
	for _, p := range []int{2, 3, 4, 7, 9, 10} {
		want[0] |= 1 << p
	}
	run, err := c.PinPages(bg, nil, &pins, 0, 2, 11, want)
	require.NoError(t, err)
	assert.ElementsMatch(t, []readCall{{0, 2 * ps, 3 * ps}, {0, 7 * ps, ps}, {0, 9 * ps, 2 * ps}}, src.calls(),
		"one read per run (the runs load at once, in any order)")
	for _, p := range []int64{2, 3, 4, 7, 9, 10} {
		assert.Equal(t, src.files[0][p*ps+1:p*ps+ps], joined(run, p*ps+1, ps-1), "page %d", p)
	}
	assert.True(t, bytes.Equal(src.files[0][2*ps:5*ps], joined(run, 2*ps, 3*ps)))
	c.mu.Lock()
	assert.Equal(t, 6, c.pinned)
	for _, p := range []int64{5, 6, 8} {
		assert.Nil(t, c.pages[key{0, p}], "page %d was not wanted", p)
	}
	c.mu.Unlock()
	assert.EqualValues(t, 6, c.Stats().Misses)

	// Pinned again (a second Pins), they are hits: no disk read.
	var again Pins
	_, err = c.PinPages(bg, nil, &again, 0, 2, 11, want)
	require.NoError(t, err)
	assert.Len(t, src.calls(), 3)
	assert.EqualValues(t, 6, c.Stats().Hits)
	c.mu.Lock()
	assert.Equal(t, 6, c.pinned, "a page pinned twice takes one slot")
	c.mu.Unlock()
	again.Release()
	pins.Release()
	slotsSettled(t, c)
}

// TestPinPagesFull: with every slot pinned, PinPages answers ErrFull without loading into a
// buffer of its own; the pages it pinned before running out stay in its Pins until Release,
// after which every slot can be used again. Crowded flips with more than half pinned.
func TestPinPagesFull(t *testing.T) {
	src := newSource(16 * ps)
	c := newCache(t, src, MinPages)
	var a, b Pins
	_, err := c.PinPages(bg, nil, &a, 0, 0, 2, nil) // 2 of 4 slots
	require.NoError(t, err)
	assert.False(t, c.Crowded(), "half pinned is not crowded")

	_, err = c.PinPages(bg, nil, &b, 0, 8, 12, nil) // 2 fit, then none is free
	require.ErrorIs(t, err, ErrFull)
	assert.True(t, c.Crowded())
	c.mu.Lock()
	assert.Equal(t, 4, c.pinned)
	assert.Empty(t, c.free)
	c.mu.Unlock()
	assert.Zero(t, c.Stats().Overflow, "strict: no private buffer")
	for _, rc := range src.calls() {
		assert.Less(t, rc.off+rc.n, int64(10*ps)+1, "nothing read past the pages that fit: %+v", rc)
	}

	// Pages already cached can still be pinned when the cache is full.
	var d Pins
	run, err := c.PinPages(bg, nil, &d, 0, 0, 1, nil)
	require.NoError(t, err)
	assert.Equal(t, src.files[0][:ps], joined(run, 0, ps))
	d.Release()

	// A strict pin of a missing page fails again, and leaves nothing behind.
	var e Pins
	_, err = c.PinPages(bg, nil, &e, 0, 14, 15, nil)
	require.ErrorIs(t, err, ErrFull)
	e.Release()

	b.Release()
	assert.False(t, c.Crowded())
	a.Release()
	slotsSettled(t, c)

	// Every slot is usable again: four new pages pin without overflow, with the right bytes.
	run, err = c.PinPages(bg, nil, &b, 0, 12, 16, nil)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(src.files[0][12*ps:16*ps], joined(run, 12*ps, 4*ps)))
	assert.True(t, c.Crowded())
	assert.Zero(t, c.Stats().Overflow)
	b.Release()
	slotsSettled(t, c)
}

// TestPinPageWhenFull: PinPage is not strict: with every slot pinned it reads the page into a
// buffer of its own (counted as overflow, not cached), and releasing it leaks nothing.
func TestPinPageWhenFull(t *testing.T) {
	src := newSource(8*ps + 100)
	c := newCache(t, src, MinPages)
	var all Pins
	_, err := c.PinPages(bg, nil, &all, 0, 0, 4, nil)
	require.NoError(t, err)
	var one Pins
	for _, p := range []int64{5, 8} { // 8 is the short last page
		run, err := c.PinPage(bg, nil, &one, 0, p)
		require.NoError(t, err)
		end := min((p+1)*ps, src.Size(0))
		assert.True(t, bytes.Equal(src.files[0][p*ps:end], joined(run, p*ps, end-p*ps)), "page %d", p)
	}
	assert.EqualValues(t, 2, c.Stats().Overflow)
	c.mu.Lock()
	assert.Nil(t, c.pages[key{0, 5}], "a private page is not cached")
	assert.Equal(t, 4, c.pinned)
	c.mu.Unlock()
	// A page already cached is pinned in its slot.
	run, err := c.PinPage(bg, nil, &one, 0, 2)
	require.NoError(t, err)
	assert.Equal(t, src.files[0][2*ps:3*ps], joined(run, 2*ps, ps))
	assert.EqualValues(t, 2, c.Stats().Overflow)
	one.Release()
	all.Release()
	slotsSettled(t, c)
	// With slots free again, PinPage caches the page.
	_, err = c.PinPage(bg, nil, &one, 0, 5)
	require.NoError(t, err)
	c.mu.Lock()
	assert.NotNil(t, c.pages[key{0, 5}])
	c.mu.Unlock()
	one.Release()
	slotsSettled(t, c)
}

// TestCrowded: Crowded is true exactly while more than half of the slots are pinned, counting
// a page pinned twice once.
func TestCrowded(t *testing.T) {
	src := newSource(16 * ps)
	c := newCache(t, src, 8)
	var pins []*Pins
	for p := int64(0); p < 6; p++ {
		pp := new(Pins)
		_, err := c.PinPage(bg, nil, pp, 0, p)
		require.NoError(t, err)
		pins = append(pins, pp)
		assert.Equal(t, p+1 > 4, c.Crowded(), "%d of 8 pinned", p+1)
	}
	var twice Pins
	_, err := c.Pin(bg, nil, &twice, 0, 0, 2*ps) // pages 0 and 1 again
	require.NoError(t, err)
	for i := len(pins) - 1; i >= 0; i-- {
		pins[i].Release()
		assert.Equal(t, i > 4, c.Crowded(), "%d of 8 pinned", i)
	}
	twice.Release()
	assert.False(t, c.Crowded())
	slotsSettled(t, c)
}

// TestPinErrors: a failed load reaches the pinner, is not cached, and releasing the pins
// returns the pages' slots.
func TestPinErrors(t *testing.T) {
	src := newSource(8 * ps)
	c := newCache(t, src, MinPages)
	src.fail.Store(true)
	var pins Pins
	_, err := c.Pin(bg, nil, &pins, 0, 10, 2*ps)
	assert.ErrorIs(t, err, errInjected)
	_, err = c.PinPage(bg, nil, &pins, 0, 5)
	assert.ErrorIs(t, err, errInjected)
	pins.Release()
	c.mu.Lock()
	assert.Len(t, c.free, MinPages, "the failed pages' slots are free")
	c.mu.Unlock()
	src.fail.Store(false)
	run, err := c.Pin(bg, nil, &pins, 0, 10, 2*ps)
	require.NoError(t, err)
	assert.Equal(t, src.files[0][10:10+2*ps], joined(run, 10, 2*ps))
	pins.Release()
	slotsSettled(t, c)
}

// TestConcurrentPins: goroutines pin random ranges of a cache too small for all of them, hold
// the pages while others read and pin, and check their bytes before and after; a strict pin
// that finds the cache full falls back to ReadAt, as view does. Run under -race.
func TestConcurrentPins(t *testing.T) {
	src := newSource(48*ps+7, 32*ps)
	c := newCache(t, src, 12)
	var wg sync.WaitGroup
	var mu sync.Mutex
	full := 0
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(g)))
			var pins Pins
			for i := 0; i < 300; i++ {
				id := FileID(r.Intn(2))
				size := src.Size(id)
				off := r.Int63n(size)
				n := 1 + r.Int63n(min(size-off, 3*ps))
				want := src.files[id][off : off+n]
				var got []byte
				switch r.Intn(3) {
				case 0: // one page at a time, never full
					for p := off / ps; p <= (off+n-1)/ps; p++ {
						run, err := c.PinPage(bg, nil, &pins, id, p)
						if !assert.NoError(t, err) {
							return
						}
						a, b := max(off, p*ps), min(off+n, (p+1)*ps)
						got = append(got, joined(run, a, b-a)...)
					}
				default:
					run, err := c.Pin(bg, nil, &pins, id, off, n)
					if errors.Is(err, ErrFull) {
						mu.Lock()
						full++
						mu.Unlock()
						pins.Release()
						got = make([]byte, n)
						err = c.Fill(bg, nil, id, off, got)
						if !assert.NoError(t, err) {
							return
						}
						break
					}
					if !assert.NoError(t, err) {
						return
					}
					vecs := run.Append(nil, off, n)
					for range r.Intn(3) { // hold the pages while the others work
						_ = c.Fill(bg, nil, FileID(r.Intn(2)), int64(r.Intn(30*ps)), make([]byte, 100))
						c.Prefetch(FileID(r.Intn(2)), int64(r.Intn(30*ps)), 2*ps)
					}
					for _, v := range vecs {
						got = append(got, v...)
					}
				}
				if !assert.True(t, bytes.Equal(want, got), "g%d: file %d [%d,+%d)", g, id, off, n) {
					return
				}
				pins.Release()
			}
		}(g)
	}
	wg.Wait()
	t.Logf("%d strict pins found the cache full; overflow %d pages", full, c.Stats().Overflow)
	slotsSettled(t, c)
}

// TestPinsReusedAcrossCaches: a Pins released after pinning pages of one cache can pin pages
// of another (view pools its Gathers, and a process may hold several caches); releasing it
// then unpins them in the cache they belong to.
func TestPinsReusedAcrossCaches(t *testing.T) {
	src := newSource(8 * ps)
	a := newCache(t, src, MinPages)
	b := newCache(t, src, MinPages)
	var pins Pins
	_, err := a.Pin(bg, nil, &pins, 0, 0, ps)
	require.NoError(t, err)
	pins.Release()
	run, err := b.Pin(bg, nil, &pins, 0, 0, 3*ps)
	require.NoError(t, err)
	assert.Equal(t, src.files[0][:3*ps], joined(run, 0, 3*ps))
	pins.Release()
	slotsSettled(t, a)
	slotsSettled(t, b)
	_, err = b.PinPage(bg, nil, &pins, 0, 5)
	require.NoError(t, err)
	pins.Release()
	slotsSettled(t, b)
}

// TestCrowdedNotByLoads: slots held by loads in flight (an object store's readahead keeps
// several blocks loading) do not make the cache crowded; the same pages pinned by a reader
// once loaded do.
func TestCrowdedNotByLoads(t *testing.T) {
	src := newSource(16 * ps)
	src.gate = make(chan struct{})
	c := newCache(t, src, 8)
	var pins Pins
	done := make(chan error)
	go func() {
		_, err := c.Pin(bg, nil, &pins, 0, 0, 6*ps) // six pages, loaded in two runs
		done <- err
	}()
	for deadline := time.Now().Add(2 * time.Second); src.inFly.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	c.mu.Lock()
	loading, pinned := c.loading, c.pinned
	c.mu.Unlock()
	assert.Equal(t, 6, loading, "slots loading")
	assert.Equal(t, 6, pinned, "slots pinned")
	assert.False(t, c.Crowded(), "six of eight slots loading is not crowded")
	src.gate <- struct{}{}
	src.gate <- struct{}{}
	require.NoError(t, <-done)
	c.mu.Lock()
	assert.Zero(t, c.loading)
	c.mu.Unlock()
	assert.True(t, c.Crowded(), "six of eight slots pinned by a reader")
	pins.Release()
	assert.False(t, c.Crowded())
	slotsSettled(t, c)
}
