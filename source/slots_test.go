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
	assert.Equal(t, 1, s.free)
}
