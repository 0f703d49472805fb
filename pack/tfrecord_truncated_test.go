package pack

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/internal/dstest"
)

// TestTFRecordTruncatedExactly: a file cut by 1 to 15 bytes, its last record of 0, 10 or 100
// bytes of data, is refused naming that record and its offset, the bytes it needs (header,
// data and CRC spelled out) and the bytes the file has from there, or, cut in the header,
// the least a record needs; the records before come back whole.
func TestTFRecordTruncatedExactly(t *testing.T) {
	for _, last := range []int{0, 10, 100} {
		recs := [][]byte{[]byte("first"), make([]byte, 33), make([]byte, last)}
		b := dstest.TFRecord(recs)
		at := 16 + 5 + 16 + 33 // the last record's offset
		for cut := 1; cut <= 15; cut++ {
			t.Run(fmt.Sprintf("last %d, cut %d", last, cut), func(t *testing.T) {
				p := filepath.Join(t.TempDir(), "cut.tfrecord")
				require.NoError(t, os.WriteFile(p, b[:len(b)-cut], 0o644))
				r, err := OpenTFRecord([]string{p})
				require.NoError(t, err)
				defer r.Close()
				got, err := readRecords(t, r)
				require.Error(t, err)
				assert.Len(t, got, 2, "the records before come back")
				need, have := 16+last, 16+last-cut
				var what string
				if have >= 12 {
					what = fmt.Sprintf("it needs %d bytes (a 12-byte header, %d bytes of data, a 4-byte data CRC) but the file has %d from there, %d short (it is truncated)",
						need, last, have, cut)
				} else {
					what = fmt.Sprintf("a record needs at least 16 bytes (a 12-byte header, its data, a 4-byte data CRC) but the file has %d from there, in the header (it is truncated)", have)
				}
				assert.Equal(t, fmt.Sprintf("%s: record 2 at byte %d: %s: the file is damaged or not a TFRecord file; recreate it or leave it out", p, at, what), err.Error())
			})
		}
	}
}
