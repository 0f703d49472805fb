package source

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSlotsReadersFirst: a token goes to a waiting reader's request before any readahead
// request, whichever came first, and to a readahead request promoted while it waits (a
// reader now waits for it) as to a reader's; a request that gives up while it waits leaves
// its place.
func TestSlotsReadersFirst(t *testing.T) {
	s := NewSlots(1)
	bg := context.Background()
	never := func() error { return nil }
	require.NoError(t, s.Acquire(bg, Read{}, time.Hour, never))
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	start := func(name string, how Read) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			require.NoError(t, s.Acquire(bg, how, 5*time.Millisecond, never))
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			s.Release()
		}()
	}
	waiting := func(q, n int) {
		require.Eventually(t, func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return len(s.wait[q]) == n
		}, 5*time.Second, time.Millisecond)
	}
	start("readahead 1", Read{Ahead: new(Ahead)})
	waiting(1, 1)
	start("readahead 2", Read{Ahead: new(Ahead)})
	waiting(1, 2)
	ra3 := new(Ahead)
	start("readahead 3, promoted", Read{Ahead: ra3})
	waiting(1, 3)
	start("reader", Read{})
	waiting(0, 1)
	ra3.Promote()
	waiting(0, 2)
	gone := errors.New("gone")
	err := s.Acquire(bg, Read{}, time.Millisecond, func() error { return gone })
	require.ErrorIs(t, err, gone)
	s.Release()
	wg.Wait()
	assert.Equal(t, []string{"reader", "readahead 3, promoted", "readahead 1", "readahead 2"}, order)
	assert.EqualValues(t, 1, s.free)
}

// TestWeightedReadersFirst: bytes handed out by weight, a reader's before readahead's even where
// a readahead request would fit and the reader's does not yet (the FIFO semaphore it replaced
// let a readahead's span go first and held the reader behind it); each class in arrival order,
// the first waiter not overtaken by smaller ones; a waiter that leaves lets the ones behind it
// go; a request larger than the pool is refused at once.
func TestWeightedReadersFirst(t *testing.T) {
	s := NewWeighted(10)
	bg := context.Background()
	require.NoError(t, s.AcquireN(bg, Read{}, 8, time.Hour, nil))
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	hold := make(chan struct{})
	start := func(name string, how Read, n int64) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !assert.NoError(t, s.AcquireN(bg, how, n, time.Millisecond, nil)) {
				return
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			<-hold
			s.ReleaseN(n)
		}()
	}
	waiting := func(q, n int) {
		require.Eventually(t, func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return len(s.wait[q]) == n
		}, 5*time.Second, time.Millisecond)
	}
	got := func(want ...string) {
		require.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return assert.ObjectsAreEqual(want, order)
		}, 5*time.Second, time.Millisecond, "order %v", want)
	}
	start("reader 5", Read{}, 5) // does not fit the 2 free
	waiting(0, 1)
	// 2 free would serve these two, but a reader waits: they wait behind it.
	start("readahead 2", Read{Ahead: new(Ahead)}, 2)
	waiting(1, 1)
	start("reader 1", Read{}, 1) // behind the first reader, not past it
	waiting(0, 2)
	s.mu.Lock()
	assert.EqualValues(t, 2, s.free, "nothing handed out while the first reader waits")
	s.mu.Unlock()
	s.ReleaseN(3)
	got("reader 5")
	s.ReleaseN(1)
	got("reader 5", "reader 1")
	s.ReleaseN(2)
	got("reader 5", "reader 1", "readahead 2")
	close(hold)
	wg.Wait()
	s.ReleaseN(2)

	// A waiter that gives up lets the one behind it go.
	require.NoError(t, s.AcquireN(bg, Read{}, 8, time.Hour, nil))
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() { done <- s.AcquireN(ctx, Read{}, 9, time.Millisecond, nil) }()
	waiting(0, 1)
	start("reader 2 behind 9", Read{}, 2)
	waiting(0, 2)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	wg.Wait()
	assert.Equal(t, "reader 2 behind 9", order[3])
	s.ReleaseN(8)
	assert.Error(t, s.AcquireN(bg, Read{}, 11, time.Millisecond, nil), "more than the pool")
	s.mu.Lock()
	defer s.mu.Unlock()
	assert.EqualValues(t, 10, s.free)
}
