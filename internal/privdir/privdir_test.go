package privdir

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMake(t *testing.T) {
	base := filepath.Join(t.TempDir(), "cache")
	dir, err := Make(base, "blockfs", "index")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(base, "blockfs", "index"), dir)
	st, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), st.Mode().Perm())
	again, err := Make(base, "blockfs", "index")
	require.NoError(t, err, "made before: used again")
	assert.Equal(t, dir, again)
}

func TestRefused(t *testing.T) {
	root := t.TempDir()
	writable := filepath.Join(root, "w")
	require.NoError(t, os.Mkdir(writable, 0o700))
	require.NoError(t, os.Chmod(writable, 0o777))
	_, err := Make(writable, "index")
	assert.ErrorIs(t, err, ErrNotPrivate)
	assert.ErrorContains(t, err, "may be written by others (mode 0777)")

	link := filepath.Join(root, "l")
	target := t.TempDir()
	require.NoError(t, os.Symlink(target, link))
	_, err = Make(root, "l")
	assert.ErrorIs(t, err, ErrNotPrivate)
	assert.ErrorContains(t, err, "is a symlink", "below base, a symlink is refused")
	got, err := Make(link, "index")
	require.NoError(t, err, "base itself may be a symlink to a private directory")
	real, err := filepath.EvalSymlinks(target)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(real, "index"), got)

	file := filepath.Join(root, "f")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	_, err = Make(root, "f")
	assert.ErrorIs(t, err, ErrNotPrivate)

	if os.Geteuid() == 0 {
		other := filepath.Join(root, "other")
		require.NoError(t, os.Mkdir(other, 0o755))
		require.NoError(t, os.Chown(other, 65534, 65534))
		_, err = Make(other, "index")
		assert.ErrorIs(t, err, ErrNotPrivate)
		assert.ErrorContains(t, err, "belongs to uid 65534")
	}
	assert.NoError(t, Check(root))
}
