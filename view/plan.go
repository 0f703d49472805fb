package view

import (
	"math/bits"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/shuffle"
)

// A read is planned, then served. The plan says which bytes of which block files the read
// needs, and holds the cache pages they are in pinned while the read uses them. It is filled
// in one of two ways:
//
//   - by spans (locate, then pin): the records of the read, merged where back to back in one
//     block file, for any record size; gather.go hands them out as slices of pinned pages or
//     copies them;
//   - by a window's run (pinWindowRun): the records i0, i0+1, ... of one window, each at
//     local*stride in its block file, with a table of their pinned pages indexed by block and
//     page; runs.go and ids.go copy from it record by record in tight loops.
//
// Both walk records in the epoch's order; a window's records are decoded a chunk at a time
// by a runIter. A plan belongs to one Gather and is not safe for concurrent use.
type plan struct {
	pins   cache.Pins
	spans  []span       // the records of the read, merged where back to back in one block file
	blocks []blockRange // the block files the read touches, and what of each it needs
	bits   []uint64     // the pages each block file's spans touch (blockRange.bits)

	pages [][]byte // a window run's pinned pages: see page
	at    []int    // at[k]: index in pages of page 0 of the window's k-th block file
	iter  runIter  // its buffers are reused from read to read
}

// span is a run of bytes of one block file: blocks[slot], from off.
type span struct {
	slot   int
	off, n uint64
}

// blockRange is one block file that a read touches: the range [lo, hi) of its bytes the
// read needs, and which cache pages they touch: bit p of plan.bits[bits:] for page p of the
// file. Only those pages are pinned (as run), so a read holds no more of the cache than it
// uses.
type blockRange struct {
	block  int
	lo, hi uint64
	bits   int
	run    cache.Run
}

// reset unpins the plan's pages and empties it, keeping its buffers.
func (p *plan) reset() {
	p.pins.Release()
	clear(p.blocks)
	clear(p.pages)
	p.spans, p.blocks, p.bits, p.pages = p.spans[:0], p.blocks[:0], p.bits[:0], p.pages[:0]
}

// geometry is the cache's page size, with its log2 when it is a power of two (the run
// copiers need one).
type geometry struct {
	size  uint64
	shift uint
	pow2  bool
}

func geometryOf(c *cache.Cache) geometry {
	ps := uint64(c.PageSize())
	return geometry{size: ps, shift: uint(bits.TrailingZeros64(ps)), pow2: ps&(ps-1) == 0}
}

// pageOf returns the page holding byte off of a file.
func (g geometry) pageOf(off uint64) uint64 {
	if g.pow2 {
		return off >> g.shift
	}
	return off / g.size
}

// page returns the page holding byte off of a file, and off's place in it.
func (g geometry) page(off uint64) (p, in uint64) {
	if g.pow2 {
		return off >> g.shift, off & (g.size - 1)
	}
	return off / g.size, off % g.size
}

// addBlocks appends a blockRange for each of win's block files, with room in p.bits for the
// pages of its file of role (none when track is false).
func (p *plan) addBlocks(e *Epoch, win *shuffle.Window, role func(int) layout.FileID, track bool) {
	ps := uint64(e.c.PageSize())
	for _, b := range win.Blocks {
		words := 0
		if track {
			words = int((uint64(e.ds.Size(role(b)))+ps-1)/ps+63) / 64
		}
		p.blocks = append(p.blocks, blockRange{block: b, lo: ^uint64(0), bits: len(p.bits)})
		for range words {
			p.bits = append(p.bits, 0)
		}
	}
}

// mark records that the read needs bytes [off, off+n) (n > 0) of the file of p.blocks[slot].
// A window's run is marked by markRun, a chunk per call.
func (p *plan) mark(g geometry, slot int, off, n uint64) {
	br := &p.blocks[slot]
	end := off + n
	br.lo, br.hi = min(br.lo, off), max(br.hi, end)
	for pg := g.pageOf(off); pg <= g.pageOf(end-1); pg++ {
		p.bits[br.bits+int(pg/64)] |= 1 << (pg % 64)
	}
}

// markRun is mark for each record of a chunk of a window's run (runIter): bytes
// [local*stride, local*stride+length) of the file of p.blocks[ks[j]] for each locals[j]. The
// loop is mark's, inline: mark does not inline, and a call per record made the run copier of
// 8-byte records markedly slower (BenchmarkRead).
func (p *plan) markRun(g geometry, ks []uint32, locals []uint64, stride, length uint64) {
	for j, local := range locals {
		off := local * stride
		br := &p.blocks[ks[j]]
		br.lo, br.hi = min(br.lo, off), max(br.hi, off+length)
		for pg := g.pageOf(off); pg <= g.pageOf(off+length-1); pg++ {
			p.bits[br.bits+int(pg/64)] |= 1 << (pg % 64)
		}
	}
}

// locate walks the records at positions from pos on, covering want bytes of the epoch's data
// (the first record from its byte skip), and records them in p as spans per block file, with
// the pages of each file they touch. It stops early, before a record that would need a span
// beyond maxSpans, and returns how much it covered and where the next record starts (position
// and byte skip). It does no I/O beyond what a variable-length window's layout needs, and no
// per-record locking.
func (p *plan) locate(rc call, e *Epoch, pos, skip, want uint64, maxSpans int) (covered, next, nextSkip uint64, err error) {
	rs, stride, regular := uint64(e.ds.RecordSize()), uint64(e.ds.RecordStride()), e.ds.Regular()
	g := geometryOf(e.c)
	for covered < want && pos < e.ord.Len() {
		w := e.ord.WindowOf(pos)
		win := e.ord.Window(w)
		var v *varWindow
		if rs == 0 {
			if v, err = e.varWindow(rc, w); err != nil {
				return 0, 0, 0, err
			}
		}
		base := len(p.blocks)
		p.addBlocks(e, win, layout.DataFile, true)
		for i := pos - win.Start; i < win.Count && covered < want; i, pos = i+1, pos+1 {
			k, local := win.Locate(i)
			off, n := local*stride, rs
			if !regular {
				off = e.ds.RecordOffset(win.Blocks[k], local)
			}
			if v != nil {
				off, n = v.off[i], v.prefix[i+1]-v.prefix[i]
			}
			off, n = off+skip, min(n-skip, want-covered)
			if n == 0 {
				skip = 0
				continue
			}
			slot := base + k
			if last := len(p.spans) - 1; last >= 0 && p.spans[last].slot == slot && p.spans[last].off+p.spans[last].n == off {
				p.spans[last].n += n
			} else if len(p.spans) == maxSpans {
				return covered, pos, skip, nil
			} else {
				p.spans = append(p.spans, span{slot: slot, off: off, n: n})
			}
			skip = 0
			covered += n
			p.mark(g, slot, off, n)
		}
	}
	return covered, pos, skip, nil
}

// pin pins, for each block file the plan touches, the pages it needs of the file of role.
// It returns cache.ErrFull when the cache cannot pin them all; the caller releases p.pins
// (or resets p) either way.
func (p *plan) pin(rc call, c *cache.Cache, role func(block int) layout.FileID) error {
	g := geometryOf(c)
	for i := range p.blocks {
		br := &p.blocks[i]
		if br.hi <= br.lo {
			continue
		}
		first, _ := g.page(br.lo)
		last, _ := g.page(br.hi - 1)
		run, err := c.PinPages(rc.ctx, rc.waits, &p.pins, role(br.block), int64(first), int64(last+1), p.bits[br.bits:])
		if err != nil {
			return err
		}
		br.run = run
	}
	return nil
}

// appendVecs appends the bytes of p's spans, in order, to vecs as slices of pinned pages.
// p must be pinned.
func (p *plan) appendVecs(vecs [][]byte) [][]byte {
	for _, s := range p.spans {
		vecs = p.blocks[s.slot].run.Append(vecs, int64(s.off), int64(s.n))
	}
	return vecs
}

// copyPinned copies p's spans into buf (which holds their bytes) from pinned pages, a span at
// a time through scratch (a slice to reuse for one span's pages), and returns scratch. p must
// be pinned.
func (p *plan) copyPinned(buf []byte, scratch [][]byte) [][]byte {
	done := 0
	for _, s := range p.spans {
		scratch = p.blocks[s.slot].run.Append(scratch[:0], int64(s.off), int64(s.n))
		for _, v := range scratch {
			done += copy(buf[done:], v)
		}
	}
	return scratch
}

// copyByPage copies p's spans into buf (which holds their bytes) holding one page at a time:
// for a cache with no slot left to pin them all at once. Each page is loaded once, into a
// buffer of its own if every slot is pinned. scratch is a slice to reuse for one page's
// bytes.
func (p *plan) copyByPage(rc call, c *cache.Cache, buf []byte, scratch [][]byte) error {
	ps := uint64(c.PageSize())
	for slot := range p.blocks {
		br := &p.blocks[slot]
		if br.hi <= br.lo {
			continue
		}
		id := layout.DataFile(br.block)
		for pg := br.lo / ps; pg <= (br.hi-1)/ps; pg++ {
			if p.bits[br.bits+int(pg/64)]&(1<<(pg%64)) == 0 {
				continue
			}
			if err := rc.ctx.Err(); err != nil {
				// A page already loaded is not waited for, so the context is looked at here:
				// an interrupted read (a killed reader, an unmount) stops at once.
				return err
			}
			run, err := c.PinPage(rc.ctx, rc.waits, &p.pins, id, int64(pg))
			if err != nil {
				return err
			}
			lo, hi := pg*ps, (pg+1)*ps
			dst := 0
			for _, s := range p.spans {
				if s.slot == slot && s.off < hi && s.off+s.n > lo {
					a, b := max(s.off, lo), min(s.off+s.n, hi)
					copy(buf[dst+int(a-s.off):], run.Append(scratch[:0], int64(a), int64(b-a))[0])
				}
				dst += int(s.n)
			}
			p.pins.Release()
		}
	}
	return nil
}

// pinWindowRun plans records [i0, i0+m) of win as a window run: it pins the pages of the
// block files of role that hold bytes [local*stride, local*stride+length) of each record, and
// fills p's page table for them (see page). It returns cache.ErrFull when the cache cannot pin
// them all (p's pins are then released). p must be reset.
func (p *plan) pinWindowRun(rc call, e *Epoch, win *shuffle.Window, i0, m uint64, role func(int) layout.FileID, stride, length uint64) error {
	g := geometryOf(e.c)
	p.addBlocks(e, win, role, true)
	for it := p.runs(win, i0, m); it.next(); {
		p.markRun(g, it.ks, it.locals, stride, length)
	}
	if err := p.pin(rc, e.c, role); err != nil {
		p.pins.Release()
		return err
	}
	p.pages, p.at = p.pages[:0], p.at[:0]
	for i := range p.blocks {
		br := &p.blocks[i]
		if br.hi <= br.lo {
			p.at = append(p.at, 0)
			continue
		}
		first, _ := g.page(br.lo)
		last, _ := g.page(br.hi - 1)
		p.at = append(p.at, len(p.pages)-int(first))
		for pg := first; pg <= last; pg++ {
			p.pages = append(p.pages, br.run.Page(int64(pg)))
		}
	}
	return nil
}

// page returns the pinned page pg of the file of the window's k-th block, in a plan filled by
// pinWindowRun. The run copiers index p.pages the same way, inline.
func (p *plan) page(k uint32, pg uint64) []byte { return p.pages[p.at[k]+int(pg)] }

// runChunk is how many records a runIter decodes at a time.
const runChunk = 4096

// runIter walks records i0, i0+1, ..., i0+m-1 of a window a chunk at a time, decoded from the
// window's compact form by shuffle.Window.LocateRun: after each call of next that returns
// true, record i0+first+j is record locals[j] of the window's block ks[j]. Every loop over a
// window's run uses one, so the decoding is written once and costs one call per chunk.
type runIter struct {
	win      *shuffle.Window
	pos, end uint64 // the next record to decode, and the end of the run, in the window
	i0       uint64

	first  uint64   // the chunk's first record, from i0
	ks     []uint32 // the chunk: block (index in win.Blocks) of each record
	locals []uint64 // and its index within that block

	kbuf   []uint32
	locbuf []uint64
}

// runs returns p's iterator, started on records [i0, i0+m) of win. It is valid until the
// next call of runs.
func (p *plan) runs(win *shuffle.Window, i0, m uint64) *runIter {
	it := &p.iter
	if len(it.kbuf) < runChunk {
		it.kbuf, it.locbuf = make([]uint32, runChunk), make([]uint64, runChunk)
	}
	it.win, it.pos, it.end, it.i0 = win, i0, i0+m, i0
	return it
}

// next decodes the next chunk of the run into it.ks and it.locals, or reports false at the
// end of the run.
func (it *runIter) next() bool {
	if it.pos >= it.end {
		return false
	}
	c := min(it.end-it.pos, runChunk)
	it.first, it.ks, it.locals = it.pos-it.i0, it.kbuf[:c], it.locbuf[:c]
	it.win.LocateRun(it.pos, it.ks, it.locals)
	it.pos += c
	return true
}
