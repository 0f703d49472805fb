package layout_test

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/source/local"
)

// Opening a dataset is tested through the local directory Store (package source/local), which
// imports layout: so these tests are in package layout_test.

func TestWriteOpenFixed(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "ds")
	layout.WriteFixed(t, dst, 10, 16, 64) // 4 records per block: 4, 4, 2
	ds, err := local.Open(dst)
	require.NoError(t, err)
	assert.Equal(t, 3, ds.Blocks())
	assert.Equal(t, []uint64{4, 4, 2}, ds.BlockCounts())
	assert.EqualValues(t, 160, ds.Bytes())
	assert.True(t, ds.HasIDs())
	// A fixed block file is exactly its records concatenated.
	data, err := os.ReadFile(filepath.Join(dst, "blocks/000001.bin"))
	require.NoError(t, err)
	assert.Len(t, data, 64)
	assert.Equal(t, byte(4), data[0])
	assert.Equal(t, byte(7), data[63])
	ids, err := os.ReadFile(filepath.Join(dst, "blocks/000001.ids"))
	require.NoError(t, err)
	assert.EqualValues(t, 5, binary.LittleEndian.Uint64(ids))
	b, l := ds.BlockOf(9)
	assert.Equal(t, 2, b)
	assert.EqualValues(t, 1, l)
	// Nothing is left next to the destination.
	ents, _ := os.ReadDir(filepath.Dir(dst))
	assert.Len(t, ents, 1)
}

func TestWriteOpenVariable(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "ds")
	recs := [][]byte{[]byte("a"), {}, []byte("hello world"), make([]byte, 300), []byte("z")}
	layout.WriteVariable(t, dst, recs, 64)
	ds, err := local.Open(dst)
	require.NoError(t, err)
	assert.Equal(t, layout.Variable, ds.Kind())
	assert.EqualValues(t, 5, ds.Records())
	assert.EqualValues(t, 1+0+11+300+1, ds.Bytes())
	// The 300-byte record, larger than the block size, gets a block of its own.
	found := false
	for b := 0; b < ds.Blocks(); b++ {
		if ds.BlockBytes(b) == 300 {
			found = true
			assert.EqualValues(t, 1, ds.BlockRecords(b))
		}
	}
	assert.True(t, found)
}

func TestCreateRefusesExisting(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "ds")
	require.NoError(t, os.Mkdir(dst, 0o755))
	_, err := layout.Create(dst, layout.WriterOptions{Kind: layout.Fixed, RecordSize: 4}, false)
	assert.ErrorIs(t, err, layout.ErrExists)
	w, err := layout.Create(dst, layout.WriterOptions{Kind: layout.Fixed, RecordSize: 4, BlockSize: 8}, true)
	require.NoError(t, err)
	// The existing destination is untouched until Commit.
	_, err = os.Stat(dst)
	require.NoError(t, err)
	require.NoError(t, w.Append(0, []byte("abcd")))
	_, err = w.Commit()
	require.NoError(t, err)
	_, err = local.Open(dst)
	require.NoError(t, err)
}

// TestOpenRejects damages a good dataset in each way Open must catch, and checks the error's
// kind and that it names the file at fault.
// manifestEdit is a case of TestOpenRejects: an edit of a small dataset's manifest (or files)
// that opening refuses with an error of kind that says contains.
type manifestEdit struct {
	name     string
	edit     func(t *testing.T, dir string, m map[string]any)
	kind     error
	contains string
}

func TestOpenRejects(t *testing.T) {
	blocks := func(m map[string]any) []any { return m["blocks"].([]any) }
	block0 := func(m map[string]any) map[string]any { return blocks(m)[0].(map[string]any) }
	cases := []manifestEdit{
		{"unknown version", func(t *testing.T, d string, m map[string]any) { m["version"] = 3 }, layout.ErrFormat, "unknown format version 3"},
		{"not blockfs", func(t *testing.T, d string, m map[string]any) { m["format"] = "zip" }, layout.ErrFormat, "not a blockfs manifest"},
		{"record size 0", func(t *testing.T, d string, m map[string]any) { m["record_size"] = 0 }, layout.ErrFormat, "record_size must be positive"},
		{"bad kind", func(t *testing.T, d string, m map[string]any) { m["kind"] = "sparse" }, layout.ErrFormat, "unknown record kind"},
		{"count mismatch", func(t *testing.T, d string, m map[string]any) { m["records"] = 11 }, layout.ErrFormat, "blocks hold 10 records but the manifest says 11"},
		{"block count vs bytes", func(t *testing.T, d string, m map[string]any) { block0(m)["records"] = 3 }, layout.ErrFormat, "do not make"},
		{"no blocks", func(t *testing.T, d string, m map[string]any) { m["blocks"] = []any{}; m["records"] = 0 }, layout.ErrFormat, "no records"},
		{"count overflow", func(t *testing.T, d string, m map[string]any) {
			block0(m)["records"] = uint64(1) << 63
			block0(m)["bytes"] = uint64(0)
		}, layout.ErrFormat, "do not make"},
		{"absolute path", func(t *testing.T, d string, m map[string]any) { block0(m)["file"] = "/etc/passwd" }, layout.ErrUnsafePath, "absolute"},
		{"dotdot path", func(t *testing.T, d string, m map[string]any) { block0(m)["file"] = "../outside.bin" }, layout.ErrUnsafePath, "leaves the dataset"},
		{"unclean path", func(t *testing.T, d string, m map[string]any) { block0(m)["file"] = "blocks/../blocks/000000.bin" }, layout.ErrUnsafePath, "not clean"},
		{"duplicate path", func(t *testing.T, d string, m map[string]any) {
			blocks(m)[1].(map[string]any)["file"] = "blocks/000000.bin"
		}, layout.ErrFormat, "already used"},
		{"missing block", func(t *testing.T, d string, m map[string]any) {
			require.NoError(t, os.Remove(filepath.Join(d, "blocks/000001.bin")))
		}, layout.ErrCorrupt, "000001.bin: block 1: file is missing"},
		{"truncated block", func(t *testing.T, d string, m map[string]any) {
			require.NoError(t, os.Truncate(filepath.Join(d, "blocks/000002.bin"), 10))
		}, layout.ErrCorrupt, "file is 10 bytes, the manifest says 32"},
		{"longer block", func(t *testing.T, d string, m map[string]any) {
			require.NoError(t, os.Truncate(filepath.Join(d, "blocks/000000.bin"), 100))
		}, layout.ErrCorrupt, "file is 100 bytes"},
		{"truncated ids", func(t *testing.T, d string, m map[string]any) {
			require.NoError(t, os.Truncate(filepath.Join(d, "blocks/000000.ids"), 8))
		}, layout.ErrCorrupt, "000000.ids"},
		{"symlink out", func(t *testing.T, d string, m map[string]any) {
			out := filepath.Join(filepath.Dir(d), "elsewhere.bin")
			require.NoError(t, os.WriteFile(out, make([]byte, 64), 0o644))
			p := filepath.Join(d, "blocks/000000.bin")
			require.NoError(t, os.Remove(p))
			require.NoError(t, os.Symlink(out, p))
		}, layout.ErrUnsafePath, "outside the dataset directory"},
		{"directory as block", func(t *testing.T, d string, m map[string]any) {
			p := filepath.Join(d, "blocks/000000.bin")
			require.NoError(t, os.Remove(p))
			require.NoError(t, os.Mkdir(p, 0o755))
		}, layout.ErrCorrupt, "not a regular file"},
		{"dtype mismatch", func(t *testing.T, d string, m map[string]any) { m["dtype"] = "<f8"; m["shape"] = []int{4} }, layout.ErrFormat, "not 16 bytes per record"},
		{"bad dtype", func(t *testing.T, d string, m map[string]any) { m["dtype"] = "float" }, layout.ErrFormat, "is not supported"},
		{"ids flag without files", func(t *testing.T, d string, m map[string]any) { delete(block0(m), "ids_file") }, layout.ErrFormat, "no ids_file"},
	}
	checkRejects(t, cases)
}

// TestOpenRejectsCompression: the compression entry and stored_bytes must hold together.
func TestOpenRejectsCompression(t *testing.T) {
	checkRejects(t, []manifestEdit{
		{"version 2 raw", func(t *testing.T, d string, m map[string]any) { m["version"] = 2 }, layout.ErrFormat, "format version 2 is for compressed blocks"},
		{"compression in version 1", func(t *testing.T, d string, m map[string]any) {
			m["compression"] = map[string]any{"codec": "zstd", "level": 3, "frame": 4096}
		}, layout.ErrFormat, "compressed blocks need format version 2"},
		{"unknown codec", func(t *testing.T, d string, m map[string]any) {
			m["version"], m["compression"] = 2, map[string]any{"codec": "lz4", "level": 3, "frame": 4096}
		}, layout.ErrFormat, `unknown compression codec "lz4"`},
		{"frame not pages", func(t *testing.T, d string, m map[string]any) {
			m["version"], m["compression"] = 2, map[string]any{"codec": "zstd", "level": 3, "frame": 5000}
		}, layout.ErrFormat, "compression frame 5000 is not a multiple of 4096"},
		{"stored_bytes without compression", func(t *testing.T, d string, m map[string]any) {
			m["blocks"].([]any)[0].(map[string]any)["stored_bytes"] = 10
		}, layout.ErrFormat, "stored_bytes is only for a dataset with compression"},
		{"stored_bytes past the bound", func(t *testing.T, d string, m map[string]any) {
			m["version"], m["compression"] = 2, map[string]any{"codec": "zstd", "level": 3, "frame": 4096}
			m["blocks"].([]any)[0].(map[string]any)["stored_bytes"] = 1 << 40
		}, layout.ErrFormat, "stored_bytes 1099511627776 is not what"},
	})
}

// checkRejects applies each edit to a new dataset and requires that opening it fails as the
// case says, naming a path.
func checkRejects(t *testing.T, cases []manifestEdit) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ds")
			layout.WriteFixed(t, dir, 10, 16, 64)
			mpath := filepath.Join(dir, layout.ManifestName)
			raw, err := os.ReadFile(mpath)
			require.NoError(t, err)
			var m map[string]any
			require.NoError(t, json.Unmarshal(raw, &m))
			c.edit(t, dir, m)
			raw, err = json.Marshal(m)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(mpath, raw, 0o644))
			_, err = local.Open(dir)
			require.Error(t, err)
			assert.ErrorIs(t, err, c.kind)
			assert.Contains(t, err.Error(), c.contains)
			var le *layout.Error
			require.True(t, errors.As(err, &le))
			assert.NotEmpty(t, le.Path)
		})
	}
}

func TestOpenRejectsManifestProblems(t *testing.T) {
	for name, content := range map[string]string{
		"empty":      "",
		"garbled":    "{\"format\": \"blockfs-dataset\", \"vers",
		"not json":   "\x00\x01\x02",
		"trailing":   `{"format":"blockfs-dataset","version":1} {}`,
		"wrong type": `{"format":"blockfs-dataset","version":"1"}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, layout.ManifestName), []byte(content), 0o644))
			_, err := local.Open(dir)
			assert.ErrorIs(t, err, layout.ErrFormat)
			assert.Contains(t, err.Error(), layout.ManifestName)
		})
	}
	_, err := local.Open(t.TempDir())
	assert.ErrorContains(t, err, "no manifest")
	_, err = local.Open(filepath.Join(t.TempDir(), "nope"))
	assert.ErrorContains(t, err, "no such directory")
}

func TestVariableOffsetsChecked(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	layout.WriteVariable(t, dir, [][]byte{[]byte("ab"), []byte("cde")}, 1024)
	off := filepath.Join(dir, "blocks/000000.off")
	raw, err := os.ReadFile(off)
	require.NoError(t, err)
	binary.LittleEndian.PutUint64(raw[16:], 4) // last offset should be 5
	require.NoError(t, os.WriteFile(off, raw, 0o644))
	_, err = local.Open(dir)
	assert.ErrorIs(t, err, layout.ErrCorrupt)
	assert.ErrorContains(t, err, "offsets index runs from 0 to 4, want 0 to 5")
}
