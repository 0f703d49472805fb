package view

import (
	"path/filepath"
	"testing"

	"github.com/blockfs/blockfs/internal/dstest"
	"github.com/blockfs/blockfs/shuffle"
)

// FuzzOffsetMapping builds a small variable-length dataset from the fuzzer's bytes (record
// lengths, block size, order), and checks the position <-> byte offset mapping both ways:
// every record's first byte maps back to its position, and positions map to increasing
// offsets that end at the dataset's size.
func FuzzOffsetMapping(f *testing.F) {
	f.Add([]byte{3, 0, 7, 1, 250, 0, 0, 9}, uint16(64), uint8(2), uint64(1))
	f.Add([]byte{0, 0, 0, 1}, uint16(1), uint8(1), uint64(0))
	f.Add([]byte{255, 255, 128, 3, 3, 3, 3, 3, 3, 3, 3}, uint16(300), uint8(3), uint64(7))
	f.Fuzz(func(t *testing.T, lens []byte, blockSize uint16, mix uint8, seed uint64) {
		if len(lens) == 0 || len(lens) > 200 {
			return
		}
		lengths := make([]int, len(lens))
		for i, l := range lens {
			lengths[i] = int(l)
		}
		d := dstest.Variable(t, filepath.Join(t.TempDir(), "ds"), lengths, int64(blockSize)+16, false)
		opt := shuffle.Options{Seed: seed, Mode: shuffle.Full, Mix: int(mix%4) + 1}
		s := openSet(t, d.Dir, opt, 16*4096)
		e, err := s.Epoch(seed % 3)
		if err != nil {
			t.Fatal(err)
		}
		var prev uint64
		for pos := uint64(0); pos <= e.Records(); pos++ {
			off, err := e.byteOf(background(), pos)
			if err != nil {
				t.Fatal(err)
			}
			if off < prev {
				t.Fatalf("position %d at byte %d, before position %d's %d", pos, off, pos-1, prev)
			}
			prev = off
			if pos == e.Records() {
				if off != e.ds.Bytes() {
					t.Fatalf("the end is at %d, want %d", off, e.ds.Bytes())
				}
				break
			}
			next, _ := e.byteOf(background(), pos+1)
			if next == off {
				continue // an empty record owns no byte
			}
			back, skip, err := e.positionOf(background(), off)
			if err != nil {
				t.Fatal(err)
			}
			if back != pos || skip != 0 {
				t.Fatalf("byte %d maps to position %d+%d, want %d", off, back, skip, pos)
			}
			if last, skip, _ := e.positionOf(background(), next-1); last != pos || skip != next-1-off {
				t.Fatalf("byte %d maps to position %d+%d, want %d+%d", next-1, last, skip, pos, next-1-off)
			}
		}
	})
}
