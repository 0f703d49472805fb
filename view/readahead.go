package view

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/layout"
)

// Waits counts the time a read waited for pages to load: its share of the data stall. Pass one
// to Reader.Gather. (It is the cache's: view re-exports it so that its callers need only view.)
type Waits = cache.Waits

// Reader is one open handle on a File: it serves reads and, before each, asks the cache to
// prefetch the block files the file's reader will need next, where the file can say which
// (readsAhead: the epoch order is known, so the prefetch is exact). Safe for concurrent use.
type Reader struct {
	File
	ahead int64

	mu sync.Mutex
	ra *readahead // nil for files without readahead (offsets, names); guarded by mu
}

// readsAhead is a File's readahead capability: a file whose next blocks after a position are
// known (they follow an epoch's order) implements it, whatever its type. NewReader asks every
// File for it.
type readsAhead interface {
	// readahead returns one reader's readahead over the file, ahead bytes past each read; nil
	// when the file has nothing to read ahead, or reads ahead within its own reads (a
	// mixture's data, in each source's order).
	readahead(ahead int64) *readahead
}

// NewReader wraps f with readahead of ahead bytes (0 disables it), for a file that can read
// ahead (an epoch's data and ids, a field's values, those of fields cut at blocks of their own
// included); the others (offsets, names) do not.
func NewReader(f File, ahead int64) *Reader {
	r := &Reader{File: f, ahead: ahead}
	if ra, ok := f.(readsAhead); ok && ahead > 0 {
		r.ra = ra.readahead(ahead)
	}
	return r
}

// ReadAt prefetches, then reads (io.ReaderAt).
func (r *Reader) ReadAt(p []byte, off int64) (int, error) {
	r.readahead(off, len(p))
	return r.File.ReadAt(p, off)
}

// Gather is ReadAt without the copy where the file allows it: it serves the bytes
// [off, off+len(buf)) of the file, clamped to its end, as slices in g (empty at the end of the
// file) and returns how many bytes they hold. Epoch data comes as slices of pinned cache pages;
// other files are read into buf. ctx bounds the wait for pages, and the time waited goes to w
// (nil: not counted), the reads the read needs besides its bytes' (an offsets index, a
// source's) included. The caller releases g once the slices have been used.
func (r *Reader) Gather(ctx context.Context, w *Waits, g *Gather, buf []byte, off int64) (int, error) {
	r.readahead(off, len(buf))
	return r.File.gather(call{ctx: ctx, waits: w}, g, buf, off)
}

// ReadFull prefetches, then fills p with the bytes of the file at off, or fails: a read that
// ends before p is full is an error. ctx and w are Gather's.
func (r *Reader) ReadFull(ctx context.Context, w *Waits, p []byte, off int64) error {
	r.readahead(off, len(p))
	return readFull(call{ctx: ctx, waits: w}, r.File, p, off)
}

func (r *Reader) readahead(off int64, n int) {
	if r.ra != nil && r.ahead > 0 && off >= 0 && off < r.Size() {
		r.mu.Lock()
		r.ra.advance(r.ra.base+uint64(off), uint64(r.ahead+int64(n)))
		r.mu.Unlock()
	}
}

// readahead is a reader's position in an epoch's order for prefetching, in the bytes of what
// it reads ahead (an epoch's data, its ids, a field's values).
type readahead struct {
	e     *Epoch             // the epoch whose order it follows
	start func(w int) uint64 // where window w (w may equal Windows()) starts in the bytes read
	// fetch asks the cache for what a reader needs of block b, a request the cache drops if
	// passed reports true by the time a worker takes it up; false: the queue is full.
	fetch func(b int, passed func() bool) bool
	base  uint64        // where the file starts in those bytes
	next  int           // first window not yet requested
	at    atomic.Uint64 // where the last read began, in the bytes read (passed reads it)
}

// readahead returns a readahead over the block files of role (data, with offsets; or ids) of
// the epoch, for a file that starts at base of the role's bytes (see roleStart).
func (e *Epoch) readahead(role layout.Role, base uint64) *readahead {
	return &readahead{e: e, base: base, next: -1,
		start: func(w int) uint64 { return e.roleStart(role, w) },
		fetch: func(b int, passed func() bool) bool { return e.prefetchBlock(b, role, passed) }}
}

// advance requests the files of every window from the one holding at up to the one holding
// at+ahead, skipping windows before next (already requested) unless the reader moved back
// past them. at and ahead are in the bytes read ahead. A full queue stops it; the windows not
// requested are tried next time.
//
// Reads come a little out of order (the kernel's readahead runs beside a reader's own reads,
// and several threads may share a handle): a read behind the last one by up to the readahead
// and a window finds its windows requested a moment ago and requests nothing again. Only a
// jump back further (a reader that starts over) requests from the current window again.
//
// A window's requests are passed once a read begins the readahead past the window's end: the
// reader has read it (a worker behind the reads, waiting on a slow store while the reader
// reads blocks already cached, would load it again). The margin keeps the reads of threads
// sharing a handle a little apart from judging each other's windows passed.
func (a *readahead) advance(at, ahead uint64) {
	a.at.Store(at)
	bound := a.start
	nw := a.e.ord.Windows()
	w := sort.Search(nw, func(w int) bool { return bound(w+1) > at })
	if a.next < w || a.next > w+1 && bound(a.next) > at+2*ahead+bound(w+1)-bound(w) {
		a.next = w // first read, a jump forward, or a jump back: start at the current window
	}
	for ; a.next < nw && bound(a.next) < at+ahead; a.next++ {
		past := bound(a.next+1) + ahead
		passed := func() bool { return a.at.Load() >= past }
		for _, b := range a.e.ord.WindowBlocks(a.next) {
			if !a.fetch(int(b), passed) {
				return
			}
		}
	}
}

func (f *dataFile) readahead(int64) *readahead { return f.e.readahead(layout.RoleData, f.base) }

func (f *idsFile) readahead(int64) *readahead {
	if !f.e.ds.HasIDs() {
		return nil
	}
	return f.e.readahead(layout.RoleIDs, 8*f.rg.Start)
}

// readahead keeps the handle's readahead: a mixture reads ahead in each source's order, within
// its reads (mixData.prefetch).
func (f *mixData) readahead(ahead int64) *readahead {
	f.ahead = ahead
	return nil
}

// readahead follows the anchor's order over the field's values: window by window, the values
// of each of its blocks' samples, which lie together in the field's own blocks (by storage
// index).
func (f *ownFile) readahead(int64) *readahead {
	rs := uint64(f.ds.RecordSize())
	ord := f.e.ord
	return &readahead{e: f.e, base: rs * f.rg.Start, next: -1,
		start: func(w int) uint64 { return rs * ord.WindowStart(w) },
		fetch: f.prefetchBlock}
}

// prefetchBlock asks the cache for the field's values of the anchor's block b: records
// FirstRecord(b) on, as many as b holds, in the field's blocks. It reports false when the
// readahead queue is full.
func (f *ownFile) prefetchBlock(b int, passed func() bool) bool {
	n := f.e.ds.BlockRecords(b)
	if n == 0 {
		return true
	}
	rs := f.ds.RecordSize()
	first := f.e.ds.FirstRecord(b)
	fb, fl := f.ds.BlockOf(first)
	lb, ll := f.ds.BlockOf(first + n - 1)
	for blk := fb; blk <= lb; blk++ {
		id := layout.DataFile(blk)
		lo, hi := int64(0), f.ds.Size(id)
		if blk == fb {
			lo = int64(fl) * rs
		}
		if blk == lb {
			hi = int64(ll+1) * rs
		}
		if !f.c.PrefetchUnless(id, lo, hi-lo, passed) {
			return false
		}
	}
	return true
}

var (
	_ readsAhead = (*dataFile)(nil)
	_ readsAhead = (*idsFile)(nil)
	_ readsAhead = (*mixData)(nil)
	_ readsAhead = (*ownFile)(nil)
)
