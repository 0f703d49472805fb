package test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// memCgroup is a memory cgroup made for one test (v1 or v2, whichever this machine has).
type memCgroup struct {
	dir     string
	version int
}

// newMemCgroup makes a memory cgroup limited to limit bytes and removes it when the test ends
// (after the test's mounts are stopped: cleanups run last first). Without a memory cgroup
// hierarchy it skips, or fails when BLOCKFS_REQUIRE_FUSE=1 (CI has one).
func newMemCgroup(t *testing.T, limit int64) *memCgroup {
	t.Helper()
	name := fmt.Sprintf("blockfs-test-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-"))
	var cg *memCgroup
	switch {
	case os.Geteuid() != 0:
	case fileExists("/sys/fs/cgroup/memory/memory.limit_in_bytes") || fileExists("/sys/fs/cgroup/memory/cgroup.procs"):
		cg = &memCgroup{dir: filepath.Join("/sys/fs/cgroup/memory", name), version: 1}
	case fileExists("/sys/fs/cgroup/cgroup.controllers"):
		ctl, _ := os.ReadFile("/sys/fs/cgroup/cgroup.subtree_control")
		if !strings.Contains(string(ctl), "memory") {
			_ = os.WriteFile("/sys/fs/cgroup/cgroup.subtree_control", []byte("+memory"), 0)
		}
		cg = &memCgroup{dir: filepath.Join("/sys/fs/cgroup", name), version: 2}
	}
	if cg == nil {
		if os.Getenv("BLOCKFS_REQUIRE_FUSE") == "1" {
			t.Fatalf("a memory cgroup is required (BLOCKFS_REQUIRE_FUSE=1): run as root on a machine with cgroup v1 memory or cgroup v2")
		}
		t.Skip("needs root and a memory cgroup hierarchy")
	}
	require.NoError(t, os.Mkdir(cg.dir, 0o755))
	t.Cleanup(func() {
		// Processes are gone by now; a cgroup with only page cache charged can be removed.
		if err := os.Remove(cg.dir); err != nil {
			t.Errorf("removing cgroup %s: %v", cg.dir, err)
		}
	})
	limitFile := "memory.max"
	if cg.version == 1 {
		limitFile = "memory.limit_in_bytes"
	}
	require.NoError(t, os.WriteFile(filepath.Join(cg.dir, limitFile), []byte(strconv.FormatInt(limit, 10)), 0))
	return cg
}

// wrap returns a script that runs its arguments as binary inside the cgroup (exec, so the
// process's pid is the binary's).
func (cg *memCgroup) wrap(t *testing.T, binary string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "in-cgroup")
	script := fmt.Sprintf("#!/bin/sh\necho $$ > %s/cgroup.procs || exit 97\nexec %s \"$@\"\n", cg.dir, binary)
	require.NoError(t, os.WriteFile(p, []byte(script), 0o755))
	return p
}

// run runs a command inside the cgroup and returns its combined output.
func (cg *memCgroup) run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(cg.wrap(t, name), args...).CombinedOutput()
	require.NoError(t, err, "%s %v: %s", name, args, out)
	return string(out)
}

// oomKills returns how many processes the kernel killed for the cgroup's limit.
func (cg *memCgroup) oomKills(t *testing.T) int64 {
	file := "memory.events"
	if cg.version == 1 {
		file = "memory.oom_control"
	}
	data, err := os.ReadFile(filepath.Join(cg.dir, file))
	require.NoError(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "oom_kill" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// diskRead returns the bytes process pid has had read from storage (/proc/PID/io read_bytes:
// page cache misses and O_DIRECT reads, not page cache hits).
func diskRead(t *testing.T, pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "read_bytes: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no read_bytes in /proc/%d/io", pid)
	return 0
}

// indexedFile writes n records of size rs whose first 8 bytes are the record's index (little
// endian) and the rest a pattern of it, synced and dropped from the page cache, so that the
// first reader, not this test, brings it in (and its cgroup is charged).
func indexedFile(t *testing.T, n, rs int64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "records.bin")
	f, err := os.Create(p)
	require.NoError(t, err)
	buf := make([]byte, 1<<20)
	per := int64(len(buf)) / rs
	for i := int64(0); i < n; i += per {
		k := min(per, n-i)
		for j := int64(0); j < k; j++ {
			fillRecord(buf[j*rs:(j+1)*rs], uint64(i+j))
		}
		_, err := f.Write(buf[:k*rs])
		require.NoError(t, err)
	}
	require.NoError(t, f.Sync())
	require.NoError(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
	require.NoError(t, f.Close())
	return p
}

func fillRecord(rec []byte, id uint64) {
	binary.LittleEndian.PutUint64(rec, id)
	for k := 8; k < len(rec); k++ {
		rec[k] = byte(id*2654435761>>(k%29)) ^ byte(k)
	}
}

// TestLargerThanMemory: a file served in place with default flags by a daemon inside a memory
// cgroup of 512 MiB, the data twice that. The plan takes the cgroup's limit, not the host's RAM
// (info.json says so); the daemon is not killed; each epoch after the first reads from disk
// only the data less the resident set (the daemon's own /proc/PID/io), within the issue's
// floor of 1.1 x (D - M) + 256 MiB for M the limit less the headroom; the resident blocks stay
// in the page cache across epochs and the streamed ones do not come in (mincore of the file);
// an epoch's bytes are exact; a trainer in the cgroup that takes half the limit makes the
// kernel take the resident set back, not kill the daemon, and the next epoch is still exact;
// the daemon's peak RSS stays within its cache + 64 MiB.
func TestLargerThanMemory(t *testing.T) {
	requireFUSE(t)
	const limit, rs = 512 << 20, 4096
	const records = 2 * limit / rs // 1 GiB
	const size = records * rs
	cg := newMemCgroup(t, limit)
	data := indexedFile(t, records, rs)
	m := mountBinary(t, cg.wrap(t, bin), data, t.TempDir(), "--record-size", "4096")
	pid := m.cmd.Process.Pid

	info := mountInfo(t, m)
	mem := info["memory"].(map[string]any)
	t.Logf("plan: %v; %v; %v", mem["budget_reason"], info["cache_size_reason"], info["direct_io_reason"])
	assert.EqualValues(t, limit, mem["total"], "the memory is the cgroup's limit, not the host's RAM")
	assert.Contains(t, mem["total_source"], "cgroup v")
	headroom := int64(mem["headroom"].(float64))
	resident := int64(mem["resident"].(float64))
	budget := int64(mem["budget"].(float64))
	cacheSize := int64(mem["cache"].(float64))
	assert.LessOrEqual(t, budget, int64(limit)-headroom)
	assert.LessOrEqual(t, cacheSize+resident, budget)
	require.GreaterOrEqual(t, resident, int64(64<<20), "a resident set beside the cache")
	require.Less(t, resident, int64(size))

	var perEpoch []int64
	for e := 0; e < 3; e++ {
		before := diskRead(t, pid)
		cg.run(t, "dd", "if="+m.path(fmt.Sprintf("epoch-%04d", e)), "of=/dev/null", "bs=1M", "status=none")
		perEpoch = append(perEpoch, diskRead(t, pid)-before)
		t.Logf("epoch %d: %d MiB from disk", e, perEpoch[e]>>20)
	}
	const slack = 32 << 20
	assert.GreaterOrEqual(t, perEpoch[0], int64(size)-slack, "the first epoch reads everything")
	floor := int64(1.1*float64(size-(limit-headroom))) + 256<<20
	for e := 1; e < 3; e++ {
		assert.InDelta(t, size-resident, perEpoch[e], slack, "epoch %d reads the data less the resident set", e)
		assert.LessOrEqual(t, perEpoch[e], floor, "epoch %d within 1.1 x (D - M) + 256 MiB", e)
	}
	// The resident blocks (the file's first bytes) stayed cached; the streamed ones never came in.
	inRes := residentPages(t, data, 0, resident)
	inStream := residentPages(t, data, resident, size-resident)
	t.Logf("page cache: %d of %d resident pages, %d of %d streamed pages", inRes, resident/pageSize, inStream, (size-resident)/pageSize)
	assert.GreaterOrEqual(t, inRes, resident/pageSize*95/100, "the resident set survives the epochs")
	assert.LessOrEqual(t, inStream, (size-resident)/pageSize/50, "streamed blocks stay out of the page cache")

	// Exact bytes: every record of an epoch is the one its .ids names.
	ids, err := os.ReadFile(m.path("epoch-0003.ids"))
	require.NoError(t, err)
	require.Len(t, ids, records*8)
	f, err := os.Open(m.path("epoch-0003"))
	require.NoError(t, err)
	defer f.Close()
	buf := make([]byte, 1<<20)
	want := make([]byte, rs)
	for i := 0; i < records; {
		n, err := io.ReadFull(f, buf)
		require.NoError(t, err)
		for j := 0; j < n/rs; j, i = j+1, i+1 {
			fillRecord(want, binary.LittleEndian.Uint64(ids[i*8:]))
			require.Equal(t, want, buf[j*rs:(j+1)*rs], "record %d of epoch 3", i)
		}
	}

	require.Zero(t, cg.oomKills(t), "nothing in the cgroup was OOM-killed")
	require.Nil(t, m.cmd.ProcessState, "the daemon is alive")

	// Pressure: a trainer in the cgroup takes 256 MiB and holds it. The resident set is page
	// cache, so the kernel takes it back; the daemon is not killed and the next epoch is read
	// whole and exact (from disk where the resident pages went).
	hog := exec.Command(cg.wrap(t, "/usr/bin/python3"), "-c",
		"import sys, time\nb = bytearray(256 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('held', flush=True)\nsys.stdin.read()")
	stdin, err := hog.StdinPipe()
	require.NoError(t, err)
	out, err := hog.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, hog.Start())
	held := make([]byte, 5)
	_, err = io.ReadFull(out, held)
	require.NoError(t, err, "the memory hog did not start")
	before := diskRead(t, pid)
	got, err := os.ReadFile(m.path("epoch-0004"))
	require.NoError(t, err)
	require.Len(t, got, size)
	ids4, err := os.ReadFile(m.path("epoch-0004.ids"))
	require.NoError(t, err)
	for i := 0; i < records; i += 997 {
		fillRecord(want, binary.LittleEndian.Uint64(ids4[i*8:]))
		require.Equal(t, want, got[i*rs:(i+1)*rs], "record %d of epoch 4 under pressure", i)
	}
	t.Logf("under pressure: epoch 4 read %d MiB from disk; %d of %d resident pages still cached",
		(diskRead(t, pid)-before)>>20, residentPages(t, data, 0, resident), resident/pageSize)
	stdin.Close()
	require.NoError(t, hog.Wait())
	require.Zero(t, cg.oomKills(t), "nothing was OOM-killed under pressure")
	require.Nil(t, m.cmd.ProcessState, "the daemon is alive")
	hwm := peakRSS(t, pid) << 10
	t.Logf("daemon peak RSS %d MiB, cache %d MiB", hwm>>20, cacheSize>>20)
	assert.LessOrEqual(t, hwm, cacheSize+64<<20, "peak RSS within the cache + 64 MiB")
}

// TestTwoMountsShareTheBudget: a mount plans its budget within what the mounts already up
// in its cgroup planned (read from their info.json), so two mounts do not each claim the same
// share of one 4 GiB cgroup; a second mount of the same data shares the first's resident set
// (only the first's cache comes off its budget), and a mount of other data counts that
// resident set once.
func TestTwoMountsShareTheBudget(t *testing.T) {
	requireFUSE(t)
	const gib = 1 << 30
	cg := newMemCgroup(t, 4*gib)
	data := sparseFile(t, "a.bin", 2*gib)
	memOf := func(data string) map[string]any {
		// --mix 1: the budget's arithmetic with the smallest window (the automatic one, 512 MiB
		// over data in place, takes twice that from the cache's share, leaving 1.9 GiB resident).
		m := mountBinary(t, cg.wrap(t, bin), data, t.TempDir(), "--record-size", "4096", "--mix", "1")
		mem := mountInfo(t, m)["memory"].(map[string]any)
		t.Logf("%s: %v; cache %v, resident %v", filepath.Base(data), mem["budget_reason"], mem["cache"], mem["resident"])
		return mem
	}
	a := memOf(data)
	require.EqualValues(t, 0, a["claimed_by_other_mounts"], "no other mount in this cgroup")
	require.EqualValues(t, 2*gib, a["resident"], "2 GiB in a 3 GiB budget: resident whole beside the cache")
	b := memOf(data)
	require.Equal(t, a["cache"], b["claimed_by_other_mounts"], "the same data: only the first's cache is claimed")
	require.Equal(t, a["resident"], b["resident"], "and the resident set is the same")
	c := memOf(sparseFile(t, "c.bin", gib))
	claim := a["cache"].(float64) + b["cache"].(float64) + a["resident"].(float64)
	require.Equal(t, claim, c["claimed_by_other_mounts"], "other data: both caches and the shared resident set once")
	require.LessOrEqual(t, c["budget"].(float64), max(4*gib-c["headroom"].(float64)-claim, 160<<20), "the third budget leaves the others'")
	require.Contains(t, c["budget_reason"], "the other blockfs mounts planned")
}

// TestTwoMountsAtOnce: two mounts started at the same moment in one 4 GiB cgroup plan one
// after the other (the registry's planning lock), so the second counts the first's claim:
// before, both often read the claims before either had written its own and each planned the
// same free memory (two 18 GB budgets on a 24 GB machine, in 2 of 3 rounds).
func TestTwoMountsAtOnce(t *testing.T) {
	requireFUSE(t)
	const gib = 1 << 30
	cg := newMemCgroup(t, 4*gib)
	data := []string{sparseFile(t, "a.bin", gib), sparseFile(t, "b.bin", gib)}
	wrapped := cg.wrap(t, bin)
	for round := 0; round < 3; round++ {
		var cmds []*exec.Cmd
		var mnts []string
		for _, d := range data {
			mnt := t.TempDir()
			cmd := exec.Command(wrapped, "mount", "--record-size", "4096", "--mix", "1", d, mnt)
			cmd.Stderr = newLogFile(t).f
			require.NoError(t, cmd.Start())
			cmds, mnts = append(cmds, cmd), append(mnts, mnt)
		}
		t.Cleanup(func() {
			for i, c := range cmds {
				_ = c.Process.Signal(syscall.SIGTERM)
				_ = c.Wait()
				if isMounted(mnts[i]) {
					_ = syscall.Unmount(mnts[i], syscall.MNT_DETACH)
				}
			}
		})
		var mem []map[string]any
		for _, mnt := range mnts {
			deadline := time.Now().Add(30 * time.Second)
			var b []byte
			for {
				var err error
				if isMounted(mnt) {
					if b, err = os.ReadFile(filepath.Join(mnt, ".blockfs", "info.json")); err == nil {
						break
					}
				}
				require.False(t, time.Now().After(deadline), "%s not mounted: %v", mnt, err)
				time.Sleep(20 * time.Millisecond)
			}
			var info map[string]any
			require.NoError(t, json.Unmarshal(b, &info))
			mem = append(mem, info["memory"].(map[string]any))
		}
		for _, c := range cmds {
			require.NoError(t, c.Process.Signal(syscall.SIGTERM))
			require.NoError(t, c.Wait())
		}
		a, b := mem[0], mem[1]
		t.Logf("round %d: claimed by others %v and %v; budgets %v and %v", round, a["claimed_by_other_mounts"], b["claimed_by_other_mounts"], a["budget"], b["budget"])
		first, second := a, b
		if a["claimed_by_other_mounts"].(float64) > 0 {
			first, second = b, a
		}
		require.EqualValues(t, 0, first["claimed_by_other_mounts"], "round %d: the first to plan saw no claim", round)
		require.Equal(t, first["cache"].(float64)+first["resident"].(float64), second["claimed_by_other_mounts"],
			"round %d: the second counted the first's cache and resident set", round)
	}
}
