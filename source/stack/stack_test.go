package stack_test

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/internal/corpus"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/source"
	"github.com/blockfs/blockfs/source/local"
	"github.com/blockfs/blockfs/source/stack"
)

// pack writes 2000 rows of 64 bytes of text at dst, in order, compressed when comp.
func pack(t *testing.T, dst string, comp bool) *layout.Dataset {
	t.Helper()
	opt := layout.WriterOptions{Kind: layout.Fixed, RecordSize: 64, BlockSize: 64 * 200}
	if comp {
		opt.Compress = &layout.Compression{Codec: layout.CodecZstd, Frame: 4096}
	}
	w, err := layout.Create(dst, opt, false)
	require.NoError(t, err)
	r := rand.New(rand.NewPCG(53, 1))
	for i := range 2000 {
		require.NoError(t, w.Append(uint64(i), corpus.Text(r, 64)))
	}
	_, err = w.Commit()
	require.NoError(t, err)
	ds, err := local.Open(dst)
	require.NoError(t, err)
	return ds
}

// whole reads file id of ds whole through src.
func whole(t *testing.T, ds *layout.Dataset, src source.Blocks, id layout.FileID) []byte {
	t.Helper()
	b := make([]byte, ds.Size(id))
	require.NoError(t, src.Fill(context.Background(), id, 0, [][]byte{b}, source.Read{}))
	return b
}

// TestBuildShapes: Build stacks for each shape the layers its data needs and no other, keeps
// each one's counters, and serves the same bytes as the raw pack's files.
func TestBuildShapes(t *testing.T) {
	dir := t.TempDir()
	raw, comp := pack(t, filepath.Join(dir, "raw"), false), pack(t, filepath.Join(dir, "comp"), true)
	require.True(t, comp.Compressed())
	wopt := layout.WindowOptions{Length: 8, Stride: 3, Segments: []layout.Segment{{Start: 0, End: 1999}}}
	rawWin, err := layout.Windows(raw, wopt, 64*100)
	require.NoError(t, err)
	compWin, err := layout.Windows(comp, wopt, 64*100)
	require.NoError(t, err)
	for _, c := range []struct {
		name   string
		ds     *layout.Dataset
		o      stack.Options
		frames bool
		want   *layout.Dataset // whose files, read raw, give the same bytes
	}{
		{"raw pack, O_DIRECT", raw, stack.Options{Local: &stack.Local{Direct: true}}, false, raw},
		{"raw pack, its store", raw, stack.Options{}, false, raw},
		{"compressed pack", comp, stack.Options{Local: &stack.Local{}}, true, raw},
		{"compressed pack, --verify", comp, stack.Options{Local: &stack.Local{}, Verify: true}, true, raw},
		{"windows over a raw pack", rawWin, stack.Options{Local: &stack.Local{}}, false, rawWin},
		{"windows over a compressed pack", compWin, stack.Options{Local: &stack.Local{}}, true, rawWin},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := stack.Build(c.ds, c.o)
			require.NoError(t, err)
			defer s.Close()
			ref := stack.Open(c.want)
			for b := range c.ds.Blocks() {
				require.Equal(t, whole(t, c.want, ref, layout.DataFile(b)), whole(t, c.ds, s.Blocks, layout.DataFile(b)), "block %d", b)
			}
			st := s.Stats()
			assert.Nil(t, st.Disk)
			assert.Nil(t, st.Store, "local data")
			if !c.frames {
				assert.Nil(t, st.Frames)
				return
			}
			require.NotNil(t, st.Frames)
			assert.Positive(t, st.Frames.Frames, "the frames read are counted")
		})
	}
}

// TestBuildVerify: --verify of a file in place, which has no checksums, is refused; of a pack,
// a damaged block is an error before any of its bytes is served.
func TestBuildVerify(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "flat.bin")
	require.NoError(t, os.WriteFile(p, make([]byte, 64*100), 0o644))
	flat, err := layout.OpenFlat(p, layout.FlatOptions{RecordSize: 64, BlockSize: 64 * 10})
	require.NoError(t, err)
	_, err = stack.Build(flat, stack.Options{Verify: true})
	require.Error(t, err)
	assert.Equal(t, flat.Verifiable().Error(), err.Error(), "Verifiable says why")

	ds := pack(t, filepath.Join(dir, "ds"), false)
	f := filepath.Join(ds.Dir, ds.Manifest.Blocks[2].File)
	data, err := os.ReadFile(f)
	require.NoError(t, err)
	data[5] ^= 1
	require.NoError(t, os.WriteFile(f, data, 0o644))
	ds, err = local.Open(ds.Dir) // opened as it is now: the damage is in its bytes alone
	require.NoError(t, err)
	s, err := stack.Build(ds, stack.Options{Local: &stack.Local{}, Verify: true})
	require.NoError(t, err)
	err = s.Blocks.Fill(context.Background(), layout.DataFile(2), 0, [][]byte{make([]byte, 10)}, source.Read{})
	require.ErrorIs(t, err, source.ErrCorrupt)
	whole(t, ds, s.Blocks, layout.DataFile(1)) // the others are served
}

// TestParts: a node's parts of a compressed pack, each a namespace of one Mux over the whole
// pack's stack, serve their blocks' bytes; the last namespace is the whole pack.
func TestParts(t *testing.T) {
	ds := pack(t, filepath.Join(t.TempDir(), "comp"), true)
	s, err := stack.Build(ds, stack.Options{Local: &stack.Local{}})
	require.NoError(t, err)
	parts := []*layout.Dataset{ds.Sub([]int{3, 0}), ds.Sub([]int{1, 4, 2})}
	mux := s.Parts(parts)
	for i, part := range parts {
		for b := range part.Blocks() {
			id := layout.DataFile(b) | layout.FileID(i)<<source.NamespaceShift
			got := make([]byte, part.Size(layout.DataFile(b)))
			require.NoError(t, mux.Fill(context.Background(), id, 0, [][]byte{got}, source.Read{}))
			assert.Equal(t, whole(t, ds, s.Blocks, part.ParentFile(layout.DataFile(b))), got, "part %d block %d", i, b)
		}
	}
	id := layout.DataFile(4) | layout.FileID(len(parts))<<source.NamespaceShift
	assert.Equal(t, ds.Size(layout.DataFile(4)), mux.Size(id), "the whole pack last")
}
