package flight

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCallWait(t *testing.T) {
	c := New[int]()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.Wait(ctx)
	require.ErrorIs(t, err, context.Canceled, "a waiter gives up on its own context")
	bad := errors.New("bad")
	c.Finish(7, bad)
	v, err := c.Wait(ctx)
	require.Equal(t, 7, v, "a finished call answers whatever the context says")
	require.ErrorIs(t, err, bad)
	select {
	case <-c.Done():
	default:
		t.Fatal("Done not closed")
	}
}

// TestGroupMerges starts many callers of one key while a load is in progress: one loads, the
// others get its result; a later call loads again (nothing is kept).
func TestGroupMerges(t *testing.T) {
	var g Group[string, int]
	var loads atomic.Int32
	release := make(chan struct{})
	started := make(chan struct{})
	load := func() (int, error) {
		if loads.Add(1) == 1 {
			close(started)
		}
		<-release
		return 42, nil
	}
	var wg sync.WaitGroup
	var shared atomic.Int32
	wg.Add(1)
	go func() {
		defer wg.Done()
		v, err, sh := g.Do(context.Background(), "k", load)
		require.NoError(t, err)
		require.Equal(t, 42, v)
		require.False(t, sh)
	}()
	<-started
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err, sh := g.Do(context.Background(), "k", load)
			require.NoError(t, err)
			require.Equal(t, 42, v)
			if sh {
				shared.Add(1)
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	close(release)
	wg.Wait()
	require.Equal(t, int32(1)+8-shared.Load(), loads.Load())
	_, _, sh := g.Do(context.Background(), "k", func() (int, error) { return 1, nil })
	require.False(t, sh, "a load that ended is not kept")
}

func TestGroupWaiterGivesUp(t *testing.T) {
	var g Group[int, int]
	release := make(chan struct{})
	started := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _, _ = g.Do(context.Background(), 1, func() (int, error) { close(started); <-release; return 0, nil })
	}()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err, sh := g.Do(ctx, 1, func() (int, error) { t.Fatal("second load"); return 0, nil })
	require.True(t, sh)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	close(release)
	<-done
}
