package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/source"
)

var bg = context.Background()

// memSource serves files from memory, records every read, and can block or fail reads.
type memSource struct {
	files [][]byte
	mu    sync.Mutex
	reads []readCall
	gate  chan struct{} // when non-nil, each read waits for a receive
	fail  atomic.Bool
	// notTried: a failing read begun in the background (readahead) fails as a backend's that
	// gave up without a request (source.ErrNotTried), as decided when it began.
	notTried atomic.Bool
	inFly    atomic.Int32
	peak     atomic.Int32
}

type readCall struct {
	id     FileID
	off, n int64
}

var errInjected = errors.New("injected failure")

func (s *memSource) Size(id FileID) int64 { return int64(len(s.files[id])) }

func (s *memSource) Fill(ctx context.Context, id FileID, off int64, bufs [][]byte, how source.Read) error {
	gaveUp := s.notTried.Load() && how.Background()
	cur := s.inFly.Add(1)
	defer s.inFly.Add(-1)
	for p := s.peak.Load(); cur > p && !s.peak.CompareAndSwap(p, cur); p = s.peak.Load() {
	}
	if s.gate != nil {
		<-s.gate
	}
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	s.mu.Lock()
	s.reads = append(s.reads, readCall{id, off, int64(n)})
	s.mu.Unlock()
	if s.fail.Load() {
		if gaveUp {
			return fmt.Errorf("%w: %w", source.ErrUnavailable, source.ErrNotTried)
		}
		return errInjected
	}
	o := off
	for _, b := range bufs {
		o += int64(copy(b, s.files[id][o:]))
	}
	return nil
}

func (s *memSource) calls() []readCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]readCall(nil), s.reads...)
}

func newSource(sizes ...int) *memSource {
	r := rand.New(rand.NewSource(1))
	s := &memSource{}
	for _, n := range sizes {
		b := make([]byte, n)
		r.Read(b)
		s.files = append(s.files, b)
	}
	return s
}

const ps = 4096

func newCache(t *testing.T, src source.Blocks, pages int) *Cache {
	t.Helper()
	c, err := New(src, Options{Size: int64(pages * ps), PageSize: ps, MaxRead: 4 * ps, Workers: 2, Queue: 8})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func TestReadAtMatchesSource(t *testing.T) {
	src := newSource(10*ps+123, 3*ps, 17)
	c := newCache(t, src, 8)
	r := rand.New(rand.NewSource(2))
	for i := 0; i < 2000; i++ {
		id := FileID(r.Intn(3))
		size := src.Size(id)
		off := r.Int63n(size)
		n := 1 + r.Int63n(min(size-off, 5*ps))
		buf := make([]byte, n)
		require.NoError(t, c.Fill(bg, nil, id, off, buf))
		require.True(t, bytes.Equal(src.files[id][off:off+n], buf), "file %d [%d,+%d)", id, off, n)
	}
	st := c.Stats()
	assert.LessOrEqual(t, st.CachedBytes, c.Capacity())
	assert.Positive(t, st.Hits)
	assert.Positive(t, st.Evictions)
	err := c.Fill(bg, nil, 0, src.Size(0)-5, make([]byte, 10))
	assert.ErrorIs(t, err, ErrRange)
}

// TestAlignedCoalescedReads: disk reads start on page boundaries, are whole pages (but for a
// file's tail), and a miss of several adjacent pages is one read up to MaxRead.
func TestAlignedCoalescedReads(t *testing.T) {
	src := newSource(20*ps + 100)
	c := newCache(t, src, 16)
	buf := make([]byte, 6*ps)
	err := c.Fill(bg, nil, 0, 3*ps+17, buf)
	require.NoError(t, err)
	calls := src.calls()
	// Pages 3..9 are needed: one read of 4 pages (MaxRead) and one of 3, at once.
	assert.ElementsMatch(t, []readCall{{0, 3 * ps, 4 * ps}, {0, 7 * ps, 3 * ps}}, calls)
	err = c.Fill(bg, nil, 0, 20*ps+10, make([]byte, 50))
	require.NoError(t, err)
	calls = src.calls()
	assert.Equal(t, readCall{0, 20 * ps, 100}, calls[len(calls)-1], "tail page is the file's end")
	for _, rc := range src.calls() {
		assert.Zero(t, rc.off%ps)
	}
}

// TestMergedMisses: concurrent readers of the same missing page cause one disk read.
func TestMergedMisses(t *testing.T) {
	src := newSource(4 * ps)
	src.gate = make(chan struct{})
	c := newCache(t, src, 8)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 100)
			err := c.Fill(bg, nil, 0, 10, buf)
			assert.NoError(t, err)
			assert.Equal(t, src.files[0][10:110], buf)
		}()
	}
	require.Eventually(t, func() bool { return src.inFly.Load() == 1 }, time.Second, time.Millisecond)
	time.Sleep(20 * time.Millisecond) // let the other readers find the loading page
	close(src.gate)
	wg.Wait()
	assert.Len(t, src.calls(), 1)
	assert.EqualValues(t, 1, c.Stats().Misses)
	assert.EqualValues(t, 7, c.Stats().Merged+c.Stats().Hits)
}

// TestBoundHeld: many concurrent readers over a working set far larger than the cache never
// make it hold more than its budget.
func TestBoundHeld(t *testing.T) {
	src := newSource(64*ps, 64*ps)
	c := newCache(t, src, 6)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var maxHeld atomic.Int64
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				h := c.Stats().CachedBytes
				if h > maxHeld.Load() {
					maxHeld.Store(h)
				}
			}
		}
	}()
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(g)))
			for i := 0; i < 300; i++ {
				id := FileID(r.Intn(2))
				off := r.Int63n(60 * ps)
				buf := make([]byte, 1+r.Intn(3*ps))
				err := c.Fill(bg, nil, id, off, buf)
				if !assert.NoError(t, err) || !assert.Equal(t, src.files[id][off:off+int64(len(buf))], buf) {
					return
				}
				if i%10 == 0 {
					c.Prefetch(id, r.Int63n(60*ps), 4*ps)
				}
			}
		}(g)
	}
	wg.Wait()
	close(stop)
	assert.LessOrEqual(t, maxHeld.Load(), c.Capacity())
	c.mu.Lock()
	assert.LessOrEqual(t, len(c.pages), c.slots)
	c.mu.Unlock()
	// Readahead may still be loading pages the readers queued; once it is idle, every slot is
	// free or holds a loaded page (none is lost).
	assert.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.slots == len(c.free)+c.lru.Len()+c.ahead.Len()
	}, 5*time.Second, time.Millisecond, "every slot is free or holds a loaded page")
}

// TestEvictionLRU: the least recently used page goes first.
func TestEvictionLRU(t *testing.T) {
	src := newSource(10 * ps)
	c := newCache(t, src, 4)
	read := func(page int64) {
		err := c.Fill(bg, nil, 0, page*ps, make([]byte, 1))
		require.NoError(t, err)
	}
	for _, p := range []int64{0, 1, 2, 3} {
		read(p)
	}
	read(0) // 0 is now the most recent; 1 is the least
	read(4) // evicts 1
	before := len(src.calls())
	read(0)
	read(2)
	read(3)
	assert.Len(t, src.calls(), before, "0, 2, 3 stayed cached")
	read(1)
	assert.Len(t, src.calls(), before+1, "1 was evicted")
}

// TestErrorsAreNotCached: a failed read reaches the reader and is retried next time.
func TestErrorsAreNotCached(t *testing.T) {
	src := newSource(4 * ps)
	c := newCache(t, src, 4)
	src.fail.Store(true)
	buf := make([]byte, 10)
	err := c.Fill(bg, nil, 0, 0, buf)
	assert.ErrorIs(t, err, errInjected)
	src.fail.Store(false)
	err = c.Fill(bg, nil, 0, 0, buf)
	require.NoError(t, err)
	assert.Equal(t, src.files[0][:10], buf)
	assert.EqualValues(t, 1, c.Stats().DiskErrors)
	c.mu.Lock()
	assert.Equal(t, c.slots, len(c.free)+c.lru.Len()+c.ahead.Len(), "the failed page's slot was returned")
	c.mu.Unlock()
}

// TestAllPinnedStillServes: when every slot is pinned by waiting readers, a further read is
// served from a private buffer instead of blocking or failing.
func TestAllPinnedStillServes(t *testing.T) {
	src := newSource(8 * ps)
	src.gate = make(chan struct{})
	c, err := New(src, Options{Size: 4 * ps, PageSize: ps, MaxRead: ps, Workers: 1, Queue: 1})
	require.NoError(t, err)
	defer c.Close()
	var wg sync.WaitGroup
	for p := 0; p < 4; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			err := c.Fill(bg, nil, 0, int64(p)*ps, make([]byte, 1))
			assert.NoError(t, err)
		}(p)
	}
	require.Eventually(t, func() bool { return src.inFly.Load() == 4 }, time.Second, time.Millisecond)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 5)
		err := c.Fill(bg, nil, 0, 6*ps, buf)
		assert.NoError(t, err)
		assert.Equal(t, src.files[0][6*ps:6*ps+5], buf)
	}()
	require.Eventually(t, func() bool { return src.inFly.Load() == 5 }, time.Second, time.Millisecond)
	close(src.gate)
	<-done
	wg.Wait()
	assert.EqualValues(t, 1, c.Stats().Overflow)
}

// TestPrefetch: prefetched pages are served as hits and counted as readahead hits; Prefetch
// never blocks even when its queue is full.
func TestPrefetch(t *testing.T) {
	src := newSource(16 * ps)
	c := newCache(t, src, 16)
	require.True(t, c.Prefetch(0, 0, 8*ps))
	require.Eventually(t, func() bool { return c.Stats().DiskBytes == 8*ps }, time.Second, time.Millisecond)
	buf := make([]byte, 8*ps)
	err := c.Fill(bg, nil, 0, 0, buf)
	require.NoError(t, err)
	assert.Equal(t, src.files[0][:8*ps], buf)
	st := c.Stats()
	assert.EqualValues(t, 8, st.ReadaheadHits)
	assert.Zero(t, st.Misses)
	for _, rc := range src.calls() {
		assert.EqualValues(t, 4*ps, rc.n, "prefetch reads MaxRead at a time")
	}

	blocked := newSource(16 * ps)
	blocked.gate = make(chan struct{})
	c2, err := New(blocked, Options{Size: 16 * ps, PageSize: ps, Workers: 1, Queue: 2})
	require.NoError(t, err)
	start := time.Now()
	accepted := 0
	for i := 0; i < 10; i++ {
		if c2.Prefetch(0, int64(i)*ps, ps) {
			accepted++
		}
	}
	assert.Less(t, time.Since(start), time.Second)
	assert.LessOrEqual(t, accepted, 3) // one taken by the worker, two queued
	assert.Positive(t, c2.Stats().PrefetchDropped)
	close(blocked.gate)
	require.NoError(t, c2.Close())
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []Options{
		{Size: 3 * ps, PageSize: ps},
		{Size: 1 << 20, PageSize: 1000},
		{Size: 1 << 20, PageSize: ps, MaxRead: ps + 1},
	} {
		assert.Error(t, o.Validate(), "%+v", o)
	}
	o := Options{}
	require.NoError(t, o.Validate())
	assert.EqualValues(t, DefaultPageSize, o.PageSize)
}

// TestWaitCancelled: a read waiting for a page another read is loading returns its context's
// error at once; the load completes for the loader, and the page stays cached with no slot lost.
func TestWaitCancelled(t *testing.T) {
	src := newSource(4 * ps)
	src.gate = make(chan struct{})
	c := newCache(t, src, 4)
	loaded := make(chan error, 1)
	go func() { loaded <- c.Fill(bg, nil, 0, 0, make([]byte, 10)) }()
	require.Eventually(t, func() bool { return src.inFly.Load() == 1 }, 5*time.Second, time.Millisecond)
	ctx, cancel := context.WithCancel(bg)
	cancel()
	assert.ErrorIs(t, c.Fill(ctx, nil, 0, 5, make([]byte, 10)), context.Canceled)
	var pins Pins
	_, err := c.Pin(ctx, nil, &pins, 0, 0, 10)
	assert.ErrorIs(t, err, context.Canceled)
	pins.Release()
	close(src.gate)
	require.NoError(t, <-loaded)
	buf := make([]byte, 10)
	require.NoError(t, c.Fill(ctx, nil, 0, 0, buf), "a loaded page is served even to a cancelled context")
	assert.Equal(t, src.files[0][:10], buf)
	c.mu.Lock()
	defer c.mu.Unlock()
	assert.Equal(t, 0, c.pinned)
	assert.Equal(t, c.slots, len(c.free)+c.lru.Len()+c.ahead.Len())
}

func TestReserve(t *testing.T) {
	src := newSource(16 * ps)
	c := newCache(t, src, 16)
	// Pages in use: Reserve takes the least recently used unpinned ones, never a pinned one.
	buf := make([]byte, 16*ps)
	require.NoError(t, c.Fill(context.Background(), nil, 0, 0, buf))
	var pins Pins
	_, err := c.PinPage(context.Background(), nil, &pins, 0, 15)
	require.NoError(t, err)
	assert.EqualValues(t, 6*ps, c.Reserve(6*ps))
	assert.EqualValues(t, 10*ps, c.Capacity())
	// Never below MinPages, and the pinned page stays.
	assert.EqualValues(t, 6*ps, c.Reserve(100*ps))
	assert.EqualValues(t, MinPages*ps, c.Capacity())
	got := make([]byte, ps)
	require.NoError(t, c.Fill(context.Background(), nil, 0, 15*ps, got))
	assert.Equal(t, src.files[0][15*ps:], got)
	pins.Release()
	// Bytes still read right with what is left.
	require.NoError(t, c.Fill(context.Background(), nil, 0, 0, buf))
	assert.Equal(t, src.files[0], buf)

	// Keep: what the mount needs for pages stays.
	kept, err := New(src, Options{Size: 16 * ps, PageSize: ps, MaxRead: ps, Workers: 1, Queue: 1, Keep: 12 * ps})
	require.NoError(t, err)
	defer kept.Close()
	assert.EqualValues(t, 4*ps, kept.Reserve(8*ps))
	assert.EqualValues(t, 12*ps, kept.Capacity())
}

// TestGrow: Grow puts pages in service up to Max and no further; a cache grown to hold a file
// reads it again from memory, where the smaller one evicted and read it from the source.
func TestGrow(t *testing.T) {
	src := newSource(12 * ps)
	c, err := New(src, Options{Size: 4 * ps, Max: 12*ps + ps/2, PageSize: ps, MaxRead: ps, Workers: 1, Queue: 1})
	require.NoError(t, err)
	defer c.Close()
	buf := make([]byte, 12*ps)
	readAll := func() {
		for p := int64(0); p < 12; p++ {
			require.NoError(t, c.Fill(bg, nil, 0, p*ps, buf[p*ps:(p+1)*ps]))
		}
		assert.Equal(t, src.files[0], buf)
	}
	readAll()
	assert.EqualValues(t, 8, c.Stats().Evictions)
	assert.EqualValues(t, 3*ps, c.Grow(3*ps+ps/2), "whole pages only")
	assert.EqualValues(t, 7*ps, c.Capacity())
	assert.EqualValues(t, 5*ps, c.Grow(100*ps), "no further than Max")
	assert.EqualValues(t, 12*ps, c.Capacity())
	assert.Zero(t, c.Grow(ps))
	readAll()
	before := len(src.calls())
	readAll()
	assert.Len(t, src.calls(), before, "the grown cache holds the whole file")
	// Without Max, a cache cannot grow; Reserve's slots do not come back.
	d := newCache(t, src, 8)
	assert.Zero(t, d.Grow(ps))
	assert.EqualValues(t, 2*ps, d.Reserve(2*ps))
	assert.Zero(t, d.Grow(2*ps))
	assert.EqualValues(t, 6*ps, d.Capacity())
}

// TestReadAheadEvictedLast: pages read ahead and not read yet outlive pages a reader has read,
// however recently it read them: a reader reads a record once an epoch, so what it has read is
// done with and what readahead brought is what it comes to next. Readahead itself never evicts
// a page read ahead (it stops); a reader does, the one read ahead last first.
func TestReadAheadEvictedLast(t *testing.T) {
	src := newSource(4*ps, 4*ps, 4*ps, 4*ps)
	c, err := New(src, Options{Size: 8 * ps, PageSize: ps, MaxRead: ps, Workers: 1, Queue: 8})
	require.NoError(t, err)
	defer c.Close()
	read := func(id FileID, page int64) {
		require.NoError(t, c.Fill(bg, nil, id, page*ps, make([]byte, 1)))
	}
	require.True(t, c.Prefetch(0, 0, 4*ps))
	require.Eventually(t, func() bool { return c.Stats().DiskBytes == 4*ps }, 5*time.Second, time.Millisecond)
	for pg := range int64(4) { // file 1 read after file 0 was read ahead: more recent
		read(1, pg)
	}
	for pg := range int64(4) { // four more pages: file 1's go, file 0's stay
		read(2, pg)
	}
	st := c.Stats()
	assert.Zero(t, st.ReadaheadWasted, "no page read ahead was evicted")
	before := len(src.calls())
	for pg := range int64(4) {
		read(0, pg)
	}
	assert.Len(t, src.calls(), before, "file 0 was served from the pages read ahead")
	assert.EqualValues(t, 4, c.Stats().ReadaheadHits)

	// Readahead into a cache full of pages read ahead stops rather than evict them.
	require.True(t, c.Prefetch(1, 0, 4*ps))
	require.True(t, c.Prefetch(3, 0, 4*ps))
	require.Eventually(t, func() bool { return c.Stats().DiskBytes == 20*ps }, 5*time.Second, time.Millisecond)
	require.True(t, c.Prefetch(2, 0, 4*ps))
	require.Eventually(t, func() bool { return c.Stats().PrefetchDropped > 0 }, 5*time.Second, time.Millisecond)
	assert.Zero(t, c.Stats().ReadaheadWasted)
	assert.EqualValues(t, 20*ps, c.Stats().DiskBytes, "file 2 was not read ahead: no room")
	// A reader evicts them, the one read ahead last first (file 3's last page).
	read(2, 0)
	assert.EqualValues(t, 1, c.Stats().ReadaheadWasted)
	before = len(src.calls())
	read(1, 0)
	read(3, 0)
	assert.Len(t, src.calls(), before, "the pages read ahead first stayed")
}

// TestPrefetchOfLoadingPages: a readahead request for pages another load is loading (a
// reader's, or an earlier request for the same block) does not hold its worker: the next
// request's load starts while the first is still loading.
func TestPrefetchOfLoadingPages(t *testing.T) {
	src := &gateSource{memSource: newSource(4*ps, 4*ps), gate: make(chan struct{}), hows: make(chan source.Read, 8)}
	c, err := New(src, Options{Size: 16 * ps, PageSize: ps, MaxRead: 4 * ps, Workers: 1, Queue: 8})
	require.NoError(t, err)
	defer c.Close()
	done := make(chan error, 1)
	go func() { done <- c.Fill(bg, nil, 0, 0, make([]byte, 4*ps)) }() // a reader loads file 0
	<-src.hows
	require.True(t, c.Prefetch(0, 0, 4*ps)) // the worker finds file 0 loading
	require.True(t, c.Prefetch(1, 0, 4*ps))
	select {
	case <-src.hows: // file 1's load started, file 0's still waits at the gate
	case <-time.After(5 * time.Second):
		t.Fatal("the worker waited for the reader's load before starting the next")
	}
	close(src.gate)
	require.NoError(t, <-done)
	requireSettled(t, c)

	// The same with a second worker that takes a request for the block the first is loading.
	src2 := &gateSource{memSource: newSource(4*ps, 4*ps), gate: make(chan struct{}), hows: make(chan source.Read, 8)}
	c2, err := New(src2, Options{Size: 16 * ps, PageSize: ps, MaxRead: 4 * ps, Workers: 2, Queue: 8})
	require.NoError(t, err)
	defer c2.Close()
	require.True(t, c2.Prefetch(0, 0, 4*ps))
	<-src2.hows // the first worker loads file 0
	require.True(t, c2.Prefetch(0, 0, 4*ps))
	require.True(t, c2.Prefetch(1, 0, 4*ps))
	select {
	case <-src2.hows:
	case <-time.After(5 * time.Second):
		t.Fatal("the second worker waited for the first's load of the same block")
	}
	close(src2.gate)
	requireSettled(t, c2)
}

// eightPages returns files of 4 pages, a cache of 8 pages over them (a page a load, one
// readahead worker) and a reader of a whole file, page by page.
func eightPages(t *testing.T, files int) (*memSource, *Cache, func(FileID)) {
	t.Helper()
	sizes := make([]int, files)
	for i := range sizes {
		sizes[i] = 4 * ps
	}
	src := newSource(sizes...)
	c, err := New(src, Options{Size: 8 * ps, PageSize: ps, MaxRead: ps, Workers: 1, Queue: 8})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return src, c, func(id FileID) {
		for pg := range int64(4) {
			require.NoError(t, c.Fill(bg, nil, id, pg*ps, make([]byte, 1)))
		}
	}
}

// TestStaleReadAheadEvicted: a page read ahead that no reader came for while the cache turned
// over (an epoch left half read) is evicted first, by readahead too.
func TestStaleReadAheadEvicted(t *testing.T) {
	src, c, read := eightPages(t, 4)
	require.True(t, c.Prefetch(0, 0, 4*ps)) // pages 1 to 4 loaded
	require.Eventually(t, func() bool { return c.Stats().DiskBytes == 4*ps }, 5*time.Second, time.Millisecond)
	read(1)
	read(2)
	read(1) // pages 5 to 16: the readers evict each other's
	assert.Zero(t, c.Stats().ReadaheadWasted, "not stale yet: at most 15 pages loaded since")
	read(2) // pages 17 to 20: file 0's first two pages, 17 loads old, go first
	assert.EqualValues(t, 2, c.Stats().ReadaheadWasted)
	require.True(t, c.Prefetch(3, 0, 4*ps)) // readahead evicts the other two: stale too
	require.Eventually(t, func() bool { return c.Stats().DiskBytes == 24*ps }, 5*time.Second, time.Millisecond)
	assert.EqualValues(t, 4, c.Stats().ReadaheadWasted)
	before := len(src.calls())
	read(2)
	assert.Len(t, src.calls(), before, "file 2's pages, read last, stayed")
}

// TestReadAheadKeepsCachedPages: readahead's request for pages already cached and read (a
// block kept from an earlier epoch, due again in this one) keeps them as pages read ahead,
// until their reader comes.
func TestReadAheadKeepsCachedPages(t *testing.T) {
	src, c, read := eightPages(t, 3)
	read(0)
	require.True(t, c.Prefetch(0, 0, 4*ps)) // file 0 is due again
	require.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.ahead.Len() == 4
	}, 5*time.Second, time.Millisecond)
	read(1)
	read(2) // evicts file 1's pages, read more recently, not file 0's
	before := len(src.calls())
	read(0)
	assert.Len(t, src.calls(), before, "file 0 stayed for its reader")
	assert.Zero(t, c.Stats().ReadaheadWasted)
}
