package test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/internal/dstest"
	"github.com/blockfs/blockfs/shuffle"
)

const recordSize = 4096

// packed is a raw input file and the dataset blockfs pack made of it.
type packed struct {
	raw, dir string
	records  [][]byte
}

// packRaw writes n random records of recordSize bytes and packs them with the CLI.
func packRaw(t *testing.T, n int, blockSize string, extra ...string) *packed {
	t.Helper()
	dir := t.TempDir()
	p := &packed{raw: filepath.Join(dir, "input.bin"), dir: filepath.Join(dir, "ds")}
	var buf bytes.Buffer
	for i := 0; i < n; i++ {
		rec := dstest.Record(uint64(i), recordSize)
		p.records = append(p.records, rec)
		buf.Write(rec)
	}
	require.NoError(t, os.WriteFile(p.raw, buf.Bytes(), 0o644))
	args := append([]string{"pack", "--format", "raw", "--record-size", "4096", "--block-size", blockSize}, extra...)
	mustRun(t, append(args, p.raw, p.dir)...)
	return p
}

func sum(b []byte) [32]byte { return sha256.Sum256(b) }

func TestEpochAsUsersReadIt(t *testing.T) {
	p := packRaw(t, 3000, "256KiB") // 64 records per block, 47 blocks
	m := mount(t, p.dir, "--seed", "5", "--cache-size", "8MiB", "--readahead", "1MiB")
	d := dstest.FromDir(t, p.dir, p.records)
	opt := shuffle.Options{Seed: 5, Epoch: 0, Mode: shuffle.Full, Mix: 1}
	wantData, wantIDs, _ := d.Epoch(opt, 0, 3000)

	// os.File
	got, err := os.ReadFile(m.path("epoch-0000"))
	require.NoError(t, err)
	require.Equal(t, sum(wantData), sum(got), "epoch-0000 read with os.ReadFile")
	st, err := os.Stat(m.path("epoch-0000"))
	require.NoError(t, err)
	assert.EqualValues(t, 3000*recordSize, st.Size(), "exact size")
	ids, err := os.ReadFile(m.path("epoch-0000.ids"))
	require.NoError(t, err)
	require.Equal(t, wantIDs, ids)

	// It is a permutation of the input, matching its ids.
	seen := make([]bool, 3000)
	for i := 0; i < 3000; i++ {
		id := binary.LittleEndian.Uint64(ids[8*i:])
		require.False(t, seen[id])
		seen[id] = true
		require.Equal(t, p.records[id], got[i*recordSize:(i+1)*recordSize])
	}

	// dd with small and large blocks gives the same bytes.
	for _, bs := range []string{"4k", "1M"} {
		out := filepath.Join(t.TempDir(), "dd.out")
		sh(t, fmt.Sprintf("dd if=%s of=%s bs=%s status=none", m.path("epoch-0001"), out, bs))
		b, err := os.ReadFile(out)
		require.NoError(t, err)
		want, _, _ := d.Epoch(shuffle.Options{Seed: 5, Epoch: 1}, 0, 3000)
		assert.Equal(t, sum(want), sum(b), "dd bs=%s", bs)
	}

	checkRandomReads(t, m.path("epoch-0000"), wantData)
	checkRandomReads(t, m.path("epoch-0000.ids"), wantIDs)
	shardData, shardIDs, _ := d.Epoch(opt, 1000, 2000)
	checkRandomReads(t, m.path("shard-1-of-3/epoch-0000"), shardData)
	checkRandomReads(t, m.path("shard-1-of-3/epoch-0000.ids"), shardIDs)
}

// checkRandomReads preads path at random offsets and lengths, the way the view reference
// test reads the ReaderAt, and compares with want; reads at and past the end return 0 bytes.
func checkRandomReads(t *testing.T, path string, want []byte) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	r := rand.New(rand.NewSource(int64(len(want))))
	for i := 0; i < 200; i++ {
		off := r.Int63n(int64(len(want)))
		buf := make([]byte, 1+r.Intn(20000))
		n, _ := f.ReadAt(buf, off)
		require.EqualValues(t, min(int64(len(buf)), int64(len(want))-off), n, "%s: read of %d at %d", path, len(buf), off)
		require.True(t, bytes.Equal(want[off:off+int64(n)], buf[:n]), "%s: [%d,+%d) differs", path, off, n)
	}
	for _, off := range []int64{int64(len(want)), int64(len(want)) + 100} {
		n, err := f.ReadAt(make([]byte, 10), off)
		assert.Zero(t, n)
		assert.Error(t, err) // io.EOF
	}
}

func TestPythonReaderMatchesReferenceOrder(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("python3 is needed (CI installs it)")
	}
	p := packRaw(t, 1500, "128KiB")
	for _, c := range []struct{ mode, mix string }{{"full", "1"}, {"full", "3"}, {"blocks", "1"}, {"none", "1"}} {
		t.Run(c.mode+"-mix"+c.mix, func(t *testing.T) {
			m := mount(t, p.dir, "--seed", "9", "--shuffle", c.mode, "--mix", c.mix, "--cache-size", "8MiB", "--readahead", "1MiB")
			out := sh(t, fmt.Sprintf("python3 testdata/check_epoch.py %s %s %s 9 2 %s %s", p.dir, m.dir, p.raw, c.mode, c.mix))
			assert.Equal(t, "ok 1500\n", out)
		})
	}
}

func TestDeterminismAcrossRemounts(t *testing.T) {
	p := packRaw(t, 500, "64KiB")
	read := func(args ...string) map[string][32]byte {
		m := mount(t, p.dir, append(args, "--cache-size", "4MiB", "--readahead", "512KiB")...)
		out := map[string][32]byte{}
		for _, name := range []string{"epoch-0000", "epoch-0001", "epoch-0007.ids"} {
			b, err := os.ReadFile(m.path(name))
			require.NoError(t, err)
			out[name] = sum(b)
		}
		m.stop()
		return out
	}
	a := read("--seed", "1")
	assert.Equal(t, a, read("--seed", "1"), "same seed after remount")
	b := read("--seed", "2")
	assert.NotEqual(t, a["epoch-0000"], b["epoch-0000"], "another seed, another order")
	assert.NotEqual(t, a["epoch-0000"], a["epoch-0001"], "another epoch, another order")
}

func TestShardsPartitionEpoch(t *testing.T) {
	p := packRaw(t, 1001, "64KiB")
	m := mount(t, p.dir, "--cache-size", "4MiB", "--readahead", "512KiB", "--mix", "2")
	whole, err := os.ReadFile(m.path("epoch-0003"))
	require.NoError(t, err)
	wholeIDs, err := os.ReadFile(m.path("epoch-0003.ids"))
	require.NoError(t, err)
	for _, w := range []int{1, 2, 4, 7} {
		var data, ids []byte
		for r := 0; r < w; r++ {
			dir := m.path(fmt.Sprintf("shard-%d-of-%d", r, w))
			b, err := os.ReadFile(filepath.Join(dir, "epoch-0003"))
			require.NoError(t, err)
			assert.Len(t, b, (1001/w)*recordSize, "all shards the same length")
			data = append(data, b...)
			i, err := os.ReadFile(filepath.Join(dir, "epoch-0003.ids"))
			require.NoError(t, err)
			ids = append(ids, i...)
		}
		assert.Equal(t, sum(whole[:len(data)]), sum(data), "W=%d: shards are the epoch in order", w)
		assert.Equal(t, wholeIDs[:len(ids)], ids)
		assert.Len(t, ids, 8*(1001-1001%w), "only the remainder is dropped")
	}
}

func TestVariableLengthMount(t *testing.T) {
	requireFUSE(t)
	r := rand.New(rand.NewSource(5))
	lengths := make([]int, 2000)
	for i := range lengths {
		lengths[i] = r.Intn(3000)
	}
	lengths[10] = 0
	lengths[11] = 300000 // larger than a block
	d := dstest.Variable(t, filepath.Join(t.TempDir(), "ds"), lengths, 64<<10, true)
	m := mount(t, d.Dir, "--seed", "3", "--mix", "2", "--cache-size", "8MiB", "--readahead", "1MiB")
	for _, rg := range []struct {
		prefix     string
		start, end uint64
	}{{"", 0, 2000}, {"shard-1-of-3/", 666, 1332}} {
		opt := shuffle.Options{Seed: 3, Epoch: 4, Mode: shuffle.Full, Mix: 2}
		wantData, wantIDs, wantOffs := d.Epoch(opt, rg.start, rg.end)
		for name, want := range map[string][]byte{"epoch-0004": wantData, "epoch-0004.ids": wantIDs, "epoch-0004.offsets": wantOffs} {
			got, err := os.ReadFile(m.path(rg.prefix + name))
			require.NoError(t, err)
			assert.Equal(t, sum(want), sum(got), "%s%s", rg.prefix, name)
			checkRandomReads(t, m.path(rg.prefix+name), want)
		}
	}
}

func TestTreeAndMetadata(t *testing.T) {
	p := packRaw(t, 100, "64KiB")
	m := mount(t, p.dir, "--epochs", "3", "--seed", "11", "--cache-size", "4MiB", "--readahead", "512KiB")
	ents, err := os.ReadDir(m.dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	assert.Equal(t, []string{".blockfs", "epoch-0000", "epoch-0000.ids", "epoch-0001", "epoch-0001.ids", "epoch-0002", "epoch-0002.ids"}, names)
	// Any epoch resolves, beyond --epochs and past 4 digits.
	for _, name := range []string{"epoch-0099", "epoch-12345", "shard-0-of-1/epoch-0000"} {
		st, err := os.Stat(m.path(name))
		require.NoError(t, err, name)
		assert.EqualValues(t, 100*recordSize, st.Size())
	}
	// Malformed names are ENOENT, never a crash.
	for _, name := range []string{"epoch-abc", "epoch--1", "epoch-1", "epoch-00001", "epoch-99999999999999999999",
		"shard-3-of-3", "shard-0-of-0", "shard-1-of-x", "shard-01-of-2", "shard-0-of-2/shard-0-of-2",
		"epoch-0000.offsets", "nothing", ".blockfs/nothing"} {
		_, err := os.Stat(m.path(name))
		assert.True(t, errors.Is(err, syscall.ENOENT), "%s: %v", name, err)
	}
	var info map[string]any
	b, err := os.ReadFile(m.path(".blockfs/info.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &info))
	assert.EqualValues(t, 100, info["records"])
	assert.EqualValues(t, 4096, info["record_size"])
	assert.EqualValues(t, 11, info["seed"])
	assert.Equal(t, "full", info["shuffle"])
	assert.Equal(t, "fixed", info["kind"])

	before := readStats(t, m)
	_, err = os.ReadFile(m.path("epoch-0002"))
	require.NoError(t, err)
	after := readStats(t, m)
	assert.EqualValues(t, 100*recordSize, after["bytes_served"]-before["bytes_served"])
	assert.Greater(t, after["disk_reads"], before["disk_reads"])
	for _, k := range []string{"disk_bytes", "cache_hits", "cache_misses", "readahead_hits", "cache_bytes"} {
		assert.Contains(t, after, k)
	}
}

func TestWritesFail(t *testing.T) {
	p := packRaw(t, 50, "64KiB")
	m := mount(t, p.dir, "--cache-size", "4MiB", "--readahead", "512KiB")
	epoch := m.path("epoch-0000")
	_, err := os.OpenFile(epoch, os.O_WRONLY, 0)
	assert.ErrorIs(t, err, syscall.EROFS)
	_, err = os.OpenFile(epoch, os.O_RDWR, 0)
	assert.ErrorIs(t, err, syscall.EROFS)
	_, err = os.Create(m.path("new"))
	assert.ErrorIs(t, err, syscall.EROFS)
	assert.ErrorIs(t, os.Mkdir(m.path("d"), 0o755), syscall.EROFS)
	assert.ErrorIs(t, os.Remove(epoch), syscall.EROFS)
	assert.ErrorIs(t, os.Rename(epoch, m.path("x")), syscall.EROFS)
	assert.ErrorIs(t, os.Chmod(epoch, 0o777), syscall.EROFS)
	assert.ErrorIs(t, os.Truncate(epoch, 0), syscall.EROFS)
	assert.ErrorIs(t, os.Symlink(epoch, m.path("l")), syscall.EROFS)
	assert.ErrorIs(t, os.Link(epoch, m.path("h")), syscall.EROFS)
	assert.ErrorIs(t, syscall.Setxattr(epoch, "user.x", []byte("1"), 0), syscall.EROFS)
	assert.ErrorIs(t, os.WriteFile(m.path(".blockfs/stats.json"), []byte("x"), 0), syscall.EROFS)
	// Nothing was written to the dataset.
	out := sh(t, "find "+p.dir+" -newer "+filepath.Join(p.dir, "blockfs.json"))
	assert.Empty(t, strings.TrimSpace(out))
}

func TestDaemonAndUnmount(t *testing.T) {
	requireFUSE(t)
	p := packRaw(t, 200, "64KiB")
	mnt := t.TempDir()
	mustRun(t, "mount", "--daemon", "--cache-size", "4MiB", "--readahead", "512KiB", p.dir, mnt)
	unmountedAtEnd(t, mnt)
	require.True(t, isMounted(mnt), "--daemon returns once the mount is ready")
	b, err := os.ReadFile(filepath.Join(mnt, "epoch-0000"))
	require.NoError(t, err)
	assert.Len(t, b, 200*recordSize)
	_, errs, code := run(t, "mount", "--cache-size", "4MiB", "--readahead", "512KiB", p.dir, mnt)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "already a mount point")
	// A file held open: unmount refuses at once, saying what to do; closed, it unmounts.
	f, err := os.Open(filepath.Join(mnt, "epoch-0001"))
	require.NoError(t, err)
	start := time.Now()
	_, errs, code = run(t, "unmount", mnt)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "(files still open? close them, or use --lazy to detach now)")
	assert.Less(t, time.Since(start), 5*time.Second, "at once")
	assert.True(t, isMounted(mnt))
	require.NoError(t, f.Close())
	mustRun(t, "unmount", mnt)
	assert.False(t, isMounted(mnt))
	_, errs, code = run(t, "unmount", mnt)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "is not mounted")
}

// TestDaemonLog: a --daemon mount without --log keeps a log of its own, which info.json names:
// private to its user, in the log directory, holding why a read failed; it stays after the
// unmount, for whoever wants to know why.
func TestDaemonLog(t *testing.T) {
	requireFUSE(t)
	p := packRaw(t, 200, "64KiB") // 16 records a block
	mnt := t.TempDir()
	mustRun(t, "mount", "--daemon", "--cache-size", "4MiB", "--readahead", "0", "--shuffle", "none", p.dir, mnt)
	unmountedAtEnd(t, mnt)
	var info struct{ Log string }
	b, err := os.ReadFile(filepath.Join(mnt, ".blockfs/info.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &info))
	require.NotEmpty(t, info.Log, "info.json names the daemon's log")
	t.Cleanup(func() { os.Remove(info.Log); os.Remove(info.Log + ".1") })
	assert.Equal(t, "/run/blockfs/logs", filepath.Dir(info.Log), "root's daemons log in /run/blockfs/logs")
	st, err := os.Stat(info.Log)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	dir, err := os.Stat(filepath.Dir(info.Log))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), dir.Mode().Perm())

	require.NoError(t, os.Truncate(filepath.Join(p.dir, "blocks/000002.bin"), 1000))
	_, err = os.ReadFile(filepath.Join(mnt, "epoch-0000"))
	require.ErrorIs(t, err, syscall.EIO)
	mustRun(t, "unmount", mnt)
	logged, err := os.ReadFile(info.Log)
	require.NoError(t, err, "the log stays after the unmount")
	assert.Contains(t, string(logged), "blockfs: serving "+p.dir)
	assert.Contains(t, string(logged), "read epoch-0000 at ")
	assert.Contains(t, string(logged), p.dir+"/blocks/000002.bin: changed since the dataset was opened: its size is 1000 bytes")
}

// TestUsersLock: a daemon given --users-lock stays while a process holds a POSIX lock on the
// file and, within a second or two of the last lock going, unmounts, removes the lock files
// and (--remove-mountpoint) the mountpoint, and exits: blockfs.Mount's lease, which no way of
// ending the users (kill -9 included) can skip.
func TestUsersLock(t *testing.T) {
	requireFUSE(t)
	p := packRaw(t, 200, "64KiB")
	dir := t.TempDir()
	mnt, lock := filepath.Join(dir, "mnt"), filepath.Join(dir, "lock")
	require.NoError(t, os.Mkdir(mnt, 0o755))
	_, errs, code := run(t, "mount", "--daemon", "--users-lock", lock, p.dir, mnt)
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "--users-lock "+lock+": no such file or directory (create the file and hold a lock on it before mounting)")
	_, errs, code = run(t, "mount", "--daemon", "--remove-mountpoint", p.dir, mnt)
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "--remove-mountpoint goes with --users-lock FILE")

	f, err := os.OpenFile(lock, os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &syscall.Flock_t{Type: syscall.F_RDLCK}))
	mustRun(t, "mount", "--daemon", "--users-lock", lock, "--remove-mountpoint", "--cache-size", "4MiB", "--readahead", "512KiB", p.dir, mnt)
	unmountedAtEnd(t, mnt)
	pid := daemonPid(t, mnt)
	time.Sleep(1200 * time.Millisecond) // two polls
	require.True(t, isMounted(mnt), "held: the mount stays")
	b, err := os.ReadFile(filepath.Join(mnt, "epoch-0000"))
	require.NoError(t, err)
	assert.Len(t, b, 200*recordSize)

	require.NoError(t, f.Close()) // the last user goes
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) && (isMounted(mnt) || exists(mnt) || exists(lock) || exists(lock+".setup") || alive(pid)) {
		time.Sleep(50 * time.Millisecond)
	}
	assert.False(t, isMounted(mnt), "unmounted")
	assert.False(t, exists(mnt), "mountpoint removed")
	assert.False(t, exists(lock) || exists(lock+".setup"), "lock files removed")
	assert.False(t, alive(pid), "daemon exited")
}

// daemonPid returns the pid of the blockfs process serving mnt.
func daemonPid(t *testing.T, mnt string) int {
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		args, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		parts := strings.Split(string(args), "\x00")
		if len(parts) > 1 && slices.Contains(parts, "mount") && slices.Contains(parts, mnt) {
			return pid
		}
	}
	t.Fatalf("no daemon serves %s", mnt)
	return 0
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z")
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// TestDaemonMemoryBounded reads a dataset eight times the cache, by several readers at once,
// and requires the daemon's peak RSS to stay within --cache-size plus 64 MiB.
func TestDaemonMemoryBounded(t *testing.T) {
	p := packRaw(t, 32768, "1MiB") // 128 MiB
	m := mount(t, p.dir, "--cache-size", "16MiB", "--readahead", "4MiB", "--mix", "4")
	script := fmt.Sprintf(`set -e
dd if=%[1]s/epoch-0000 of=/dev/null bs=1M status=none
for r in 0 1 2 3; do dd if=%[1]s/shard-$r-of-4/epoch-0001 of=/dev/null bs=64k status=none & done
wait
dd if=%[1]s/epoch-0002.ids of=/dev/null bs=4k status=none`, m.dir)
	sh(t, script)
	hwm := peakRSS(t, m.cmd.Process.Pid)
	t.Logf("daemon peak RSS %d KiB with a 16 MiB cache over 128 MiB of data", hwm)
	assert.LessOrEqual(t, hwm, int64(16+64)<<10, "peak RSS in KiB")
}

// TestSigtermWithOpenReader: SIGTERM while a reader holds an epoch open still unmounts and
// exits 0; the reader then gets errors, not a hang.
func TestSigtermWithOpenReader(t *testing.T) {
	p := packRaw(t, 200, "64KiB")
	m := mount(t, p.dir, "--cache-size", "4MiB", "--readahead", "512KiB")
	f, err := os.Open(m.path("epoch-0000"))
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Read(make([]byte, 4096))
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, m.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-m.exited:
		require.NoError(t, err, "exit status after SIGTERM: %s", m.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("daemon still running 30s after SIGTERM with an open reader: %s", m.stderr.String())
	}
	t.Logf("exited %v after SIGTERM", time.Since(start))
	assert.False(t, isMounted(m.dir), "nothing left mounted")
	_, err = f.ReadAt(make([]byte, 4096), 100*4096)
	assert.Error(t, err, "the open reader gets an error once the daemon is gone")
}

// TestBillionRecordsInPlace mounts a sparse file of 10^9 4 KiB records in place (about 244,000
// logical blocks, no disk space used): the mount must be ready in under 2 s, and after reads
// across many epochs and shards the daemon's peak RSS must stay within --cache-size + 64 MiB.
func TestBillionRecordsInPlace(t *testing.T) {
	requireFUSE(t)
	src := sparseFile(t, "huge.bin", 1_000_000_000*4096)
	m := mountWithin(t, 2*time.Second, src, "--record-size", "4096", "--cache-size", "64MiB", "--readahead", "16MiB")
	st, err := os.Stat(m.path("epoch-0000"))
	require.NoError(t, err)
	assert.EqualValues(t, int64(1_000_000_000)*4096, st.Size())
	script := fmt.Sprintf(`set -e
dd if=%[1]s/epoch-0005 of=/dev/null bs=1M count=256 status=none
dd if=%[1]s/shard-7-of-8/epoch-0005.ids of=/dev/null bs=1M count=32 status=none
for e in 1 2 3 4 6 7; do dd if=%[1]s/epoch-000$e of=/dev/null bs=1M count=32 skip=3000000 status=none; done
for r in 0 1 2 3; do dd if=%[1]s/shard-$r-of-4/epoch-0008 of=/dev/null bs=1M count=64 status=none & done
wait`, m.dir)
	sh(t, script)
	hwm := peakRSS(t, m.cmd.Process.Pid)
	t.Logf("daemon peak RSS %d KiB with a 64 MiB cache over 10^9 records", hwm)
	assert.LessOrEqual(t, hwm, int64(64+64)<<10, "peak RSS in KiB")
}

// peakRSS returns a process's VmHWM in KiB.
func peakRSS(t *testing.T, pid int) int64 { return procStatusKiB(t, pid, "VmHWM") }

// procStatusKiB returns a field of /proc/PID/status that is in kB (VmHWM, VmRSS).
func procStatusKiB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	kb, err := statusKiB(pid, field)
	require.NoError(t, err)
	return kb
}

// statusKiB reads a kB field of /proc/PID/status.
func statusKiB(pid int, field string) (int64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			var kb int64
			_, err := fmt.Sscanf(v, "%d", &kb)
			return kb, err
		}
	}
	return 0, fmt.Errorf("no %s for pid %d", field, pid)
}
