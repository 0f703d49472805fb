package diskcache

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/internal/crc32c"
	"github.com/blockfs/blockfs/internal/odirect"
	"github.com/blockfs/blockfs/source"
)

// pages splits n bytes into aligned buffers of 1 MiB (the last one short), as the cache's
// pages are.
func pages(n int64) [][]byte {
	var bufs [][]byte
	for n > 0 {
		k := min(n, 1<<20)
		bufs = append(bufs, odirect.AlignedBuf(int(k)))
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
		err := b.Fill(context.Background(), source.FileID(id), 0, bufs, source.Read{})
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
	probe, err := odirect.OpenWith(true, func(extra int) (*os.File, error) {
		return os.OpenFile(filepath.Join(t.TempDir(), "probe"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|extra, 0o644)
	})
	require.NoError(t, err)
	if probe.Direct() {
		require.True(t, b.direct.Load(), "O_DIRECT reads still in use: the filesystem has O_DIRECT")
	}
	require.NoError(t, probe.Close())
	require.EqualValues(t, len(m.files), b.Stats().Hits)

	p := filepath.Join(subDir(dir), ns, fmt.Sprintf("1-%08x-%d.blk", crc32c.Checksum(m.files[1]), 2<<20))
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{^m.files[1][1<<20+3]}, 1<<20+3)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	_, err = whole(b, 1)
	require.ErrorIs(t, err, source.ErrUnavailable, "damaged, and the source is gone: an error")
	require.NoFileExists(t, p)
}
