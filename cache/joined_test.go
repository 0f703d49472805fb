package cache

import (
	"testing"
	"time"

	"github.com/blockfs/blockfs/source"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What a read does when a load it only joined fails (retryJoined, joinedFailed): tries again
// with a load of its own, at most joinedTries times in all.

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

// TestJoinedReadaheadAfterMark: a read that finds its pages loading by a readahead load
// begun after it asked (its own read's readahead, another reader's), which then fails without
// a request (a readahead gives up at once on a store it still counts silent), loads them
// itself and gets their bytes; a read whose every try joins such a load gives up after
// joinedTries. A readahead load begun after it asked that tried and failed is its answer.
func TestJoinedReadaheadAfterMark(t *testing.T) {
	for _, c := range []struct {
		name     string
		notTried bool // the readahead's load gave up without a request
		recovers bool // the store answers the read's own load
		tries    int
		err      error
	}{
		{"gave up, then the read's own load", true, true, 2, nil},
		{"gave up every time", true, false, joinedTries, source.ErrNotTried},
		{"tried and failed", false, true, 1, errInjected},
	} {
		t.Run(c.name, func(t *testing.T) {
			readaheadAfterMark(t, c.notTried, c.recovers, c.tries, c.err)
		})
	}
}

func readaheadAfterMark(t *testing.T, notTried, recovers bool, wantTries int, wantErr error) {
	src := newSource(8 * ps)
	src.gate = make(chan struct{})
	src.notTried.Store(notTried)
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
			if tries == 1 || !recovers {
				// Readahead of the same pages, begun after the read's mark.
				c.Prefetch(0, 0, 2*ps)
				for src.inFly.Load() == 0 {
					time.Sleep(time.Millisecond)
				}
			}
			return c.pinPages(bg, nil, &pins, 0, 0, 2, nil)
		})
		done <- err
	}()
	for try := 1; try <= wantTries && (try == 1 || !recovers); try++ {
		require.Eventually(t, func() bool { return c.Stats().Merged == uint64(2*try) }, time.Second, time.Millisecond,
			"try %d joins the readahead's load", try)
		src.gate <- struct{}{} // the readahead's load fails
		require.Eventually(t, func() bool { return c.Stats().DiskErrors == uint64(try) }, time.Second, time.Millisecond)
	}
	if wantErr == nil {
		src.fail.Store(false)
		select {
		case src.gate <- struct{}{}: // the read's own load
		case err := <-done:
			t.Fatalf("the read did not load the pages itself: %v (tries %d)", err, tries)
		}
		require.NoError(t, <-done)
		assert.Equal(t, src.files[0][:2*ps], joined(run, 0, 2*ps))
	} else {
		assert.ErrorIs(t, <-done, wantErr)
	}
	assert.Equal(t, wantTries, tries)
	pins.Release()
	slotsSettled(t, c)
}
