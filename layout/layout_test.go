package layout

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeFixed packs n records of size rs (record i is filled with byte i) with ids reversed.
func writeFixed(t *testing.T, dst string, n, rs, bs int64) {
	t.Helper()
	w, err := Create(dst, WriterOptions{Kind: Fixed, RecordSize: rs, BlockSize: bs, IDs: true}, false)
	require.NoError(t, err)
	for i := int64(0); i < n; i++ {
		rec := make([]byte, rs)
		for j := range rec {
			rec[j] = byte(i)
		}
		require.NoError(t, w.Append(uint64(n-1-i), rec))
	}
	_, err = w.Commit()
	require.NoError(t, err)
}

func writeVariable(t *testing.T, dst string, recs [][]byte, bs int64) {
	t.Helper()
	w, err := Create(dst, WriterOptions{Kind: Variable, BlockSize: bs}, false)
	require.NoError(t, err)
	for i, r := range recs {
		require.NoError(t, w.Append(uint64(i), r))
	}
	_, err = w.Commit()
	require.NoError(t, err)
}

func TestWriterRefusals(t *testing.T) {
	dir := t.TempDir()
	_, err := Create(filepath.Join(dir, "a"), WriterOptions{Kind: Fixed, RecordSize: 0}, false)
	assert.Error(t, err)
	_, err = Create(filepath.Join(dir, "b"), WriterOptions{Kind: Fixed, RecordSize: 100, BlockSize: 64}, false)
	assert.ErrorContains(t, err, "larger than the block size")
	_, err = Create(filepath.Join(dir, "c"), WriterOptions{Kind: Fixed, RecordSize: 4, DType: "<f4", Shape: []int64{2}}, false)
	assert.ErrorContains(t, err, "not 4 bytes per record")
	w, err := Create(filepath.Join(dir, "d"), WriterOptions{Kind: Fixed, RecordSize: 4}, false)
	require.NoError(t, err)
	assert.ErrorContains(t, w.Append(1, []byte("abcd")), "out of sequence")
	assert.ErrorContains(t, w.Append(0, []byte("abc")), "want 4")
	_, err = w.Commit()
	assert.ErrorContains(t, err, "no records")
	_, err = os.Stat(filepath.Join(dir, "d"))
	assert.True(t, os.IsNotExist(err), "a failed commit leaves nothing")
	ents, _ := os.ReadDir(dir)
	assert.Empty(t, ents, "no temporary directory left behind")
}

// TestFlatDType: a raw file served in place with a dtype and shape has them in its manifest
// (and so in info.json), its record size from them; names and type strings are read as numpy
// reads them, and a disagreement is one error.
func TestFlatDType(t *testing.T) {
	p := filepath.Join(t.TempDir(), "rows.bin")
	require.NoError(t, os.WriteFile(p, make([]byte, 12*100), 0o644))
	ds, err := OpenFlat(p, FlatOptions{DType: "float32", Shape: []int64{3}})
	require.NoError(t, err)
	assert.Equal(t, "<f4", ds.Manifest.DType)
	assert.Equal(t, []int64{3}, ds.Manifest.Shape)
	assert.EqualValues(t, 12, ds.RecordSize())
	assert.EqualValues(t, 100, ds.Records())

	ds, err = OpenFlat(p, FlatOptions{DType: "u2", RecordSize: 2})
	require.NoError(t, err)
	assert.Equal(t, "<u2", ds.Manifest.DType)
	assert.Equal(t, []int64{}, ds.Manifest.Shape, "one element a record")

	for dt, want := range map[string]string{"uint8": "|u1", "u1": "|u1", ">f8": ">f8", "=i4": "<i4", "S16": "|S16", "bool": "|b1", "complex64": "<c8"} {
		got, err := ParseDType(dt)
		require.NoError(t, err, dt)
		assert.Equal(t, want, got, dt)
	}
	_, err = ParseDType("float")
	assert.ErrorContains(t, err, `dtype "float" is not a numpy type`)

	for opt, want := range map[*FlatOptions]string{
		{DType: "float32", Shape: []int64{3}, RecordSize: 8}: "--record-size 8 disagrees with --dtype <f4 and --shape [3] (12 bytes a record)",
		{Shape: []int64{3}, RecordSize: 12}:                  "--shape goes with --dtype",
		{DType: "f4", Shape: []int64{0}}:                     "--shape [0]: each dimension must be at least 1",
		{DType: "f4", Shape: []int64{7}}:                     "not a multiple of the record size 28",
	} {
		_, err := OpenFlat(p, *opt)
		assert.ErrorContains(t, err, want)
	}
}
