package view

import (
	"encoding/binary"
	"fmt"

	"github.com/blockfs/blockfs/shuffle"
)

// A small source drawn many times an epoch (a few lines repeated 10^7 times) is read a pass
// at a time, and one read of a mixture's epoch may cross hundreds of thousands of its passes.
// Through its Set each pass costs an Epoch, its windows and a read through the cache (tens of
// microseconds, and garbage); a Mixture holds such a source's records instead (tiny), and
// orders each pass with its own small window cache: a pass then costs its permutation.
const (
	tinyBytes   = 1 << 20  // a source of at most this many bytes...
	tinyRecords = 2048     // ...and records is held when drawn more than twice an epoch
	tinyWindows = 64 << 10 // each held source's window cache

	// MaxReadBytes is the largest read of an epoch (the FUSE mount's max_read).
	MaxReadBytes = 1 << 20
	// A read of MaxReadBytes of an epoch's data, ids or offsets may cross at most this many
	// passes of a held source's order, or of another source's: bounds on a read's time,
	// whatever a source's repeat.
	maxTinyPasses = 1 << 20
	maxSetPasses  = 1 << 16
)

// tinyTotal is the most the held sources of a mixture may take together, their window caches
// included (a variable: tests set it to 0 to read every source through its Set).
var tinyTotal int64 = 16 << 20

// tiny is a source's records in memory, by stored index (block by block), and its order.
type tiny struct {
	counts []uint64 // records per block (the Set's)
	first  []uint64 // stored index of each block's first record
	offs   []uint64 // record r's bytes are data[offs[r]:offs[r+1]]
	ids    []uint64 // record r's source id
	data   []byte
	opt    shuffle.Options
	wc     *shuffle.WindowCache
}

// holdTiny holds the small sources drawn many times (within tinyTotal), and refuses a mixture
// a read of which would cross more passes of a source than its path allows.
func (m *Mixture) holdTiny() error {
	m.tiny = make([]*tiny, len(m.Sets))
	var held int64
	for i, s := range m.Sets {
		n, bytes := s.DS.Records(), s.DS.Bytes()
		size := int64(bytes+16*n) + tinyWindows
		if m.Order.MaxCount(i) > 2*n && bytes <= tinyBytes && n <= tinyRecords && held+size <= tinyTotal {
			t, err := loadTiny(s)
			if err != nil {
				return err
			}
			m.tiny[i], held = t, held+size
			m.held = held
		}
		// A read of data crosses a pass per source's bytes; one of ids or offsets, a pass per
		// n records of 8 bytes.
		passes, most := MaxReadBytes/8/n+2, uint64(maxSetPasses)
		if bytes == 0 {
			passes = m.Order.MaxCount(i)/n + 2
		} else {
			passes = max(passes, MaxReadBytes/bytes+2)
		}
		passes = min(passes, m.Order.MaxCount(i)/n+2)
		if m.tiny[i] != nil {
			most = maxTinyPasses
		}
		if passes > most {
			return fmt.Errorf("%w: source %d has %d records of %d bytes in all and gives up to %d records an epoch: a read of %d bytes could cross %d passes of its order (at most %d); lower its repeat or records, or give it more data",
				shuffle.ErrMixture, i, n, bytes, m.Order.MaxCount(i), MaxReadBytes, passes, most)
		}
	}
	return nil
}

// loadTiny reads a small source's records through its Set: its epoch 0's files, put back in
// stored order by that epoch's order.
func loadTiny(s *Set) (*tiny, error) {
	rc := background()
	e, err := s.Epoch(0)
	if err != nil {
		return nil, err
	}
	all, n := e.All(), s.DS.Records()
	read := func(k Kind) ([]byte, error) {
		f, err := e.open(rc, k, all)
		if err != nil {
			return nil, err
		}
		b := make([]byte, f.Size())
		return b, readFull(rc, f, b, 0)
	}
	data, err := read(Data)
	if err != nil {
		return nil, err
	}
	ids, err := read(IDs)
	if err != nil {
		return nil, err
	}
	bounds := make([]uint64, n+1) // epoch 0's offsets
	if rs := uint64(s.DS.RecordSize()); rs > 0 {
		for p := range bounds {
			bounds[p] = uint64(p) * rs
		}
	} else {
		raw, err := read(Offsets)
		if err != nil {
			return nil, err
		}
		for p := range bounds {
			bounds[p] = binary.LittleEndian.Uint64(raw[8*p:])
		}
	}
	t := &tiny{counts: s.counts, first: make([]uint64, len(s.counts)), offs: make([]uint64, n+1), ids: make([]uint64, n),
		opt: s.Opt, wc: shuffle.NewWindowCache(tinyWindows)}
	for b := 1; b < len(s.counts); b++ {
		t.first[b] = t.first[b-1] + s.counts[b-1]
	}
	length := make([]uint64, n)
	for p := range n {
		r := t.stored(e.ord, p)
		length[r], t.ids[r] = bounds[p+1]-bounds[p], binary.LittleEndian.Uint64(ids[8*p:])
	}
	for r := range n {
		t.offs[r+1] = t.offs[r] + length[r]
	}
	t.data = make([]byte, 0, len(data))
	for r := range n { // stored order, from epoch 0's
		t.data = append(t.data, make([]byte, length[r])...)
	}
	for p := range n {
		r := t.stored(e.ord, p)
		copy(t.data[t.offs[r]:t.offs[r+1]], data[bounds[p]:bounds[p+1]])
	}
	return t, nil
}

// stored returns the stored index of the record at position p of order o.
func (t *tiny) stored(o *shuffle.Order, p uint64) uint64 {
	b, local := o.At(p)
	return t.first[b] + local
}

// pass returns the order of the source's epoch (pass) k.
func (t *tiny) pass(k uint64) (*shuffle.Order, error) {
	opt := t.opt
	opt.Epoch = k
	return shuffle.NewCached(t.counts, opt, t.wc)
}

// records calls fn with the stored index of each record at positions [a, b) of pass k.
func (t *tiny) records(k, a, b uint64, fn func(r uint64)) error {
	o, err := t.pass(k)
	if err != nil {
		return err
	}
	for p := a; p < b; {
		win := o.Window(o.WindowOf(p))
		for ; p < b && p-win.Start < win.Count; p++ {
			blk, local := win.At(p - win.Start)
			fn(t.first[blk] + local)
		}
	}
	return nil
}

// bytes returns the bytes of positions [a, b) of pass k.
func (t *tiny) bytes(k, a, b uint64) (uint64, error) {
	var n uint64
	err := t.records(k, a, b, func(r uint64) { n += t.offs[r+1] - t.offs[r] })
	return n, err
}

// values returns the ids (IDs) or the lengths (Offsets) of a segment's records.
func (t *tiny) values(sg segment, k Kind) ([]uint64, error) {
	out := make([]uint64, 0, sg.Len())
	err := t.records(sg.pass, sg.Start, sg.End, func(r uint64) {
		if k == IDs {
			out = append(out, t.ids[r])
		} else {
			out = append(out, t.offs[r+1]-t.offs[r])
		}
	})
	return out, err
}

// appendSegment appends a segment's bytes, from byte from of its first record to byte
// lastWant (exclusive) of its last, to r: copied onto r.bytes, or as slices of t.data; and
// the lengths of its records.
func (t *tiny) appendSegment(sg segment, r *sourceRead, from, lastWant uint64, copied bool) error {
	recs := make([]uint64, 0, sg.Len())
	if err := t.records(sg.pass, sg.Start, sg.End, func(x uint64) { recs = append(recs, x) }); err != nil {
		return err
	}
	for k, x := range recs {
		rec := t.data[t.offs[x]:t.offs[x+1]:t.offs[x+1]]
		if r.rs == 0 {
			r.lens = append(r.lens, uint64(len(rec)))
		}
		if k == len(recs)-1 && lastWant < uint64(len(rec)) {
			rec = rec[:lastWant]
		}
		if k == 0 {
			rec = rec[min(from, uint64(len(rec))):]
		}
		switch {
		case len(rec) == 0:
		case copied:
			r.bytes = append(r.bytes, rec...)
		default:
			r.vecs = append(r.vecs, rec)
		}
	}
	return nil
}
