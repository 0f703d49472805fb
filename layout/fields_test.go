package layout

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A FieldWriter cuts every field at the same samples, whatever their sizes, and commits the
// whole or nothing.
func TestFieldWriter(t *testing.T) {
	dir := t.TempDir()
	dst := filepath.Join(dir, "ds")
	fields := []Field{{Name: "image", Kind: Variable}, {Name: "label", Kind: Fixed, RecordSize: 8, DType: "<i8"}, {Name: "note", Kind: Variable}}
	w, err := CreateFields(dst, fields, 64<<10, "test", false)
	require.NoError(t, err)
	value := func(i int) [][]byte {
		return [][]byte{bytes.Repeat([]byte{byte(i)}, 100+i%3000), []byte(fmt.Sprintf("%08d", i)), bytes.Repeat([]byte("n"), i%5)}
	}
	for i := range 2000 {
		require.NoError(t, w.Append(value(i)))
	}
	_, err = os.Stat(dst)
	require.True(t, os.IsNotExist(err), "nothing at dst before Commit")
	m, err := w.Commit()
	require.NoError(t, err)
	require.EqualValues(t, 2000, m.Records)
	require.True(t, IsFields(dst))
	read, err := ReadFieldsManifest(dst)
	require.NoError(t, err)
	require.Equal(t, m.Records, read.Records)
	require.Equal(t, "fields/label", read.Fields[1].Dir)
	var counts [][]uint64
	for _, f := range read.Fields {
		raw, err := os.ReadFile(filepath.Join(dst, f.Dir, ManifestName))
		require.NoError(t, err, f.Name)
		man, err := ParseManifest(f.Name, raw)
		require.NoError(t, err, f.Name)
		require.EqualValues(t, 2000, man.Records, f.Name)
		var c []uint64
		for _, b := range man.Blocks {
			c = append(c, b.Records)
		}
		counts = append(counts, c)
	}
	require.Greater(t, len(counts[0]), 10, "several blocks")
	require.Equal(t, counts[0], counts[1])
	require.Equal(t, counts[0], counts[2])
	left, _ := os.ReadDir(dir)
	require.Len(t, left, 1, "no temporary directory left: %v", left)

	// Abort leaves nothing; a second dataset at dst needs force.
	_, err = CreateFields(dst, fields, 64<<10, "test", false)
	require.ErrorIs(t, err, ErrExists)
	w, err = CreateFields(filepath.Join(dir, "other"), fields, 64<<10, "test", false)
	require.NoError(t, err)
	require.NoError(t, w.Append(value(1)))
	w.Abort()
	left, _ = os.ReadDir(dir)
	require.Len(t, left, 1, "Abort left %v", left)
}
