package layout

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCommitFailureLeavesNothing fails Commit at several of its steps, each time over an
// existing dataset with force, and checks that the error keeps its cause, the existing dataset
// is untouched and no temporary directory is left.
func TestCommitFailureLeavesNothing(t *testing.T) {
	cases := []struct {
		name     string
		names    bool             // keep names; one AddName only
		records  int              // 16-byte records to append, 4 to a block
		prep     func(tmp string) // runs on the temporary directory before the records
		is       error            // the cause, if the failure has one
		contains string
	}{
		{name: "no records", contains: "the input has no records: nothing to pack"},
		{name: "names short of records", names: true, records: 2, contains: "1 names for 2 records"},
		{name: "block file", records: 2, prep: func(tmp string) {
			require.NoError(t, os.WriteFile(filepath.Join(tmp, "blocks/000000.bin"), nil, 0o644))
		}, is: fs.ErrExist, contains: "000000.bin"},
		{name: "manifest", records: 6, prep: func(tmp string) {
			require.NoError(t, os.WriteFile(filepath.Join(tmp, ManifestName), nil, 0o644))
		}, is: fs.ErrExist, contains: ManifestName},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			dst := filepath.Join(dir, "ds")
			writeFixed(t, dst, 10, 16, 64)
			before, err := os.ReadFile(filepath.Join(dst, ManifestName))
			require.NoError(t, err)

			w, err := Create(dst, WriterOptions{Kind: Fixed, RecordSize: 16, BlockSize: 64, Names: c.names}, true)
			require.NoError(t, err)
			if c.prep != nil {
				c.prep(w.TempDir())
			}
			if c.names {
				require.NoError(t, w.AddName("only"))
			}
			for i := 0; i < c.records; i++ {
				require.NoError(t, w.Append(uint64(i), make([]byte, 16)))
			}
			m, err := w.Commit()
			assert.Nil(t, m)
			require.ErrorContains(t, err, c.contains)
			if c.is != nil {
				assert.ErrorIs(t, err, c.is, "the cause is kept")
			}

			after, err := os.ReadFile(filepath.Join(dst, ManifestName))
			require.NoError(t, err)
			assert.Equal(t, before, after, "the existing dataset is untouched")
			ents, _ := os.ReadDir(dir)
			assert.Len(t, ents, 1, "no temporary directory left")
			_, err = w.Commit()
			assert.ErrorContains(t, err, "writer is closed")
		})
	}
}

// TestWriterKeepsFirstBackgroundError fails the background write of the first block and checks
// that every later call refuses with that error, Commit included, and that nothing is left.
func TestWriterKeepsFirstBackgroundError(t *testing.T) {
	dir := t.TempDir()
	dst := filepath.Join(dir, "ds")
	w, err := Create(dst, WriterOptions{Kind: Fixed, RecordSize: 16, BlockSize: 16}, false)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(w.TempDir(), "blocks/000000.bin"), nil, 0o644))
	rec := make([]byte, 16)
	// One record per block: the failure is seen within a few blocks (one queued, one being
	// written).
	var first error
	id := uint64(0)
	for ; id < 10 && first == nil; id++ {
		first = w.Append(id, rec)
	}
	require.ErrorIs(t, first, fs.ErrExist)
	assert.ErrorContains(t, first, "000000.bin")
	assert.Equal(t, first, w.Append(id, rec), "later records are refused with the first error")
	_, err = w.Commit()
	assert.Equal(t, first, err)
	_, err = os.Stat(dst)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	ents, _ := os.ReadDir(dir)
	assert.Empty(t, ents, "no temporary directory left")
}
