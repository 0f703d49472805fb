package mount

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/mount/daemon"
)

// TestCheckFuseFD: a /dev/fd/N mount point that names no mounted /dev/fuse is one clear line
// (the kernel cases, /dev/fuse itself, are in test/TestDevFdRefusals).
func TestCheckFuseFD(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	require.NoError(t, err)
	defer f.Close()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	closed, err := os.Open(os.DevNull)
	require.NoError(t, err)
	gone := int(closed.Fd())
	closed.Close()
	for fd, msg := range map[int]string{
		int(f.Fd()): "is not /dev/fuse but a regular file",
		int(r.Fd()): "is not /dev/fuse but a named pipe (FIFO)",
		gone:        "is not open",
		1:           "is standard output or error (descriptor 1); pass the /dev/fuse descriptor as 3 or above",
	} {
		mnt := "/dev/fd/" + strconv.Itoa(fd)
		_, _, err := daemon.CheckMountpoint(mnt, "/data")
		require.Error(t, err, mnt)
		assert.Contains(t, err.Error(), "mount point "+mnt)
		assert.Contains(t, err.Error(), msg)
	}
}

// TestCheckFuseFDOptions: the options a mount made by another process cannot honour are
// refused as usage errors, and only on /dev/fd/N.
func TestCheckFuseFDOptions(t *testing.T) {
	assert.NoError(t, checkFuseFDOptions("/dev/fd/3", Options{}))
	assert.NoError(t, checkFuseFDOptions("/mnt/x", Options{AllowOther: true, UsersLock: "/tmp/l"}))
	err := checkFuseFDOptions("/dev/fd/3", Options{AllowOther: true})
	assert.ErrorIs(t, err, ErrUsage)
	assert.ErrorContains(t, err, "--allow-other: the process that mounted /dev/fd/3")
	err = checkFuseFDOptions("/dev/fd/3", Options{UsersLock: "/tmp/l"})
	assert.ErrorIs(t, err, ErrUsage)
	assert.ErrorContains(t, err, "--users-lock: blockfs cannot unmount /dev/fd/3")
}
