package view

import (
	"context"
	"encoding/binary"
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

	pins   cache.Pins
	spans  []span       // the records of the read, merged where back to back in one block file
	blocks []blockRange // the block files the read touches, and what of each it needs
	bits   []uint64     // the pages each block file's spans touch (blockRange.bits)
	run    runScratch   // the run copiers' buffers (runs.go)
}

// span is a run of bytes (data) or of records (ids) of one block file: blocks[slot], from off.
type span struct {
	slot   int
	off, n uint64
}

// blockRange is one block file that a read touches: the range [lo, hi) of its spans, in
// their unit, and which cache pages they touch: bit p of g.bits[bits:] for page p of the file.
// Only those pages are pinned (as run), so a read holds no more of the cache than it uses.
type blockRange struct {
	block  int
	lo, hi uint64
	bits   int
	run    cache.Run
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
	g.pins.Release()
	clear(g.Vecs)
	clear(g.blocks)
	clear(g.run.pages)
	g.run.pages = g.run.pages[:0]
	g.Vecs, g.spans, g.blocks, g.bits = g.Vecs[:0], g.spans[:0], g.blocks[:0], g.bits[:0]
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
func (f *dataFile) gatherData(ctx context.Context, g *Gather, buf []byte, off int64, n int) error {
	pos0, skip0, err := f.e.positionOf(ctx, f.base+uint64(off))
	if err != nil {
		return err
	}
	covered, pos, skip, err := f.e.locate(ctx, g, pos0, skip0, uint64(n), true, MaxVecs)
	if err != nil {
		return err
	}
	if covered == uint64(n) && !f.e.c.Crowded() {
		err = f.e.pin(ctx, g, layout.DataFile, 1)
		if err == nil {
			for _, s := range g.spans {
				g.Vecs = g.blocks[s.slot].run.Append(g.Vecs, int64(s.off), int64(s.n))
			}
			if len(g.Vecs) <= MaxVecs {
				f.e.c.Served(n)
				return nil
			}
		} else if !errors.Is(err, cache.ErrFull) {
			return err
		}
	}
	g.pins.Release()
	clear(g.Vecs)
	g.Vecs = g.Vecs[:0]
	if _, pow2 := f.e.pageShift(); f.e.ds.RecordSize() > 0 && pow2 {
		// Small fixed-size records: copied a window's run at a time (runs.go).
		g.reset()
		if err := f.copyFixed(ctx, g, buf[:n], pos0, skip0, n); err != nil {
			return err
		}
		g.Vecs = append(g.Vecs[:0], buf[:n])
		f.e.c.Served(n)
		return nil
	}
	// Copy: what is located so far, then the rest a chunk at a time.
	for done := 0; ; {
		if err := f.copySpans(ctx, g, buf[done:done+int(covered)]); err != nil {
			return err
		}
		if done += int(covered); done == n {
			break
		}
		g.reset()
		if covered, pos, skip, err = f.e.locate(ctx, g, pos, skip, uint64(n-done), true, copySpans); err != nil {
			return err
		}
	}
	g.Vecs = append(g.Vecs[:0], buf[:n])
	f.e.c.Served(n)
	return nil
}

// copySpans copies g's spans into buf: from pinned pages, or, when the cache has no slot left
// to pin them all at once, one page at a time (each page loaded once, into a buffer of its own
// if every slot is pinned).
func (f *dataFile) copySpans(ctx context.Context, g *Gather, buf []byte) error {
	err := f.e.pin(ctx, g, layout.DataFile, 1)
	if errors.Is(err, cache.ErrFull) {
		g.pins.Release()
		return f.copyByPage(ctx, g, buf)
	}
	if err != nil {
		return err
	}
	done := 0
	for _, s := range g.spans {
		g.Vecs = g.blocks[s.slot].run.Append(g.Vecs[:0], int64(s.off), int64(s.n))
		for _, v := range g.Vecs {
			done += copy(buf[done:], v)
		}
	}
	clear(g.Vecs)
	g.Vecs = g.Vecs[:0]
	g.pins.Release()
	return nil
}

// copyByPage is copySpans holding one page at a time.
func (f *dataFile) copyByPage(ctx context.Context, g *Gather, buf []byte) error {
	ps := uint64(f.e.c.PageSize())
	for slot := range g.blocks {
		br := &g.blocks[slot]
		if br.hi <= br.lo {
			continue
		}
		id := layout.DataFile(br.block)
		for p := br.lo / ps; p <= (br.hi-1)/ps; p++ {
			if g.bits[br.bits+int(p/64)]&(1<<(p%64)) == 0 {
				continue
			}
			run, err := f.e.c.PinPage(ctx, &g.pins, id, int64(p))
			if err != nil {
				return err
			}
			lo, hi := p*ps, (p+1)*ps
			dst := 0
			for _, s := range g.spans {
				if s.slot == slot && s.off < hi && s.off+s.n > lo {
					a, b := max(s.off, lo), min(s.off+s.n, hi)
					copy(buf[dst+int(a-s.off):], run.Append(g.Vecs[:0], int64(a), int64(b-a))[0])
				}
				dst += int(s.n)
			}
			g.pins.Release()
		}
	}
	return nil
}

// idsChunk is how many ids fillIDs locates, pins and decodes at a time.
const idsChunk = 8192

// fillIDs sets vals to the source ids of the range's records first, first+1, ...: a window's
// run at a time (idsRun), or by spans (fillChunk) where that cannot be done.
func (f *idsFile) fillIDs(ctx context.Context, g *Gather, first uint64, vals []uint64) error {
	_, pow2 := f.e.pageShift()
	for len(vals) > 0 {
		k := min(len(vals), idsChunk)
		ok := false
		if pow2 {
			pos := f.rg.Start + first
			win := f.e.ord.Window(f.e.ord.WindowOf(pos))
			k = int(min(uint64(len(vals)), win.Count-(pos-win.Start), runSegment))
			var err error
			if ok, err = f.idsRun(ctx, g, win, pos, vals[:k]); err != nil {
				return err
			}
		}
		if !ok {
			k = min(k, idsChunk)
			if err := f.fillChunk(ctx, g, first, vals[:k]); err != nil {
				return err
			}
			g.reset()
		}
		first, vals = first+uint64(k), vals[k:]
	}
	return nil
}

func (f *idsFile) fillChunk(ctx context.Context, g *Gather, first uint64, vals []uint64) error {
	if _, _, _, err := f.e.locate(ctx, g, f.rg.Start+first, 0, uint64(len(vals)), false, len(vals)); err != nil {
		return err
	}
	ds := f.e.ds
	pinned := false
	if ds.HasIDs() {
		err := f.e.pin(ctx, g, layout.IDsFile, 8)
		if err != nil && !errors.Is(err, cache.ErrFull) {
			return err
		}
		if pinned = err == nil; !pinned {
			g.pins.Release()
		}
	}
	i := 0
	var b [8]byte
	for _, s := range g.spans {
		br := &g.blocks[s.slot]
		for local := s.off; local < s.off+s.n; local++ {
			switch {
			case pinned:
				vals[i] = binary.LittleEndian.Uint64(br.run.Bytes(int64(8*local), 8, b[:]))
			case ds.HasIDs():
				if err := f.e.c.Fill(ctx, layout.IDsFile(br.block), int64(8*local), b[:]); err != nil {
					return err
				}
				vals[i] = binary.LittleEndian.Uint64(b[:])
			default:
				vals[i] = ds.SourceID(br.block, local)
			}
			i++
		}
	}
	return nil
}
