package fs

import (
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeFile records the ranges dropped of it; while hold is open, each drop waits for it.
type fakeFile struct {
	hold chan struct{}

	mu     sync.Mutex
	ranges [][2]int64
}

func (f *fakeFile) NotifyContent(off, sz int64) syscall.Errno {
	if f.hold != nil {
		<-f.hold
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ranges = append(f.ranges, [2]int64{off, sz})
	return 0
}

func (f *fakeFile) dropped() [][2]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][2]int64(nil), f.ranges...)
}

// A file's ranges are dropped in the order asked for, on one worker; a file whose drops wait
// in the kernel does not hold another file's; drops its worker cannot queue are counted, not
// waited for.
func TestInvalidatorWorkers(t *testing.T) {
	v := newInvalidator(2)
	slow := &fakeFile{hold: make(chan struct{})}
	fast := &fakeFile{}
	var slowD, fastD dropper
	slowD.opened(&handle{}, v)
	fastD.opened(&handle{}, v)
	require.NotEqual(t, slowD.worker, fastD.worker, "files opened one after the other take the workers in turn")
	var want [][2]int64
	for i := range int64(10) {
		fastD.drop(v, fast, i*dropChunk, dropChunk)
		want = append(want, [2]int64{i * dropChunk, dropChunk})
	}
	fastD.drop(v, fast, 0, 0)
	want = append(want, [2]int64{0, 0})

	// slow's worker takes one drop and waits in it; its queue then fills.
	q := v.queues[slowD.worker]
	slowD.drop(v, slow, 0, dropChunk)
	require.Eventually(t, func() bool { return len(q) == 0 }, 10*time.Second, time.Millisecond)
	for range invalidateQueue {
		slowD.drop(v, slow, 0, dropChunk)
	}
	require.Eventually(t, func() bool { return len(fast.dropped()) == len(want) }, 10*time.Second, time.Millisecond,
		"the other file's drops went on")
	assert.Equal(t, want, fast.dropped())
	assert.Len(t, q, invalidateQueue)
	slowD.drop(v, slow, dropChunk, dropChunk)
	slowD.drop(v, slow, 2*dropChunk, dropChunk)
	assert.EqualValues(t, 2, v.skipped.Load(), "a full queue skips the drop and counts it")
	fastD.drop(v, fast, 0, 0)
	require.Eventually(t, func() bool { return len(fast.dropped()) == len(want)+1 }, 10*time.Second, time.Millisecond,
		"the other worker still takes drops")

	close(slow.hold)
	require.Eventually(t, func() bool { return len(slow.dropped()) == invalidateQueue+1 }, 10*time.Second, time.Millisecond)
	assert.EqualValues(t, len(want)+1+invalidateQueue+1, v.dropped.Load())
	assert.Positive(t, v.ns.Load())
}

func TestInvalidators(t *testing.T) {
	n := invalidators()
	assert.GreaterOrEqual(t, n, 1)
	assert.LessOrEqual(t, n, 8)

	// Files opened one after another take the workers in turn, whatever their inodes.
	v := newInvalidator(4)
	counts := make([]int, 4)
	for range 16 {
		var d dropper
		d.opened(&handle{}, v)
		d.opened(&handle{}, v) // a second handle keeps the file's worker
		counts[d.worker]++
	}
	assert.Equal(t, []int{4, 4, 4, 4}, counts)
}
