package fs

import (
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Epoch files would otherwise stay in the kernel's page cache long after they are read: every
// epoch is a new file, read once, so each epoch of a run would leave its whole size behind
// (FOPEN_KEEP_CACHE keeps it across opens). blockfs drops what every reader of a file has
// passed: each open handle remembers where its last read ended, and once the lowest of those
// is more than dropSlack + dropChunk past what was dropped, the range below it (less the
// slack, which covers the kernel's own readahead) is invalidated. When the last handle
// closes, the whole file is. The kernel then holds per file at most the slack, a chunk and
// its readahead window, whatever the number of epochs. A reader that goes back re-reads from
// the daemon: the bytes are the same, only served again.
const (
	dropSlack = 8 << 20
	dropChunk = 16 << 20
)

// dropper tracks the open handles of one file and what of it has been dropped, and queues the
// file's drops on its worker of the invalidator while it holds its lock, so that they are
// dropped in the order they were decided.
type dropper struct {
	mu      sync.Mutex
	handles map[*handle]struct{} // open handles (guarded by mu)
	dropped int64                // bytes [0, dropped) are not in the kernel's cache (guarded by mu)
	closes  uint64               // times the last handle closed (guarded by mu)
	worker  int                  // the invalidator's worker for the file's drops, from its first one (guarded by mu)
	hasWork bool                 // whether worker was taken (guarded by mu)
}

// opened registers h.
func (d *dropper) opened(h *handle) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.handles == nil {
		d.handles = make(map[*handle]struct{})
	}
	d.handles[h] = struct{}{}
}

// queueLocked queues the drop of [off, off+n) of file (n 0: to the end) on the file's worker,
// which its first drop takes (a sidecar, which is seldom dropped before it closes, then does
// not take a turn between two data files); d.mu held.
func (d *dropper) queueLocked(v *invalidator, file contentNotifier, off, n int64) {
	if !d.hasWork {
		d.worker, d.hasWork = v.assign(), true
	}
	v.drop(d.worker, file, off, n)
}

// read records that h read up to end and, once every reader of the file has passed a range
// beyond the slack, queues its drop.
func (d *dropper) read(v *invalidator, file contentNotifier, h *handle, end int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	h.pos = end
	low := end
	for o := range d.handles {
		if o.pos >= 0 {
			low = min(low, o.pos)
		}
	}
	if low < d.dropped {
		// A reader went back: what it reads below dropped is cached again.
		d.dropped = low / dropChunk * dropChunk
	}
	upTo := (low - dropSlack) / dropChunk * dropChunk
	if upTo <= d.dropped {
		return
	}
	d.queueLocked(v, file, d.dropped, upTo-d.dropped)
	d.dropped = upTo
}

// closed unregisters h. When it was the last handle it returns true and the count of last
// closes of handles that read, which dropIfIdle takes: a handle that read nothing (one opened
// to map the file and ask what of it is cached) leaves no pages of its own, so its close does
// not put off the drop an earlier reader's close is waiting to make.
func (d *dropper) closed(h *handle) (last bool, closes uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.handles, h)
	if len(d.handles) > 0 {
		return false, 0
	}
	if h.pos >= 0 {
		d.closes++
	}
	return true, d.closes
}

// dropIfIdle queues the drop of the whole file if no handle is open and no handle that read
// has closed since the last close that returned closes, and forgets what was dropped.
func (d *dropper) dropIfIdle(v *invalidator, file contentNotifier, closes uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.handles) > 0 || d.closes != closes {
		return
	}
	d.dropped = 0
	d.queueLocked(v, file, 0, 0)
}

// closeDropDelay is how long after its last handle closes a file is dropped whole, unless it
// was opened again: a loader that opens the file for each batch keeps its readahead.
const closeDropDelay = 2 * time.Second

// invalidation is a request to drop [off, off+n) of a file from the kernel's cache (n 0: to
// the end).
type invalidation struct {
	file   contentNotifier
	off, n int64
}

// contentNotifier is what the invalidator needs of a file (*gofs.Inode): the kernel's
// invalidation of a range of its pages.
type contentNotifier interface {
	NotifyContent(off, sz int64) syscall.Errno
}

// invalidator drops ranges of files from the kernel's page cache off the request path: the
// kernel may wait for pages of the range that are being read, so a request handler must not do
// it itself. It has a worker per few cores, each with a queue; files take them in turn at their
// first drop (shards read together spread over all of them; inode numbers, which go up by two
// from a shard's directory to its file, would not), and a file's drops always go to its
// worker, in the order its dropper decided them. One worker for the whole mount was a
// bound: the kernel's invalidation costs 0.1-0.18 CPU s per GiB dropped on the development
// machines (a third to a half of the daemon's time for a dd), so a node's readers at 8-16 GB/s would
// keep one core busy with it, and a drop its queue could not take stays in the page cache.
type invalidator struct {
	queues  []chan invalidation
	done    chan struct{} // closed by stop: the workers return, drops are no longer queued
	stopped sync.Once
	workers sync.WaitGroup
	dropped atomic.Uint64 // ranges invalidated
	skipped atomic.Uint64 // ranges not invalidated: their worker's queue was full
	ns      atomic.Int64  // time spent invalidating (failed tries included)
	next    atomic.Uint64 // the worker the next file opened takes (modulo their number)
}

// invalidators is the number of workers of a mount's invalidator: one per 4 cores the
// process may use, 1 to 8.
func invalidators() int { return min(max(runtime.GOMAXPROCS(0)/4, 1), 8) }

// invalidateQueue is the requests each worker holds; each is most often a dropChunk (16 MiB)
// or a whole file, so 64 are about a GiB of pages passed and not yet dropped.
const invalidateQueue = 64

// newInvalidator starts an invalidator of workers workers, which run until stop.
func newInvalidator(workers int) *invalidator {
	v := &invalidator{queues: make([]chan invalidation, workers), done: make(chan struct{})}
	for i := range v.queues {
		q := make(chan invalidation, invalidateQueue)
		v.queues[i] = q
		v.workers.Add(1)
		go func() {
			defer v.workers.Done()
			v.work(q)
		}()
	}
	return v
}

// work drops the ranges queued on q until stop.
func (v *invalidator) work(q <-chan invalidation) {
	for {
		var r invalidation
		select {
		case <-v.done:
			return
		case r = <-q:
		}
		start := time.Now()
		errno := r.file.NotifyContent(r.off, r.n)
		v.ns.Add(int64(time.Since(start)))
		// Not counted: the kernel had forgotten the inode (ENOENT), or the mount is gone
		// (EBADF).
		if errno == 0 {
			v.dropped.Add(1)
		}
	}
}

// stop ends the workers once the mount is gone (what is still queued has no pages to drop)
// and waits for them: no invalidation runs after it returns, and later drops are ignored.
// Idempotent.
func (v *invalidator) stop() {
	v.stopped.Do(func() { close(v.done) })
	v.workers.Wait()
}

// assign returns the worker for the next file to drop something: each in turn.
func (v *invalidator) assign() int { return int((v.next.Add(1) - 1) % uint64(len(v.queues))) }

// drop queues an invalidation on worker w; when its queue is full it is skipped (the pages stay
// until the file's whole drop after it closes, unless that is skipped too, or until memory
// is reclaimed) and counted.
func (v *invalidator) drop(w int, file contentNotifier, off, n int64) {
	select {
	case <-v.done:
		return
	default:
	}
	select {
	case v.queues[w] <- invalidation{file, off, n}:
	default:
		v.skipped.Add(1)
	}
}
