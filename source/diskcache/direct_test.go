package diskcache

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestDirectWriter writes files from aligned pieces (O_DIRECT), then pieces that are not
// (a short tail, a buffer off the alignment), and checks every byte lands in order.
func TestDirectWriter(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	page := func(n int) []byte {
		b := alignedBuf(n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	off := page(3 * directAlign)[1 : 1+directAlign] // aligned length, unaligned address
	require.NotZero(t, uintptr(unsafe.Pointer(&off[0]))%directAlign)
	for name, pieces := range map[string][][]byte{
		"aligned":              {page(1 << 20), page(1 << 20), page(directAlign)},
		"short tail":           {page(1 << 20), page(1 << 20), page(5000)},
		"unaligned then more":  {page(1 << 20), off, page(1 << 20), page(7)},
		"unaligned first":      {page(100), page(1 << 20)},
		"empty":                {},
		"one unaligned buffer": {page(1)},
	} {
		path := filepath.Join(t.TempDir(), "f.tmp")
		w, err := createTemp(path)
		require.NoError(t, err, name)
		t.Logf("%s: O_DIRECT %v", name, w.direct)
		for _, p := range pieces {
			n, err := w.Write(p)
			require.NoError(t, err, name)
			require.Equal(t, len(p), n, name)
		}
		require.NoError(t, w.Close(), name)
		got, err := os.ReadFile(path)
		require.NoError(t, err, name)
		require.True(t, bytes.Equal(bytes.Join(pieces, nil), got), name)
	}
}

func TestAlignedBuf(t *testing.T) {
	for _, n := range []int{1, 4095, 4096, 1 << 20} {
		b := alignedBuf(n)
		require.Len(t, b, n)
		require.Equal(t, n, cap(b))
		require.Zero(t, uintptr(unsafe.Pointer(&b[0]))%directAlign)
	}
}
