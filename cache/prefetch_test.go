package cache

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPrefetchUnlessPassed: a request whose reader has read past it by the time the worker
// takes it up (the worker was held by a slow load) is dropped and counted as late; one still
// ahead of its reader is loaded; a request that becomes passed between its runs stops there.
func TestPrefetchUnlessPassed(t *testing.T) {
	src := newSource(4*ps, 4*ps, 4*ps, 12*ps)
	src.gate = make(chan struct{})
	c, err := New(src, Options{Size: 32 * ps, PageSize: ps, MaxRead: 4 * ps, Workers: 1, Queue: 8})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })

	require.True(t, c.Prefetch(0, 0, 4*ps)) // holds the only worker at the gate
	require.Eventually(t, func() bool { return src.inFly.Load() == 1 }, time.Second, time.Millisecond)
	var read1 atomic.Bool
	require.True(t, c.PrefetchUnless(1, 0, 4*ps, read1.Load))
	require.True(t, c.PrefetchUnless(2, 0, 4*ps, func() bool { return false }))
	// File 3 is three runs of MaxRead; its reader passes it after the first.
	var runs atomic.Int32
	require.True(t, c.PrefetchUnless(3, 0, 12*ps, func() bool { return runs.Add(1) > 1 }))
	read1.Store(true) // the reader read file 1 itself while the worker waited
	for range 3 {
		src.gate <- struct{}{}
	}
	require.Eventually(t, func() bool { return c.Stats().ReadaheadLate == 2 }, time.Second, time.Millisecond)
	close(src.gate)
	require.NoError(t, c.Close())
	var files []FileID
	for _, rc := range src.calls() {
		files = append(files, rc.id)
	}
	assert.Equal(t, []FileID{0, 2, 3}, files, "file 1 was passed before the worker came to it; file 3 after its first run")
	assert.EqualValues(t, 2, c.Stats().ReadaheadLate)
}
