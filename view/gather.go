package view

import (
	"context"
	"errors"
	"sync"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/layout"
)

// Gather is one read served as slices of pinned cache pages, in order: a FUSE reply can be
// written from them without copying the records into a buffer first. Get one with NewGather,
// fill it with Reader.Gather, and call Release once the slices have been used. Not safe for
// concurrent use.
type Gather struct {
	Vecs [][]byte // the read's bytes, in order; valid until Release

	plan plan      // where the read's bytes are, and the pins holding them (plan.go)
	subs []*Gather // a mixture's reads of its sources, whose pages Vecs holds
	bufs []*[]byte // their buffers, from scratchBufs
}

// scratchBufs holds the buffers a mixture's reads of its sources copy into when they cannot
// be served from pinned pages, so that a read allocates none.
var scratchBufs = sync.Pool{New: func() any { return new([]byte) }}

// scratch returns a buffer of n bytes that g holds until it is released.
func (g *Gather) scratch(n int) []byte {
	b := scratchBufs.Get().(*[]byte)
	if cap(*b) < n {
		*b = make([]byte, n)
	}
	g.bufs = append(g.bufs, b)
	return (*b)[:n]
}

var gathers = sync.Pool{New: func() any { return new(Gather) }}

// NewGather returns an empty Gather from a pool; Release returns it.
func NewGather() *Gather { return gathers.Get().(*Gather) }

// Len returns the bytes in g.Vecs.
func (g *Gather) Len() int {
	n := 0
	for _, v := range g.Vecs {
		n += len(v)
	}
	return n
}

// InBuf reports whether g's bytes are already in p, copied there by the read.
func (g *Gather) InBuf(p []byte) bool {
	return len(g.Vecs) == 1 && len(p) > 0 && len(g.Vecs[0]) > 0 && &g.Vecs[0][0] == &p[0]
}

// CopyTo copies g's bytes into p (which must hold Len bytes) and returns how many it copied.
func (g *Gather) CopyTo(p []byte) int {
	n := 0
	for _, v := range g.Vecs {
		n += copy(p[n:], v)
	}
	return n
}

// Release unpins g's pages and returns g to the pool; g must not be used afterwards.
func (g *Gather) Release() {
	g.reset()
	gathers.Put(g)
}

func (g *Gather) reset() {
	for _, s := range g.subs {
		s.Release()
	}
	clear(g.subs)
	g.subs = g.subs[:0]
	for _, b := range g.bufs {
		scratchBufs.Put(b)
	}
	clear(g.bufs)
	g.bufs = g.bufs[:0]
	g.plan.reset()
	clear(g.Vecs)
	g.Vecs = g.Vecs[:0]
}

// MaxVecs is the most slices a Gather of epoch data holds: writev takes at most 1024 iovecs
// (UIO_MAXIOV), and a FUSE reply needs two of them for its headers. A read in more pieces
// (small records) is copied into the caller's buffer.
const MaxVecs = 1024 - 2

// copySpans is how many spans a copied read locates, pins and copies at a time.
const copySpans = 4096

// gatherData fills g.Vecs with n bytes of the file from its byte off (inside the file): as at
// most MaxVecs slices of pinned cache pages where it can, and otherwise copied into buf (which
// must hold n bytes; g.Vecs is then buf[:n]), a bounded number of records at a time, pinning
// one page at a time when the cache has no slot left to pin (many readers on a small cache).
func (f *dataFile) gatherData(rc call, g *Gather, buf []byte, off int64, n int) error {
	pos0, skip0, err := f.e.positionOf(rc, f.base+uint64(off))
	if err != nil {
		return err
	}
	p := &g.plan
	covered, pos, skip, err := p.locate(rc, f.e, pos0, skip0, uint64(n), MaxVecs)
	if err != nil {
		return err
	}
	if covered == uint64(n) && !f.e.c.Crowded() {
		err = p.pin(rc, f.e.c, layout.DataFile)
		if err == nil {
			if g.Vecs = p.appendVecs(g.Vecs); len(g.Vecs) <= MaxVecs {
				f.e.c.CountServed(n)
				return nil
			}
		} else if !errors.Is(err, cache.ErrFull) {
			return err
		}
	}
	p.pins.Release()
	clear(g.Vecs)
	g.Vecs = g.Vecs[:0]
	if f.e.ds.RecordSize() > 0 && f.e.ds.Regular() && geometryOf(f.e.c).pow2 {
		// Small fixed-size records: copied a window's run at a time (runs.go).
		g.reset()
		err = f.copyFixed(rc, g, buf[:n], pos0, skip0, n)
	} else {
		err = f.copyRest(rc, g, buf[:n], covered, pos, skip)
	}
	if err != nil {
		return err
	}
	g.Vecs = append(g.Vecs[:0], buf[:n])
	f.e.c.CountServed(n)
	return nil
}

// copyRest copies into buf the spans g's plan has located (covered bytes), then the rest from
// the record at pos (skip bytes into it) a chunk of spans at a time.
func (f *dataFile) copyRest(rc call, g *Gather, buf []byte, covered, pos, skip uint64) error {
	for done := 0; ; {
		if err := rc.ctx.Err(); err != nil {
			return err
		}
		if err := f.copySpans(rc, g, buf[done:done+int(covered)]); err != nil {
			return err
		}
		if done += int(covered); done == len(buf) {
			return nil
		}
		g.reset()
		var err error
		if covered, pos, skip, err = g.plan.locate(rc, f.e, pos, skip, uint64(len(buf)-done), copySpans); err != nil {
			return err
		}
	}
}

// copySpans copies the spans of g's plan into buf: from pinned pages, or, when the cache has
// no slot left to pin them all at once, one page at a time (plan.copyByPage).
func (f *dataFile) copySpans(rc call, g *Gather, buf []byte) error {
	p := &g.plan
	err := p.pin(rc, f.e.c, layout.DataFile)
	if errors.Is(err, cache.ErrFull) {
		p.pins.Release()
		return p.copyByPage(rc, f.e.c, buf, g.Vecs)
	}
	if err != nil {
		return err
	}
	g.Vecs = p.copyPinned(buf, g.Vecs[:0])
	clear(g.Vecs)
	g.Vecs = g.Vecs[:0]
	p.pins.Release()
	return nil
}

// call is one read on its way down to the cache: ctx bounds its waits for pages (a FUSE
// request's, cancelled when the reader is interrupted), and the time it waits for them goes
// to waits (nil: not counted). Every cache read of view takes the call it serves, so that the
// reads a read needs (an offsets index, ids) are cancelled and counted with it.
type call struct {
	ctx   context.Context
	waits *cache.Waits
}

// background is the call of a read no reader makes (building a mixture, io.ReaderAt's).
func background() call { return call{ctx: context.Background()} }
