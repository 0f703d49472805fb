package view

import (
	"errors"
	"unsafe"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/shuffle"
)

// The run copiers serve reads of many small fixed-size records (more than MaxVecs pieces):
// per window they plan the run of records the read covers (plan.pinWindowRun: the pages those
// records touch, pinned, in a table) and copy each record from that table with a tight loop
// over the window's run (runIter): no span, lock, map lookup, interface call, search or
// allocation per record. Anything else (a record's head or tail cut by the read, a record
// across two pages, a cache with every slot pinned, a page size that is not a power of two)
// goes through the span path (plan.locate, copySpans, plan.copyByPage).

// runSegment is the most records a run copier pins pages for at once.
const runSegment = 1 << 16

// copyFixed copies n bytes of fixed-size records, from the record at pos (skip bytes into it),
// into buf. g must be reset; it is left reset.
func (f *dataFile) copyFixed(rc call, g *Gather, buf []byte, pos, skip uint64, n int) error {
	rs := uint64(f.e.ds.RecordSize())
	stride := uint64(f.e.ds.RecordStride())
	d := 0
	if skip > 0 {
		d = int(min(rs-skip, uint64(n)))
		if err := f.copyBySpans(rc, g, buf[:d], pos, skip); err != nil {
			return err
		}
		pos++
	}
	for whole := uint64(n-d) / rs; whole > 0; {
		if err := rc.ctx.Err(); err != nil {
			return err
		}
		win := f.e.ord.Window(f.e.ord.WindowOf(pos))
		i0 := pos - win.Start
		m := min(whole, win.Count-i0, runSegment)
		dst := buf[d : d+int(m*rs)]
		err := g.plan.pinWindowRun(rc, f.e, win, i0, m, layout.DataFile, stride, rs)
		switch {
		case err == nil:
			ok := g.plan.copyRun(win, i0, dst, rs, stride, geometryOf(f.e.c))
			g.reset()
			if !ok {
				err = f.copyBySpans(rc, g, dst, pos, 0)
			}
		case errors.Is(err, cache.ErrFull):
			g.reset()
			err = f.copyBySpans(rc, g, dst, pos, 0)
		}
		if err != nil {
			return err
		}
		pos, d, whole = pos+m, d+len(dst), whole-m
	}
	if d < n {
		return f.copyBySpans(rc, g, buf[d:n], pos, 0)
	}
	return nil
}

// copyRun copies the records i0, i0+1, ... of win (rs bytes each, stride apart in their block
// files) into dst from p's page table (g.pow2 must hold). It reports false, having copied
// only part, if a record crosses a page boundary (the caller then copies the run by spans).
func (p *plan) copyRun(win *shuffle.Window, i0 uint64, dst []byte, rs, stride uint64, g geometry) bool {
	switch rs {
	case 1:
		return copyRunOf[[1]byte](p, win, i0, dst, stride, g)
	case 2:
		return copyRunOf[[2]byte](p, win, i0, dst, stride, g)
	case 4:
		return copyRunOf[[4]byte](p, win, i0, dst, stride, g)
	case 8:
		return copyRunOf[[8]byte](p, win, i0, dst, stride, g)
	case 16:
		return copyRunOf[[16]byte](p, win, i0, dst, stride, g)
	case 32:
		return copyRunOf[[32]byte](p, win, i0, dst, stride, g)
	case 64:
		return copyRunOf[[64]byte](p, win, i0, dst, stride, g)
	}
	shift, mask := g.shift, g.size-1
	d := 0
	for it := p.runs(win, i0, uint64(len(dst))/rs); it.next(); {
		for j, local := range it.locals {
			off := local * stride
			pg := p.pages[p.at[it.ks[j]]+int(off>>shift)]
			in := off & mask
			if in+rs > uint64(len(pg)) {
				return false
			}
			copy(dst[d:d+int(rs)], pg[in:in+rs])
			d += int(rs)
		}
	}
	return true
}

// copyRunOf is copyRun for records of one small size, the size of T (a byte array): each
// record is copied with a load and a store of T instead of a call to memmove.
func copyRunOf[T any](p *plan, win *shuffle.Window, i0 uint64, dst []byte, stride uint64, g geometry) bool {
	shift, mask := g.shift, g.size-1
	var zero T
	rs := uint64(unsafe.Sizeof(zero))
	m := uint64(len(dst)) / rs
	out := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(dst))), m)
	for it := p.runs(win, i0, m); it.next(); {
		out := out[it.first:]
		for j, local := range it.locals {
			off := local * stride
			pg := p.pages[p.at[it.ks[j]]+int(off>>shift)]
			in := off & mask
			if in+rs > uint64(len(pg)) {
				return false
			}
			out[j] = *(*T)(unsafe.Pointer(&pg[in]))
		}
	}
	return true
}

// copyBySpans copies len(dst) bytes from the record at pos (skip bytes into it) into dst by
// spans, a bounded number at a time. g must be reset; it is left reset.
func (f *dataFile) copyBySpans(rc call, g *Gather, dst []byte, pos, skip uint64) error {
	for done := 0; done < len(dst); {
		if err := rc.ctx.Err(); err != nil {
			return err
		}
		covered, next, nextSkip, err := g.plan.locate(rc, f.e, pos, skip, uint64(len(dst)-done), copySpans)
		if err == nil {
			err = f.copySpans(rc, g, dst[done:done+int(covered)])
		}
		g.reset()
		if err != nil {
			return err
		}
		done, pos, skip = done+int(covered), next, nextSkip
	}
	return nil
}
