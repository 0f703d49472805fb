package daemon

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
	pid, ns := live.Process.Pid, pidNS()
	claim := Claim{Cache: 1 << 20, Resident: 2 << 20, Cgroup: "/", OpenData: "/data", Fingerprint: "f"}
	mounts := []mountinfo.Mount{{Dev: "0:50", Mountpoint: "/mnt/a", FSType: "fuse.blockfs"}, {Dev: "0:51", Mountpoint: "/mnt/x", FSType: "ext4"}}

	require.NoError(t, writeEntry(dir, entry{NS: ns, PID: pid, Start: startTime(pid), Mountpoint: "/mnt/a", Dev: "0:50", Claim: claim}))
	got := readEntries(dir, mounts)
	require.Len(t, got, 1)
	assert.Equal(t, claim, got[0].Claim)

	// The same pid with another start time is another process: the entry is stale.
	require.NoError(t, writeEntry(dir, entry{NS: ns, PID: pid, Start: startTime(pid) + 1, Mountpoint: "/mnt/a", Dev: "0:50", Claim: claim}))
	assert.Empty(t, readEntries(dir, mounts))
	assert.NoFileExists(t, entryPath(dir, ns, pid), "a stale entry is removed")

	// A live daemon whose mount is not (or no longer) a blockfs mount here: skipped, kept.
	for _, e := range []entry{{Mountpoint: "/mnt/x", Dev: "0:51"}, {Mountpoint: "/mnt/b", Dev: "0:50"}, {Mountpoint: "/mnt/a", Dev: "0:52"}} {
		e.NS, e.PID, e.Start, e.Claim = ns, pid, startTime(pid), claim
		require.NoError(t, writeEntry(dir, e))
		assert.Empty(t, readEntries(dir, mounts), "%+v", e)
		assert.FileExists(t, entryPath(dir, ns, pid))
	}

	// Not regular files, or other names: ignored, at once. The symlink points at a valid entry
	// of the live daemon, which would count if links were followed.
	require.NoError(t, os.Remove(entryPath(dir, ns, pid)))
	require.NoError(t, syscall.Mkfifo(entryPath(dir, ns, 1), 0o600))
	elsewhere := filepath.Join(t.TempDir(), "other")
	require.NoError(t, writeEntry(elsewhere, entry{NS: ns, PID: pid, Start: startTime(pid), Mountpoint: "/mnt/a", Dev: "0:50", Claim: claim}))
	require.Len(t, readEntries(elsewhere, mounts), 1, "the link's target is a live entry")
	require.NoError(t, os.Symlink(entryPath(elsewhere, ns, pid), entryPath(dir, ns, pid)))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x.json"), []byte("{}"), 0o600))
	start := time.Now()
	assert.Empty(t, readEntries(dir, mounts), "a symlink is not followed")
	assert.Less(t, time.Since(start), time.Second)
	_, err := readEntryFile(entryPath(dir, ns, pid))
	assert.ErrorIs(t, err, syscall.ELOOP, "opened with O_NOFOLLOW")
	require.NoError(t, os.Remove(entryPath(dir, ns, pid)))

	// A directory others can write is not read.
	require.NoError(t, writeEntry(dir, entry{NS: ns, PID: pid, Start: startTime(pid), Mountpoint: "/mnt/a", Dev: "0:50", Claim: claim}))
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

// TestRegistryUnion: a reader counts the entries of every registry directory, whichever this
// process would write to: a daemon started while the user had no runtime directory (cron, a
// batch job) wrote to /tmp/blockfs-mounts-UID, an interactive one to /run/user/UID, and each
// must see the other's claim.
func TestRegistryUnion(t *testing.T) {
	root := t.TempDir()
	run, tmp := filepath.Join(root, "run-user"), filepath.Join(root, "tmp")
	require.NoError(t, os.Mkdir(run, 0o700))
	require.NoError(t, os.Mkdir(tmp, 0o700))
	saved := registryDirs
	registryDirs = func() []string { return []string{filepath.Join(run, "reg"), filepath.Join(tmp, "reg")} }
	t.Cleanup(func() { registryDirs = saved })
	if os.Geteuid() != 0 {
		assert.Equal(t, filepath.Join(run, "reg"), RegistryDir(), "a writer takes the first it can")
	}

	a, b := sleeper(t), sleeper(t)
	ns := pidNS()
	mounts := []mountinfo.Mount{{Dev: "0:50", Mountpoint: "/mnt/a", FSType: "fuse.blockfs"}, {Dev: "0:51", Mountpoint: "/mnt/b", FSType: "fuse.blockfs"}}
	require.NoError(t, writeEntry(filepath.Join(run, "reg"), entry{NS: ns, PID: a, Start: startTime(a), Mountpoint: "/mnt/a", Dev: "0:50", Claim: Claim{Cache: 1}}))
	require.NoError(t, writeEntry(filepath.Join(tmp, "reg"), entry{NS: ns, PID: b, Start: startTime(b), Mountpoint: "/mnt/b", Dev: "0:51", Claim: Claim{Cache: 2}}))
	got := readRegistry(mounts)
	require.Len(t, got, 2, "both directories are read")
	assert.ElementsMatch(t, []int64{1, 2}, []int64{got[0].Claim.Cache, got[1].Claim.Cache})

	// The runtime directory gone (the last logout): the other is still read.
	require.NoError(t, os.RemoveAll(run))
	got = readRegistry(mounts)
	require.Len(t, got, 1)
	assert.Equal(t, b, got[0].PID)
}

// TestRegistryNamespaces: an entry of another pid namespace (a daemon in a container sharing
// the directory and the uid) is neither counted nor removed, even when its pid here is another
// process's or none; entries of two namespaces with the same pid do not overwrite each other.
func TestRegistryNamespaces(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "reg")
	pid, ns := sleeper(t), pidNS()
	require.NotZero(t, ns)
	mounts := []mountinfo.Mount{{Dev: "0:50", Mountpoint: "/mnt/a", FSType: "fuse.blockfs"}}
	mine := entry{NS: ns, PID: pid, Start: startTime(pid), Mountpoint: "/mnt/a", Dev: "0:50"}
	theirs := entry{NS: ns + 1, PID: pid, Start: startTime(pid) + 7, Mountpoint: "/mnt/a", Dev: "0:50"}
	require.NoError(t, writeEntry(dir, mine))
	require.NoError(t, writeEntry(dir, theirs))
	got := readEntries(dir, mounts)
	require.Len(t, got, 1)
	assert.Equal(t, ns, got[0].NS)
	assert.FileExists(t, entryPath(dir, ns+1, pid), "another namespace's entry is kept")
	assert.FileExists(t, entryPath(dir, ns, pid))
}

// TestRemoveStaleKeepsFresh: a stale entry is removed, but not once a new daemon that got the
// same pid has written its own over it between the read and the removal.
func TestRemoveStaleKeepsFresh(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "reg")
	pid, ns := sleeper(t), pidNS()
	path := entryPath(dir, ns, pid)
	require.NoError(t, writeEntry(dir, entry{NS: ns, PID: pid, Start: startTime(pid) + 1}))
	removeStale(path)
	assert.NoFileExists(t, path, "a stale entry is removed")

	// Read as stale, then replaced by the live daemon's entry before the removal.
	require.NoError(t, writeEntry(dir, entry{NS: ns, PID: pid, Start: startTime(pid), Claim: Claim{Cache: 9}}))
	removeStale(path)
	e, err := readEntryFile(path)
	require.NoError(t, err, "the fresh entry stays")
	assert.Equal(t, int64(9), e.Claim.Cache)
	left, err := filepath.Glob(filepath.Join(dir, ".*"))
	require.NoError(t, err)
	assert.Empty(t, left, "nothing left behind")
}

// sleeper starts a process that lives until the test ends and returns its pid.
func sleeper(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd.Process.Pid
}
