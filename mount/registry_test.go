package mount

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/internal/mountinfo"
)

// TestRegistryEntries: readEntries counts an entry while its daemon lives (the pid with the
// start time it wrote) and its connection is a fuse.blockfs mount; it removes an entry whose
// daemon is gone (or whose pid another process has now), keeps but skips one whose mount is
// gone, and reads nothing but regular files of a private directory, without waiting on a FIFO.
func TestRegistryEntries(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "reg")
	require.NoError(t, privateDir(dir))
	live := exec.Command("sleep", "60")
	require.NoError(t, live.Start())
	t.Cleanup(func() { live.Process.Kill(); live.Wait() })
	pid := live.Process.Pid
	claim := Claim{Cache: 1 << 20, Resident: 2 << 20, Cgroup: "/", OpenData: "/data", Fingerprint: "f"}
	mounts := []mountinfo.Mount{{Dev: "0:50", Mountpoint: "/mnt/a", FSType: "fuse.blockfs"}, {Dev: "0:51", Mountpoint: "/mnt/x", FSType: "ext4"}}

	require.NoError(t, writeEntry(dir, entry{PID: pid, Start: startTime(pid), Mountpoint: "/mnt/a", Dev: "0:50", Claim: claim}))
	got := readEntries(dir, mounts)
	require.Len(t, got, 1)
	assert.Equal(t, claim, got[0].Claim)

	// The same pid with another start time is another process: the entry is stale.
	require.NoError(t, writeEntry(dir, entry{PID: pid, Start: startTime(pid) + 1, Mountpoint: "/mnt/a", Dev: "0:50", Claim: claim}))
	assert.Empty(t, readEntries(dir, mounts))
	assert.NoFileExists(t, entryPath(dir, pid), "a stale entry is removed")

	// A live daemon whose mount is not (or no longer) a blockfs mount here: skipped, kept.
	for _, e := range []entry{{Mountpoint: "/mnt/x", Dev: "0:51"}, {Mountpoint: "/mnt/b", Dev: "0:50"}, {Mountpoint: "/mnt/a", Dev: "0:52"}} {
		e.PID, e.Start, e.Claim = pid, startTime(pid), claim
		require.NoError(t, writeEntry(dir, e))
		assert.Empty(t, readEntries(dir, mounts), "%+v", e)
		assert.FileExists(t, entryPath(dir, pid))
	}

	// Not regular files, or other names: ignored, at once.
	require.NoError(t, os.Remove(entryPath(dir, pid)))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "1.json"), 0o600))
	require.NoError(t, os.Symlink(entryPath(dir, os.Getpid()), filepath.Join(dir, "2.json")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x.json"), []byte("{}"), 0o600))
	start := time.Now()
	assert.Empty(t, readEntries(dir, mounts))
	assert.Less(t, time.Since(start), time.Second)

	// A directory others can write is not read.
	require.NoError(t, writeEntry(dir, entry{PID: pid, Start: startTime(pid), Mountpoint: "/mnt/a", Dev: "0:50", Claim: claim}))
	require.Len(t, readEntries(dir, mounts), 1)
	require.NoError(t, os.Chmod(dir, 0o777))
	assert.Empty(t, readEntries(dir, mounts))
	assert.Error(t, writeEntry(dir, entry{PID: pid}))
}

// TestClaimOf: the claim a daemon registers is what its info.json says, as other mounts read it.
func TestClaimOf(t *testing.T) {
	c, err := claimOf(map[string]any{"open_data": "/d", "fingerprint": "fp", "memory": map[string]any{"cache": 5, "resident": 7, "cgroup": "/a", "ram": 9}})
	require.NoError(t, err)
	assert.Equal(t, Claim{Cache: 5, Resident: 7, Cgroup: "/a", OpenData: "/d", Fingerprint: "fp"}, c)
}
