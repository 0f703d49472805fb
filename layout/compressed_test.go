package layout_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/source"
	"github.com/blockfs/blockfs/source/local"
	"github.com/blockfs/blockfs/source/stack"
)

// words returns n bytes of text, compressible as a corpus is.
func words(r *rand.Rand, n int) []byte {
	var b bytes.Buffer
	for b.Len() < n {
		fmt.Fprintf(&b, "%s %d ", []string{"block", "epoch", "shuffle", "record"}[r.IntN(4)], r.IntN(500))
	}
	return b.Bytes()[:n]
}

// writeRecords writes recs as a dataset at dst, compressed with frames of 4 KiB when comp.
func writeRecords(t *testing.T, dst string, recs [][]byte, opt layout.WriterOptions, comp bool) *layout.Manifest {
	t.Helper()
	if comp {
		opt.Compress = &layout.Compression{Codec: layout.CodecZstd, Frame: 4096}
	}
	w, err := layout.Create(dst, opt, false)
	require.NoError(t, err)
	for i, rec := range recs {
		require.NoError(t, w.Append(uint64(i), rec))
	}
	m, err := w.Commit()
	require.NoError(t, err)
	return m
}

// readAll reads every file of ds through src, file by file, in pieces of step bytes.
// localStack returns ds's files as a mount reads them: its own local source, read buffered.
func localStack(t *testing.T, ds *layout.Dataset) source.Blocks {
	s, err := stack.Build(ds, stack.Options{Local: &stack.Local{}})
	require.NoError(t, err)
	return s.Blocks
}

func readAll(t *testing.T, ds *layout.Dataset, src source.Blocks, step int64) [][]byte {
	t.Helper()
	var out [][]byte
	for id := layout.FileID(0); id <= layout.NamesFile(ds.Blocks()); id++ {
		if _, ok := ds.File(id); !ok {
			continue
		}
		b := make([]byte, ds.Size(id))
		for off := int64(0); off < int64(len(b)); off += step {
			require.NoError(t, src.Fill(context.Background(), id, off, [][]byte{b[off:min(off+step, int64(len(b)))]}, source.Read{}))
		}
		out = append(out, b)
	}
	return out
}

// TestCompressedPack: a compressed pack of fixed and of variable records (one larger than a
// block, streamed to its file) serves the same bytes as the raw pack, in any pieces; its
// manifest is version 2 with stored_bytes below bytes; verify decompresses every frame; a
// flipped byte is an error, never other bytes; a tampered stored_bytes is refused.
func TestCompressedPack(t *testing.T) {
	r := rand.New(rand.NewPCG(40, 2))
	var fixed, variable [][]byte
	for range 300 {
		fixed = append(fixed, words(r, 100))
		variable = append(variable, words(r, r.IntN(700)))
	}
	variable = append(variable, words(r, 40000), []byte{}, words(r, 10))
	cases := []struct {
		name string
		recs [][]byte
		opt  layout.WriterOptions
	}{
		{"fixed", fixed, layout.WriterOptions{Kind: layout.Fixed, RecordSize: 100, BlockSize: 10000}},
		{"variable", variable, layout.WriterOptions{Kind: layout.Variable, BlockSize: 9000, IDs: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			raw := writeRecords(t, filepath.Join(dir, "raw"), c.recs, c.opt, false)
			comp := writeRecords(t, filepath.Join(dir, "comp"), c.recs, c.opt, true)
			assert.Equal(t, layout.Version, raw.Version)
			assert.Equal(t, layout.VersionCompressed, comp.Version)
			require.NotNil(t, comp.Compression)
			assert.EqualValues(t, 4096, comp.Compression.Frame)
			var stored, bytes uint64
			for i, b := range comp.Blocks {
				assert.Equal(t, raw.Blocks[i].Bytes, b.Bytes)
				stored, bytes = stored+b.Stored(), bytes+b.Bytes
			}
			assert.Less(t, stored, bytes/2, "text compresses")
			rds, err := local.Open(filepath.Join(dir, "raw"))
			require.NoError(t, err)
			cds, err := local.Open(filepath.Join(dir, "comp"))
			require.NoError(t, err)
			assert.True(t, cds.Compressed())
			assert.False(t, rds.Compressed())
			want := readAll(t, rds, stack.Open(rds), 1<<20)
			for _, step := range []int64{1 << 20, 4096, 1000} {
				require.Equal(t, want, readAll(t, cds, stack.Open(cds), step), "step %d", step)
			}
			// The mount's stack: its own local source over the files as stored.
			require.Equal(t, want, readAll(t, cds, localStack(t, cds), 3000))

			st, err := local.NewStore(filepath.Join(dir, "comp"))
			require.NoError(t, err)
			res, err := layout.VerifyStore(st, func(err error) { t.Errorf("verify: %v", err) })
			require.NoError(t, err)
			assert.Equal(t, len(comp.Blocks), res.Framed)
			assert.EqualValues(t, bytes, res.FramedRaw)

			// A byte flipped in a frame: the read fails (EIO in a mount), verify reports it.
			f := filepath.Join(dir, "comp", comp.Blocks[0].File)
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			data[len(data)-3] ^= 0x40
			require.NoError(t, os.WriteFile(f, data, 0o644))
			cds, err = local.Open(filepath.Join(dir, "comp"))
			require.NoError(t, err)
			buf := make([]byte, cds.Size(layout.DataFile(0)))
			err = stack.Open(cds).Fill(context.Background(), layout.DataFile(0), 0, [][]byte{buf}, source.Read{})
			require.ErrorIs(t, err, source.ErrCorrupt)
			var problems []error
			_, err = layout.VerifyStore(st, func(err error) { problems = append(problems, err) })
			require.NoError(t, err)
			require.Len(t, problems, 1)
			assert.ErrorIs(t, problems[0], layout.ErrCorrupt)
		})
	}
}

// TestCompressedKeptRaw: data that does not compress (random bytes) is written raw, and the
// writer says so.
func TestCompressedKeptRaw(t *testing.T) {
	r := rand.New(rand.NewPCG(40, 3))
	var recs [][]byte
	for range 100 {
		b := make([]byte, 512)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		recs = append(recs, b)
	}
	dst := filepath.Join(t.TempDir(), "ds")
	w, err := layout.Create(dst, layout.WriterOptions{Kind: layout.Fixed, RecordSize: 512, BlockSize: 8192,
		Compress: &layout.Compression{Codec: layout.CodecZstd}}, false)
	require.NoError(t, err)
	for i, rec := range recs {
		require.NoError(t, w.Append(uint64(i), rec))
	}
	m, err := w.Commit()
	require.NoError(t, err)
	ratio, raw, ok := w.CompressResult()
	assert.True(t, ok)
	assert.True(t, raw, "ratio %.3f", ratio)
	assert.Greater(t, ratio, layout.KeepRawRatio)
	assert.Nil(t, m.Compression)
	assert.Equal(t, layout.Version, m.Version)
	for _, b := range m.Blocks {
		assert.Zero(t, b.StoredBytes)
	}
}

// TestVerifyFrameCRCMatched: a compressed block whose file matches its CRC32C but holds a
// frame that does not (as a faulty writer would leave it) is reported by verify, which
// decompresses every frame in the pass that checks the file's CRC32C; the other blocks pass.
func TestVerifyFrameCRCMatched(t *testing.T) {
	r := rand.New(rand.NewPCG(40, 6))
	var recs [][]byte
	for range 400 {
		var b []byte
		for len(b) < 100 {
			b = fmt.Appendf(b, "word%d ", r.IntN(50))
		}
		recs = append(recs, b[:100])
	}
	dst := filepath.Join(t.TempDir(), "ds")
	m := writeRecords(t, dst, recs, layout.WriterOptions{Kind: layout.Fixed, RecordSize: 100, BlockSize: 10000}, true)
	require.NotNil(t, m.Compression)
	f := filepath.Join(dst, m.Blocks[1].File)
	data, err := os.ReadFile(f)
	require.NoError(t, err)
	data[len(data)-2] ^= 0x10 // in the last frame
	require.NoError(t, os.WriteFile(f, data, 0o644))
	mpath := filepath.Join(dst, layout.ManifestName)
	raw, err := os.ReadFile(mpath)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(raw, &doc))
	doc["blocks"].([]any)[1].(map[string]any)["crc32c"] = layout.CRC32C(data)
	raw, err = json.Marshal(doc)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(mpath, raw, 0o644))

	st, err := local.NewStore(dst)
	require.NoError(t, err)
	var problems []error
	res, err := layout.VerifyStore(st, func(err error) { problems = append(problems, err) })
	require.NoError(t, err)
	require.Len(t, problems, 1)
	assert.ErrorIs(t, problems[0], layout.ErrCorrupt)
	assert.Contains(t, problems[0].Error(), "frame")
	assert.Contains(t, problems[0].Error(), m.Blocks[1].File)
	assert.Equal(t, len(m.Blocks)-1, res.Framed, "the other blocks decompressed whole")
}

// TestCompressedLiteralsOnly: records with skewed bytes but no repeats for zstd to match
// (float32 of small integers drawn at random) are compressed by their literals' entropy, as
// libzstd does (69% of their bytes at level 3), not kept raw.
func TestCompressedLiteralsOnly(t *testing.T) {
	r := rand.New(rand.NewPCG(40, 5))
	var recs [][]byte
	for range 512 {
		b := make([]byte, 32)
		for i := 0; i < len(b); i += 4 {
			binary.LittleEndian.PutUint32(b[i:], math.Float32bits(float32(r.IntN(30000))))
		}
		recs = append(recs, b)
	}
	w, err := layout.Create(filepath.Join(t.TempDir(), "ds"), layout.WriterOptions{Kind: layout.Fixed, RecordSize: 32,
		BlockSize: 16384, Compress: &layout.Compression{Codec: layout.CodecZstd}}, false)
	require.NoError(t, err)
	for i, rec := range recs {
		require.NoError(t, w.Append(uint64(i), rec))
	}
	m, err := w.Commit()
	require.NoError(t, err)
	ratio, raw, _ := w.CompressResult()
	assert.False(t, raw, "kept raw at %.3f", ratio)
	assert.Less(t, ratio, 0.8)
	require.NotNil(t, m.Compression)
}

// TestCompressedWindows: windows over a compressed pack of rows serve the windows the raw
// pack's do.
func TestCompressedWindows(t *testing.T) {
	r := rand.New(rand.NewPCG(40, 4))
	var rows [][]byte
	for range 5000 {
		rows = append(rows, []byte(fmt.Sprintf("%07d", r.IntN(300))))
	}
	dir := t.TempDir()
	opt := layout.WriterOptions{Kind: layout.Fixed, RecordSize: 7, BlockSize: 7 * 600}
	writeRecords(t, filepath.Join(dir, "raw"), rows, opt, false)
	writeRecords(t, filepath.Join(dir, "comp"), rows, opt, true)
	var got [][][]byte
	for _, name := range []string{"raw", "comp"} {
		ds, err := local.Open(filepath.Join(dir, name))
		require.NoError(t, err)
		w, err := layout.Windows(ds, layout.WindowOptions{Length: 50, Stride: 7,
			Segments: []layout.Segment{{Start: 0, End: 1999}, {Start: 2003, End: 2040}, {Start: 2100, End: 4999}}}, 7*400)
		require.NoError(t, err)
		assert.Equal(t, name == "comp", w.Compressed())
		got = append(got, readAll(t, w, localStack(t, w), 1111))
	}
	require.Equal(t, got[0], got[1])
}
