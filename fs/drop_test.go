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
	hold  chan struct{}
	errno syscall.Errno // what NotifyContent returns

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
	return f.errno
}

func (f *fakeFile) dropped() [][2]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][2]int64(nil), f.ranges...)
}

// A worker's ranges are dropped in the order queued; a file whose drops wait in the kernel
// does not hold another worker's; drops a worker cannot queue are counted, not waited for.
func TestInvalidatorWorkers(t *testing.T) {
	v := newInvalidator(2)
	slow := &fakeFile{hold: make(chan struct{})}
	fast := &fakeFile{}
	const slowW, fastW = 0, 1
	var want [][2]int64
	for i := range int64(10) {
		v.drop(fastW, fast, i*dropChunk, dropChunk)
		want = append(want, [2]int64{i * dropChunk, dropChunk})
	}
	v.drop(fastW, fast, 0, 0)
	want = append(want, [2]int64{0, 0})

	// slow's worker takes one drop and waits in it; its queue then fills.
	q := v.queues[slowW]
	v.drop(slowW, slow, 0, dropChunk)
	require.Eventually(t, func() bool { return len(q) == 0 }, 10*time.Second, time.Millisecond)
	for range invalidateQueue {
		v.drop(slowW, slow, 0, dropChunk)
	}
	require.Eventually(t, func() bool { return len(fast.dropped()) == len(want) }, 10*time.Second, time.Millisecond,
		"the other worker's drops went on")
	assert.Equal(t, want, fast.dropped())
	assert.Len(t, q, invalidateQueue)
	v.drop(slowW, slow, dropChunk, dropChunk)
	v.drop(slowW, slow, 2*dropChunk, dropChunk)
	assert.EqualValues(t, 2, v.skipped.Load(), "a full queue skips the drop and counts it")
	v.drop(fastW, fast, 0, 0)
	require.Eventually(t, func() bool { return len(fast.dropped()) == len(want)+1 }, 10*time.Second, time.Millisecond,
		"the other worker still takes drops")

	close(slow.hold)
	require.Eventually(t, func() bool { return len(slow.dropped()) == invalidateQueue+1 }, 10*time.Second, time.Millisecond)
	assert.EqualValues(t, len(want)+1+invalidateQueue+1, v.dropped.Load())
	assert.Positive(t, v.ns.Load())

	// A drop the kernel refuses (an inode it forgot) is not counted.
	refused := &fakeFile{errno: syscall.ENOENT}
	v.drop(fastW, refused, 0, 0)
	require.Eventually(t, func() bool { return len(refused.dropped()) == 1 }, 10*time.Second, time.Millisecond)
	time.Sleep(10 * time.Millisecond) // the count is made after NotifyContent returns
	assert.EqualValues(t, len(want)+1+invalidateQueue+1, v.dropped.Load())
}

// A file's drops: the ranges every reader has passed, less the slack, in whole chunks and in
// order; a reader going back lowers what counts as dropped; the whole file once idle, but not
// for a close that a later open and close have overtaken.
func TestDropper(t *testing.T) {
	v := newInvalidator(1)
	f := &fakeFile{}
	var d dropper
	a, b := &handle{pos: -1}, &handle{pos: -1}
	d.opened(a)
	d.opened(b)
	d.read(v, f, a, 40<<20) // b has read nothing: it does not count
	want := [][2]int64{{0, 2 * dropChunk}}
	assert.Equal(t, want, queued(t, f, 1))
	d.read(v, f, b, 30<<20) // b is below what was dropped: dropped is now 16 MiB
	d.read(v, f, a, 60<<20)
	assert.Equal(t, want, queued(t, f, 1), "b at 30 MiB: nothing more is passed by both")
	d.read(v, f, b, 60<<20)
	want = append(want, [2]int64{dropChunk, 2 * dropChunk}) // both at 60: up to 48 MiB
	assert.Equal(t, want, queued(t, f, 2))
	d.read(v, f, b, 20<<20) // b went back: from 16 MiB on, the pages are cached again
	d.read(v, f, b, 64<<20)
	want = append(want, [2]int64{dropChunk, 2 * dropChunk})
	assert.Equal(t, want, queued(t, f, 3))

	last, _ := d.closed(a)
	assert.False(t, last)
	last, first := d.closed(b)
	require.True(t, last)
	d.opened(a) // reopened, read and closed again before the first close's timer
	d.read(v, f, a, 1<<20)
	last, second := d.closed(a)
	require.True(t, last)
	d.dropIfIdle(v, f, first)
	assert.Equal(t, want, queued(t, f, 3), "a reader came since the first close: not yet")
	d.dropIfIdle(v, f, second) // the second close's timer
	want = append(want, [2]int64{0, 0})
	assert.Equal(t, want, queued(t, f, 4), "one whole drop, for the last close")

	d.opened(a)
	d.read(v, f, a, 1<<20)
	last, third := d.closed(a)
	require.True(t, last)
	peek := &handle{pos: -1} // opened to ask what is cached (mincore), reads nothing
	d.opened(peek)
	d.dropIfIdle(v, f, third)
	assert.Equal(t, want, queued(t, f, 4), "no whole drop while a handle is open")
	last, after := d.closed(peek)
	require.True(t, last)
	assert.Equal(t, third, after, "a handle that read nothing does not put off the drop")
	d.dropIfIdle(v, f, third)
	want = append(want, [2]int64{0, 0})
	assert.Equal(t, want, queued(t, f, 5))
}

// queued waits until f has had n drops (and a moment for more that should not come).
func queued(t *testing.T, f *fakeFile, n int) [][2]int64 {
	t.Helper()
	require.Eventually(t, func() bool { return len(f.dropped()) >= n }, 10*time.Second, time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	return f.dropped()
}

func TestInvalidators(t *testing.T) {
	n := invalidators()
	assert.GreaterOrEqual(t, n, 1)
	assert.LessOrEqual(t, n, 8)

	// Files take the workers in turn at their first drop, and keep theirs; a file that has
	// dropped nothing (a sidecar) takes no turn.
	v := newInvalidator(4)
	counts := make([]int, 4)
	f := &fakeFile{}
	for range 16 {
		var d, sidecar dropper
		h, s := &handle{pos: -1}, &handle{pos: -1}
		d.opened(h)
		sidecar.opened(s)
		sidecar.read(v, f, s, 4096)
		d.read(v, f, h, 30<<20)
		w := d.worker
		d.read(v, f, h, 60<<20)
		assert.Equal(t, w, d.worker)
		assert.False(t, sidecar.hasWork)
		counts[d.worker]++
	}
	assert.Equal(t, []int{4, 4, 4, 4}, counts)
}

// Once stopped (the mount gone), an invalidator's workers return and a drop is neither queued
// nor counted as skipped.
func TestInvalidatorStop(t *testing.T) {
	v := newInvalidator(3)
	f := &fakeFile{}
	v.drop(1, f, 0, dropChunk)
	require.Eventually(t, func() bool { return v.dropped.Load() == 1 }, 10*time.Second, time.Millisecond)
	stopped := make(chan struct{})
	go func() {
		v.stop() // returns once every worker has
		v.stop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the workers did not return")
	}
	for range 2 * invalidateQueue {
		v.drop(1, f, dropChunk, dropChunk)
	}
	require.Zero(t, len(v.queues[1]))
	require.Zero(t, v.skipped.Load())
	require.Equal(t, [][2]int64{{0, dropChunk}}, f.dropped())
}
