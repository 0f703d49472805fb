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
