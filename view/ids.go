package view

import (
	"encoding/binary"
	"errors"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/shuffle"
)

// fillIDs sets vals to the source ids of the range's records first, first+1, ...: a window's
// run at a time (plan.sourceIDs). g is left reset after each run.
func (f *idsFile) fillIDs(rc call, g *Gather, first uint64, vals []uint64) error {
	for len(vals) > 0 {
		pos := f.rg.Start + first
		win := f.e.ord.Window(f.e.ord.WindowOf(pos))
		i0 := pos - win.Start
		k := min(uint64(len(vals)), win.Count-i0, runSegment)
		if err := g.plan.sourceIDs(rc, f.e, win, i0, vals[:k]); err != nil {
			return err
		}
		first, vals = first+k, vals[k:]
	}
	return nil
}

// sourceIDs sets vals to the source ids of records i0, i0+1, ... of win (vals must not pass
// its end). It is the one place where a record's source id is decoded: computed from its block
// and index (layout.Dataset.SourceID) when the dataset stores no ids, else read from its
// block's ids file (uint64 little-endian at 8 times its index), from pinned pages or, when the
// cache cannot pin them all (every slot pinned), a record at a time. p must be reset; it is
// left reset.
func (p *plan) sourceIDs(rc call, e *Epoch, win *shuffle.Window, i0 uint64, vals []uint64) error {
	defer p.reset()
	stored, pinned := e.ds.HasIDs(), false
	if stored {
		err := p.pinWindowRun(rc, e, win, i0, uint64(len(vals)), layout.IDsFile, 8, 8)
		if err != nil && !errors.Is(err, cache.ErrFull) {
			return err
		}
		pinned = err == nil
	}
	g := geometryOf(e.c)
	var b [8]byte
	for it := p.runs(win, i0, uint64(len(vals))); it.next(); {
		out := vals[it.first:]
		switch {
		case pinned:
			for j, local := range it.locals {
				pg, in := g.page(8 * local)
				out[j] = binary.LittleEndian.Uint64(p.page(it.ks[j], pg)[in:])
			}
		case stored:
			for j, local := range it.locals {
				if err := e.c.Fill(rc.ctx, rc.waits, layout.IDsFile(win.Blocks[it.ks[j]]), int64(8*local), b[:]); err != nil {
					return err
				}
				out[j] = binary.LittleEndian.Uint64(b[:])
			}
		default:
			for j, local := range it.locals {
				out[j] = e.ds.SourceID(win.Blocks[it.ks[j]], local)
			}
		}
	}
	return nil
}
