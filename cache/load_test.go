package cache

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/source"
)

// ctxSource is a memSource that records whether each read was a readahead's (source.Read.Background).
type ctxSource struct {
	*memSource
	mu sync.Mutex
	bg []bool
}

func (s *ctxSource) Fill(ctx context.Context, id FileID, off int64, bufs [][]byte, how source.Read) error {
	s.mu.Lock()
	s.bg = append(s.bg, how.Background())
	s.mu.Unlock()
	return s.memSource.Fill(ctx, id, off, bufs, how)
}

// requireSettled checks the slot accounting once no page is pinned or loading: every slot is
// free or holds a cached page.
func requireSettled(t *testing.T, c *Cache) {
	t.Helper()
	require.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.pinned == 0 && c.loading == 0 && c.slots == len(c.free)+c.lru.Len()+c.ahead.Len()
	}, 5*time.Second, time.Millisecond, "slots lost")
}

// TestOwnLoadCancelled: a reader whose context ends while the source reads its own pages (a
// FUSE read interrupted while the store does not answer) returns at once; the load goes on
// without it, and its slots come back whether the load succeeds or fails.
func TestOwnLoadCancelled(t *testing.T) {
	for _, fail := range []bool{false, true} {
		src := newSource(4 * ps)
		src.gate = make(chan struct{})
		c := newCache(t, src, 4)
		ctx, cancel := context.WithCancel(bg)
		done := make(chan error, 1)
		go func() { done <- c.Fill(ctx, nil, 0, 0, make([]byte, 2*ps)) }()
		require.Eventually(t, func() bool { return src.inFly.Load() == 1 }, 5*time.Second, time.Millisecond)
		cancel()
		select {
		case err := <-done:
			require.ErrorIs(t, err, context.Canceled)
		case <-time.After(2 * time.Second):
			t.Fatal("a reader whose context ended still waits for its own load")
		}
		src.fail.Store(fail)
		close(src.gate)
		requireSettled(t, c)
		src.fail.Store(false)
		src.gate = nil
		buf := make([]byte, 2*ps)
		require.NoError(t, c.Fill(bg, nil, 0, 0, buf))
		assert.Equal(t, src.files[0][:2*ps], buf)
	}
}

// TestReadaheadIsBackground: readahead's loads are marked source.Read.Ahead, a reader's are not, so
// that a source with a bounded pool serves the reader first.
func TestReadaheadIsBackground(t *testing.T) {
	src := &ctxSource{memSource: newSource(4*ps, 4*ps)}
	c := newCache(t, src, 8)
	require.NoError(t, c.Fill(bg, nil, 0, 0, make([]byte, 10)))
	require.True(t, c.Prefetch(1, 0, 4*ps))
	require.Eventually(t, func() bool { return c.Stats().CachedBytes == 5*ps }, 5*time.Second, time.Millisecond)
	src.mu.Lock()
	defer src.mu.Unlock()
	assert.Equal(t, []bool{false, true}, src.bg)
}

// TestWholeLoads: with Options.Whole a miss loads the whole file in one read when it fits in
// the unpinned slots and none of it is cached; otherwise only what was asked for.
func TestWholeLoads(t *testing.T) {
	src := newSource(6*ps+100, 12*ps, 3*ps)
	c, err := New(src, Options{Size: 10 * ps, PageSize: ps, MaxRead: 2 * ps, Workers: 1, Queue: 8, Whole: true})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })

	got := make([]byte, 10)
	require.NoError(t, c.Fill(bg, nil, 0, 3*ps, got))
	assert.Equal(t, src.files[0][3*ps:3*ps+10], got)
	assert.Equal(t, []readCall{{0, 0, 6*ps + 100}}, src.calls(), "one read of the whole file, past MaxRead")
	for off := int64(0); off < 6*ps+100; off += ps / 2 {
		n := min(int64(ps/2), 6*ps+100-off)
		buf := make([]byte, n)
		require.NoError(t, c.Fill(bg, nil, 0, off, buf))
		assert.Equal(t, src.files[0][off:off+n], buf)
	}
	assert.Len(t, src.calls(), 1, "the rest of the file was loaded with it")
	st := c.Stats()
	assert.EqualValues(t, 1, st.Misses)
	assert.EqualValues(t, 6, st.ReadaheadHits, "the pages not asked for count as read ahead")

	// Larger than the cache: only the pages asked for.
	require.NoError(t, c.Fill(bg, nil, 1, 5*ps, got))
	assert.Equal(t, readCall{1, 5 * ps, ps}, src.calls()[1])

	// A file with a page cached already: only the pages missing.
	src.mu.Lock()
	src.reads = nil
	src.mu.Unlock()
	require.NoError(t, c.Fill(bg, nil, 2, 0, got))
	c.mu.Lock()
	for pg := int64(1); pg < 3; pg++ {
		c.removeLocked(c.pages[key{2, pg}])
	}
	c.mu.Unlock()
	require.NoError(t, c.Fill(bg, nil, 2, 2*ps, got))
	assert.Equal(t, []readCall{{2, 0, 3 * ps}, {2, 2 * ps, ps}}, src.calls())
	requireSettled(t, c)
}

// gateSource is a memSource whose reads wait for gate, recording how each is to be served.
type gateSource struct {
	*memSource
	gate chan struct{}
	hows chan source.Read
}

func (s *gateSource) Fill(ctx context.Context, id FileID, off int64, bufs [][]byte, how source.Read) error {
	s.hows <- how
	<-s.gate
	return s.memSource.Fill(ctx, id, off, bufs, how)
}

// TestReaderPromotesReadahead: a reader that waits for a page readahead is loading promotes
// that load (source.Read.Background turns false), so the source serves it as a reader's.
func TestReaderPromotesReadahead(t *testing.T) {
	src := &gateSource{memSource: newSource(4 * ps), gate: make(chan struct{}), hows: make(chan source.Read, 4)}
	c := newCache(t, src, 8)
	require.True(t, c.Prefetch(0, 0, 4*ps))
	how := <-src.hows
	require.True(t, how.Background())
	done := make(chan error, 1)
	go func() { done <- c.Fill(bg, nil, 0, ps, make([]byte, 10)) }()
	require.Eventually(t, func() bool { return !how.Background() }, 5*time.Second, time.Millisecond)
	close(src.gate)
	require.NoError(t, <-done)
	assert.EqualValues(t, 1, c.Stats().Merged)
	requireSettled(t, c)
}

// TestWaitsCountsTheReadsWait: the time a read waits for its pages goes to the Waits it
// passes, and only to it; a read of loaded pages waits nothing.
func TestWaitsCountsTheReadsWait(t *testing.T) {
	src := &gateSource{memSource: newSource(4 * ps), gate: make(chan struct{}), hows: make(chan source.Read, 4)}
	c := newCache(t, src, 8)
	var w, other Waits
	done := make(chan error, 1)
	go func() { done <- c.Fill(bg, &w, 0, 0, make([]byte, 10)) }()
	<-src.hows
	time.Sleep(30 * time.Millisecond)
	close(src.gate)
	require.NoError(t, <-done)
	assert.GreaterOrEqual(t, w.Duration(), 25*time.Millisecond)
	require.NoError(t, c.Fill(bg, &other, 0, 0, make([]byte, 10)))
	var pins Pins
	_, err := c.Pin(bg, &other, &pins, 0, 0, 10)
	require.NoError(t, err)
	pins.Release()
	assert.Zero(t, other.Duration(), "loaded pages")
	requireSettled(t, c)
}

// TestWholeReadaheadNoRoom: with Options.Whole, readahead that finds no room for a whole file
// (the cache holding pages read ahead, not read yet) loads none of it rather than part, so
// that the file is later loaded whole, with one read.
func TestWholeReadaheadNoRoom(t *testing.T) {
	src := newSource(7*ps, 4*ps)
	c, err := New(src, Options{Size: 8 * ps, PageSize: ps, MaxRead: 8 * ps, Workers: 1, Queue: 8, Whole: true})
	require.NoError(t, err)
	defer c.Close()
	require.True(t, c.Prefetch(0, 0, 7*ps)) // 7 pages read ahead, one slot free
	require.Eventually(t, func() bool { return c.Stats().DiskBytes == 7*ps }, 5*time.Second, time.Millisecond)
	require.True(t, c.Prefetch(1, 0, 4*ps))
	require.Eventually(t, func() bool { return c.Stats().PrefetchDropped > 0 }, 5*time.Second, time.Millisecond)
	assert.EqualValues(t, 7*ps, c.Stats().DiskBytes, "no part of file 1 was read ahead")
	require.NoError(t, c.Fill(bg, nil, 0, 0, make([]byte, 7*ps))) // file 0 read: its pages may go
	require.NoError(t, c.Fill(bg, nil, 1, 0, make([]byte, 4*ps)))
	assert.Equal(t, []readCall{{0, 0, 7 * ps}, {1, 0, 4 * ps}}, src.calls(), "each file read whole, once")
	requireSettled(t, c)
}
