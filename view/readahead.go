package view

import (
	"io"
	"sort"
	"sync"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/layout"
)

// Reader is one open handle on a File: it serves reads and, before each, asks the cache to
// prefetch the block files of the windows the epoch order will need next (the order is known,
// so the prefetch is exact). Safe for concurrent use.
type Reader struct {
	File
	ahead int64

	mu   sync.Mutex
	next int // first window not yet requested; guarded by mu
}

// NewReader wraps f with readahead of ahead bytes (0 disables it).
func NewReader(f File, ahead int64) *Reader { return &Reader{File: f, ahead: ahead, next: -1} }

// ReadAt prefetches, then reads.
func (r *Reader) ReadAt(p []byte, off int64) (int, error) {
	r.readahead(off, len(p))
	return r.File.ReadAt(p, off)
}

// Gather is ReadAt without the copy where the file allows it: it serves the bytes
// [off, off+len(buf)) of the file, clamped to its end, as slices in g (empty at the end of the
// file) and returns how many bytes they hold. Epoch data comes as slices of pinned cache pages;
// other files are read into buf. The caller releases g once the slices have been used.
func (r *Reader) Gather(g *Gather, buf []byte, off int64) (int, error) {
	r.readahead(off, len(buf))
	if d, ok := r.File.(*dataFile); ok {
		n := clamp(buf, off, d.size)
		if n == 0 {
			return 0, nil
		}
		return n, d.gatherData(g, buf, off, n)
	}
	n, err := r.File.ReadAt(buf, off)
	if err != nil && err != io.EOF {
		return 0, err
	}
	if n > 0 {
		g.Vecs = append(g.Vecs, buf[:n])
	}
	return n, nil
}

func (r *Reader) readahead(off int64, n int) {
	if r.ahead > 0 && off < r.Size() {
		r.mu.Lock()
		r.File.prefetch(off, r.ahead+int64(n), &r.next)
		r.mu.Unlock()
	}
}

// prefetch requests the files of role of every window from the one holding at up to the one
// holding at+ahead, skipping windows before *next (already requested) unless the reader moved
// back. at and ahead are in the role's own file bytes: epoch data bytes, or 8 per record for
// ids. A full queue stops it; the windows not requested are tried next time.
func (e *Epoch) prefetch(at, ahead uint64, next *int, role int) {
	bound := e.winByte // where window w starts, in role bytes
	if role == layout.RoleIDs {
		bound = func(w int) uint64 { return 8 * e.ord.WindowStart(w) }
	}
	nw := e.ord.Windows()
	w := sort.Search(nw, func(w int) bool { return bound(w+1) > at })
	if *next < w || *next > w+1 && bound(*next) > at+ahead+bound(w+1)-bound(w) {
		*next = w // first read, a jump forward, or a jump back: start at the current window
	}
	for ; *next < nw && bound(*next) < at+ahead; *next++ {
		for _, b := range e.ord.WindowBlocks(*next) {
			if !e.prefetchBlock(int(b), role) {
				return
			}
		}
	}
}

func (e *Epoch) prefetchBlock(b, role int) bool {
	ids := []layout.FileID{layout.DataFile(b)}
	switch {
	case role == layout.RoleIDs:
		ids = []layout.FileID{layout.IDsFile(b)}
	case e.ds.Kind() == layout.Variable:
		ids = append(ids, layout.OffsetsFile(b))
	}
	for _, id := range ids {
		if !e.c.Prefetch(cache.FileID(id), 0, e.ds.Size(id)) {
			return false
		}
	}
	return true
}
