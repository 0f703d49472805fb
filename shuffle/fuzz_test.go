package shuffle

import "testing"

// FuzzOrder: for any block counts and options, the order visits every record exactly once, and
// the same inputs give the same order.
func FuzzOrder(f *testing.F) {
	f.Add([]byte{4, 4, 4, 3}, uint64(42), uint64(0), uint8(0), uint8(1))
	f.Add([]byte{1}, uint64(0), uint64(9), uint8(1), uint8(1))
	f.Add([]byte{0, 5, 200, 1, 1, 7}, uint64(7), uint64(3), uint8(0), uint8(4))
	f.Fuzz(func(t *testing.T, raw []byte, seed, epoch uint64, mode, mix uint8) {
		if len(raw) == 0 || len(raw) > 64 {
			return
		}
		counts := make([]uint64, 0, len(raw))
		var total uint64
		for _, c := range raw {
			if c == 0 {
				continue // blocks have at least one record
			}
			counts = append(counts, uint64(c))
			total += uint64(c)
		}
		if len(counts) == 0 {
			return
		}
		opt := Options{Seed: seed, Epoch: epoch, Mode: Mode(mode % 3), Mix: int(mix%8) + 1}
		if opt.Mode != Full {
			opt.Mix = 1
		}
		a, err := New(counts, opt)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := New(counts, opt)
		start := make([]uint64, len(counts)+1)
		for i, c := range counts {
			start[i+1] = start[i] + c
		}
		seen := make([]bool, total)
		for p := uint64(0); p < a.Len(); p++ {
			blk, l := a.At(p)
			blk2, l2 := b.At(p)
			if blk != blk2 || l != l2 {
				t.Fatalf("position %d differs between two orders of the same inputs", p)
			}
			if l >= counts[blk] {
				t.Fatalf("position %d: record %d of block %d holds %d", p, l, blk, counts[blk])
			}
			id := start[blk] + l
			if seen[id] {
				t.Fatalf("record %d twice", id)
			}
			seen[id] = true
		}
		if a.Len() != total {
			t.Fatalf("%d positions for %d records", a.Len(), total)
		}
	})
}
