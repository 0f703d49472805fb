package diskcache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/internal/crc32c"
	"github.com/blockfs/blockfs/source"
)

// memSource is a table and a source of files in memory that counts its Fills and can fail.
type memSource struct {
	files [][]byte
	fills atomic.Int64
	fail  atomic.Bool
}

func newMem(sizes ...int) *memSource {
	r := rand.New(rand.NewPCG(1, 2))
	m := &memSource{}
	for _, n := range sizes {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		m.files = append(m.files, b)
	}
	return m
}

func (m *memSource) Extent(id source.FileID) (source.Extent, bool) {
	if int(id) >= len(m.files) {
		return source.Extent{}, false
	}
	f := m.files[id]
	return source.Extent{Name: fmt.Sprint(id), Size: int64(len(f)),
		Ident: source.Identity{Size: int64(len(f)), CRC32C: crc32c.Checksum(f), HasCRC: true}}, true
}

func (m *memSource) Size(id source.FileID) int64 { e, _ := m.Extent(id); return e.Size }

func (m *memSource) Fill(ctx context.Context, id source.FileID, off int64, bufs [][]byte, how source.Read) error {
	m.fills.Add(1)
	if m.fail.Load() {
		return &source.Error{Op: "get", Name: fmt.Sprint(id), Off: off, Err: source.ErrUnavailable}
	}
	for _, p := range bufs {
		off += int64(copy(p, m.files[id][off:]))
	}
	return nil
}

const ns = "0123456789abcdef0123456789abcdef"

func open(t *testing.T, m *memSource, dir string, size int64) *Blocks {
	t.Helper()
	var logs []string
	var mu sync.Mutex
	b, err := Open(m, m, Options{Dir: dir, Size: size, Namespace: ns, Logf: func(f string, a ...any) {
		mu.Lock()
		logs = append(logs, fmt.Sprintf(f, a...))
		mu.Unlock()
	}})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return b
}

// read fills n bytes of file id from off in pieces of 3 buffers.
func read(b *Blocks, id source.FileID, off, n int64) ([]byte, error) {
	out := make([]byte, n)
	bufs := [][]byte{out[:n/3], out[n/3 : 2*n/3], out[2*n/3:]}
	return out, b.Fill(context.Background(), id, off, bufs, source.Read{})
}

func TestWholeAndPartReuseAcrossOpens(t *testing.T) {
	dir := t.TempDir()
	m := newMem(3<<20+17, 100, 5<<20)
	b := open(t, m, dir, 64<<20)
	got, err := read(b, 0, 0, int64(len(m.files[0])))
	require.NoError(t, err)
	require.True(t, bytes.Equal(got, m.files[0]))
	// Part of a file not cached: the whole file is kept, the part returned.
	got, err = read(b, 2, 1<<20+5, 2<<20)
	require.NoError(t, err)
	require.True(t, bytes.Equal(got, m.files[2][1<<20+5:3<<20+5]))
	require.NoError(t, b.Close())

	// Another mount: everything from disk, the source not asked (it fails if it is).
	m.fail.Store(true)
	b = open(t, m, dir, 64<<20)
	before := m.fills.Load()
	for _, c := range []struct{ id, off, n int64 }{{0, 0, 3<<20 + 17}, {0, 7, 1000}, {2, 0, 5 << 20}, {2, 5<<20 - 9, 9}} {
		got, err := read(b, source.FileID(c.id), c.off, c.n)
		require.NoError(t, err, "%v", c)
		require.True(t, bytes.Equal(got, m.files[c.id][c.off:c.off+c.n]), "%v", c)
	}
	require.Equal(t, before, m.fills.Load())
	_, err = read(b, 1, 0, 100) // never fetched: the source's error
	require.ErrorIs(t, err, source.ErrUnavailable)
	st := b.Stats()
	require.EqualValues(t, 4, st.Hits)
	require.EqualValues(t, 2, st.Files)
}

func TestDamagedCopyIsNeverServed(t *testing.T) {
	dir := t.TempDir()
	m := newMem(2<<20, 4096)
	b := open(t, m, dir, 64<<20)
	for id := range 2 {
		_, err := read(b, source.FileID(id), 0, int64(len(m.files[id])))
		require.NoError(t, err)
	}
	files, _ := filepath.Glob(filepath.Join(subDir(dir), ns, "*.blk"))
	require.Len(t, files, 2)
	for _, damage := range []func(p string){
		func(p string) { // a flipped byte
			f, _ := os.OpenFile(p, os.O_RDWR, 0)
			_, _ = f.WriteAt([]byte{0xff ^ m.files[0][12345]}, 12345)
			f.Close()
		},
		func(p string) { _ = os.Truncate(p, 1000) },
		func(p string) { _ = os.Remove(p) },
	} {
		damage(filepath.Join(subDir(dir), ns, fmt.Sprintf("0-%08x-%d.blk", crc32c.Checksum(m.files[0]), 2<<20)))
		// With the store there: fetched again, exact bytes, whole or in part.
		got, err := read(b, 0, 100, 1<<20)
		require.NoError(t, err)
		require.True(t, bytes.Equal(got, m.files[0][100:100+1<<20]))
		got, err = read(b, 0, 0, 2<<20)
		require.NoError(t, err)
		require.True(t, bytes.Equal(got, m.files[0]))
	}
	// With the store gone: an error, never the damaged bytes.
	m.fail.Store(true)
	p := filepath.Join(subDir(dir), ns, fmt.Sprintf("1-%08x-4096.blk", crc32c.Checksum(m.files[1])))
	data, _ := os.ReadFile(p)
	data[0] ^= 1
	require.NoError(t, os.WriteFile(p, data, 0o644))
	for _, n := range []int64{4096, 10} {
		_, err := read(b, 1, 0, n)
		require.ErrorIs(t, err, source.ErrUnavailable)
	}
	require.NoFileExists(t, p)
	require.GreaterOrEqual(t, b.Stats().Bad, int64(3))
}

func TestSizeBoundAndLeftovers(t *testing.T) {
	dir := t.TempDir()
	m := newMem(1<<20, 1<<20, 1<<20, 1<<20, 3<<20)
	// A crash's temporary file is deleted at open.
	require.NoError(t, open(t, m, dir, 2<<20+10).Close())
	tmp := filepath.Join(subDir(dir), ns, "0-00000000-5.blk.0123456789abcdef.tmp")
	require.NoError(t, os.MkdirAll(filepath.Dir(tmp), 0o700))
	require.NoError(t, os.WriteFile(tmp, []byte("half!"), 0o600))
	b := open(t, m, dir, 2<<20+10)
	require.NoFileExists(t, tmp)
	du := func() int64 {
		var n int64
		files, _ := filepath.Glob(filepath.Join(subDir(dir), "*", "*.blk"))
		for _, f := range files {
			st, _ := os.Stat(f)
			n += st.Size()
		}
		return n
	}
	for round := range 3 {
		for id := range 4 {
			got, err := read(b, source.FileID(id), 0, 1<<20)
			require.NoError(t, err)
			require.True(t, bytes.Equal(got, m.files[id]))
			require.LessOrEqual(t, du(), int64(2<<20+10), "round %d file %d", round, id)
		}
	}
	// A file larger than the bound passes through.
	got, err := read(b, 4, 0, 3<<20)
	require.NoError(t, err)
	require.True(t, bytes.Equal(got, m.files[4]))
	require.LessOrEqual(t, du(), int64(2<<20+10))
	st := b.Stats()
	require.EqualValues(t, 2, st.Files)
	require.Greater(t, st.Evicted, int64(5))
	require.NoError(t, b.Close())

	// A smaller bound at the next open evicts down to it; a deleted directory is no trouble.
	b = open(t, m, dir, 1<<20+10)
	require.EqualValues(t, 1, b.Stats().Files)
	require.NoError(t, b.Close())
	require.NoError(t, os.RemoveAll(dir))
	b = open(t, m, dir, 1<<20+10)
	_, err = read(b, 0, 0, 1<<20)
	require.NoError(t, err)
	require.EqualValues(t, 1, b.Stats().Files)
}

func TestBusyAndConcurrent(t *testing.T) {
	dir := t.TempDir()
	m := newMem(2<<20, 2<<20, 2<<20)
	b := open(t, m, dir, 64<<20)
	_, err := Open(m, m, Options{Dir: dir, Size: 1 << 20, Namespace: ns})
	require.ErrorIs(t, err, ErrBusy)
	var wg sync.WaitGroup
	var bad atomic.Int64
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 3))
			for range 30 {
				id := r.IntN(3)
				off := r.Int64N(2 << 20)
				n := r.Int64N(2<<20-off) + 1
				if r.IntN(3) == 0 {
					off, n = 0, 2<<20
				}
				got, err := read(b, source.FileID(id), off, n)
				if err != nil || !bytes.Equal(got, m.files[id][off:off+n]) {
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	require.Zero(t, bad.Load())
	require.EqualValues(t, 3, b.Stats().Fetches, "each file fetched once")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.True(t, errors.Is(b.Fill(ctx, 0, 0, [][]byte{make([]byte, 10)}, source.Read{}), context.Canceled))
}

// TestFixedSet: a dataset twice the bound keeps a fixed set, its first files by FileID, and
// fetches only the rest in each later epoch (a least-recently-used bound, the policy before,
// fetched 52-57 of 64 files per epoch at half the data: it evicts files before their next
// visit); the set survives a remount, and files outside it are served without being written.
func TestFixedSet(t *testing.T) {
	const files, size = 16, 4096
	sizes := make([]int, files)
	for i := range sizes {
		sizes[i] = size
	}
	m := newMem(sizes...)
	dir := t.TempDir()
	bound := int64(files / 2 * size)
	openSet := func() *Blocks {
		b, err := Open(m, m, Options{Dir: dir, Size: bound, Namespace: ns, Files: files, Logf: t.Logf})
		require.NoError(t, err)
		return b
	}
	b := openSet()
	require.EqualValues(t, files/2, b.KeptFiles())
	r := rand.New(rand.NewPCG(3, 4))
	epoch := func(b *Blocks) int64 {
		before := m.fills.Load()
		for _, i := range r.Perm(files) {
			got, err := read(b, source.FileID(i), 0, size)
			require.NoError(t, err)
			require.True(t, bytes.Equal(m.files[i], got), "file %d", i)
		}
		return m.fills.Load() - before
	}
	require.EqualValues(t, files, epoch(b), "the first epoch fetches everything")
	for e := 1; e <= 3; e++ {
		require.EqualValues(t, files/2, epoch(b), "epoch %d fetches only the files outside the set", e)
	}
	st := b.Stats()
	require.EqualValues(t, bound, st.Used)
	require.Zero(t, st.Evicted)
	for i := 0; i < files; i++ {
		_, err := os.Stat(filepath.Join(subDir(dir), ns, fmt.Sprintf("%d-%08x-%d.blk", i, crc32c.Checksum(m.files[i]), size)))
		require.Equal(t, i < files/2, err == nil, "file %d kept: %v", i, err)
	}
	require.NoError(t, b.Close())

	// A remount keeps the set: no fetch of it, and nothing evicted.
	b = openSet()
	defer b.Close()
	require.EqualValues(t, files/2, epoch(b))
	require.Zero(t, b.Stats().Evicted)

	// A larger bound on the same directory (a later mount) keeps more; a smaller one evicts
	// the files past its set first.
	require.NoError(t, b.Close())
	b2, err := Open(m, m, Options{Dir: dir, Size: bound / 2, Namespace: ns, Files: files, Logf: t.Logf})
	require.NoError(t, err)
	defer b2.Close()
	require.EqualValues(t, files/4, b2.KeptFiles())
	require.EqualValues(t, files/4, b2.Stats().Files, "the set of the smaller bound stays")
	for i := 0; i < files/4; i++ {
		_, err := os.Stat(filepath.Join(subDir(dir), ns, fmt.Sprintf("%d-%08x-%d.blk", i, crc32c.Checksum(m.files[i]), size)))
		require.NoError(t, err, "file %d of the set", i)
	}
}
