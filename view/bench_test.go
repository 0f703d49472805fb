package view

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/internal/dstest"
	"github.com/blockfs/blockfs/shuffle"
	"github.com/blockfs/blockfs/source/local"
)

// benchFile opens kind k of epoch 1 of a dataset of n records of rs bytes, in a cache that
// holds it all, and reads it once so that the benchmark measures the read path, not the disk.
func benchFile(b *testing.B, n, rs int64, pre bool, k Kind) File {
	d := dstest.Fixed(b, filepath.Join(b.TempDir(), "d"), n, rs, 1<<16, pre)
	ds, err := local.Open(d.Dir)
	if err != nil {
		b.Fatal(err)
	}
	s := newSet(b, ds, nil, cache.Options{Size: 256 << 20, PageSize: 4096, MaxRead: 1 << 20}, shuffle.Options{Seed: 3, Mix: 2})
	e, err := s.Epoch(1)
	if err != nil {
		b.Fatal(err)
	}
	f, err := e.Open(bg, k, e.All())
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, f.Size())
	if _, err := f.ReadAt(buf, 0); err != nil {
		b.Fatal(err)
	}
	return f
}

// BenchmarkRead reads a cached epoch file in 1 MiB reads: small fixed records (the run
// copiers, generic and not), records a read hands out as pages (the gather), and ids stored
// or computed.
func BenchmarkRead(b *testing.B) {
	for _, c := range []struct {
		rs   int64
		pre  bool
		kind Kind
	}{{8, true, Data}, {16, true, Data}, {24, true, Data}, {4096, true, Data}, {16, true, IDs}, {16, false, IDs}} {
		b.Run(fmt.Sprintf("rs%d-pre%v-kind%d", c.rs, c.pre, c.kind), func(b *testing.B) {
			f := benchFile(b, (4<<20)/c.rs, c.rs, c.pre, c.kind)
			buf := make([]byte, 1<<20)
			b.SetBytes(int64(len(buf)))
			b.ResetTimer()
			off := int64(0)
			for range b.N {
				if off+int64(len(buf)) > f.Size() {
					off = 0
				}
				if _, err := f.ReadAt(buf, off); err != nil {
					b.Fatal(err)
				}
				off += int64(len(buf))
			}
		})
	}
}
