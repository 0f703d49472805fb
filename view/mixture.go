package view

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/big"
	"sort"
	"sync"

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
	Sets  []*Set
	Order *shuffle.Mixture
	Cache *cache.Cache // the cache the sources' namespaces share
	rs    int64        // every record's size when all sources have fixed records of one size; else 0
	name  string       // the mixture file
	facts map[string]any

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
	m := &Mixture{Sets: sets, Order: order, Cache: c, name: name, facts: facts, recent: lru.New[uint64, *shuffle.MixEpoch](0, epochCacheSize)}
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

// Readahead returns the mount's readahead: a mixture's reader splits it among its sources.
func (m *Mixture) Readahead(k Kind, mount int64) int64 { return mount }

// RecordSize returns the size of every record, or 0 when they vary (then epochs have offsets).
func (m *Mixture) RecordSize() int64 { return m.rs }

// Dir returns the mixture file.
func (m *Mixture) Dir() string { return m.name }

// Stamp returns the mixture file.
func (m *Mixture) Stamp() string { return m.name }

// OpenNames reports false: a mixture's records are named by their sources' files; a node's
// mount opens its dataset's names file (Names).
func (m *Mixture) OpenNames() (File, bool) {
	if m.Names != nil {
		return m.Names()
	}
	return nil, false
}

// Stats returns the shared cache's counters.
func (m *Mixture) Stats() CacheStats { return m.Cache.Stats() }

// OrderBytes returns the order state the sources' Sets hold, together, and the held sources.
func (m *Mixture) OrderBytes() int64 {
	n := m.held
	for _, s := range m.Sets {
		n += s.OrderBytes()
	}
	return n
}

// Facts returns info.json's facts of the mixture: the mount's (its sources) and the epoch's
// shape.
func (m *Mixture) Facts() map[string]any {
	f := map[string]any{}
	for k, v := range m.facts {
		f[k] = v
	}
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
	base, err := me.byteOf(ctx, rg.Start)
	if err != nil {
		return nil, err
	}
	if k == Offsets {
		return &mixTable{me: me, rg: rg, width: 8, kind: Offsets, base: base}, nil
	}
	end, err := me.byteOf(ctx, rg.End)
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
func (me *mixEpoch) drawBytes(ctx context.Context, i int, j uint64) (uint64, error) {
	s := me.m.Sets[i]
	if rs := s.DS.RecordSize(); rs > 0 {
		return j * uint64(rs), nil
	}
	if j == 0 {
		return 0, nil
	}
	first, end := me.e.DrawOf(i, 0), me.e.DrawOf(i, j)
	if first.Pass == end.Pass {
		return me.passBytes(ctx, i, first.Pass, first.Pos, end.Pos)
	}
	head, err := me.passBytes(ctx, i, first.Pass, first.Pos, s.DS.Records())
	if err != nil {
		return 0, err
	}
	tail, err := me.passBytes(ctx, i, end.Pass, 0, end.Pos)
	if err != nil {
		return 0, err
	}
	return head + (end.Pass-first.Pass-1)*s.DS.Bytes() + tail, nil
}

// passBytes returns the bytes of positions [a, b) of pass (its own epoch) of a source s with
// records of varying size, building the pass's order only when the range is not all or none
// of it.
func (me *mixEpoch) passBytes(ctx context.Context, i int, pass, a, b uint64) (uint64, error) {
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
	x, err := e.byteOf(ctx, a)
	if err != nil {
		return 0, err
	}
	y, err := e.byteOf(ctx, b)
	return y - x, err
}

// byteOf returns the epoch byte offset of position p (p may equal the epoch's records).
func (me *mixEpoch) byteOf(ctx context.Context, p uint64) (uint64, error) {
	if me.m.rs > 0 {
		return p * uint64(me.m.rs), nil
	}
	n := make([]uint64, len(me.m.Sets))
	me.e.Before(p, n)
	var total uint64
	for i, j := range n {
		b, err := me.drawBytes(ctx, i, j)
		if err != nil {
			return 0, err
		}
		total += b
	}
	return total, nil
}

// positionOf returns the position of the record holding epoch byte offset off (below the
// epoch's bytes) and off's distance from that record's start.
func (me *mixEpoch) positionOf(ctx context.Context, off uint64) (uint64, uint64, error) {
	if rs := uint64(me.m.rs); rs > 0 {
		return off / rs, off % rs, nil
	}
	var ferr error
	p := sort.Search(int(me.e.Len()), func(p int) bool {
		b, err := me.byteOf(ctx, uint64(p)+1)
		if err != nil && ferr == nil {
			ferr = err
		}
		return b > off
	})
	if ferr != nil {
		return 0, 0, ferr
	}
	start, err := me.byteOf(ctx, uint64(p))
	return uint64(p), off - start, err
}

// lengths returns the byte length of each record of a source's segment: from its epoch's
// offsets for variable-length records, nil for fixed-size ones.
func (me *mixEpoch) lengths(ctx context.Context, sg segment) ([]uint64, error) {
	s := me.m.Sets[sg.src]
	if s.DS.RecordSize() > 0 {
		return nil, nil
	}
	if t := me.m.tiny[sg.src]; t != nil {
		return t.values(sg, Offsets)
	}
	e, err := s.Epoch(sg.pass)
	if err != nil {
		return nil, err
	}
	f, err := e.Open(ctx, Offsets, sg.Range)
	if err != nil {
		return nil, err
	}
	raw := make([]byte, f.Size())
	if err := readFull(ctx, f, raw, 0); err != nil {
		return nil, err
	}
	out := make([]uint64, sg.Len())
	for k := range out {
		out[k] = binary.LittleEndian.Uint64(raw[8*k+8:]) - binary.LittleEndian.Uint64(raw[8*k:])
	}
	return out, nil
}

// mixData is the records of a range of a mixture's epoch, in its order. It is opened per
// handle, and keeps the handle's readahead in each source's order.
type mixData struct {
	me     *mixEpoch
	rg     Range
	base   uint64 // epoch byte offset of the range's first record
	size   int64
	ahead  int64 // the handle's readahead (NewReader sets it)
	mu     sync.Mutex
	ra     []*readahead // per source, in its current pass (guarded by mu)
	raPass []uint64     // the pass each ra is over (guarded by mu)
}

func (f *mixData) Size() int64 { return f.size }

func (f *mixData) ReadAt(p []byte, off int64) (int, error) { return readAt(f, p, off) }

// sourceRead is one source's part of a read: its segments' bytes as slices of pinned pages
// (or of buf), their records' lengths, and a cursor over them.
type sourceRead struct {
	rs      uint64   // record size, or 0: lens
	lens    []uint64 // variable: each record's length, over the source's segments in order
	vecs    [][]byte
	bytes   []byte // the source's bytes, copied (a read of many records)
	vi, at  int    // cursor: vecs[vi][at:]
	records int    // records taken
}

// take appends the next n bytes of the source's bytes to out as slices.
func (s *sourceRead) take(n uint64, out [][]byte) [][]byte {
	for n > 0 {
		v := s.vecs[s.vi][s.at:]
		k := min(uint64(len(v)), n)
		out = append(out, v[:k:k])
		n -= k
		if s.at += int(k); s.at == len(s.vecs[s.vi]) {
			s.vi, s.at = s.vi+1, 0
		}
	}
	return out
}

func (f *mixData) gather(ctx context.Context, g *Gather, buf []byte, off int64) (int, error) {
	n := clamp(buf, off, f.size)
	if n == 0 {
		return 0, nil
	}
	me := f.me
	ns := len(me.m.Sets)
	p0, skip, err := me.positionOf(ctx, f.base+uint64(off))
	if err != nil {
		return 0, err
	}
	pl, lastAt, err := me.positionOf(ctx, f.base+uint64(off)+uint64(n)-1)
	if err != nil {
		return 0, err
	}
	it := me.e.Iter(p0)
	first := it.Peek()
	n0 := append([]uint64(nil), it.Drawn()...)
	n1 := make([]uint64, ns)
	me.e.Before(pl+1, n1)
	last, _ := me.e.At(pl)
	// A read of many records (tiny ones, a small source drawn many times) is copied into buf:
	// fs would copy more than MaxVecs slices anyway, and a Gather per segment would hold a pin
	// of the source's pages for each of thousands of passes.
	copied := pl-p0+1 > MaxVecs
	reads := make([]sourceRead, ns)
	var segs []segment
	for i := range ns {
		if n1[i] == n0[i] {
			continue
		}
		segs = me.segments(i, n0[i], n1[i], segs[:0])
		f.prefetch(i, segs)
		r := &reads[i]
		r.rs = uint64(me.m.Sets[i].DS.RecordSize())
		for k, sg := range segs {
			// Only the bytes the read wants: from skip into the first record, to the last
			// byte wanted of the last.
			var from uint64
			if i == first && k == 0 {
				from = skip
			}
			lastWant := ^uint64(0)
			if i == last && k == len(segs)-1 {
				lastWant = lastAt + 1
			}
			if err := f.readSegment(ctx, g, sg, r, from, lastWant, copied); err != nil {
				return 0, err
			}
		}
		if copied {
			r.vecs = [][]byte{r.bytes}
		}
	}
	layOut(it, reads, skip, uint64(n), g, buf, copied)
	return n, nil
}

// layOut lays the records of a read out in the mixture's order (it, from the read's first
// record, skip bytes into it): as slices of the sources' bytes, or copied into buf.
func layOut(it *shuffle.Iter, reads []sourceRead, skip, want uint64, g *Gather, buf []byte, copied bool) {
	out, vecs := buf[:0], g.Vecs
	var tmp [][]byte
	for want > 0 {
		i := it.Next()
		r := &reads[i]
		length := r.rs
		if length == 0 {
			length = r.lens[r.records]
		}
		r.records++
		length = min(length-skip, want)
		skip = 0
		if !copied {
			vecs = r.take(length, vecs)
		} else {
			tmp = r.take(length, tmp[:0])
			for _, v := range tmp {
				out = append(out, v...)
			}
		}
		want -= length
	}
	if copied {
		vecs = append(vecs, out)
	}
	g.Vecs = vecs
}

// readSegment reads a source's segment, from byte from of its first record to byte lastWant
// (exclusive) of its last (all of it when lastWant is past its end), as slices held by a
// Gather of its own that g releases, or copied onto r.bytes; and the lengths of its records,
// variable-length.
func (f *mixData) readSegment(ctx context.Context, g *Gather, sg segment, r *sourceRead, from, lastWant uint64, copied bool) error {
	if t := f.me.m.tiny[sg.src]; t != nil {
		return t.appendSegment(sg, r, from, lastWant, copied)
	}
	s := f.me.m.Sets[sg.src]
	e, err := s.Epoch(sg.pass)
	if err != nil {
		return err
	}
	file, err := e.Open(ctx, Data, sg.Range)
	if err != nil {
		return err
	}
	lastLen := r.rs
	if r.rs == 0 {
		lens, err := f.me.lengths(ctx, sg)
		if err != nil {
			return err
		}
		r.lens = append(r.lens, lens...)
		lastLen = lens[len(lens)-1]
	}
	end := uint64(file.Size())
	if lastWant < lastLen {
		end -= lastLen - lastWant
	}
	if copied {
		at := len(r.bytes)
		r.bytes = append(r.bytes, make([]byte, end-from)...)
		return readFull(ctx, file, r.bytes[at:], int64(from))
	}
	sub := NewGather()
	g.subs = append(g.subs, sub)
	k, err := file.gather(ctx, sub, g.scratch(int(end-from)), int64(from))
	if err != nil {
		return err
	}
	if uint64(k) != end-from {
		return fmt.Errorf("view: a source's segment read %d of %d bytes", k, end-from)
	}
	r.vecs = append(r.vecs, sub.Vecs...)
	return nil
}

// prefetch moves source i's readahead to its segments' first and asks for what comes next, in
// the source's bytes: the handle's readahead in proportion to the source's share of the epoch.
func (f *mixData) prefetch(i int, segs []segment) {
	if f.ahead <= 0 || len(segs) == 0 || f.me.m.tiny[i] != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	sg := segs[0]
	s := f.me.m.Sets[i]
	if f.ra[i] == nil || f.raPass[i] != sg.pass {
		e, err := s.Epoch(sg.pass)
		if err != nil {
			return
		}
		f.ra[i], f.raPass[i] = &readahead{e: e, role: layout.RoleData, next: -1}, sg.pass
	}
	share := max(f.ahead/int64(len(f.ra)), int64(float64(f.ahead)*float64(f.me.e.Count(i))/float64(max(1, f.me.e.Len()))))
	at := sg.Start * uint64(max(1, s.DS.RecordSize()))
	if s.DS.RecordSize() == 0 {
		if b, err := f.ra[i].e.byteOf(context.Background(), sg.Start); err == nil {
			at = b
		}
	}
	f.ra[i].advance(at, uint64(share))
}
