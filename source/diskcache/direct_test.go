package diskcache

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/internal/crc32c"
	"github.com/blockfs/blockfs/source"
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
	// Where the filesystem has O_DIRECT (the CI machine's disk does), the aligned writes must
	// use it.
	probe, err := createTemp(filepath.Join(t.TempDir(), "probe"))
	require.NoError(t, err)
	haveDirect := probe.direct
	require.NoError(t, probe.Close())
	t.Logf("O_DIRECT on %s: %v", os.TempDir(), haveDirect)
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
		for i, p := range pieces {
			n, err := w.Write(p)
			require.NoError(t, err, name)
			require.Equal(t, len(p), n, name)
			if haveDirect && i == 0 {
				require.Equal(t, aligned(p), w.direct, "%s: O_DIRECT for an aligned first write, buffered after one that is not", name)
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
		b := alignedBuf(n)
		require.Len(t, b, n)
		require.Equal(t, n, cap(b))
		require.Zero(t, uintptr(unsafe.Pointer(&b[0]))%directAlign)
	}
}

// pages splits n bytes into aligned buffers of 1 MiB (the last one short), as the cache's
// pages are.
func pages(n int64) [][]byte {
	var bufs [][]byte
	for n > 0 {
		k := min(n, 1<<20)
		bufs = append(bufs, alignedBuf(int(k)))
		n -= k
	}
	return bufs
}

// TestDirectReads reads whole cached files into page-aligned buffers with Options.Direct, as
// the readahead does: exact bytes from the copy written with O_DIRECT, in another mount with
// the source gone, and a damaged copy is still never served.
func TestDirectReads(t *testing.T) {
	dir := t.TempDir()
	m := newMem(3<<20+17, 2<<20, 3*4096, 4097)
	openDirect := func() *Blocks {
		b, err := Open(m, m, Options{Dir: dir, Size: 64 << 20, Namespace: ns, Direct: true, Logf: t.Logf})
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		return b
	}
	whole := func(b *Blocks, id int) ([]byte, error) {
		bufs := pages(int64(len(m.files[id])))
		err := b.Fill(context.Background(), source.FileID(id), 0, bufs)
		return bytes.Join(bufs, nil), err
	}
	b := openDirect()
	for id := range m.files {
		got, err := whole(b, id)
		require.NoError(t, err)
		require.True(t, bytes.Equal(got, m.files[id]), "file %d, fetched", id)
	}
	require.NoError(t, b.Close())

	m.fail.Store(true)
	b = openDirect()
	for id := range m.files {
		got, err := whole(b, id)
		require.NoError(t, err)
		require.True(t, bytes.Equal(got, m.files[id]), "file %d, from disk", id)
	}
	probe, err := createTemp(filepath.Join(t.TempDir(), "probe"))
	require.NoError(t, err)
	if probe.direct {
		require.True(t, b.direct.Load(), "O_DIRECT reads still in use: the filesystem has O_DIRECT")
	}
	require.NoError(t, probe.Close())
	require.EqualValues(t, len(m.files), b.Stats().Hits)

	p := filepath.Join(dir, ns, fmt.Sprintf("1-%08x-%d.blk", crc32c.Checksum(m.files[1]), 2<<20))
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{^m.files[1][1<<20+3]}, 1<<20+3)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	_, err = whole(b, 1)
	require.ErrorIs(t, err, source.ErrUnavailable, "damaged, and the source is gone: an error")
	require.NoFileExists(t, p)
}
