package local_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/blockfs/blockfs/internal/dstest"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/source"
	"github.com/blockfs/blockfs/source/local"
)

var bg = context.Background()

// TestFillNeverShort: Fill fills every buffer or fails; a truncated file is source.ErrShort and
// a deleted one keeps its errno (ENOENT), each naming the file.
func TestFillNeverShort(t *testing.T) {
	d := dstest.Fixed(t, filepath.Join(t.TempDir(), "ds"), 10, 16, 64, false) // 4 per block
	ds, err := layout.Open(d.Dir)
	require.NoError(t, err)
	f := local.New(ds, false)
	buf := make([]byte, 64)
	require.NoError(t, f.Fill(bg, layout.DataFile(0), 0, [][]byte{buf[:10], buf[10:]}))
	assert.Equal(t, dstest.Record(0, 16), buf[:16])

	require.NoError(t, os.Truncate(filepath.Join(d.Dir, "blocks/000000.bin"), 40))
	err = f.Fill(bg, layout.DataFile(0), 0, [][]byte{buf})
	assert.ErrorIs(t, err, source.ErrShort)
	assert.ErrorContains(t, err, "000000.bin at offset 40")

	require.NoError(t, os.Remove(filepath.Join(d.Dir, "blocks/000001.bin")))
	err = f.Fill(bg, layout.DataFile(1), 0, [][]byte{buf})
	assert.ErrorIs(t, err, syscall.ENOENT)
	var se *source.Error
	require.True(t, errors.As(err, &se))
	assert.Equal(t, "open", se.Op)
}

// TestFillRefuses: a file the table does not have, a range past its end, and a cancelled
// context are errors before any I/O.
func TestFillRefuses(t *testing.T) {
	d := dstest.Fixed(t, filepath.Join(t.TempDir(), "ds"), 10, 16, 64, false)
	ds, err := layout.Open(d.Dir)
	require.NoError(t, err)
	f := local.New(ds, false)
	assert.ErrorIs(t, f.Fill(bg, layout.IDsFile(0), 0, [][]byte{make([]byte, 8)}), source.ErrNoFile, "no ids file")
	assert.ErrorIs(t, f.Fill(bg, layout.DataFile(0), 60, [][]byte{make([]byte, 8)}), source.ErrNoFile, "past the end")
	ctx, cancel := context.WithCancel(bg)
	cancel()
	assert.ErrorIs(t, f.Fill(ctx, layout.DataFile(0), 0, [][]byte{make([]byte, 8)}), context.Canceled)
	assert.EqualValues(t, 64, f.Size(layout.DataFile(0)))
	assert.EqualValues(t, 0, f.Size(layout.IDsFile(0)))
}

// TestDirectIO reads with O_DIRECT into page-aligned buffers, including a short tail page, and
// gets the same bytes as a buffered read; unaligned requests fall back.
func TestDirectIO(t *testing.T) {
	d := dstest.Variable(t, filepath.Join(t.TempDir(), "ds"), []int{10000, 7777}, 1<<20, false)
	ds, err := layout.Open(d.Dir)
	require.NoError(t, err)
	size := int(ds.BlockBytes(0))
	want := make([]byte, size)
	require.NoError(t, local.New(ds, false).Fill(bg, layout.DataFile(0), 0, [][]byte{want}))
	arena, err := unix.Mmap(-1, 0, 3*4096+8192, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	require.NoError(t, err)
	defer unix.Munmap(arena)
	f := local.New(ds, true)
	// Pages 0-3 as separate iovecs; the last one short, with room to the slot's end.
	bufs := [][]byte{arena[0:4096], arena[4096:8192], arena[8192:12288], arena[12288 : 12288+size-12288 : 12288+8192]}
	require.NoError(t, f.Fill(bg, layout.DataFile(0), 0, bufs))
	assert.True(t, bytes.Equal(want, arena[:size]))
	// Unaligned offset and buffer: served by the buffered path.
	odd := make([]byte, 100)
	require.NoError(t, f.Fill(bg, layout.DataFile(0), 9999, [][]byte{odd}))
	assert.Equal(t, want[9999:10099], odd)
	// A truncated file is still an error, not a short read.
	require.NoError(t, os.Truncate(filepath.Join(d.Dir, "blocks/000000.bin"), 9000))
	assert.ErrorIs(t, f.Fill(bg, layout.DataFile(0), 0, bufs), source.ErrShort)
}

// TestFlatExtents: a file served in place is read at its blocks' offsets past the header.
func TestFlatExtents(t *testing.T) {
	p := filepath.Join(t.TempDir(), "raw.bin")
	data := make([]byte, 1000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	require.NoError(t, os.WriteFile(p, data, 0o644))
	ds, err := layout.OpenFlat(p, layout.FlatOptions{RecordSize: 10, BlockSize: 300})
	require.NoError(t, err)
	f := local.New(ds, false)
	buf := make([]byte, 100)
	require.NoError(t, f.Fill(bg, layout.DataFile(2), 0, [][]byte{buf}))
	assert.Equal(t, data[600:700], buf)
	assert.EqualValues(t, 100, f.Size(layout.DataFile(3)))
	assert.ErrorIs(t, f.Fill(bg, layout.OffsetsFile(0), 0, [][]byte{buf[:8]}), source.ErrNoFile)
}
