package infiles

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDetectShards: a folder whose every file a folder pack would take is a .tar shard is
// WebDataset, every one a .tfrecord TFRecord, whatever the hidden and junk files and the
// symlinks beside them; one other file, shards of both kinds or no file at all leave it a
// folder of files.
func TestDetectShards(t *testing.T) {
	for _, tc := range []struct {
		name   string
		files  []string
		format string
		n      int
	}{
		{"tar", []string{"shard-0.tar", "shard-1.tar", "sub/shard-2.TAR"}, WebDataset, 3},
		{"tar and junk", []string{"a.tar", ".DS_Store", "Thumbs.db", "__MACOSX/._a.tar", ".git/config", "notes.txt~"}, WebDataset, 1},
		{"tfrecord", []string{"train-0.tfrecord", "train-1.tfrecords"}, TFRecord, 2},
		{"tar and text", []string{"a.tar", "README.txt"}, "", 0},
		{"tar and tfrecord", []string{"a.tar", "b.tfrecord"}, "", 0},
		{"parquet", []string{"a.parquet", "b.parquet"}, "", 0},
		{"images", []string{"a.png", "b.jpg"}, "", 0},
		{"junk only", []string{".DS_Store"}, "", 0},
		{"empty", nil, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tc.files {
				p := filepath.Join(dir, filepath.FromSlash(f))
				require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
				require.NoError(t, os.WriteFile(p, nil, 0o644))
			}
			// A symlink is read by neither a folder pack nor a shards pack.
			require.NoError(t, os.Symlink("/etc/hostname", filepath.Join(dir, "link.txt")))
			format, n, ok := DetectShards(dir)
			assert.Equal(t, tc.format != "", ok)
			assert.Equal(t, tc.format, format)
			assert.Equal(t, tc.n, n)
		})
	}
	// Not a folder: a file or a glob.
	p := filepath.Join(t.TempDir(), "a.tar")
	require.NoError(t, os.WriteFile(p, nil, 0o644))
	for _, src := range []string{p, filepath.Join(filepath.Dir(p), "*.tar"), filepath.Join(filepath.Dir(p), "missing")} {
		_, _, ok := DetectShards(src)
		assert.False(t, ok, src)
	}
}

func TestIsJunk(t *testing.T) {
	for name, want := range map[string]bool{
		".DS_Store": true, "._001.png": true, ".git": true, ".ipynb_checkpoints": true, ".hidden.png": true,
		"Thumbs.db": true, "thumbs.db": true, "ehthumbs.db": true, "desktop.ini": true, "Desktop.ini": true,
		"__MACOSX": true, "$RECYCLE.BIN": true, "System Volume Information": true, "lost+found": true,
		"001.png~": true,
		"001.png":  false, "README.txt": false, "cat": false, "a.b.c": false, "x~y": false, "Thumbs.db.png": false,
		"__init__.py": false,
	} {
		assert.Equal(t, want, IsJunk(name), name)
	}
}
