package cache

import (
	"testing"
	"time"

	"github.com/blockfs/blockfs/source"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What a read does when a load it only joined fails: tries again with a load of its own
// (retryJoined, joinedFailed), or has the load ask again (a readahead's given up, load).

// TestJoinedLoadRetried: a reader that joins a load begun before it asked, which then fails
// (on a source that has recovered since), loads the pages again itself and gets their bytes;
// the reader whose own load failed gets the error at once, and a joined load that fails
// again is the joined reader's error too.
func TestJoinedLoadRetried(t *testing.T) {
	for _, recovered := range []bool{true, false} {
		for _, fill := range []bool{false, true} { // PinPages (FUSE replies, shm), Fill (ids, tables)
			joinedLoad(t, recovered, fill)
		}
	}
}

// TestJoinedRetryNewDense: the retry of a read whose Pins must grow its page table for the
// read (a plan pinning many blocks) neither panics nor leaves the failed try in the table.
func TestJoinedRetryNewDense(t *testing.T) {
	src := newSource(62*ps, 4*ps)
	c := newCache(t, src, 80)
	var pins Pins
	_, err := c.PinPages(bg, nil, &pins, 0, 0, 62, nil) // 62 of the table's 64
	require.NoError(t, err)
	src.gate = make(chan struct{})
	src.fail.Store(true)
	first := make(chan error, 1)
	go func() {
		var p Pins
		_, err := c.Pin(bg, nil, &p, 1, 0, 4*ps)
		p.Release()
		first <- err
	}()
	require.Eventually(t, func() bool { return src.inFly.Load() == 1 }, time.Second, time.Millisecond)
	done := make(chan error, 1)
	var run Run
	go func() {
		var err error
		run, err = c.PinPages(bg, nil, &pins, 1, 0, 4, nil) // joins; the table needs a new array
		done <- err
	}()
	require.Eventually(t, func() bool { return c.Stats().Merged == 4 }, time.Second, time.Millisecond)
	src.gate <- struct{}{}
	require.ErrorIs(t, <-first, errInjected)
	src.fail.Store(false)
	src.gate <- struct{}{} // the retry's own load
	require.NoError(t, <-done)
	assert.Equal(t, src.files[1], joined(run, 0, 4*ps))
	assert.Len(t, pins.dense, 4, "the table holds the retried run only")
	pins.Release()
	slotsSettled(t, c)
}

func joinedLoad(t *testing.T, recovered, fill bool) {
	src := newSource(8 * ps)
	src.gate = make(chan struct{})
	c := newCache(t, src, MinPages)
	src.fail.Store(true)
	first := make(chan error, 1)
	go func() {
		var p Pins
		_, err := c.Pin(bg, nil, &p, 0, 0, 2*ps) // its own load of pages 0 and 1
		p.Release()
		first <- err
	}()
	require.Eventually(t, func() bool { return src.inFly.Load() == 1 }, time.Second, time.Millisecond)
	var pins Pins
	got := make([]byte, ps)
	done := make(chan error, 1)
	go func() { // pages 0 and 1, loading: it joins
		if fill {
			done <- c.Fill(bg, nil, 0, 10, got)
			return
		}
		run, err := c.Pin(bg, nil, &pins, 0, 10, ps)
		if err == nil {
			copy(got, joined(run, 10, ps))
		}
		done <- err
	}()
	require.Eventually(t, func() bool { return c.Stats().Merged == 2 }, time.Second, time.Millisecond)
	src.gate <- struct{}{}
	require.ErrorIs(t, <-first, errInjected, "the reader whose load failed")
	src.fail.Store(!recovered)
	select {
	case src.gate <- struct{}{}: // the joined reader's load of its own
	case err := <-done:
		t.Fatalf("fill %v: the joined reader did not load the pages itself: %v", fill, err)
	}
	err := <-done
	if recovered {
		require.NoError(t, err)
		assert.Equal(t, src.files[0][10:10+ps], got)
	} else {
		assert.ErrorIs(t, err, errInjected)
	}
	assert.Len(t, src.calls(), 2, "the failed load and the joined reader's own")
	pins.Release()
	slotsSettled(t, c)
}

// TestFailedLoadFreesSlots: a failed load's slots are free at once, though readers that joined
// it still hold its pages: a read that tries again loads a file checked whole in one Fill, not
// page by page (each page of an object checked whole costs the whole object: a 300 MiB block
// took minutes).
func TestFailedLoadFreesSlots(t *testing.T) {
	src := newSource(6 * ps)
	src.gate = make(chan struct{})
	c, err := New(src, Options{Size: 8 * ps, PageSize: ps, MaxRead: 4 * ps, Workers: 1, Whole: true})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	src.fail.Store(true)
	first := make(chan error, 1)
	go func() {
		var p Pins
		_, err := c.Pin(bg, nil, &p, 0, 0, ps) // loads the whole file
		p.Release()
		first <- err
	}()
	require.Eventually(t, func() bool { return src.inFly.Load() == 1 }, time.Second, time.Millisecond)
	held, _ := c.pin(0, 0, 5, src.Size(0), forReader, privateWhenFull, nil) // a reader that joined, slow to let go
	require.Len(t, held, 6)
	src.gate <- struct{}{}
	require.ErrorIs(t, <-first, errInjected)
	src.fail.Store(false)
	got := make(chan error, 1)
	go func() {
		var p Pins
		_, err := c.Pin(bg, nil, &p, 0, 2*ps, ps)
		p.Release()
		got <- err
	}()
	src.gate <- struct{}{}
	require.NoError(t, <-got)
	calls := src.calls()
	require.Len(t, calls, 2)
	assert.EqualValues(t, 6*ps, calls[1].n, "the read after the failure loads the file whole")
	c.unpin(held)
	slotsSettled(t, c)
}

// TestReadaheadGaveUpJoined: a readahead load that the source gave up without asking the
// store (source.ErrNotTried: readahead gives up at once on a store it still counts silent)
// while a reader had come to wait for it asks the store once more, as a reader's, so the
// reader gets the store's answer: the bytes once it is back, its error while it is down. The
// reader here asked before the readahead began (its own read's readahead, a neighbour's), so
// it would not try again itself. A readahead load nobody waited for keeps its error, and the
// next reader loads the pages itself.
func TestReadaheadGaveUpJoined(t *testing.T) {
	for _, back := range []bool{true, false} {
		src := newSource(8 * ps)
		src.gate = make(chan struct{})
		src.notTried.Store(true)
		c := newCache(t, src, MinPages)
		src.fail.Store(true)
		var pins Pins
		var run Run
		tries := 0
		done := make(chan error, 1)
		go func() {
			var err error
			run, err = c.retryJoined(bg, &pins, func() (Run, error) {
				tries++
				// Readahead of the same pages, begun after the read's mark.
				c.Prefetch(0, 0, 2*ps)
				for src.inFly.Load() == 0 {
					time.Sleep(time.Millisecond)
				}
				return c.pinPages(bg, nil, &pins, 0, 0, 2, nil)
			})
			done <- err
		}()
		require.Eventually(t, func() bool { return c.Stats().Merged == 2 }, time.Second, time.Millisecond)
		src.gate <- struct{}{} // the readahead's Fill, begun in the background, gives up
		require.Eventually(t, func() bool { return c.Stats().DiskErrors == 1 }, time.Second, time.Millisecond)
		src.fail.Store(!back)
		select {
		case src.gate <- struct{}{}: // the same load asks again, as the waiting reader's
		case err := <-done:
			t.Fatalf("back %v: the load did not ask the store again: %v", back, err)
		}
		err := <-done
		if back {
			require.NoError(t, err)
			assert.Equal(t, src.files[0][:2*ps], joined(run, 0, 2*ps))
		} else {
			assert.ErrorIs(t, err, errInjected, "the store's answer")
			assert.NotErrorIs(t, err, source.ErrNotTried)
		}
		assert.Equal(t, 1, tries, "the reader tried once: the load asked for it")
		assert.Len(t, src.calls(), 2)
		pins.Release()
		slotsSettled(t, c)
	}

	// Nobody waiting: the error is the readahead's own; a reader after it loads the pages.
	src := newSource(8 * ps)
	src.notTried.Store(true)
	c := newCache(t, src, MinPages)
	src.fail.Store(true)
	c.Prefetch(0, 0, 2*ps)
	require.Eventually(t, func() bool { return c.Stats().DiskErrors == 1 }, time.Second, time.Millisecond)
	slotsSettled(t, c)
	src.fail.Store(false)
	var pins Pins
	run, err := c.PinPages(bg, nil, &pins, 0, 0, 2, nil)
	require.NoError(t, err)
	assert.Equal(t, src.files[0][:2*ps], joined(run, 0, 2*ps))
	assert.Len(t, src.calls(), 2, "the readahead's, then the reader's own")
	pins.Release()
}
