package local_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/blockfs/blockfs/internal/dstest"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/source"
	"github.com/blockfs/blockfs/source/local"
)

var bg = context.Background()

// table is a source.Table without identities: reads are not checked against the file as it was.
type table map[source.FileID]source.Extent

func (t table) Extent(id source.FileID) (source.Extent, bool) {
	e, ok := t[id]
	return e, ok
}

// TestFillNeverShort: Fill fills every buffer or fails; a file shorter than the table says is
// source.ErrShort (a table without identities: with them the change is caught first) and a
// deleted one keeps its errno (ENOENT), each naming the file.
func TestFillNeverShort(t *testing.T) {
	d := dstest.Fixed(t, filepath.Join(t.TempDir(), "ds"), 10, 16, 64, false) // 4 per block
	ds, err := local.Open(d.Dir)
	require.NoError(t, err)
	f := local.New(ds, false)
	buf := make([]byte, 64)
	require.NoError(t, f.Fill(bg, layout.DataFile(0), 0, [][]byte{buf[:10], buf[10:]}, source.Read{}))
	assert.Equal(t, dstest.Record(0, 16), buf[:16])

	p0 := filepath.Join(d.Dir, "blocks/000000.bin")
	require.NoError(t, os.Truncate(p0, 40))
	err = local.New(table{0: {Name: p0, Size: 64}}, false).Fill(bg, 0, 0, [][]byte{buf}, source.Read{})
	assert.ErrorIs(t, err, source.ErrShort)
	assert.ErrorContains(t, err, "000000.bin at offset 40")
	err = f.Fill(bg, layout.DataFile(0), 0, [][]byte{buf}, source.Read{})
	assert.ErrorIs(t, err, source.ErrChanged)
	assert.ErrorContains(t, err, "000000.bin: changed since the dataset was opened: its size is 40 bytes, was 64")

	require.NoError(t, os.Remove(filepath.Join(d.Dir, "blocks/000001.bin")))
	err = f.Fill(bg, layout.DataFile(1), 0, [][]byte{buf}, source.Read{})
	assert.ErrorIs(t, err, syscall.ENOENT)
	var se *source.Error
	require.True(t, errors.As(err, &se))
	assert.Equal(t, "open", se.Op)
}

// TestFillRefuses: a file the table does not have, a range past its end, and a cancelled
// context are errors before any I/O.
func TestFillRefuses(t *testing.T) {
	d := dstest.Fixed(t, filepath.Join(t.TempDir(), "ds"), 10, 16, 64, false)
	ds, err := local.Open(d.Dir)
	require.NoError(t, err)
	f := local.New(ds, false)
	assert.ErrorIs(t, f.Fill(bg, layout.IDsFile(0), 0, [][]byte{make([]byte, 8)}, source.Read{}), source.ErrNoFile, "no ids file")
	assert.ErrorIs(t, f.Fill(bg, layout.DataFile(0), 60, [][]byte{make([]byte, 8)}, source.Read{}), source.ErrNoFile, "past the end")
	ctx, cancel := context.WithCancel(bg)
	cancel()
	assert.ErrorIs(t, f.Fill(ctx, layout.DataFile(0), 0, [][]byte{make([]byte, 8)}, source.Read{}), context.Canceled)
	assert.EqualValues(t, 64, f.Size(layout.DataFile(0)))
	assert.EqualValues(t, 0, f.Size(layout.IDsFile(0)))
}

// TestDirectIO reads with O_DIRECT into page-aligned buffers, including a short tail page, and
// gets the same bytes as a buffered read; unaligned requests fall back.
func TestDirectIO(t *testing.T) {
	d := dstest.Variable(t, filepath.Join(t.TempDir(), "ds"), []int{10000, 7777}, 1<<20, false)
	ds, err := local.Open(d.Dir)
	require.NoError(t, err)
	size := int(ds.BlockBytes(0))
	want := make([]byte, size)
	require.NoError(t, local.New(ds, false).Fill(bg, layout.DataFile(0), 0, [][]byte{want}, source.Read{}))
	arena, err := unix.Mmap(-1, 0, 3*4096+8192, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	require.NoError(t, err)
	defer unix.Munmap(arena)
	f := local.New(ds, true)
	// Pages 0-3 as separate iovecs; the last one short, with room to the slot's end.
	bufs := [][]byte{arena[0:4096], arena[4096:8192], arena[8192:12288], arena[12288 : 12288+size-12288 : 12288+8192]}
	require.NoError(t, f.Fill(bg, layout.DataFile(0), 0, bufs, source.Read{}))
	assert.True(t, bytes.Equal(want, arena[:size]))
	// Unaligned offset and buffer: served by the buffered path.
	odd := make([]byte, 100)
	require.NoError(t, f.Fill(bg, layout.DataFile(0), 9999, [][]byte{odd}, source.Read{}))
	assert.Equal(t, want[9999:10099], odd)
	// A truncated file is still an error, not a short read.
	require.NoError(t, os.Truncate(filepath.Join(d.Dir, "blocks/000000.bin"), 9000))
	assert.ErrorIs(t, f.Fill(bg, layout.DataFile(0), 0, bufs, source.Read{}), source.ErrChanged)
}

// TestChangedUnderneath: a file replaced, re-packed, rewritten in place, grown, turned into a
// symlink to a file elsewhere or into a FIFO is refused with source.ErrChanged saying what
// changed, at once (a FIFO never blocks), and never read.
func TestChangedUnderneath(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(outside, bytes.Repeat([]byte("s"), 64), 0o600))
	cases := []struct {
		name   string
		change func(t *testing.T, p string)
		want   string
	}{
		{"replaced", func(t *testing.T, p string) {
			require.NoError(t, os.WriteFile(p+".new", bytes.Repeat([]byte("x"), 64), 0o644))
			require.NoError(t, os.Rename(p+".new", p))
		}, "another file is in its place"},
		{"appended to", func(t *testing.T, p string) {
			f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.Write([]byte("more"))
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}, "its size is 68 bytes, was 64"},
		{"rewritten in place", func(t *testing.T, p string) {
			require.NoError(t, os.WriteFile(p, bytes.Repeat([]byte("y"), 64), 0o644))
			future := time.Now().Add(time.Hour)
			require.NoError(t, os.Chtimes(p, future, future))
		}, "it was modified"},
		{"a symlink to a file elsewhere", func(t *testing.T, p string) {
			require.NoError(t, os.Remove(p))
			require.NoError(t, os.Symlink(outside, p))
		}, "it is now a symbolic link"},
		{"a FIFO", func(t *testing.T, p string) {
			require.NoError(t, os.Remove(p))
			require.NoError(t, syscall.Mkfifo(p, 0o644))
		}, "it is no longer a regular file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := dstest.Fixed(t, filepath.Join(t.TempDir(), "ds"), 10, 16, 64, false)
			ds, err := local.Open(d.Dir)
			require.NoError(t, err)
			c.change(t, filepath.Join(d.Dir, "blocks/000001.bin"))
			for _, direct := range []bool{false, true} {
				buf := make([]byte, 64)
				done := make(chan error, 1)
				go func() { done <- local.New(ds, direct).Fill(bg, layout.DataFile(1), 0, [][]byte{buf}, source.Read{}) }()
				select {
				case err = <-done:
				case <-time.After(5 * time.Second):
					t.Fatal("Fill blocked")
				}
				assert.ErrorIs(t, err, source.ErrChanged)
				assert.ErrorContains(t, err, c.want)
				assert.NotContains(t, string(buf), "s", "no byte of the file elsewhere")
			}
			buf := make([]byte, 64)
			assert.NoError(t, local.New(ds, false).Fill(bg, layout.DataFile(0), 0, [][]byte{buf}, source.Read{}), "other files are fine")
		})
	}
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
	require.NoError(t, f.Fill(bg, layout.DataFile(2), 0, [][]byte{buf}, source.Read{}))
	assert.Equal(t, data[600:700], buf)
	assert.EqualValues(t, 100, f.Size(layout.DataFile(3)))
	assert.ErrorIs(t, f.Fill(bg, layout.OffsetsFile(0), 0, [][]byte{buf[:8]}, source.Read{}), source.ErrNoFile)
}

// TestStreamingKeepsResidentSet: NewStreaming reads the files it is told to buffered, so the
// kernel's page cache keeps them, and the others with O_DIRECT, so none of their pages is
// cached (mincore of the files; skipped where the filesystem has no O_DIRECT, as tmpfs).
func TestStreamingKeepsResidentSet(t *testing.T) {
	d := dstest.Fixed(t, filepath.Join(t.TempDir(), "ds"), 4*256, 4096, 1<<20, false) // 4 blocks of 1 MiB
	ds, err := local.Open(d.Dir)
	require.NoError(t, err)
	require.Equal(t, 4, ds.Blocks())
	paths := make([]string, ds.Blocks())
	for b := range paths {
		paths[b] = ds.Path(layout.DataFile(b))
		fd, err := unix.Open(paths[b], unix.O_RDONLY|unix.O_DIRECT, 0)
		if err == unix.EINVAL {
			t.Skip("no O_DIRECT on this filesystem")
		}
		require.NoError(t, err)
		require.NoError(t, unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED))
		unix.Close(fd)
	}
	f := local.NewStreaming(ds, func(id source.FileID) bool { return layout.BlockOfFile(id) >= 2 })
	arena, err := unix.Mmap(-1, 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	require.NoError(t, err)
	defer unix.Munmap(arena)
	want := make([]byte, 1<<20)
	for b := range paths {
		require.NoError(t, f.Fill(bg, layout.DataFile(b), 0, [][]byte{arena}, source.Read{}))
		raw, err := os.ReadFile(paths[b])
		require.NoError(t, err)
		copy(want, raw)
		require.True(t, bytes.Equal(want, arena), "block %d", b)
		require.NoError(t, unix.Fadvise(mustOpen(t, paths[b]), 0, 0, unix.FADV_DONTNEED)) // ReadFile's own pages
	}
	// ReadFile cached every file and the advice dropped them; read again through f only.
	for b := range paths {
		require.NoError(t, f.Fill(bg, layout.DataFile(b), 0, [][]byte{arena}, source.Read{}))
	}
	for b, p := range paths {
		n := cachedPages(t, p)
		if b < 2 {
			assert.EqualValues(t, 256, n, "block %d is resident: every page cached", b)
		} else {
			assert.Zero(t, n, "block %d streams: no page cached", b)
		}
	}
}

func mustOpen(t *testing.T, p string) int {
	fd, err := unix.Open(p, unix.O_RDONLY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// cachedPages returns how many 4 KiB pages of the file at p are in the kernel's page cache.
func cachedPages(t *testing.T, p string) int {
	n := 0
	for _, in := range cachedVec(t, p) {
		if in {
			n++
		}
	}
	return n
}

// cachedVec returns, for each 4 KiB page of the file at p, whether it is in the page cache.
func cachedVec(t *testing.T, p string) []bool {
	st, err := os.Stat(p)
	require.NoError(t, err)
	return dstest.CachedPages(t, p, 0, st.Size())
}

// TestStreamingUnaligned: a file served in place whose blocks are off the 4 KiB grid (a
// 100-byte header) cannot be read with O_DIRECT; its streamed blocks are read buffered and
// dropped from the page cache behind the read, so only the resident blocks stay there.
func TestStreamingUnaligned(t *testing.T) {
	p := filepath.Join(t.TempDir(), "flat.bin")
	raw := make([]byte, 100+4<<20)
	for i := range raw {
		raw[i] = byte(i * 7)
	}
	require.NoError(t, os.WriteFile(p, raw, 0o644))
	ds, err := layout.OpenFlat(p, layout.FlatOptions{RecordSize: 4096, BlockSize: 1 << 20, Offset: 100})
	require.NoError(t, err)
	require.Equal(t, 4, ds.Blocks())
	fd := mustOpen(t, p)
	require.NoError(t, unix.Fsync(fd))
	require.NoError(t, unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED))
	if cachedPages(t, p) != 0 {
		t.Skip("this filesystem keeps its pages (tmpfs)")
	}
	f := local.NewStreaming(ds, func(id source.FileID) bool { return layout.BlockOfFile(id) >= 2 })
	buf := make([]byte, 1<<20)
	for b := 0; b < 4; b++ {
		require.NoError(t, f.Fill(bg, layout.DataFile(b), 0, [][]byte{buf}, source.Read{}))
		require.True(t, bytes.Equal(raw[100+b<<20:100+(b+1)<<20], buf), "block %d", b)
	}
	vec := cachedVec(t, p)
	var resident, streamed int
	for pg, in := range vec {
		switch {
		case !in:
		case int64(pg)*4096 < 100+2<<20:
			resident++
		default:
			streamed++
		}
	}
	assert.GreaterOrEqual(t, resident, 2*256, "the resident blocks stay cached")
	assert.LessOrEqual(t, streamed, 1, "the streamed blocks leave at most the page they share with a resident one")
}
