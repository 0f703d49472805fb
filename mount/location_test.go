package mount

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/blockfs/blockfs/source/objstore"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/internal/dstest"
)

// TestLocate: a directory, a file and an s3:// URL are told apart in one place.
func TestLocate(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "rows.bin")
	require.NoError(t, os.WriteFile(file, make([]byte, 64), 0o644))
	assert.Equal(t, Dir, Locate(dir).Kind)
	assert.Equal(t, File, Locate(file).Kind)
	assert.Equal(t, Dir, Locate(filepath.Join(dir, "missing")).Kind, "opening it says what is missing")
	l := Locate("s3://bucket/prefix")
	assert.Equal(t, Location{Kind: Remote, Name: "s3://bucket/prefix", Abs: "s3://bucket/prefix"}, l)
	assert.True(t, IsRemote("s3://b/p"))
	assert.False(t, IsRemote(dir))
	assert.True(t, filepath.IsAbs(Locate("rel/path").Abs))
}

// TestOpenRefusesFlagsThatDoNotApply: in-place and window options on data they do not fit are
// usage errors naming the flag.
func TestOpenRefusesFlagsThatDoNotApply(t *testing.T) {
	ds := dstest.Fixed(t, filepath.Join(t.TempDir(), "ds"), 100, 64, 1024, false)
	cases := []struct {
		loc  Location
		in   InPlace
		want string
	}{
		{Locate(ds.Dir), InPlace{RecordSize: 8}, "--record-size is for a file served in place"},
		{Locate(ds.Dir), InPlace{Offset: 8}, "--offset is for a file served in place"},
		{Locate(ds.Dir), InPlace{Stride: 2}, "--stride and --segments go with --window"},
		{Locate("s3://bucket/ds"), InPlace{Window: 4}, "--window is for a local file served in place"},
		{Locate("s3://bucket/ds"), InPlace{Segments: "x.json"}, "--segments is for a local file served in place"},
	}
	for _, c := range cases {
		_, err := OpenDataset(c.loc, c.in, objstore.Options{})
		require.Error(t, err, c.want)
		assert.ErrorIs(t, err, ErrUsage)
		assert.Contains(t, err.Error(), c.want)
	}
	got, err := OpenDataset(Locate(ds.Dir), InPlace{Window: 4}, objstore.Options{})
	require.NoError(t, err)
	_, _, _, _, ok := got.Window()
	assert.True(t, ok, "windows over a pack stored in order")
}
