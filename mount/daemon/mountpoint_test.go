package daemon

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/blockfs/blockfs/internal/userfile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestOpenDir: the mount point's directory is opened without following a symbolic link
// anywhere on its (resolved) path (internal/userfile's TestOpenBeneath tests the walk kept for
// kernels without openat2); CheckMountpoint checks it through that descriptor and hands it on.
func TestOpenDir(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	real := filepath.Join(base, "a", "mnt")
	require.NoError(t, os.MkdirAll(real, 0o755))
	require.NoError(t, os.Symlink(filepath.Join(base, "a"), filepath.Join(base, "link")))
	require.NoError(t, os.Symlink(real, filepath.Join(base, "last")))
	require.NoError(t, os.WriteFile(filepath.Join(base, "file"), nil, 0o644))
	fd, err := openDir(real)
	require.NoError(t, err)
	var st, want unix.Stat_t
	require.NoError(t, unix.Fstat(int(fd.Fd()), &st))
	fd.Close()
	require.NoError(t, unix.Stat(real, &want))
	assert.Equal(t, want.Ino, st.Ino)
	for p, errno := range map[string]syscall.Errno{
		filepath.Join(base, "last"): unix.ELOOP, // the last
		filepath.Join(base, "file"): unix.ENOTDIR,
		filepath.Join(base, "none"): unix.ENOENT,
	} {
		_, err := openDir(p)
		assert.ErrorIs(t, err, errno, p)
	}
	_, err = openDir(filepath.Join(base, "link", "mnt"))
	assert.ErrorAs(t, err, new(*userfile.FolderChangedError), "a symbolic link on the path")

	mnt, dir, err := CheckMountpoint(filepath.Join(base, "link", "mnt"), filepath.Join(base, "data"))
	require.NoError(t, err, "a symbolic link the path has when checked is followed")
	defer dir.Close()
	assert.Equal(t, filepath.Join(base, "link", "mnt"), mnt)
	require.NoError(t, unix.Fstat(int(dir.Fd()), &st))
	require.NoError(t, unix.Stat(real, &want))
	assert.Equal(t, want.Ino, st.Ino, "the directory checked is handed on")
	require.NoError(t, os.WriteFile(filepath.Join(real, "x"), nil, 0o644))
	_, _, err = CheckMountpoint(real, filepath.Join(base, "data"))
	assert.ErrorContains(t, err, "is not empty")
}
