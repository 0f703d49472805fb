package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What the tests of gs://, az:// and https:// ask of every store, written once.

// storePack is one input the store tests pack, locally and into the store, and the mount's
// files compared besides epochs 0, 1 and 7.
type storePack struct {
	name  string
	src   string
	flags []string // pack's
	mount []string // the store mount's, besides --seed
	files []string
}

// storePacks are fixed-size records, and variable ones compressed, mounted with a disk cache.
func storePacks(raw, folder, dir string) []storePack {
	return []storePack{
		{"fixed", raw, []string{"--format", "raw", "--record-size", "1000", "--block-size", "256KiB", "--seed", "5"}, nil,
			[]string{"epoch-0000.ids", "shard-1-of-3/epoch-0002"}},
		{"files-z", folder, []string{"--block-size", "128KiB", "--seed", "9", "--compress", "zstd"},
			[]string{"--disk-cache", filepath.Join(dir, "dc")}, []string{"epoch-0000.offsets", ".blockfs/names.txt"}},
	}
}

// packToStore packs c into the directory local and into the store at u (ep: --endpoint=...):
// a second pack there is refused without --force and replaces with it.
func packToStore(t *testing.T, c storePack, local, u, ep string) {
	t.Helper()
	mustRun(t, append(append([]string{"pack", "--quiet"}, c.flags...), c.src, local)...)
	mustRun(t, append(append([]string{"pack", "--quiet", ep}, c.flags...), c.src, u)...)
	_, errs, code := run(t, append(append([]string{"pack", "--quiet", ep}, c.flags...), c.src, u)...)
	require.Equal(t, 1, code, errs)
	require.Contains(t, errs, "--force")
	mustRun(t, append(append([]string{"pack", "--quiet", "--force", ep}, c.flags...), c.src, u)...)
}

// storeMatchesLocal checks the dataset at u (a store's URL; extra: its flags) against the same
// pack in local: verify and info read u, and a mount of each with the same seed serves the
// same epochs 0, 1 and 7 and files, byte for byte. It returns the two mounts.
func storeMatchesLocal(t *testing.T, c storePack, local, u string, extra ...string) (*mounted, *mounted) {
	t.Helper()
	require.Contains(t, mustRun(t, append(append([]string{"verify"}, extra...), u)...), u+": ok")
	require.Equal(t, strings.ReplaceAll(mustRun(t, "info", local), local, u), mustRun(t, append(append([]string{"info"}, extra...), u)...))
	ml := mount(t, local, "--seed", "3")
	mr := mount(t, u, append(append(append([]string{}, extra...), "--seed", "3"), c.mount...)...)
	for _, name := range append([]string{"epoch-0000", "epoch-0001", "epoch-0007"}, c.files...) {
		want, err := os.ReadFile(ml.path(name))
		require.NoError(t, err, name)
		require.NotEmpty(t, want, name)
		got, err := os.ReadFile(mr.path(name))
		require.NoError(t, err, name)
		require.True(t, slices.Equal(want, got), "%s differs between the local mount and the mount of %s", name, u)
	}
	return ml, mr
}

// replacedUnderMount mounts local and the same dataset at u (extra: its flags) with a cache
// smaller than the data, calls replace (which rewrites the store's block objects with other
// bytes of their size), and checks that epoch 2 reads as EIO where it must reach the store,
// never as the new bytes, and that the log says the files changed under the mount.
func replacedUnderMount(t *testing.T, local, u string, extra []string, replace func()) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "mount.log")
	ml := mount(t, local, "--seed", "1")
	mr := mount(t, u, append(extra, "--seed", "1", "--cache-size", "4MiB", "--readahead", "512KiB", "--log", logPath)...)
	want, err := os.ReadFile(ml.path("epoch-0002"))
	require.NoError(t, err)
	replace()
	require.NotZero(t, readAllOrEIO(t, mr.path("epoch-0002"), want, 1<<20))
	logText, _ := os.ReadFile(logPath)
	require.Contains(t, string(logText), "changed under the mount")
}

// faultsFlags make a mount of 8 MB through the fault proxy go back to the store every epoch
// (a 4 MiB cache) and give up on a silent store quickly (1 s stalls).
var faultsFlags = []string{"--seed", "1", "--cache-size", "4MiB", "--readahead", "512KiB",
	"--s3-concurrency", "2", "--s3-timeout", "2s", "--s3-stall-timeout", "1s", "--s3-retries", "3"}

// checkStoreFaults reads epochs of mr, a mount through proxy of the data ml mounts locally
// (both --seed 1): 503s, resets and cut or damaged bodies are retried to the exact bytes; a
// store that never answers gives EIO in bounded time, and the reads after it recovers (once
// the requests of the outage have ended: settle) get every byte.
func checkStoreFaults(t *testing.T, ml, mr *mounted, proxy *faultProxy) {
	t.Helper()
	want := func(name string) []byte {
		b, err := os.ReadFile(ml.path(name))
		require.NoError(t, err)
		return b
	}
	const chunk = 1 << 20
	require.Zero(t, readAllOrEIO(t, mr.path("epoch-0000"), want("epoch-0000"), chunk))
	retriedFaults(t, ml, mr, proxy)
	name := "epoch-0006"
	w := want(name)
	proxy.hang.Store(-1)
	readEIO(t, mr.path(name), 30*time.Second, "a store that never answers")
	proxy.clear()
	proxy.settle(t) // as TestS3Faults: the outage's loads end before the reads that must succeed
	require.Zero(t, readAllOrEIO(t, mr.path(name), w, chunk), "after recovery")
}

// retriedFaults reads epochs 1-4 of mr, a mount through proxy of the data ml mounts locally
// (same flags), one kind of fault a retry mends each (503s, resets, cut bodies, a damaged
// body): every byte exact, no EIO, and every fault met.
func retriedFaults(t *testing.T, ml, mr *mounted, proxy *faultProxy) {
	t.Helper()
	for i, fault := range []struct {
		name string
		c    *atomic.Int64
		n    int64
	}{
		{"503s", &proxy.err503, 3},
		{"resets", &proxy.reset, 3},
		{"truncated bodies", &proxy.truncate, 3},
		{"a damaged body", &proxy.flip, 1},
	} {
		fault.c.Store(fault.n)
		name := fmt.Sprintf("epoch-%04d", i+1)
		want, err := os.ReadFile(ml.path(name))
		require.NoError(t, err)
		require.Zero(t, readAllOrEIO(t, mr.path(name), want, 1<<20), fault.name)
		require.Zero(t, fault.c.Load(), "%s: the faults were not all met (nothing read from the store?)", fault.name)
		proxy.clear()
	}
}

// checkMergeLock: a merge into the store at url (ep its --endpoint flag) is refused while
// another's lock object is there, planted by plant(key, body) with the store's own client,
// saying whose it is and how to remove it (a lock left by a process gone from this host, boot
// and PID namespace, so said); the store's conditional create is what refuses, since a create that overwrote the
// lock would go on to find no parts. Then url's parts merge, and list(prefix) shows the lock
// gone after.
func checkMergeLock(t *testing.T, ep, url string, plant func(key string, body []byte), list func(prefix string) []string) {
	t.Helper()
	scheme, rest, _ := strings.Cut(url, "://")
	prefix := rest[strings.Index(rest, "/")+1:]
	if scheme == "az" { // az://ACCOUNT/CONTAINER/PREFIX
		prefix = prefix[strings.Index(prefix, "/")+1:]
	}
	host, err := os.Hostname()
	require.NoError(t, err)
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	require.NoError(t, err)
	pidNS, err := os.Readlink("/proc/self/ns/pid")
	require.NoError(t, err)
	gone := exec.Command("true")
	require.NoError(t, gone.Run())
	for _, c := range []struct {
		lock, want string
	}{
		{`{"host":"node-7","pid":4242,"started":"2026-01-01T00:00:00Z","token":"x"}`,
			"another merge of " + url + "-locked is running (node-7 pid 4242, since 2026-01-01T00:00:00Z): wait for it to end (and merge again if it failed); if it is gone, remove " + url + "-locked/.blockfs-merge.lock and merge again"},
		{fmt.Sprintf(`{"host":%q,"pid":%d,"started":"2026-01-01T00:00:00Z","token":"y","boot_id":%q,"pid_ns":%q}`,
			host, gone.Process.Pid, strings.TrimSpace(string(boot)), pidNS),
			"a merge of " + url + "-locked that is gone (" + host + " pid " + fmt.Sprint(gone.Process.Pid) + ", since 2026-01-01T00:00:00Z) left its lock " + url + "-locked/.blockfs-merge.lock: remove it and merge again"},
	} {
		plant(prefix+"-locked/.blockfs-merge.lock", []byte(c.lock))
		_, errs, code := run(t, "pack", "--merge", ep, url+"-locked")
		assert.Equal(t, 1, code, errs)
		assert.Equal(t, "blockfs: "+c.want+"\n", errs)
	}
	require.Contains(t, mustRun(t, "pack", "--merge", ep, url), "merged 3 parts")
	for _, k := range list(prefix + "/") {
		assert.NotContains(t, k, ".blockfs-merge.lock", "the merge removed its lock")
	}
}
