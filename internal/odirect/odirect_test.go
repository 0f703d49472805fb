package odirect

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
		b := AlignedBuf(n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	off := page(3 * Align)[1 : 1+Align] // aligned length, unaligned address
	require.NotZero(t, uintptr(unsafe.Pointer(&off[0]))%Align)
	// Where the filesystem has O_DIRECT (the CI machine's disk does), the aligned writes must
	// use it.
	probe, err := openFile(filepath.Join(t.TempDir(), "probe"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, true)
	require.NoError(t, err)
	haveDirect := probe.direct
	require.NoError(t, probe.Close())
	t.Logf("O_DIRECT on %s: %v", os.TempDir(), haveDirect)
	for name, pieces := range map[string][][]byte{
		"aligned":              {page(1 << 20), page(1 << 20), page(Align)},
		"short tail":           {page(1 << 20), page(1 << 20), page(5000)},
		"unaligned then more":  {page(1 << 20), off, page(1 << 20), page(7)},
		"unaligned first":      {page(100), page(1 << 20)},
		"empty":                {},
		"one unaligned buffer": {page(1)},
	} {
		path := filepath.Join(t.TempDir(), "f.tmp")
		w, err := openFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, true)
		require.NoError(t, err, name)
		for i, p := range pieces {
			n, err := w.Write(p)
			require.NoError(t, err, name)
			require.Equal(t, len(p), n, name)
			if haveDirect && i == 0 {
				require.Equal(t, Aligned(p), w.direct, "%s: O_DIRECT for an aligned first write, buffered after one that is not", name)
			}
		}
		require.NoError(t, w.Close(), name)
		got, err := os.ReadFile(path)
		require.NoError(t, err, name)
		require.True(t, bytes.Equal(bytes.Join(pieces, nil), got), name)
	}
}

func TestAlignedBuf(t *testing.T) {
	for _, n := range []int{1, 4095, 4096, 1 << 20} {
		b := AlignedBuf(n)
		require.Len(t, b, n)
		require.Equal(t, n, cap(b))
		require.Zero(t, uintptr(unsafe.Pointer(&b[0]))%Align)
	}
}

// openFile opens path with flag (and mode 0644 if it creates it), adding O_DIRECT when direct
// is set and the filesystem allows it.
func openFile(path string, flag int, direct bool) (*File, error) {
	return OpenWith(direct, func(extra int) (*os.File, error) {
		return os.OpenFile(path, flag|extra, 0o644)
	})
}
