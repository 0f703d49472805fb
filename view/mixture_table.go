package view

// mixTable is a mixture epoch's file of one value per record: ids (uint64), sources (uint16)
// or offsets (uint64, with the range's end).
type mixTable struct {
	me    *mixEpoch
	rg    Range
	width int
	kind  Kind
	base  uint64 // offsets: the range's first byte in the epoch
}

func (f *mixTable) Size() int64 {
	n := int64(f.rg.Len())
	if f.kind == Offsets {
		n++
	}
	return int64(f.width) * n
}

func (f *mixTable) ReadAt(p []byte, off int64) (int, error) { return readAt(f, p, off) }

func (f *mixTable) gather(rc call, g *Gather, buf []byte, off int64) (int, error) {
	n, err := readTable(buf, off, f.Size(), f.width, func(first uint64, vals []uint64) error {
		return f.fill(rc, f.rg.Start+first, vals)
	})
	if n > 0 && err == nil {
		g.Vecs = append(g.Vecs, buf[:n])
	}
	return n, err
}

// fill sets vals to the values of positions from, from+1, ... of the epoch (an offsets file's
// last value, at the range's end, is its size).
func (f *mixTable) fill(rc call, from uint64, vals []uint64) error {
	me := f.me
	ns := len(me.m.Sets)
	end := min(from+uint64(len(vals)), f.rg.End) // records whose own value is read
	it := me.e.Iter(from)
	if f.kind == Sources {
		for k := range vals {
			vals[k] = uint64(it.Next())
		}
		return nil
	}
	at := it.Drawn()
	n1 := make([]uint64, ns)
	me.e.Before(end, n1)
	per := make([][]uint64, ns) // ids, or lengths, of each source's draws [at, n1)
	var segs []segment
	for i := range ns {
		for _, sg := range me.segments(i, at[i], n1[i], segs[:0]) {
			v, err := f.sourceValues(rc, sg)
			if err != nil {
				return err
			}
			per[i] = append(per[i], v...)
		}
	}
	taken := make([]int, ns)
	var pos uint64
	if f.kind == Offsets {
		b, err := me.byteOf(rc, from)
		if err != nil {
			return err
		}
		pos = b - f.base
	}
	for k := range vals {
		if from+uint64(k) >= end {
			vals[k] = pos // the range's end
			continue
		}
		i := it.Next()
		v := per[i][taken[i]]
		taken[i]++
		if f.kind == IDs {
			vals[k] = v
			continue
		}
		vals[k] = pos
		pos += v
	}
	return nil
}

// sourceValues returns the ids (IDs) or the lengths (Offsets) of a source's segment.
func (f *mixTable) sourceValues(rc call, sg segment) ([]uint64, error) {
	if rs := uint64(f.me.m.Sets[sg.src].DS.RecordSize()); f.kind == Offsets && rs > 0 {
		out := make([]uint64, sg.Len())
		for k := range out {
			out[k] = rs
		}
		return out, nil
	}
	return f.me.segmentValues(rc, sg, f.kind)
}
