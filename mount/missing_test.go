package mount

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMissingNearName: a missing file in place is fs.ErrNotExist, and the hint offers the
// nearest name of its folder (case, extension, two letters), nothing for a far one.
func TestMissingNearName(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"train.bin", "labels.npy", "x"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), nil, 0o644))
	}
	for _, c := range []struct{ name, hint string }{
		{"Train.BIN", "train.bin"},
		{"train.npy", "train.bin"},
		{"train", "train.bin"},
		{"trian.bin", "train.bin"},
		{"labels.np", "labels.npy"},
		{"lables.npy", "labels.npy"},
		{"validation.bin", ""},
		{"y", ""},
	} {
		err := missing(filepath.Join(dir, c.name), "--record-size serves an existing file in place")
		require.Error(t, err, c.name)
		assert.True(t, errors.Is(err, fs.ErrNotExist), c.name)
		if c.hint == "" {
			assert.NotContains(t, err.Error(), "did you mean", c.name)
		} else {
			assert.Contains(t, err.Error(), "(did you mean "+filepath.Join(dir, c.hint)+"?)", c.name)
		}
	}
	assert.NoError(t, missing(dir, "--record-size serves an existing file in place"), "it exists")
}
