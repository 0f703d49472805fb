package pack

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/source"
	"github.com/blockfs/blockfs/source/local"
)

// readBack returns every record of a dataset by source id, and the names file if any.
func readBack(t *testing.T, dir string) (map[uint64][]byte, []string) {
	t.Helper()
	ds, err := local.Open(dir)
	require.NoError(t, err)
	out := map[uint64][]byte{}
	next := uint64(0)
	for b := 0; b < ds.Blocks(); b++ {
		data := make([]byte, ds.BlockBytes(b))
		if len(data) > 0 {
			require.NoError(t, local.New(ds, false).Fill(context.Background(), layout.DataFile(b), 0, [][]byte{data}, source.Read{}))
		}
		n := ds.BlockRecords(b)
		ids := make([]uint64, n)
		if ds.HasIDs() {
			raw := make([]byte, 8*n)
			require.NoError(t, local.New(ds, false).Fill(context.Background(), layout.IDsFile(b), 0, [][]byte{raw}, source.Read{}))
			for i := range ids {
				ids[i] = binary.LittleEndian.Uint64(raw[8*i:])
			}
		} else {
			for i := range ids {
				ids[i] = next + uint64(i)
			}
		}
		next += n
		offs := make([]uint64, n+1)
		if ds.Kind() == layout.Variable {
			raw := make([]byte, 8*(n+1))
			require.NoError(t, local.New(ds, false).Fill(context.Background(), layout.OffsetsFile(b), 0, [][]byte{raw}, source.Read{}))
			for i := range offs {
				offs[i] = binary.LittleEndian.Uint64(raw[8*i:])
			}
		} else {
			for i := range offs {
				offs[i] = uint64(i) * uint64(ds.RecordSize())
			}
		}
		for i, id := range ids {
			_, dup := out[id]
			require.False(t, dup, "id %d twice", id)
			out[id] = data[offs[i]:offs[i+1]]
		}
	}
	var names []string
	if id, ok := ds.Names(); ok {
		raw := make([]byte, ds.Size(id))
		require.NoError(t, local.New(ds, false).Fill(context.Background(), id, 0, [][]byte{raw}, source.Read{}))
		names = strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	}
	return out, names
}

func packBoth(t *testing.T, src string, opt Options, check func(t *testing.T, dst string)) {
	for _, noShuffle := range []bool{true, false} {
		t.Run(fmt.Sprintf("noshuffle=%v", noShuffle), func(t *testing.T) {
			o := opt
			o.NoShuffle = noShuffle
			dst := filepath.Join(t.TempDir(), "ds")
			_, err := Pack(context.Background(), src, dst, o)
			require.NoError(t, err)
			check(t, dst)
		})
	}
}

func TestLines(t *testing.T) {
	lines := []string{"first", "", "{\"a\": 1}", strings.Repeat("x", 5000), "", "ünïcödé ✓", "last without newline"}
	src := filepath.Join(t.TempDir(), "data.jsonl")
	require.NoError(t, os.WriteFile(src, []byte(strings.Join(lines, "\n")), 0o644))
	f, err := Detect(src)
	require.NoError(t, err)
	assert.Equal(t, Lines, f)
	packBoth(t, src, Options{BlockSize: 1024, BucketBytes: 100}, func(t *testing.T, dst string) {
		recs, names := readBack(t, dst)
		assert.Nil(t, names)
		require.Len(t, recs, len(lines))
		for i, l := range lines {
			assert.Equal(t, l, string(recs[uint64(i)]), "line %d", i)
		}
	})
	// A trailing newline does not make an extra empty record; CRLF keeps its \r.
	src2 := filepath.Join(t.TempDir(), "crlf.txt")
	require.NoError(t, os.WriteFile(src2, []byte("a\r\nb\n"), 0o644))
	dst := filepath.Join(t.TempDir(), "ds")
	_, err = Pack(context.Background(), src2, dst, Options{NoShuffle: true})
	require.NoError(t, err)
	recs, _ := readBack(t, dst)
	assert.Equal(t, map[uint64][]byte{0: []byte("a\r"), 1: []byte("b")}, recs)
}

func TestFiles(t *testing.T) {
	root := filepath.Join(t.TempDir(), "tree")
	files := map[string]string{
		"b.txt":           "bee",
		"a/z.bin":         "zed",
		"a/deeper/x.json": "{}",
		"a/deeper/empty":  "",
		"日本/画像.png":       "png bytes",
		"a.txt":           "sorted after a/ by path component",
		"big.bin":         strings.Repeat("B", 10000), // larger than the block size
	}
	for rel, content := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	require.NoError(t, os.Symlink(filepath.Join(root, "b.txt"), filepath.Join(root, "link")))
	want := []string{"a/deeper/empty", "a/deeper/x.json", "a/z.bin", "a.txt", "b.txt", "big.bin", "日本/画像.png"}
	packBoth(t, root, Options{BlockSize: 4096, BucketBytes: 20}, func(t *testing.T, dst string) {
		recs, names := readBack(t, dst)
		assert.Equal(t, want, names, "names in sorted path order; the symlink is skipped")
		require.Len(t, recs, len(want))
		for i, name := range want {
			assert.Equal(t, files[name], string(recs[uint64(i)]), name)
		}
	})
}

// writeNpy writes a .npy file with the given header dict and data.
func writeNpy(t *testing.T, major int, dict string, data []byte) string {
	t.Helper()
	var b bytes.Buffer
	b.WriteString(layout.NpyMagic)
	b.WriteByte(byte(major))
	b.WriteByte(0)
	pre := 10
	if major > 1 {
		pre = 12
	}
	hdr := dict
	for (pre+len(hdr)+1)%64 != 0 {
		hdr += " "
	}
	hdr += "\n"
	if major == 1 {
		binary.Write(&b, binary.LittleEndian, uint16(len(hdr)))
	} else {
		binary.Write(&b, binary.LittleEndian, uint32(len(hdr)))
	}
	b.WriteString(hdr)
	b.Write(data)
	p := filepath.Join(t.TempDir(), "a.npy")
	require.NoError(t, os.WriteFile(p, b.Bytes(), 0o644))
	return p
}

func TestNpy(t *testing.T) {
	data := make([]byte, 10*3*4*4)
	for i := range data {
		data[i] = byte(i)
	}
	for _, major := range []int{1, 2, 3} {
		src := writeNpy(t, major, "{'descr': '<f4', 'fortran_order': False, 'shape': (10, 3, 4), }", data)
		f, err := Detect(src)
		require.NoError(t, err)
		assert.Equal(t, Npy, f)
		packBoth(t, src, Options{BlockSize: 100}, func(t *testing.T, dst string) {
			ds, err := local.Open(dst)
			require.NoError(t, err)
			assert.Equal(t, "<f4", ds.Manifest.DType)
			assert.Equal(t, []int64{3, 4}, ds.Manifest.Shape)
			assert.EqualValues(t, 48, ds.RecordSize())
			recs, _ := readBack(t, dst)
			for i := 0; i < 10; i++ {
				assert.Equal(t, data[48*i:48*(i+1)], recs[uint64(i)])
			}
		})
	}
	// A single-record array of scalars.
	src := writeNpy(t, 1, "{'descr': '|u1', 'fortran_order': False, 'shape': (1,), }", []byte{7})
	dst := filepath.Join(t.TempDir(), "ds")
	_, err := Pack(context.Background(), src, dst, Options{})
	require.NoError(t, err)
	recs, _ := readBack(t, dst)
	assert.Equal(t, map[uint64][]byte{0: {7}}, recs)
}

func TestNpyRefusals(t *testing.T) {
	good := "{'descr': '<f4', 'fortran_order': False, 'shape': (10, 3), }"
	cases := map[string]struct {
		dict string
		data int
		msg  string
	}{
		"truncated":  {good, 100, "truncated or damaged"},
		"longer":     {good, 200, "truncated or damaged"},
		"fortran":    {"{'descr': '<f4', 'fortran_order': True, 'shape': (10, 3), }", 120, "Fortran order"},
		"object":     {"{'descr': '|O', 'fortran_order': False, 'shape': (10,), }", 80, "object arrays"},
		"structured": {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (10,), }", 40, "structured dtypes"},
		"scalar":     {"{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 4, "scalar"},
		"datetime":   {"{'descr': '<M8[ns]', 'fortran_order': False, 'shape': (2,), }", 16, "not supported"},
		"empty":      {"{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }", 0, "no records"},
		"empty rows": {"{'descr': '<f4', 'fortran_order': False, 'shape': (5, 0), }", 0, "rows are empty"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			src := writeNpy(t, 1, c.dict, make([]byte, c.data))
			dir := t.TempDir()
			_, err := Pack(context.Background(), src, filepath.Join(dir, "ds"), Options{Format: Npy})
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.msg)
			assert.NotContains(t, err.Error(), "\n")
			ents, _ := os.ReadDir(dir)
			assert.Empty(t, ents, "nothing left behind")
		})
	}
}

func TestDetectAndFormatErrors(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "x.bin")
	require.NoError(t, os.WriteFile(bin, []byte("abcd"), 0o644))
	_, err := Detect(bin)
	assert.ErrorContains(t, err, "give --format")
	_, err = Pack(context.Background(), bin, filepath.Join(dir, "ds"), Options{Format: Raw})
	assert.ErrorContains(t, err, "--record-size is required")
	txt := filepath.Join(dir, "x.txt")
	require.NoError(t, os.WriteFile(txt, []byte("a\n"), 0o644))
	_, err = Pack(context.Background(), txt, filepath.Join(dir, "ds"), Options{RecordSize: 4})
	assert.ErrorContains(t, err, "does not apply")
	unreadable := filepath.Join(dir, "tree")
	require.NoError(t, os.MkdirAll(unreadable, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(unreadable, "f"), []byte("x"), 0o000))
	if os.Geteuid() != 0 { // root reads anything
		_, err = Pack(context.Background(), unreadable, filepath.Join(dir, "ds"), Options{})
		assert.ErrorContains(t, err, "cannot read")
	}
	empty := filepath.Join(dir, "emptytree")
	require.NoError(t, os.MkdirAll(filepath.Join(empty, "sub"), 0o755))
	_, err = Pack(context.Background(), empty, filepath.Join(dir, "ds"), Options{})
	assert.ErrorContains(t, err, "no regular files")
	_, err = ParseFormat("orc")
	assert.ErrorContains(t, err, "auto, raw, npy, lines, files, parquet, arrow, webdataset, tfrecord")
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	assert.Equal(t, []string{"emptytree", "tree", "x.bin", "x.txt"}, names, "nothing left behind")
}
