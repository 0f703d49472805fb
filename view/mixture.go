package view

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/big"
	"sort"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/internal/lru"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/shuffle"
)

// Mixture serves the epochs of a mixture of datasets (docs/SHUFFLE.md, "Mixtures"): each
// epoch's records come from the sources' own epochs (Sets, one per source, each over its own
// namespace of one cache), interleaved by a shuffle.Mixture. A read of a mixture's epoch is cut
// into one read per source of the draws it covers, in the source's own order (whole blocks of
// its block-shuffled order, with its own readahead), and the records are then laid out in the
// mixture's order as slices of the sources' pinned pages. Safe for concurrent use.
type Mixture struct {
	// Immutable after NewMixture.
	group // the sources' Sets and their cache; the mixture file; the mount's facts
	Order *shuffle.Mixture
	rs    int64 // every record's size when all sources have fixed records of one size; else 0

	recent *lru.Cache[uint64, *shuffle.MixEpoch]
	tiny   []*tiny // per source: its records, held when it is small and drawn many times
	held   int64   // the bytes the held sources take

	// node: the epochs of a node of a node-aware mount (NewNode), its parts the sources:
	// served as one dataset's epochs, with no .source file.
	node bool
	// Names, when set, opens the names file of the dataset a node's parts are of.
	Names func() (File, bool)
}

// NewMixture returns the mixture of sets (source i is sets[i]) in order. name is the mixture
// file (a mount's fsname and stamp); facts are what info.json says of it beyond what the
// Mixture computes (its sources, fingerprint).
func NewMixture(sets []*Set, order *shuffle.Mixture, c *cache.Cache, name string, facts map[string]any) (*Mixture, error) {
	if len(sets) != order.Sources() {
		return nil, fmt.Errorf("view: %d sets for a mixture of %d sources", len(sets), order.Sources())
	}
	m := &Mixture{group: group{Sets: sets, Cache: c, dir: name, facts: facts}, Order: order, recent: lru.New[uint64, *shuffle.MixEpoch](0, epochCacheSize)}
	m.rs = sets[0].DS.RecordSize()
	for i, s := range sets {
		if s.DS.RecordSize() != m.rs {
			m.rs = 0
		}
		if s.DS.Records() != order.Source(i).N {
			return nil, fmt.Errorf("view: source %d has %d records; the mixture's order has %d", i, s.DS.Records(), order.Source(i).N)
		}
	}
	// File sizes and offsets are int64: an epoch's bytes must fit.
	most := new(big.Int)
	for i, s := range sets {
		if rs := s.DS.RecordSize(); rs > 0 {
			most.Add(most, new(big.Int).Mul(new(big.Int).SetUint64(order.MaxCount(i)), big.NewInt(rs)))
			continue
		}
		passes := order.MaxCount(i)/max(1, s.DS.Records()) + 2 // a partial pass at each end
		most.Add(most, new(big.Int).Mul(new(big.Int).SetUint64(passes), new(big.Int).SetUint64(s.DS.Bytes())))
	}
	if most.Cmp(big.NewInt(MaxEpochBytes)) > 0 {
		return nil, fmt.Errorf("%w: an epoch of the mixture could hold %s bytes; at most %d: lower the records an epoch takes", shuffle.ErrMixture, most, int64(MaxEpochBytes))
	}
	if err := m.holdTiny(); err != nil {
		return nil, err
	}
	if _, err := m.epoch(0); err != nil {
		return nil, err
	}
	return m, nil
}

// NewNode returns the epochs of a node of a node-aware mount (docs/SHUFFLE.md, "Many nodes"):
// the round-robin mixture (order, shuffle.NewNodeMixture) of its parts (sets, each a part of
// one dataset), served as that dataset's epochs: the same files as a mount of it, with no
// .source file. facts are info.json's (the dataset's and the nodes').
func NewNode(sets []*Set, order *shuffle.Mixture, c *cache.Cache, name string, facts map[string]any) (*Mixture, error) {
	m, err := NewMixture(sets, order, c, name, facts)
	if err != nil {
		return nil, err
	}
	m.node = true
	return m, nil
}

// MaxEpochBytes bounds the bytes of a mixture's epoch (its files' sizes are int64).
const MaxEpochBytes = 1 << 62

// epoch returns epoch n's counts and interleave.
func (m *Mixture) epoch(n uint64) (*shuffle.MixEpoch, error) {
	if e, ok := m.recent.Get(n); ok {
		return e, nil
	}
	e, err := m.Order.Epoch(n)
	if err != nil {
		return nil, err
	}
	m.recent.Add(n, e, 1)
	return e, nil
}

// Records returns the records of epoch n.
func (m *Mixture) Records(n uint64) (uint64, error) {
	e, err := m.epoch(n)
	if err != nil {
		return 0, err
	}
	return e.Len(), nil
}

// Kinds returns an epoch's files: data, ids, offsets (records of several sizes) and source.
func (m *Mixture) Kinds() []Kind {
	if m.node && m.rs == 0 {
		return []Kind{Data, IDs, Offsets}
	}
	if m.node {
		return []Kind{Data, IDs}
	}
	if m.rs == 0 {
		return []Kind{Data, IDs, Offsets, Sources}
	}
	return []Kind{Data, IDs, Sources}
}

// Suffix returns the suffix of an epoch's file of kind k.
func (m *Mixture) Suffix(k Kind) string { return kindSuffix[k] }

// RecordSize returns the size of every record, or 0 when they vary (then epochs have offsets).
func (m *Mixture) RecordSize() int64 { return m.rs }

// Stamp returns the mixture file.
func (m *Mixture) Stamp() string { return m.dir }

// OpenNames reports false: a mixture's records are named by their sources' files; a node's
// mount opens its dataset's names file (Names).
func (m *Mixture) OpenNames() (File, bool) {
	if m.Names != nil {
		return m.Names()
	}
	return nil, false
}

// OrderBytes returns the order state the sources' Sets hold, together, and the held sources.
func (m *Mixture) OrderBytes() int64 { return m.held + m.group.OrderBytes() }

// Facts returns info.json's facts of the mixture: the mount's (its sources) and the epoch's
// shape.
func (m *Mixture) Facts() map[string]any {
	f := m.factsCopy()
	e0, _ := m.epoch(0)
	f["records"] = e0.Len()
	if m.node {
		return f
	}
	f["epoch_records_vary"] = m.Order.Varies()
	tree := Tree()
	tree["source"] = SourceSuffix
	f["tree"] = tree
	f["ids_dtype"] = "<u8"
	f["ids"] = "uint64 little-endian id of each record in its source (epoch-NNNN.ids)"
	f["source"] = "uint16 little-endian index in sources of each record's source (epoch-NNNN.source)"
	f["source_dtype"] = "<u2"
	if m.rs > 0 {
		f["kind"], f["record_size"] = string(layout.Fixed), m.rs
	} else {
		f["kind"], f["offsets_dtype"] = string(layout.Variable), "<u8"
	}
	return f
}

// FileSize returns the size of the file of kind k over positions rg of epoch n.
func (m *Mixture) FileSize(ctx context.Context, n uint64, k Kind, rg Range) (int64, error) {
	switch k {
	case IDs:
		return 8 * int64(rg.Len()), nil
	case Offsets:
		return 8 * int64(rg.Len()+1), nil
	case Sources:
		return 2 * int64(rg.Len()), nil
	}
	if m.rs > 0 {
		return int64(rg.Len()) * m.rs, nil
	}
	f, err := m.Open(ctx, n, k, rg)
	if err != nil {
		return 0, err
	}
	return f.Size(), nil
}

// Open returns the file of kind k over positions rg of epoch n.
func (m *Mixture) Open(ctx context.Context, n uint64, k Kind, rg Range) (File, error) {
	rc := call{ctx: ctx}
	e, err := m.epoch(n)
	if err != nil {
		return nil, err
	}
	me := &mixEpoch{m: m, e: e}
	switch k {
	case IDs:
		return &mixTable{me: me, rg: rg, width: 8, kind: IDs}, nil
	case Sources:
		return &mixTable{me: me, rg: rg, width: 2, kind: Sources}, nil
	}
	base, err := me.byteOf(rc, rg.Start)
	if err != nil {
		return nil, err
	}
	if k == Offsets {
		return &mixTable{me: me, rg: rg, width: 8, kind: Offsets, base: base}, nil
	}
	end, err := me.byteOf(rc, rg.End)
	if err != nil {
		return nil, err
	}
	return &mixData{me: me, rg: rg, base: base, size: int64(end - base), ra: make([]*readahead, len(m.Sets)), raPass: make([]uint64, len(m.Sets))}, nil
}

// mixEpoch is one epoch of a mixture with the byte arithmetic of its records.
type mixEpoch struct {
	m *Mixture
	e *shuffle.MixEpoch
}

// segment is a run of one source's draws that lies in one pass of its order: positions
// [Start, End) of the source's epoch Pass.
type segment struct {
	src  int
	pass uint64
	Range
}

// segments returns the runs of source i's draws [j0, j1) of the epoch, a pass at a time.
func (me *mixEpoch) segments(i int, j0, j1 uint64, out []segment) []segment {
	n := me.m.Order.Source(i).N
	for j0 < j1 {
		d := me.e.DrawOf(i, j0)
		take := min(j1-j0, n-d.Pos)
		out = append(out, segment{src: i, pass: d.Pass, Range: Range{d.Pos, d.Pos + take}})
		j0 += take
	}
	return out
}

// drawBytes returns the bytes of source i's draws [0, j) of the epoch: the rest of the pass
// the first draw is in, the whole passes after it (each the source's bytes), and the start of
// the pass the last draw ends in. It builds at most two passes' orders, however many passes
// the draws cover (a small source drawn millions of times an epoch).
func (me *mixEpoch) drawBytes(rc call, i int, j uint64) (uint64, error) {
	s := me.m.Sets[i]
	if rs := s.DS.RecordSize(); rs > 0 {
		return j * uint64(rs), nil
	}
	if j == 0 {
		return 0, nil
	}
	first, end := me.e.DrawOf(i, 0), me.e.DrawOf(i, j)
	if first.Pass == end.Pass {
		return me.passBytes(rc, i, first.Pass, first.Pos, end.Pos)
	}
	head, err := me.passBytes(rc, i, first.Pass, first.Pos, s.DS.Records())
	if err != nil {
		return 0, err
	}
	tail, err := me.passBytes(rc, i, end.Pass, 0, end.Pos)
	if err != nil {
		return 0, err
	}
	return head + (end.Pass-first.Pass-1)*s.DS.Bytes() + tail, nil
}

// passBytes returns the bytes of positions [a, b) of pass (its own epoch) of a source s with
// records of varying size, building the pass's order only when the range is not all or none
// of it.
func (me *mixEpoch) passBytes(rc call, i int, pass, a, b uint64) (uint64, error) {
	s := me.m.Sets[i]
	switch {
	case a == b:
		return 0, nil
	case a == 0 && b == s.DS.Records():
		return s.DS.Bytes(), nil
	case me.m.tiny[i] != nil:
		return me.m.tiny[i].bytes(pass, a, b)
	}
	e, err := s.Epoch(pass)
	if err != nil {
		return 0, err
	}
	x, err := e.byteOf(rc, a)
	if err != nil {
		return 0, err
	}
	y, err := e.byteOf(rc, b)
	return y - x, err
}

// byteOf returns the epoch byte offset of position p (p may equal the epoch's records).
func (me *mixEpoch) byteOf(rc call, p uint64) (uint64, error) {
	if me.m.rs > 0 {
		return p * uint64(me.m.rs), nil
	}
	n := make([]uint64, len(me.m.Sets))
	me.e.Before(p, n)
	var total uint64
	for i, j := range n {
		b, err := me.drawBytes(rc, i, j)
		if err != nil {
			return 0, err
		}
		total += b
	}
	return total, nil
}

// positionOf returns the position of the record holding epoch byte offset off (below the
// epoch's bytes) and off's distance from that record's start.
func (me *mixEpoch) positionOf(rc call, off uint64) (uint64, uint64, error) {
	if rs := uint64(me.m.rs); rs > 0 {
		return off / rs, off % rs, nil
	}
	var ferr error
	p := sort.Search(int(me.e.Len()), func(p int) bool {
		b, err := me.byteOf(rc, uint64(p)+1)
		if err != nil && ferr == nil {
			ferr = err
		}
		return b > off
	})
	if ferr != nil {
		return 0, 0, ferr
	}
	start, err := me.byteOf(rc, uint64(p))
	return uint64(p), off - start, err
}

// lengths returns the byte length of each record of a source's segment: from its epoch's
// offsets for variable-length records, nil for fixed-size ones.
func (me *mixEpoch) lengths(rc call, sg segment) ([]uint64, error) {
	if me.m.Sets[sg.src].DS.RecordSize() > 0 {
		return nil, nil
	}
	return me.segmentValues(rc, sg, Offsets)
}

// segmentValues returns the ids (IDs) or the records' byte lengths (Offsets, of
// variable-length records) of a source's segment, read from the source's own epoch (or its
// held records).
func (me *mixEpoch) segmentValues(rc call, sg segment, kind Kind) ([]uint64, error) {
	if t := me.m.tiny[sg.src]; t != nil {
		return t.values(sg, kind)
	}
	e, err := me.m.Sets[sg.src].Epoch(sg.pass)
	if err != nil {
		return nil, err
	}
	f, err := e.open(rc, kind, sg.Range)
	if err != nil {
		return nil, err
	}
	raw := make([]byte, f.Size())
	if err := readFull(rc, f, raw, 0); err != nil {
		return nil, err
	}
	out := make([]uint64, sg.Len())
	for k := range out {
		v := binary.LittleEndian.Uint64(raw[8*k:])
		if kind == Offsets {
			v = binary.LittleEndian.Uint64(raw[8*k+8:]) - v
		}
		out[k] = v
	}
	return out, nil
}
