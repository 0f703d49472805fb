package shuffle

import "math/bits"

// bijectionRounds is the number of Feistel rounds of a Bijection: two updates of each half,
// with mix64 as the round function (four rounds of a pseudorandom function make a
// pseudorandom permutation: Luby and Rackoff).
const bijectionRounds = 4

// A Bijection is a keyed permutation of [0, n) computed one index at a time, in O(1) state:
// the order of a window too large to hold its permutation (docs/SHUFFLE.md, "Order version
// 2"). It is an alternating Feistel network over the k bits that hold n-1, its halves the a =
// floor(k/2) high bits and the b = ceil(k/2) low bits, each round XORing one half with the
// low bits of mix64 of the other half XOR a round key; an index the network sends past n goes
// through it again (cycle walking), which, 2^k being less than 2n, takes under two passes on
// average. Immutable.
type Bijection struct {
	n            uint64
	b            uint
	maskA, maskB uint64
	keys         [bijectionRounds]uint64
}

// NewBijection returns the permutation of [0, n) keyed by key (n >= 1): its round keys are the
// first bijectionRounds numbers of RNG(key).
func NewBijection(n, key uint64) *Bijection {
	p := &Bijection{n: n}
	if n < 2 {
		return p
	}
	k := uint(bits.Len64(n - 1))
	a := k / 2
	p.b = k - a
	p.maskA, p.maskB = 1<<a-1, 1<<p.b-1
	r := NewRNG(key)
	for i := range p.keys {
		p.keys[i] = r.Uint64()
	}
	return p
}

// Len returns n.
func (p *Bijection) Len() uint64 { return p.n }

// At returns the image of i (i < n).
func (p *Bijection) At(i uint64) uint64 {
	if p.n < 2 {
		return i
	}
	x := p.pass(i)
	for x >= p.n {
		x = p.pass(x)
	}
	return x
}

// pass is one pass of the Feistel network over [0, 2^k).
func (p *Bijection) pass(x uint64) uint64 {
	l, r := x>>p.b, x&p.maskB
	for j := 0; j < bijectionRounds; j += 2 {
		l ^= mix64(r^p.keys[j]) & p.maskA
		r ^= mix64(l^p.keys[j+1]) & p.maskB
	}
	return l<<p.b | r
}

// Run sets out[j] = At(i0+j) for every j. It passes four indices through the network side by
// side (independent chains the processor overlaps) and walks the few that leave [0, n)
// afterwards, for readers that decode runs of tiny records.
func (p *Bijection) Run(i0 uint64, out []uint64) {
	if p.n < 2 {
		for j := range out {
			out[j] = i0 + uint64(j)
		}
		return
	}
	b, ma, mb := p.b, p.maskA, p.maskB
	k0, k1, k2, k3 := p.keys[0], p.keys[1], p.keys[2], p.keys[3]
	j := 0
	for ; j+4 <= len(out); j += 4 {
		x := i0 + uint64(j)
		l0, r0 := x>>b, x&mb
		l1, r1 := (x+1)>>b, (x+1)&mb
		l2, r2 := (x+2)>>b, (x+2)&mb
		l3, r3 := (x+3)>>b, (x+3)&mb
		l0, l1, l2, l3 = l0^mix64(r0^k0)&ma, l1^mix64(r1^k0)&ma, l2^mix64(r2^k0)&ma, l3^mix64(r3^k0)&ma
		r0, r1, r2, r3 = r0^mix64(l0^k1)&mb, r1^mix64(l1^k1)&mb, r2^mix64(l2^k1)&mb, r3^mix64(l3^k1)&mb
		l0, l1, l2, l3 = l0^mix64(r0^k2)&ma, l1^mix64(r1^k2)&ma, l2^mix64(r2^k2)&ma, l3^mix64(r3^k2)&ma
		r0, r1, r2, r3 = r0^mix64(l0^k3)&mb, r1^mix64(l1^k3)&mb, r2^mix64(l2^k3)&mb, r3^mix64(l3^k3)&mb
		o := out[j : j+4 : j+4]
		o[0], o[1], o[2], o[3] = l0<<b|r0, l1<<b|r1, l2<<b|r2, l3<<b|r3
		for m, y := range o {
			for y >= p.n {
				y = p.pass(y)
			}
			o[m] = y
		}
	}
	for ; j < len(out); j++ {
		out[j] = p.At(i0 + uint64(j))
	}
}
