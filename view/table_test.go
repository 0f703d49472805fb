package view

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// readTable gives the bytes of the whole table at any offset and length, in chunks or not.
func TestReadTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, width := range []int{2, 8} {
		const values = 3*tableChunk + 17
		size := int64(values * width)
		want := make([]byte, size)
		for i := range values {
			v := uint64(i)*2654435761 + 1
			if width == 2 {
				binary.LittleEndian.PutUint16(want[2*i:], uint16(v))
			} else {
				binary.LittleEndian.PutUint64(want[8*i:], v)
			}
		}
		fill := func(first uint64, vals []uint64) error {
			require.LessOrEqual(t, len(vals), tableChunk)
			for j := range vals {
				vals[j] = (first+uint64(j))*2654435761 + 1
			}
			return nil
		}
		for range 300 {
			off := rng.Int64N(size + 10)
			buf := make([]byte, rng.IntN(int(size)/2+1))
			n, err := readTable(buf, off, size, width, fill)
			require.NoError(t, err)
			end := min(off+int64(len(buf)), size)
			if off >= size {
				require.Zero(t, n)
				continue
			}
			require.Equal(t, int(end-off), n)
			require.Equal(t, want[off:end], buf[:n], "width %d off %d len %d", width, off, len(buf))
		}
	}
}
