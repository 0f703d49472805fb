package shuffle

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBijectionIsPermutation checks that At is a permutation of [0, n), for every n up to 300 (odd and even bit counts, powers of two and one past them)
// and a few keys.
func TestBijectionIsPermutation(t *testing.T) {
	for n := uint64(1); n <= 300; n++ {
		for key := uint64(0); key < 3; key++ {
			p := NewBijection(n, Derive(key, DomainWindow, 0, n))
			seen := make([]bool, n)
			for i := uint64(0); i < n; i++ {
				x := p.At(i)
				require.Less(t, x, n)
				require.False(t, seen[x], "n %d key %d: %d hit twice", n, key, x)
				seen[x] = true
			}
		}
	}
}

func BenchmarkBijection(b *testing.B) {
	p := NewBijection(60_000_000, 7)
	var s uint64
	for i := 0; i < b.N; i++ {
		s += p.At(uint64(i) & (1<<25 - 1))
	}
	sink = s
}

var sink uint64

func BenchmarkBijectionRun(b *testing.B) {
	p := NewBijection(60_000_000, 7)
	out := make([]uint64, 4096)
	for i := 0; i < b.N; i += len(out) {
		p.Run(uint64(i)&(1<<25-1), out)
	}
}

func TestBijectionRun(t *testing.T) {
	for _, n := range []uint64{1, 2, 3, 7, 100, 1000, 4097} {
		p := NewBijection(n, 99)
		for _, i0 := range []uint64{0, 1, n / 2} {
			out := make([]uint64, n-i0)
			p.Run(i0, out)
			for j, x := range out {
				require.Equal(t, p.At(i0+uint64(j)), x)
			}
		}
	}
}
