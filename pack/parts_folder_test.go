package pack

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A folder of nothing but .tar shards given to --part is read as its shards, as one pack of
// it reads it (infiles.DetectShards); an option of a folder of files keeps it a folder of files.
func TestPackPartsFolderOfShards(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wds")
	require.NoError(t, os.Mkdir(dir, 0o755))
	writeShards(t, dir, "pax", []string{"0.tar", "1.tar", "2.tar"}, [][]wdsItem{
		{sampleItem("a", map[string][]byte{"jpg": []byte("x"), "cls": []byte("1")})},
		{sampleItem("b", map[string][]byte{"jpg": []byte("yy"), "cls": []byte("2")})},
		{sampleItem("c", map[string][]byte{"jpg": []byte("zzz"), "cls": []byte("3")})},
	})
	out := t.TempDir()
	for i := 0; i < 2; i++ {
		pr, err := PackPart(context.Background(), []string{dir}, out, Part{i, 2}, Options{})
		require.NoError(t, err)
		require.Len(t, pr.Manifest.Fields, 2, "part %d: the shards' fields", i)
	}
	res, err := Merge(out, false)
	require.NoError(t, err)
	require.NotNil(t, res.Fields)
	assert.EqualValues(t, 3, res.Fields.Records)

	files := t.TempDir()
	pr, err := PackPart(context.Background(), []string{dir}, files, Part{0, 1}, Options{NoShuffle: true})
	require.NoError(t, err)
	assert.Empty(t, pr.Manifest.Fields, "--no-shuffle is a folder of files' option: each shard one record")
	assert.EqualValues(t, 3, pr.Manifest.Records)
}
