// Package view builds the files a mount serves, without FUSE: for an epoch (or a shard of one)
// an io.ReaderAt over its records in shuffled order, over their source ids and, for
// variable-length datasets, over their byte offsets. Reads go through the page cache.
package view

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/internal/lru"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/shuffle"
)

// Epoch is one epoch's order over a dataset, with the byte layout of its files. It holds
// O(windows) state plus, variable-length, a few window layouts; the window permutations live
// in its Set's shuffle.WindowCache. Safe for concurrent use.
type Epoch struct {
	// Immutable after newEpoch.
	ds       *layout.Dataset
	c        *cache.Cache
	ord      *shuffle.Order
	winBytes []uint64 // variable-length: epoch byte offset of window w, len windows+1; see winByte
	vwin     *lru.Cache[int, *varWindow]
}

// An Epoch keeps variable-length window layouts (16 bytes a record) while they hold at most
// varWindowRecords records, and always the last minVarWindows.
const (
	varWindowRecords = 1 << 20
	minVarWindows    = 4
)

func newEpoch(ds *layout.Dataset, c *cache.Cache, counts []uint64, opt shuffle.Options, wc *shuffle.WindowCache) (*Epoch, error) {
	ord, err := shuffle.NewCached(counts, opt, wc)
	if err != nil {
		return nil, err
	}
	e := &Epoch{ds: ds, c: c, ord: ord, vwin: lru.New[int, *varWindow](varWindowRecords, minVarWindows)}
	if ds.Kind() == layout.Variable {
		e.winBytes = make([]uint64, ord.Windows()+1)
		for w := 0; w < ord.Windows(); w++ {
			var n uint64
			for _, b := range ord.WindowBlocks(w) {
				n += ds.BlockBytes(int(b))
			}
			e.winBytes[w+1] = e.winBytes[w] + n
		}
	}
	return e, nil
}

// winByte returns the epoch byte offset of window w's first record (w may equal Windows()).
// Fixed-size records need no table for it.
func (e *Epoch) winByte(w int) uint64 {
	if e.winBytes == nil {
		return e.ord.WindowStart(w) * uint64(e.ds.RecordSize())
	}
	return e.winBytes[w]
}

// Order returns the epoch's order.
func (e *Epoch) Order() *shuffle.Order { return e.ord }

// Records returns the number of records in the epoch.
func (e *Epoch) Records() uint64 { return e.ord.Len() }

// Range is a run of positions [Start, End) of an epoch's order.
type Range struct{ Start, End uint64 }

// Len returns the number of records in r.
func (r Range) Len() uint64 { return r.End - r.Start }

// All returns the whole epoch.
func (e *Epoch) All() Range { return Range{0, e.ord.Len()} }

// Shard returns slice r of w of the epoch (see ShardRange).
func (e *Epoch) Shard(r, w uint64) Range { return ShardRange(e.ord.Len(), r, w) }

// Open returns the file of kind k over positions rg of the epoch. ctx bounds the reads a
// variable-length epoch needs to find the range's bytes.
func (e *Epoch) Open(ctx context.Context, k Kind, rg Range) (File, error) {
	return e.open(call{ctx: ctx}, k, rg)
}

// open is Open for the read rc (a mixture's read of its sources' epochs).
func (e *Epoch) open(rc call, k Kind, rg Range) (File, error) {
	switch k {
	case IDs:
		return &idsFile{e: e, rg: rg}, nil
	case Offsets:
		base, err := e.byteOf(rc, rg.Start)
		if err != nil {
			return nil, err
		}
		return &offsetsFile{e: e, rg: rg, base: base}, nil
	default:
		base, err := e.byteOf(rc, rg.Start)
		if err != nil {
			return nil, err
		}
		end, err := e.byteOf(rc, rg.End)
		if err != nil {
			return nil, err
		}
		return &dataFile{e: e, base: base, size: int64(end - base)}, nil
	}
}

// record is where one record of the epoch lives.
type record struct {
	block  int
	local  uint64 // index within the block
	off    uint64 // byte offset in the block's data file
	length uint64
}

// varWindow is the byte layout of one window of a variable-length epoch.
type varWindow struct {
	off    []uint64 // off[i] = offset of the window's i-th record in its block file
	prefix []uint64 // prefix[i] = bytes of the window's first i records; len count+1
}

// varWindow returns the layout of window w, building it from the blocks' offsets indexes.
func (e *Epoch) varWindow(rc call, w int) (*varWindow, error) {
	if v, ok := e.vwin.Get(w); ok {
		return v, nil
	}
	win := e.ord.Window(w)
	offs := make(map[int][]uint64, len(win.Blocks))
	for _, b := range win.Blocks {
		o, err := e.readOffsets(rc, b)
		if err != nil {
			return nil, err
		}
		offs[b] = o
	}
	v := &varWindow{off: make([]uint64, win.Count), prefix: make([]uint64, win.Count+1)}
	for i := uint64(0); i < win.Count; i++ {
		b, local := win.At(i)
		v.off[i] = offs[b][local]
		v.prefix[i+1] = v.prefix[i] + offs[b][local+1] - offs[b][local]
	}
	e.vwin.Add(w, v, win.Count)
	return v, nil
}

// readOffsets reads and checks block b's offsets index (records+1 ascending values from 0 to
// the block's size).
func (e *Epoch) readOffsets(rc call, b int) ([]uint64, error) {
	id := layout.OffsetsFile(b)
	buf := make([]byte, e.ds.Size(id))
	if err := e.c.Fill(rc.ctx, rc.waits, id, 0, buf); err != nil {
		return nil, err
	}
	o := make([]uint64, len(buf)/8)
	for i := range o {
		o[i] = binary.LittleEndian.Uint64(buf[8*i:])
		if (i > 0 && o[i] < o[i-1]) || o[i] > e.ds.BlockBytes(b) {
			return nil, &layout.Error{Path: e.ds.Path(id), Block: b, Kind: layout.ErrCorrupt,
				Msg: fmt.Sprintf("offsets index entry %d (%d) is out of order or past the block's %d bytes", i, o[i], e.ds.BlockBytes(b))}
		}
	}
	return o, nil
}

// byteOf returns the epoch byte offset of position pos (pos may equal Records()).
func (e *Epoch) byteOf(rc call, pos uint64) (uint64, error) {
	if rs := e.ds.RecordSize(); rs > 0 {
		return pos * uint64(rs), nil
	}
	if pos == e.ord.Len() {
		return e.ds.Bytes(), nil
	}
	w := e.ord.WindowOf(pos)
	v, err := e.varWindow(rc, w)
	if err != nil {
		return 0, err
	}
	return e.winByte(w) + v.prefix[pos-e.ord.WindowStart(w)], nil
}

// walk calls fn for the records at positions from, from+1, ... until fn returns false. For the
// record at from, skip bytes are to be skipped (the caller's offset into it).
func (e *Epoch) walk(rc call, from uint64, fn func(pos uint64, r record) bool) error {
	rs, regular := uint64(e.ds.RecordSize()), e.ds.Regular()
	for pos := from; pos < e.ord.Len(); {
		w := e.ord.WindowOf(pos)
		win := e.ord.Window(w)
		var v *varWindow
		if rs == 0 {
			var err error
			if v, err = e.varWindow(rc, w); err != nil {
				return err
			}
		}
		for i := pos - win.Start; i < win.Count; i, pos = i+1, pos+1 {
			b, local := win.At(i)
			r := record{block: b, local: local, off: local * uint64(e.ds.RecordStride()), length: rs}
			if !regular {
				r.off = e.ds.RecordOffset(b, local)
			}
			if v != nil {
				r.off, r.length = v.off[i], v.prefix[i+1]-v.prefix[i]
			}
			if !fn(pos, r) {
				return nil
			}
		}
	}
	return nil
}

// positionOf returns the position of the record holding epoch byte offset off (< total bytes)
// and off's distance from that record's start.
func (e *Epoch) positionOf(rc call, off uint64) (uint64, uint64, error) {
	if rs := uint64(e.ds.RecordSize()); rs > 0 {
		return off / rs, off % rs, nil
	}
	w := sort.Search(e.ord.Windows(), func(w int) bool { return e.winByte(w+1) > off })
	v, err := e.varWindow(rc, w)
	if err != nil {
		return 0, 0, err
	}
	rel := off - e.winByte(w)
	i := sort.Search(len(v.prefix)-1, func(i int) bool { return v.prefix[i+1] > rel })
	return e.ord.WindowStart(w) + uint64(i), rel - v.prefix[i], nil
}

// roleStart returns where window w (w may equal Windows()) starts in the bytes of role: epoch
// data bytes, or 8 per record for ids.
func (e *Epoch) roleStart(role layout.Role, w int) uint64 {
	if role == layout.RoleIDs {
		return 8 * e.ord.WindowStart(w)
	}
	return e.winByte(w)
}

// prefetchBlock asks the cache for block b's files that a reader of role needs: its ids file,
// or its data file (and offsets index, variable-length). It reports false when the readahead
// queue is full; passed is that of the request (the cache's PrefetchUnless).
func (e *Epoch) prefetchBlock(b int, role layout.Role, passed func() bool) bool {
	ids := []layout.FileID{layout.DataFile(b)}
	switch {
	case role == layout.RoleIDs:
		ids = []layout.FileID{layout.IDsFile(b)}
	case e.ds.Kind() == layout.Variable:
		ids = append(ids, layout.OffsetsFile(b))
	}
	for _, id := range ids {
		if !e.c.PrefetchUnless(id, 0, e.ds.Size(id), passed) {
			return false
		}
	}
	return true
}
