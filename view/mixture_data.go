package view

import (
	"fmt"
	"sync"

	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/shuffle"
)

// A read of a mixture's epoch data: cut into one read per source of the draws it covers, in
// the source's own order, with each source's readahead, and laid out in the mixture's order.

// mixData is the records of a range of a mixture's epoch, in its order. It is opened per
// handle, and keeps the handle's readahead in each source's order.
type mixData struct {
	me     *mixEpoch
	rg     Range
	base   uint64 // epoch byte offset of the range's first record
	size   int64
	ahead  int64 // the handle's readahead (NewReader sets it: readahead)
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

func (f *mixData) gather(rc call, g *Gather, buf []byte, off int64) (int, error) {
	n := clamp(buf, off, f.size)
	if n == 0 {
		return 0, nil
	}
	me := f.me
	ns := len(me.m.Sets)
	p0, skip, err := me.positionOf(rc, f.base+uint64(off))
	if err != nil {
		return 0, err
	}
	pl, lastAt, err := me.positionOf(rc, f.base+uint64(off)+uint64(n)-1)
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
		f.prefetch(rc, i, segs)
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
			if err := f.readSegment(rc, g, sg, r, from, lastWant, copied); err != nil {
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
func (f *mixData) readSegment(rc call, g *Gather, sg segment, r *sourceRead, from, lastWant uint64, copied bool) error {
	if t := f.me.m.tiny[sg.src]; t != nil {
		return t.appendSegment(sg, r, from, lastWant, copied)
	}
	s := f.me.m.Sets[sg.src]
	e, err := s.Epoch(sg.pass)
	if err != nil {
		return err
	}
	file, err := e.open(rc, Data, sg.Range)
	if err != nil {
		return err
	}
	lastLen := r.rs
	if r.rs == 0 {
		lens, err := f.me.lengths(rc, sg)
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
		return readFull(rc, file, r.bytes[at:], int64(from))
	}
	sub := NewGather()
	g.subs = append(g.subs, sub)
	k, err := file.gather(rc, sub, g.scratch(int(end-from)), int64(from))
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
// Finding a variable-length segment's first byte may read the source's offsets: as part of
// the read rc.
func (f *mixData) prefetch(rc call, i int, segs []segment) {
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
		f.ra[i], f.raPass[i] = e.readahead(layout.RoleData, 0), sg.pass
	}
	share := max(f.ahead/int64(len(f.ra)), int64(float64(f.ahead)*float64(f.me.e.Count(i))/float64(max(1, f.me.e.Len()))))
	at := sg.Start * uint64(max(1, s.DS.RecordSize()))
	if s.DS.RecordSize() == 0 {
		if b, err := f.ra[i].e.byteOf(rc, sg.Start); err == nil {
			at = b
		}
	}
	f.ra[i].advance(at, uint64(share))
}
