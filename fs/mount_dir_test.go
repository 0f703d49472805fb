package fs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/internal/dstest"
	"github.com/blockfs/blockfs/internal/mountinfo"
	"github.com/blockfs/blockfs/shuffle"
	"github.com/blockfs/blockfs/source/local"
	"github.com/blockfs/blockfs/view"
)

// TestMountThroughDir: as root, a mount is made on the directory its check opened
// (Options.MountDir), not where the mount point's path leads by then. Between the check and
// the mount, the checked directory is moved away and its path made a symbolic link to another
// directory (what a user who can write along the path could do to a mount root makes, to have
// it hide /etc): the other directory stays as it was, the mount is on the moved directory, it
// serves there, and Unmount unmounts it there.
func TestMountThroughDir(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("BLOCKFS_REQUIRE_FUSE") == "1" {
			t.Fatal("mounts through a directory only as root; BLOCKFS_REQUIRE_FUSE=1 wants this test run")
		}
		t.Skip("root only: without root, fusermount3 makes the mount")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("no /dev/fuse: %v", err)
	}
	base := t.TempDir()
	d := dstest.Fixed(t, filepath.Join(base, "ds"), 40, 100, 1000, true)
	ds, err := local.Open(d.Dir)
	require.NoError(t, err)
	c, err := cache.New(local.New(ds, false), cache.Options{Size: 64 * 4096, PageSize: 4096, MaxRead: 16384})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	set, err := view.NewSet(ds, c, view.SetOptions{Order: shuffle.Options{Seed: 1, Mode: shuffle.Full}})
	require.NoError(t, err)

	mnt, moved, other := filepath.Join(base, "mnt"), filepath.Join(base, "moved"), filepath.Join(base, "other")
	require.NoError(t, os.Mkdir(mnt, 0o755))
	require.NoError(t, os.Mkdir(other, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(other, "keep"), []byte("kept"), 0o644))
	dir, err := os.Open(mnt) // what the check opens
	require.NoError(t, err)
	defer dir.Close()
	require.NoError(t, os.Rename(mnt, moved))
	require.NoError(t, os.Symlink(other, mnt))

	srv, err := Mount(mnt, set, Options{MountDir: dir, NoShm: true, Epochs: 2})
	require.NoError(t, err)
	unmounted := false
	defer func() {
		if !unmounted {
			srv.Unmount()
		}
	}()
	assert.Equal(t, []string{moved}, fuseMounts(t, base), "the mount is on the directory checked")
	b, err := os.ReadFile(filepath.Join(other, "keep"))
	require.NoError(t, err, "the symbolic link's target is not covered")
	assert.Equal(t, "kept", string(b))
	epoch, err := os.ReadFile(filepath.Join(moved, "epoch-0000"))
	require.NoError(t, err)
	want, _, _ := d.Epoch(shuffle.Options{Seed: 1, Mode: shuffle.Full}, 0, 40)
	assert.Equal(t, want, epoch, "it serves there")

	require.NoError(t, srv.Unmount())
	unmounted = true
	assert.Empty(t, fuseMounts(t, base), "Unmount unmounts it where it is")
	require.NoError(t, srv.Unmount(), "a second Unmount is a no-op")
	srv.Stop()

	// The users lock's end (Detach, then RemoveDir for --remove-mountpoint) goes through the
	// directory too: the one mounted on is detached and removed, the link and its target stay.
	dir2, err := os.Open(moved)
	require.NoError(t, err)
	defer dir2.Close()
	moved2 := filepath.Join(base, "moved2")
	require.NoError(t, os.Rename(moved, moved2))
	srv2, err := Mount(mnt, set, Options{MountDir: dir2, NoShm: true, Epochs: 2})
	require.NoError(t, err)
	assert.Equal(t, []string{moved2}, fuseMounts(t, base))
	ok, err := srv2.Detach()
	require.True(t, ok)
	require.NoError(t, err)
	srv2.Wait()
	assert.Empty(t, fuseMounts(t, base), "detached")
	ok, err = srv2.RemoveDir()
	require.True(t, ok)
	require.NoError(t, err)
	assert.NoDirExists(t, moved2)
	assert.FileExists(t, filepath.Join(mnt, "keep"), "the link and its target stay")
	srv2.Stop()
}

// fuseMounts lists the blockfs mounts under base.
func fuseMounts(t *testing.T, base string) []string {
	t.Helper()
	ms, err := mountinfo.Read("/proc/self/mountinfo")
	require.NoError(t, err)
	var at []string
	for _, m := range ms {
		if m.FSType == "fuse."+Type && filepath.Dir(m.Mountpoint) == base {
			at = append(at, m.Mountpoint)
		}
	}
	return at
}
