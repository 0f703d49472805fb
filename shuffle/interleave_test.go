package shuffle

// The interleaves of counts c, built as NewMixture and NewNodeMixture build theirs, for the
// tests that check the orders against them.

// NewInterleave returns the interleave of counts c.
func NewInterleave(c []uint64) Interleave {
	il := Interleave{c: c}
	for _, n := range c {
		il.t += n
	}
	return il
}

// NewRoundRobin returns the round-robin interleave of counts c.
func NewRoundRobin(c []uint64) Interleave {
	il := NewInterleave(c)
	il.rr = true
	return il
}

// NodeShare returns node's positions among the first x positions of the round-robin
// interleave of all the parts (records[p], every part's records), for nodes that divide the
// parts: where that node's epoch resumes when x positions of the whole epoch are done.
func NodeShare(records []uint64, nodes, node int, x uint64) uint64 {
	il := NewRoundRobin(records)
	n := make([]uint64, len(records))
	il.Before(min(x, il.Len()), n)
	var s uint64
	for p := node; p < len(records); p += nodes {
		s += n[p]
	}
	return s
}
