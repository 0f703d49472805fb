package shuffle

import (
	"fmt"
	"math"
	"math/bits"
	"sort"
)

// Interleave places the draws of the sources of one epoch (counts c) by the Sainte-Laguë key:
// draw j of source i has key (2j+1)/(2c_i); positions follow keys, ties by source index.
//
// A round-robin interleave (the parts of a node-aware mount: NewNodeMixture) places them by the
// key (j, i) instead: round j takes draw j of every source with more than j draws, in source
// order.
type Interleave struct {
	c  []uint64
	t  uint64
	rr bool
}

// RoundRobin reports whether the interleave is a round-robin one.
func (il *Interleave) RoundRobin() bool { return il.rr }

// Len returns the epoch's records.
func (il *Interleave) Len() uint64 { return il.t }

// Count returns source i's records in the epoch.
func (il *Interleave) Count(i int) uint64 { return il.c[i] }

// Counts returns every source's records in the epoch (not to be modified).
func (il *Interleave) Counts() []uint64 { return il.c }

// before returns how many of source k's draws come before draw j of source i.
func (il *Interleave) before(k, i int, j uint64) uint64 {
	if k == i {
		return j
	}
	if il.rr {
		if k < i {
			return min(il.c[k], j+1)
		}
		return min(il.c[k], j)
	}
	ck, ci := il.c[k], il.c[i]
	if ck == 0 {
		return 0
	}
	// X = (2j+1)*c_k < 2*c_i*c_k, so X / c_i < 2*c_k fits in 64 bits (hi < c_i).
	hi, lo := bits.Mul64(2*j+1, ck)
	if k > i {
		// strictly before: (2j'+1)*c_i < X, i.e. 2j'+1 <= floor((X-1)/c_i)
		var borrow uint64
		lo, borrow = bits.Sub64(lo, 1, 0)
		hi -= borrow
	}
	q, _ := bits.Div64(hi, lo, ci)
	return min((q+1)/2, ck)
}

// Position returns the position of draw j of source i (j < Count(i)).
func (il *Interleave) Position(i int, j uint64) uint64 {
	var p uint64
	for k := range il.c {
		p += il.before(k, i, j)
	}
	return p
}

// At returns the source and draw index at position p (p < Len()).
func (il *Interleave) At(p uint64) (int, uint64) {
	it := il.Iter(p)
	i := it.peek()
	if i < 0 {
		panic(fmt.Sprintf("shuffle: no draw at position %d of an interleave of %d", p, il.t))
	}
	return i, it.n[i]
}

// Before fills n (len Sources) with each source's draws before position p (p <= Len()).
func (il *Interleave) Before(p uint64, n []uint64) {
	if p >= il.t {
		copy(n, il.c)
		return
	}
	copy(n, il.Iter(p).n)
}

// Iter returns an iterator over the positions from p (p <= Len()) in O(S log S) for S
// sources: it counts each source's draws with a key below (2p+1)/(2T), which is within about
// S/2 of p draws in all, and steps from there to exactly p, a draw at a time by key.
func (il *Interleave) Iter(p uint64) *Iter {
	it := &Iter{il: il, n: make([]uint64, len(il.c))}
	if p >= il.t {
		copy(it.n, il.c)
		return it
	}
	var m uint64
	if il.rr {
		m = il.roundsBelow(p, it.n)
	}
	for k, ck := range il.c {
		if ck == 0 || il.rr {
			continue
		}
		// draws j with (2j+1)*T < (2p+1)*c_k: 2j+1 <= floor((X-1)/T), X = (2p+1)*c_k < 2*T*c_k
		hi, lo := bits.Mul64(2*p+1, ck)
		var borrow uint64
		lo, borrow = bits.Sub64(lo, 1, 0)
		hi -= borrow
		q, _ := bits.Div64(hi, lo, il.t)
		it.n[k] = min((q+1)/2, ck)
		m += it.n[k]
	}
	if m > p {
		// Give back the last draws taken, the largest keys first.
		h := &keyHeap{il: il, at: it.n, last: true}
		for k := range il.c {
			if it.n[k] > 0 {
				h.push(k)
			}
		}
		for ; m > p; m-- {
			k := h.pop()
			it.n[k]--
			if it.n[k] > 0 {
				h.push(k)
			}
		}
	}
	it.h = keyHeap{il: il, at: it.n}
	for k, ck := range il.c {
		if it.n[k] < ck {
			it.h.push(k)
		}
	}
	for ; m < p; m++ {
		it.Next()
	}
	return it
}

// Iter walks an interleave's positions in order (Interleave.Iter). Not safe for concurrent use.
type Iter struct {
	il *Interleave
	n  []uint64 // each source's draws so far
	h  keyHeap  // the sources with draws left, by their next draw's key
}

// Next returns the source at the next position and takes its draw, or -1 past the end.
func (it *Iter) Next() int {
	if len(it.h.ks) == 0 {
		return -1
	}
	k := it.h.ks[0]
	it.n[k]++
	if it.n[k] < it.il.c[k] {
		it.h.fix0()
	} else {
		it.h.pop()
	}
	return k
}

// Peek returns the source at the next position without taking it, or -1 past the end.
func (it *Iter) Peek() int { return it.peek() }

// peek returns the source at the next position, or -1 past the end.
func (it *Iter) peek() int {
	if len(it.h.ks) == 0 {
		return -1
	}
	return it.h.ks[0]
}

// Drawn returns each source's draws so far (not to be modified).
func (it *Iter) Drawn() []uint64 { return it.n }

// keyHeap orders sources by the key of a draw: their next (at[k]) or, with last, their last
// taken (at[k]-1), smallest first, or largest first with last; ties by source index.
type keyHeap struct {
	il   *Interleave
	at   []uint64
	last bool
	ks   []int
}

func (h *keyHeap) less(a, b int) bool {
	ka, kb := h.ks[a], h.ks[b]
	ja, jb := h.at[ka], h.at[kb]
	if h.last {
		return h.il.keyLess(kb, jb-1, ka, ja-1)
	}
	return h.il.keyLess(ka, ja, kb, jb)
}

func (h *keyHeap) push(k int) {
	h.ks = append(h.ks, k)
	for i := len(h.ks) - 1; i > 0; {
		parent := (i - 1) / 2
		if !h.less(i, parent) {
			break
		}
		h.ks[i], h.ks[parent] = h.ks[parent], h.ks[i]
		i = parent
	}
}

func (h *keyHeap) pop() int {
	k := h.ks[0]
	last := len(h.ks) - 1
	h.ks[0] = h.ks[last]
	h.ks = h.ks[:last]
	h.fix0()
	return k
}

// fix0 restores the heap after the top's key grew (smallest-first) or shrank (largest-first).
func (h *keyHeap) fix0() {
	for i := 0; ; {
		l, r, best := 2*i+1, 2*i+2, i
		if l < len(h.ks) && h.less(l, best) {
			best = l
		}
		if r < len(h.ks) && h.less(r, best) {
			best = r
		}
		if best == i {
			return
		}
		h.ks[i], h.ks[best] = h.ks[best], h.ks[i]
		i = best
	}
}

// Next returns the source of the position after the draws n (each source's draws so far),
// and advances n past it. It returns -1 when every draw is placed.
func (il *Interleave) Next(n []uint64) int {
	best := -1
	for k, ck := range il.c {
		if n[k] >= ck {
			continue
		}
		if best < 0 || il.keyLess(k, n[k], best, n[best]) {
			best = k
		}
	}
	if best >= 0 {
		n[best]++
	}
	return best
}

// keyLess reports whether draw a of source i has a smaller key than draw b of source k (ties:
// the lower source first).
func (il *Interleave) keyLess(i int, a uint64, k int, b uint64) bool {
	if il.rr {
		return a < b || a == b && i < k
	}
	h1, l1 := bits.Mul64(2*a+1, il.c[k])
	h2, l2 := bits.Mul64(2*b+1, il.c[i])
	if h1 != h2 {
		return h1 < h2
	}
	if l1 != l2 {
		return l1 < l2
	}
	return i < k
}

// roundsBelow sets n to each source's draws in the whole rounds that end at or before
// position p of a round-robin interleave, and returns their sum (at most p, and within a
// round of it).
func (il *Interleave) roundsBelow(p uint64, n []uint64) uint64 {
	var most uint64
	for _, ck := range il.c {
		most = max(most, ck)
	}
	through := func(j uint64) uint64 { // positions in rounds 0..j-1
		var t uint64
		for _, ck := range il.c {
			t += min(ck, j)
		}
		return t
	}
	// the most rounds j whose positions fit in p
	j := uint64(sort.Search(int(min(most, uint64(math.MaxInt-1)))+1, func(j int) bool { return through(uint64(j)) > p })) - 1
	var m uint64
	for k, ck := range il.c {
		n[k] = min(ck, j)
		m += n[k]
	}
	return m
}
