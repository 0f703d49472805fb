package cache

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFillHitAllocs pins the hit path: a Fill of cached pages allocates nothing.
func TestFillHitAllocs(t *testing.T) {
	src := newSource(8 << 20)
	c, err := New(src, Options{Size: 16 << 20, PageSize: 1 << 20, Workers: 1})
	require.NoError(t, err)
	defer c.Close()
	p := make([]byte, 3<<20)
	require.NoError(t, c.Fill(bg, nil, 0, 1000, p))
	allocs := testing.AllocsPerRun(100, func() {
		if err := c.Fill(bg, nil, 0, 1000, p); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)
}

// BenchmarkFillHit reads 4 KiB records from cached pages, the path every read of a warm
// epoch takes.
func BenchmarkFillHit(b *testing.B) {
	src := newSource(8 << 20)
	c, err := New(src, Options{Size: 16 << 20, PageSize: 1 << 20, Workers: 1})
	require.NoError(b, err)
	defer c.Close()
	p := make([]byte, 4096)
	require.NoError(b, c.Fill(bg, nil, 0, 0, make([]byte, 8<<20)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := c.Fill(bg, nil, 0, int64(i%2000)*4096, p); err != nil {
			b.Fatal(err)
		}
	}
}
