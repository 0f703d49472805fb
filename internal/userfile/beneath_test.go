package userfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestOpenBeneath: a path under a folder opens with no symlink followed in any component,
// through openat2 and through the walk that stands in for it on a kernel without it (which
// OpenBeneath falls back to, and keeps to, when openat2 fails as such a kernel's does).
func TestOpenBeneath(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "sub", "deep"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "sub", "deep", "f"), []byte("in"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "f"), []byte("out"), 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "link")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "f"), filepath.Join(root, "sub", "lf")))
	require.NoError(t, os.WriteFile(filepath.Join(root, "file"), nil, 0o644))
	dir, err := os.Open(root)
	require.NoError(t, err)
	defer dir.Close()
	const flags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	for _, mode := range []string{"openat2", "walk"} { // "openat2": the kernel's, or the walk where it has none
		if mode == "walk" {
			noOpenat2.Store(false) // the first pass may have found none: the stub is tried first
			calls := 0
			openat2 = func(int, string, *unix.OpenHow) (int, error) { calls++; return -1, unix.ENOSYS }
			t.Cleanup(func() { openat2 = unix.Openat2; noOpenat2.Store(false) })
			defer func() { assert.Equal(t, 1, calls, "openat2 tried once, then the walk kept to") }()
		}
		fd, err := OpenBeneath(int(dir.Fd()), "sub/deep/f", flags)
		require.NoError(t, err, mode)
		b := make([]byte, 8)
		n, _ := unix.Read(fd, b)
		unix.Close(fd)
		assert.Equal(t, "in", string(b[:n]), mode)

		_, err = OpenBeneath(int(dir.Fd()), "link/f", flags)
		var changed *FolderChangedError
		require.ErrorAs(t, err, &changed, mode)
		assert.Equal(t, "link", changed.Dir, mode)
		_, err = OpenBeneath(int(dir.Fd()), "file/f", flags)
		require.ErrorAs(t, err, &changed, mode)
		assert.Equal(t, "file", changed.Dir, mode)
		for rel, errno := range map[string]syscall.Errno{
			"sub/lf": unix.ELOOP, "sub/none": unix.ENOENT, "../x": unix.EXDEV, "/etc/passwd": unix.EXDEV,
		} {
			_, err = OpenBeneath(int(dir.Fd()), rel, flags)
			assert.ErrorIs(t, err, errno, "%s %s", mode, rel)
		}
		fd, err = OpenBeneath(int(dir.Fd()), "sub/deep", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
		require.NoError(t, err, mode)
		unix.Close(fd)
		_, err = OpenBeneath(int(dir.Fd()), "link", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
		assert.ErrorIs(t, err, unix.ELOOP, "%s: a last component that is a symlink, without O_NOFOLLOW", mode)
		_, err = OpenBeneath(int(dir.Fd()), "file", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
		assert.ErrorIs(t, err, unix.ENOTDIR, mode)
		fd, err = OpenAbsolute("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC)
		require.NoError(t, err, "%s: / itself", mode)
		unix.Close(fd)
		fd, err = OpenAbsolute(filepath.Join(root, "sub", "deep", "f"), flags)
		require.NoError(t, err, mode)
		unix.Close(fd)
		_, err = OpenAbsolute(filepath.Join(root, "link", "f"), flags)
		require.ErrorAs(t, err, &changed, "%s: OpenAbsolute follows no symlink either", mode)
	}
}
