package view

import (
	"context"
	"sort"
	"sync"

	"github.com/blockfs/blockfs/layout"
)

// Reader is one open handle on a File: it serves reads and, before each, asks the cache to
// prefetch the block files of the windows the epoch order will need next (the order is known,
// so the prefetch is exact). Safe for concurrent use.
type Reader struct {
	File
	ahead int64

	mu sync.Mutex
	ra *readahead // nil for files without readahead (offsets, names); guarded by mu
}

// NewReader wraps f with readahead of ahead bytes (0 disables it). An epoch's data and ids
// files read ahead; the others (offsets, names) do not.
func NewReader(f File, ahead int64) *Reader {
	r := &Reader{File: f, ahead: ahead}
	switch f := f.(type) {
	case *dataFile:
		r.ra = &readahead{e: f.e, role: layout.RoleData, base: f.base, next: -1}
	case *mixData:
		f.ahead = ahead // a mixture reads ahead in each source's order (mixData.prefetch)
	case *idsFile:
		if f.e.ds.HasIDs() {
			r.ra = &readahead{e: f.e, role: layout.RoleIDs, base: 8 * f.rg.Start, next: -1}
		}
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
// other files are read into buf. ctx bounds the wait for pages. The caller releases g once the
// slices have been used.
func (r *Reader) Gather(ctx context.Context, g *Gather, buf []byte, off int64) (int, error) {
	r.readahead(off, len(buf))
	return r.File.gather(ctx, g, buf, off)
}

func (r *Reader) readahead(off int64, n int) {
	if r.ra != nil && r.ahead > 0 && off >= 0 && off < r.Size() {
		r.mu.Lock()
		r.ra.advance(r.ra.base+uint64(off), uint64(r.ahead+int64(n)))
		r.mu.Unlock()
	}
}

// readahead is a reader's position in the epoch order for prefetching.
type readahead struct {
	e    *Epoch
	role layout.Role // the block files prefetched: data (with offsets) or ids
	base uint64      // where the file starts in the role's bytes (see Epoch.roleStart)
	next int         // first window not yet requested
}

// advance requests the files of every window from the one holding at up to the one holding
// at+ahead, skipping windows before next (already requested) unless the reader moved back. at
// and ahead are in the role's bytes. A full queue stops it; the windows not requested are
// tried next time.
func (a *readahead) advance(at, ahead uint64) {
	bound := func(w int) uint64 { return a.e.roleStart(a.role, w) }
	nw := a.e.ord.Windows()
	w := sort.Search(nw, func(w int) bool { return bound(w+1) > at })
	if a.next < w || a.next > w+1 && bound(a.next) > at+ahead+bound(w+1)-bound(w) {
		a.next = w // first read, a jump forward, or a jump back: start at the current window
	}
	for ; a.next < nw && bound(a.next) < at+ahead; a.next++ {
		for _, b := range a.e.ord.WindowBlocks(a.next) {
			if !a.e.prefetchBlock(int(b), a.role) {
				return
			}
		}
	}
}
