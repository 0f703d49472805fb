package view

import (
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
	g.Vecs, g.spans, g.blocks, g.bits = g.Vecs[:0], g.spans[:0], g.blocks[:0], g.bits[:0]
}

// locate walks the records at positions from pos on, covering want bytes of the data (data
// true; the first record from its byte skip) or want records (ids, 8 bytes each in their
// files), and records them in g as spans per block file, with the pages of each file they
// touch. It stops early, before a record that would need a span beyond maxSpans, and returns
// how much it covered and where the next record starts (position and byte skip). It does no
// I/O beyond what a variable-length window's layout needs, and no per-record locking.
func (e *Epoch) locate(g *Gather, pos, skip, want uint64, data bool, maxSpans int) (covered, next, nextSkip uint64, err error) {
	rs := uint64(e.ds.RecordSize())
	unit, role := uint64(8), layout.IDsFile
	if data {
		unit, role = 1, layout.DataFile
	}
	ps := uint64(e.c.PageSize())
	track := data || e.ds.HasIDs() // whether the records come from files (ids may be computed)
	for covered < want && pos < e.ord.Len() {
		w := e.ord.WindowOf(pos)
		win := e.ord.Window(w)
		var v *varWindow
		if data && rs == 0 {
			if v, err = e.varWindow(w); err != nil {
				return 0, 0, 0, err
			}
		}
		base := len(g.blocks)
		for _, b := range win.Blocks {
			words := 0
			if track {
				words = int((uint64(e.ds.Size(role(b)))+ps-1)/ps+63) / 64
			}
			g.blocks = append(g.blocks, blockRange{block: b, lo: ^uint64(0), bits: len(g.bits)})
			for range words {
				g.bits = append(g.bits, 0)
			}
		}
		for i := pos - win.Start; i < win.Count && covered < want; i, pos = i+1, pos+1 {
			k, local := win.Locate(i)
			var off, n uint64 = local, 1 // ids: in records
			if data {
				off, n = local*rs, rs
				if v != nil {
					off, n = v.off[i], v.prefix[i+1]-v.prefix[i]
				}
				off, n = off+skip, min(n-skip, want-covered)
				if n == 0 {
					skip = 0
					continue
				}
			}
			slot := base + k
			if last := len(g.spans) - 1; last >= 0 && g.spans[last].slot == slot && g.spans[last].off+g.spans[last].n == off {
				g.spans[last].n += n
			} else if len(g.spans) == maxSpans {
				return covered, pos, skip, nil
			} else {
				g.spans = append(g.spans, span{slot: slot, off: off, n: n})
			}
			skip = 0
			covered += n
			br := &g.blocks[slot]
			br.lo, br.hi = min(br.lo, off), max(br.hi, off+n)
			for p := off * unit / ps; track && p <= ((off+n)*unit-1)/ps; p++ {
				g.bits[br.bits+int(p/64)] |= 1 << (p % 64)
			}
		}
	}
	return covered, pos, skip, nil
}

// pin pins, for each block file the spans touch, the pages they need of file role.
func (e *Epoch) pin(g *Gather, role func(block int) layout.FileID, unit uint64) error {
	ps := uint64(e.c.PageSize())
	for i := range g.blocks {
		br := &g.blocks[i]
		if br.hi <= br.lo {
			continue
		}
		first, end := br.lo*unit/ps, (br.hi*unit-1)/ps+1
		run, err := e.c.PinPages(&g.pins, cache.FileID(role(br.block)), int64(first), int64(end), g.bits[br.bits:])
		if err != nil {
			return err
		}
		br.run = run
	}
	return nil
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
func (f *dataFile) gatherData(g *Gather, buf []byte, off int64, n int) error {
	pos, skip, err := f.e.positionOf(f.base + uint64(off))
	if err != nil {
		return err
	}
	covered, pos, skip, err := f.e.locate(g, pos, skip, uint64(n), true, MaxVecs)
	if err != nil {
		return err
	}
	if covered == uint64(n) && !f.e.c.Crowded() {
		err = f.e.pin(g, layout.DataFile, 1)
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
	// Copy: what is located so far, then the rest a chunk at a time.
	g.pins.Release()
	clear(g.Vecs)
	g.Vecs = g.Vecs[:0]
	for done := 0; ; {
		if err := f.copySpans(g, buf[done:done+int(covered)]); err != nil {
			return err
		}
		if done += int(covered); done == n {
			break
		}
		g.reset()
		if covered, pos, skip, err = f.e.locate(g, pos, skip, uint64(n-done), true, copySpans); err != nil {
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
func (f *dataFile) copySpans(g *Gather, buf []byte) error {
	err := f.e.pin(g, layout.DataFile, 1)
	if errors.Is(err, cache.ErrFull) {
		g.pins.Release()
		return f.copyByPage(g, buf)
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
func (f *dataFile) copyByPage(g *Gather, buf []byte) error {
	ps := uint64(f.e.c.PageSize())
	for slot := range g.blocks {
		br := &g.blocks[slot]
		if br.hi <= br.lo {
			continue
		}
		id := cache.FileID(layout.DataFile(br.block))
		for p := br.lo / ps; p <= (br.hi-1)/ps; p++ {
			if g.bits[br.bits+int(p/64)]&(1<<(p%64)) == 0 {
				continue
			}
			run, err := f.e.c.PinPage(&g.pins, id, int64(p))
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

// fillIDs sets vals to the source ids of the range's records first, first+1, ...
func (f *idsFile) fillIDs(g *Gather, first uint64, vals []uint64) error {
	for len(vals) > 0 {
		k := min(len(vals), idsChunk)
		if err := f.fillChunk(g, first, vals[:k]); err != nil {
			return err
		}
		g.reset()
		first, vals = first+uint64(k), vals[k:]
	}
	return nil
}

func (f *idsFile) fillChunk(g *Gather, first uint64, vals []uint64) error {
	if _, _, _, err := f.e.locate(g, f.rg.Start+first, 0, uint64(len(vals)), false, len(vals)); err != nil {
		return err
	}
	ds := f.e.ds
	pinned := false
	if ds.HasIDs() {
		err := f.e.pin(g, layout.IDsFile, 8)
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
				if _, err := f.e.c.ReadAt(cache.FileID(layout.IDsFile(br.block)), b[:], int64(8*local)); err != nil {
					return err
				}
				vals[i] = binary.LittleEndian.Uint64(b[:])
			default:
				vals[i] = ds.FirstRecord(br.block) + local
			}
			i++
		}
	}
	return nil
}
