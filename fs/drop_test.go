package fs

import (
	"sync"
	"syscall"
	"testing"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeFile records the ranges dropped of it; while hold is open, each drop waits for it.
type fakeFile struct {
	ino  uint64
	hold chan struct{}

	mu     sync.Mutex
	ranges [][2]int64
}

func (f *fakeFile) StableAttr() gofs.StableAttr { return gofs.StableAttr{Ino: f.ino} }

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
	slow := &fakeFile{ino: 7, hold: make(chan struct{})}
	fast := &fakeFile{ino: 8}
	var want [][2]int64
	for i := range int64(10) {
		v.drop(fast, i*dropChunk, dropChunk)
		want = append(want, [2]int64{i * dropChunk, dropChunk})
	}
	v.drop(fast, 0, 0)
	want = append(want, [2]int64{0, 0})

	// slow's worker takes one drop and waits in it; its queue then fills.
	q := v.queues[slow.ino%2]
	v.drop(slow, 0, dropChunk)
	require.Eventually(t, func() bool { return len(q) == 0 }, 10*time.Second, time.Millisecond)
	for range invalidateQueue {
		v.drop(slow, 0, dropChunk)
	}
	require.Eventually(t, func() bool { return len(fast.dropped()) == len(want) }, 10*time.Second, time.Millisecond,
		"the other file's drops went on")
	assert.Equal(t, want, fast.dropped())
	assert.Len(t, q, invalidateQueue)
	v.drop(slow, dropChunk, dropChunk)
	v.drop(slow, 2*dropChunk, dropChunk)
	assert.EqualValues(t, 2, v.skipped.Load(), "a full queue skips the drop and counts it")
	v.drop(fast, 0, 0)
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
}
