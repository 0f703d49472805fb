package fs

import (
	"sync"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
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

// dropper tracks the open handles of one file and what of it has been dropped.
type dropper struct {
	mu      sync.Mutex
	handles map[*handle]struct{} // open handles (guarded by mu)
	dropped int64                // bytes [0, dropped) are not in the kernel's cache (guarded by mu)
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

// read records that h read up to end and returns a range to invalidate (n > 0), if any.
func (d *dropper) read(h *handle, end int64) (off, n int64) {
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
		return 0, 0
	}
	off, n = d.dropped, upTo-d.dropped
	d.dropped = upTo
	return off, n
}

// closed unregisters h and reports whether it was the last handle.
func (d *dropper) closed(h *handle) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.handles, h)
	return len(d.handles) == 0
}

// idle reports whether no handle is open, and if so forgets what was dropped: the caller
// drops the whole file.
func (d *dropper) idle() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.handles) > 0 {
		return false
	}
	d.dropped = 0
	return true
}

// closeDropDelay is how long after its last handle closes a file is dropped whole, unless it
// was opened again: a loader that opens the file for each batch keeps its readahead.
const closeDropDelay = 2 * time.Second

// invalidation is a request to drop [off, off+n) of a file from the kernel's cache (n 0: to
// the end).
type invalidation struct {
	node   *gofs.Inode
	off, n int64
}

// invalidator drops ranges of files from the kernel's page cache, one at a time, off the
// request path: the kernel may wait for pages of the range that are being read, so a request
// handler must not do it itself.
type invalidator struct {
	queue chan invalidation
	done  chan struct{}
}

func newInvalidator() *invalidator {
	v := &invalidator{queue: make(chan invalidation, 256), done: make(chan struct{})}
	go func() {
		defer close(v.done)
		for r := range v.queue {
			r.node.NotifyContent(r.off, r.n)
		}
	}()
	return v
}

// drop queues an invalidation; when the queue is full it is skipped (the pages stay until
// the file closes or memory is reclaimed).
func (v *invalidator) drop(node *gofs.Inode, off, n int64) {
	select {
	case v.queue <- invalidation{node, off, n}:
	default:
	}
}
