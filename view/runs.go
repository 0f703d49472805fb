package view

import (
	"context"
	"encoding/binary"
	"errors"
	"math/bits"
	"unsafe"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/shuffle"
)

// The run copiers serve reads of many small fixed-size records (more than MaxVecs pieces):
// per window they decode the records' (block, index) pairs a chunk at a time from the window's
// compact form (shuffle.Window.LocateRun), mark and pin the pages those records touch, and
// copy each record from a table of pinned pages with a tight loop: no span, lock, map lookup,
// interface call, search or allocation per record. Anything else (a record's head or tail cut
// by the read, a record across two pages, a cache with every slot pinned, a page size that is
// not a power of two) goes through the span path (locate, copySpans, copyByPage).

// runChunk is how many records the run copiers decode at a time.
const runChunk = 4096

// runSegment is the most records a run copier pins pages for at once.
const runSegment = 1 << 16

// runScratch is a Gather's reusable buffers for the run copiers.
type runScratch struct {
	ks     []uint32
	locals []uint64
	pages  [][]byte // pinned pages of the window's block files; see pageTable
	at     []int    // at[k]: index in pages of page 0 of the window's k-th block file
}

func (s *runScratch) grow() {
	if len(s.ks) < runChunk {
		s.ks, s.locals = make([]uint32, runChunk), make([]uint64, runChunk)
	}
}

// pageShift returns log2 of the cache's page size, or false if it is not a power of two.
func (e *Epoch) pageShift() (uint, bool) {
	ps := uint64(e.c.PageSize())
	return uint(bits.TrailingZeros64(ps)), ps&(ps-1) == 0
}

// pinWindowRun pins, for records [i0, i0+m) of win, the pages of the block files of role that
// hold bytes [local*stride, local*stride+length) of each record, and fills g's page table for
// them. It returns cache.ErrFull when the cache cannot pin them all (g's pins are then
// released). g must be reset.
func (e *Epoch) pinWindowRun(ctx context.Context, g *Gather, win *shuffle.Window, i0, m uint64, role func(int) layout.FileID, stride, length uint64) error {
	shift, _ := e.pageShift()
	ps := uint64(1) << shift
	for _, b := range win.Blocks {
		words := int((uint64(e.ds.Size(role(b)))+ps-1)/ps+63) / 64
		g.blocks = append(g.blocks, blockRange{block: b, lo: ^uint64(0), bits: len(g.bits)})
		for range words {
			g.bits = append(g.bits, 0)
		}
	}
	s := &g.run
	s.grow()
	for done := uint64(0); done < m; {
		c := min(m-done, runChunk)
		ks, locals := s.ks[:c], s.locals[:c]
		win.LocateRun(i0+done, ks, locals)
		for j, local := range locals {
			br := &g.blocks[ks[j]]
			off := local * stride
			br.lo, br.hi = min(br.lo, off), max(br.hi, off+length)
			for p := off >> shift; p <= (off+length-1)>>shift; p++ {
				g.bits[br.bits+int(p/64)] |= 1 << (p % 64)
			}
		}
		done += c
	}
	if err := e.pin(ctx, g, role, 1); err != nil {
		g.pins.Release()
		return err
	}
	s.pages, s.at = s.pages[:0], s.at[:0]
	for i := range g.blocks {
		br := &g.blocks[i]
		if br.hi <= br.lo {
			s.at = append(s.at, 0)
			continue
		}
		first, last := int64(br.lo>>shift), int64((br.hi-1)>>shift)
		s.at = append(s.at, len(s.pages)-int(first))
		for p := first; p <= last; p++ {
			s.pages = append(s.pages, br.run.Page(p))
		}
	}
	return nil
}

// copyFixed copies n bytes of fixed-size records, from the record at pos (skip bytes into it),
// into buf. g must be reset; it is left reset.
func (f *dataFile) copyFixed(ctx context.Context, g *Gather, buf []byte, pos, skip uint64, n int) error {
	rs := uint64(f.e.ds.RecordSize())
	d := 0
	if skip > 0 {
		d = int(min(rs-skip, uint64(n)))
		if err := f.copyBySpans(ctx, g, buf[:d], pos, skip); err != nil {
			return err
		}
		pos++
	}
	for whole := uint64(n-d) / rs; whole > 0; {
		win := f.e.ord.Window(f.e.ord.WindowOf(pos))
		i0 := pos - win.Start
		m := min(whole, win.Count-i0, runSegment)
		dst := buf[d : d+int(m*rs)]
		err := f.e.pinWindowRun(ctx, g, win, i0, m, layout.DataFile, uint64(f.e.ds.RecordStride()), rs)
		switch {
		case err == nil:
			ok := g.copyRun(win, i0, dst, rs, uint64(f.e.ds.RecordStride()), f.e.c.PageSize())
			g.reset()
			if !ok {
				err = f.copyBySpans(ctx, g, dst, pos, 0)
			}
		case errors.Is(err, cache.ErrFull):
			g.reset()
			err = f.copyBySpans(ctx, g, dst, pos, 0)
		}
		if err != nil {
			return err
		}
		pos, d, whole = pos+m, d+len(dst), whole-m
	}
	if d < n {
		return f.copyBySpans(ctx, g, buf[d:n], pos, 0)
	}
	return nil
}

// copyRun copies the records i0, i0+1, ... of win (rs bytes each, stride apart in their block
// files) into dst from g's page table. It reports false, having copied only part, if a record
// crosses a page boundary (the caller then copies the run by spans).
func (g *Gather) copyRun(win *shuffle.Window, i0 uint64, dst []byte, rs, stride uint64, pageSize int) bool {
	switch rs {
	case 4:
		return copyRunOf[[4]byte](g, win, i0, dst, stride, pageSize)
	case 8:
		return copyRunOf[[8]byte](g, win, i0, dst, stride, pageSize)
	case 16:
		return copyRunOf[[16]byte](g, win, i0, dst, stride, pageSize)
	case 32:
		return copyRunOf[[32]byte](g, win, i0, dst, stride, pageSize)
	case 64:
		return copyRunOf[[64]byte](g, win, i0, dst, stride, pageSize)
	}
	s := &g.run
	shift := uint(bits.TrailingZeros(uint(pageSize)))
	mask := uint64(pageSize - 1)
	m := uint64(len(dst)) / rs
	d := 0
	for done := uint64(0); done < m; {
		c := min(m-done, runChunk)
		ks, locals := s.ks[:c], s.locals[:c]
		win.LocateRun(i0+done, ks, locals)
		for j, local := range locals {
			off := local * stride
			pg := s.pages[s.at[ks[j]]+int(off>>shift)]
			in := off & mask
			if in+rs > uint64(len(pg)) {
				return false
			}
			copy(dst[d:d+int(rs)], pg[in:in+rs])
			d += int(rs)
		}
		done += c
	}
	return true
}

// copyRunOf is copyRun for records of one small size, the size of T (a byte array): each
// record is copied with a load and a store of T instead of a call to memmove.
func copyRunOf[T any](g *Gather, win *shuffle.Window, i0 uint64, dst []byte, stride uint64, pageSize int) bool {
	s := &g.run
	shift := uint(bits.TrailingZeros(uint(pageSize)))
	mask := uint64(pageSize - 1)
	var zero T
	rs := uint64(unsafe.Sizeof(zero))
	m := uint64(len(dst)) / rs
	out := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(dst))), m)
	for done := uint64(0); done < m; {
		c := min(m-done, runChunk)
		ks, locals := s.ks[:c], s.locals[:c]
		win.LocateRun(i0+done, ks, locals)
		for j, local := range locals {
			off := local * stride
			pg := s.pages[s.at[ks[j]]+int(off>>shift)]
			in := off & mask
			if in+rs > uint64(len(pg)) {
				return false
			}
			out[done+uint64(j)] = *(*T)(unsafe.Pointer(&pg[in]))
		}
		done += c
	}
	return true
}

// copyBySpans copies len(dst) bytes from the record at pos (skip bytes into it) into dst by
// spans, a bounded number at a time. g must be reset; it is left reset.
func (f *dataFile) copyBySpans(ctx context.Context, g *Gather, dst []byte, pos, skip uint64) error {
	for done := 0; done < len(dst); {
		covered, next, nextSkip, err := f.e.locate(ctx, g, pos, skip, uint64(len(dst)-done), true, copySpans)
		if err == nil {
			err = f.copySpans(ctx, g, dst[done:done+int(covered)])
		}
		g.reset()
		if err != nil {
			return err
		}
		done, pos, skip = done+int(covered), next, nextSkip
	}
	return nil
}

// idsRun sets vals to the source ids of the records at positions pos, pos+1, ... of one window
// (vals must not pass its end), from the pinned pages of the blocks' ids files or computed. It
// reports false if it could not (a cache with every slot pinned); g is left reset.
func (f *idsFile) idsRun(ctx context.Context, g *Gather, win *shuffle.Window, pos uint64, vals []uint64) (bool, error) {
	i0 := pos - win.Start
	ds := f.e.ds
	s := &g.run
	s.grow()
	if !ds.HasIDs() {
		for done := 0; done < len(vals); {
			c := min(len(vals)-done, runChunk)
			ks, locals := s.ks[:c], s.locals[:c]
			win.LocateRun(i0+uint64(done), ks, locals)
			for j, local := range locals {
				vals[done+j] = ds.SourceID(win.Blocks[ks[j]], local)
			}
			done += c
		}
		return true, nil
	}
	err := f.e.pinWindowRun(ctx, g, win, i0, uint64(len(vals)), layout.IDsFile, 8, 8)
	if errors.Is(err, cache.ErrFull) {
		g.reset()
		return false, nil
	}
	if err != nil {
		g.reset()
		return false, err
	}
	shift, _ := f.e.pageShift()
	mask := uint64(1)<<shift - 1
	for done := 0; done < len(vals); {
		c := min(len(vals)-done, runChunk)
		ks, locals := s.ks[:c], s.locals[:c]
		win.LocateRun(i0+uint64(done), ks, locals)
		for j, local := range locals {
			off := 8 * local
			pg := s.pages[s.at[ks[j]]+int(off>>shift)]
			vals[done+j] = binary.LittleEndian.Uint64(pg[off&mask:])
		}
		done += c
	}
	g.reset()
	return true, nil
}
