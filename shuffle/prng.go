// Package shuffle computes the record order of an epoch: a pure function of the block record
// counts, the seed, the epoch, the mode and the mix. docs/SHUFFLE.md specifies the algorithm
// exactly enough to reimplement it; the golden test pins it.
package shuffle

// golden is the SplitMix64 increment (2^64 / phi, odd).
const golden = 0x9E3779B97F4A7C15

// Domains separate the random streams derived from one seed.
const (
	DomainBlockOrder  = 1 // the order of blocks in an epoch
	DomainWindow      = 2 // the permutation of the records of one window
	DomainPackAssign  = 3 // pack: which block each input record goes to
	DomainPackInBlock = 4 // pack: the order of records inside a packed block
	DomainReference   = 5 // blockfs order --stats: the uniform shuffle of the reference row
)

// mix64 is the SplitMix64 output function (Stafford's Mix13 variant).
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// Derive returns the starting state of the stream for (seed, domain, epoch, index):
//
//	h = mix64(seed + golden)
//	h = mix64((h ^ domain) + golden)
//	h = mix64((h ^ epoch) + golden)
//	h = mix64((h ^ index) + golden)
//
// with all arithmetic modulo 2^64.
func Derive(seed, domain, epoch, index uint64) uint64 {
	h := mix64(seed + golden)
	for _, v := range [...]uint64{domain, epoch, index} {
		h = mix64((h ^ v) + golden)
	}
	return h
}

// RNG is a SplitMix64 generator. The zero value is a valid generator with state 0.
type RNG struct{ state uint64 }

// NewRNG returns a generator whose state starts at state (usually a Derive result).
func NewRNG(state uint64) *RNG { return &RNG{state: state} }

// Uint64 advances the state by golden and returns mix64 of it.
func (r *RNG) Uint64() uint64 {
	r.state += golden
	return mix64(r.state)
}

// Below returns a uniform integer in [0, n) by rejection: draws below (2^64 mod n) are
// discarded, then the draw is reduced modulo n. n must be at least 1.
func (r *RNG) Below(n uint64) uint64 {
	threshold := -n % n // (2^64 - n) mod n == 2^64 mod n
	for {
		x := r.Uint64()
		if x >= threshold {
			return x % n
		}
	}
}

// Permutation returns a uniformly random permutation of [0, n) as uint32s by Fisher-Yates,
// from the last index down: for i = n-1 .. 1, j = Below(i+1), swap(a[i], a[j]).
func Permutation(n int, r *RNG) []uint32 {
	a := make([]uint32, n)
	for i := range a {
		a[i] = uint32(i)
	}
	for i := n - 1; i > 0; i-- {
		j := r.Below(uint64(i + 1))
		a[i], a[j] = a[j], a[i]
	}
	return a
}
