package test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/blockfs/blockfs/internal/dstest"
	"github.com/blockfs/blockfs/shuffle"
)

// readStats returns the mount's .blockfs/stats.json.
func readStats(t *testing.T, m *mounted) map[string]float64 {
	t.Helper()
	b, err := os.ReadFile(m.path(".blockfs/stats.json"))
	require.NoError(t, err)
	var raw map[string]any
	require.NoError(t, json.Unmarshal(b, &raw))
	out := map[string]float64{}
	for k, v := range raw {
		if f, ok := v.(float64); ok {
			out[k] = f
		}
	}
	return out
}

// TestBlockLostUnderMount deletes one block file and truncates another under a running mount:
// reads that touch them get EIO (never zeros), other ranges keep working, the daemon keeps
// running and logs the block and the cause.
func TestBlockLostUnderMount(t *testing.T) {
	p := packRaw(t, 160, "64KiB", "--no-shuffle") // 16 records (64 KiB) a block, 10 blocks
	addr := freeAddr(t)
	m := mount(t, p.dir, "--shuffle", "none", "--readahead", "0", "--cache-size", "4MiB", "--metrics", addr)
	require.NoError(t, os.Remove(filepath.Join(p.dir, "blocks/000003.bin")))
	require.NoError(t, os.Truncate(filepath.Join(p.dir, "blocks/000005.bin"), 1000))
	f, err := os.Open(m.path("epoch-0000"))
	require.NoError(t, err)
	defer f.Close()
	const block = 16 * recordSize
	buf := make([]byte, recordSize)
	for _, b := range []int{3, 5} {
		_, err := f.ReadAt(buf, int64(b*block+100))
		assert.ErrorIs(t, err, syscall.EIO, "block %d", b)
	}
	for _, b := range []int{0, 4, 6, 9} {
		n, err := f.ReadAt(buf, int64(b*block))
		require.NoError(t, err, "block %d", b)
		assert.Equal(t, recordSize, n)
		assert.Equal(t, p.records[b*16], buf, "block %d", b)
	}
	// dd over the whole epoch fails instead of reading zeros.
	out, err := exec.Command("dd", "if="+m.path("epoch-0000"), "of=/dev/null", "bs=1M").CombinedOutput()
	assert.Error(t, err)
	assert.Contains(t, string(out), "Input/output error")
	assert.Nil(t, m.cmd.ProcessState, "the daemon keeps running")
	// Why is where a trainer looks: stats.json counts the failed reads by kind and keeps the
	// reasons, blockfs stats shows them, /metrics counts them by kind.
	var st struct {
		Errors uint64            `json:"read_errors"`
		ByKind map[string]uint64 `json:"read_errors_by_kind"`
		Last   []struct {
			File, Kind, Reason string
			Offset             int64
			Count              uint64
		} `json:"last_errors"`
	}
	b, err := os.ReadFile(m.path(".blockfs/stats.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &st))
	assert.Positive(t, st.Errors)
	assert.Positive(t, st.ByKind["gone"])
	assert.Positive(t, st.ByKind["changed"])
	var sum uint64
	for _, n := range st.ByKind {
		sum += n
	}
	assert.Equal(t, st.Errors, sum, "every failed read has a kind")
	reasons := map[string]string{}
	for _, e := range st.Last {
		assert.Equal(t, "epoch-0000", e.File)
		assert.Positive(t, e.Count)
		reasons[e.Kind] = e.Reason
	}
	assert.Contains(t, reasons["gone"], "a dataset file is gone (changed under the mount? remount it): open "+p.dir+"/blocks/000003.bin: no such file or directory")
	assert.Contains(t, reasons["changed"], p.dir+"/blocks/000005.bin: changed since the dataset was opened")
	view := mustRun(t, "stats", "--once", "--interval", "0.1", m.dir)
	assert.Contains(t, view, `"last_errors":`)
	assert.Contains(t, view, "blocks/000003.bin: no such file or directory")
	fams := scrape(t, addr)
	byKind := map[string]float64{}
	for _, mt := range fams["blockfs_read_errors_total"].GetMetric() {
		for _, l := range mt.GetLabel() {
			byKind[l.GetValue()] = mt.GetCounter().GetValue()
		}
	}
	// The kernel's readahead may still be failing on: the scrape counts at least as many.
	assert.GreaterOrEqual(t, byKind["gone"], float64(st.ByKind["gone"]))
	assert.GreaterOrEqual(t, byKind["changed"], float64(st.ByKind["changed"]))
	assert.Contains(t, byKind, "corrupt", "every kind, 0 where none")
	// The daemon writes its log line before it answers the read, but this process copies the
	// daemon's stderr from a pipe on a goroutine of its own: wait for the copy.
	waitLog(t, m, "blocks/000003.bin: no such file", "blocks/000005.bin: changed since")
	log := m.stderr.String()
	assert.Contains(t, log, "a dataset file is gone (changed under the mount? remount it): open "+p.dir+"/blocks/000003.bin: no such file or directory")
	assert.Contains(t, log, "a dataset file changed under the mount (the mount serves the version it opened, or nothing; remount to serve the new one): open "+p.dir+"/blocks/000005.bin: changed since the dataset was opened: its size is 1000 bytes, was 65536")
}

// TestKill9AndRemount: after kill -9 the mount point is stale; mount refuses it with advice,
// blockfs unmount clears it, and a new mount on the same point works.
func TestKill9AndRemount(t *testing.T) {
	p := packRaw(t, 100, "64KiB")
	m := mount(t, p.dir, "--cache-size", "4MiB", "--readahead", "512KiB")
	_, err := os.ReadFile(m.path("epoch-0000"))
	require.NoError(t, err)
	m.kill()
	_, err = os.ReadFile(m.path("epoch-0000"))
	require.Error(t, err, "the stale mount does not serve")
	_, errs, code := run(t, "mount", "--cache-size", "4MiB", "--readahead", "512KiB", p.dir, m.dir)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "blockfs unmount")
	mustRun(t, "unmount", m.dir)
	assert.False(t, isMounted(m.dir))
	m2 := mountAt(t, p.dir, m.dir, "--cache-size", "4MiB", "--readahead", "512KiB")
	b, err := os.ReadFile(m2.path("epoch-0000"))
	require.NoError(t, err)
	assert.Len(t, b, 100*recordSize)
}

// TestReaderKilledMidRead: readers killed in the middle of reads leave no goroutines or file
// descriptors behind in the daemon.
func TestReaderKilledMidRead(t *testing.T) {
	p := packRaw(t, 8192, "1MiB") // 32 MiB
	m := mount(t, p.dir, "--cache-size", "16MiB", "--readahead", "4MiB")
	// Warm go-fuse's reader pool so the baseline is its steady state.
	sh(t, fmt.Sprintf("for e in 0 1; do dd if=%s/epoch-000$e of=/dev/null bs=1M status=none & done; wait", m.dir))
	time.Sleep(500 * time.Millisecond)
	base := readStats(t, m)
	for i := 0; i < 5; i++ {
		cmd := exec.Command("dd", "if="+m.path(fmt.Sprintf("shard-%d-of-5/epoch-%04d", i, 10+i)), "of=/dev/null", "bs=4k")
		require.NoError(t, cmd.Start())
		time.Sleep(30 * time.Millisecond)
		require.NoError(t, cmd.Process.Kill())
		_ = cmd.Wait()
	}
	var now map[string]float64
	deadline := time.Now().Add(10 * time.Second)
	for {
		now = readStats(t, m)
		if now["goroutines"] <= base["goroutines"]+2 && now["open_fds"] <= base["open_fds"] || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("goroutines %v -> %v, open fds %v -> %v", base["goroutines"], now["goroutines"], base["open_fds"], now["open_fds"])
	assert.LessOrEqual(t, now["goroutines"], base["goroutines"]+2, "goroutines return to the baseline")
	assert.LessOrEqual(t, now["open_fds"], base["open_fds"], "open fds return to the baseline")
}

// TestSigintWhileReading: SIGINT while readers are reading unmounts and exits 0; the readers
// finish or get an error, never hang.
func TestSigintWhileReading(t *testing.T) {
	p := packRaw(t, 8192, "1MiB")
	m := mount(t, p.dir, "--cache-size", "16MiB", "--readahead", "4MiB")
	var readers []*exec.Cmd
	for i := 0; i < 3; i++ {
		cmd := exec.Command("dd", "if="+m.path(fmt.Sprintf("epoch-%04d", i)), "of=/dev/null", "bs=4k")
		require.NoError(t, cmd.Start())
		readers = append(readers, cmd)
	}
	time.Sleep(100 * time.Millisecond)
	require.NoError(t, m.cmd.Process.Signal(os.Interrupt))
	select {
	case err := <-m.exited:
		require.NoError(t, err, "exit status after SIGINT: %s", m.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("daemon still running 30 s after SIGINT")
	}
	for _, r := range readers {
		done := make(chan error, 1)
		go func() { done <- r.Wait() }()
		select {
		case err := <-done:
			var ee *exec.ExitError
			if err != nil && !errors.As(err, &ee) {
				t.Errorf("reader: %v", err)
			}
		case <-time.After(10 * time.Second):
			_ = r.Process.Kill()
			t.Error("a reader hung after the daemon exited")
		}
	}
	assert.False(t, isMounted(m.dir))
	assert.True(t, strings.Contains(m.stderr.String(), "interrupt"), m.stderr.String())
}

// TestFDLimitIsEMFILE: a daemon out of file descriptors answers reads with EMFILE and logs one
// line saying so and what to do, instead of calling the data corrupt; once the limit is raised
// the same reads give the epoch's bytes.
func TestFDLimitIsEMFILE(t *testing.T) {
	p := packRaw(t, 256, "64KiB") // 16 records per block, 16 blocks
	m := mount(t, p.dir, "--cache-size", "4MiB", "--readahead", "0", "--direct", "off")
	pid := m.cmd.Process.Pid
	// The mount point appears before the daemon has finished starting (it still opens files to
	// tune readahead); wait for its last start-up log line.
	require.Eventually(t, func() bool { return strings.Contains(m.stderr.String(), "blockfs: memory budget ") }, 20*time.Second, 10*time.Millisecond)
	var old unix.Rlimit
	require.NoError(t, unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &old))
	// No descriptor may be opened (those open stay usable): the next open of a block file
	// fails, whatever descriptor numbers are free.
	tight := unix.Rlimit{Cur: 0, Max: old.Max}
	require.NoError(t, unix.Prlimit(pid, unix.RLIMIT_NOFILE, &tight, nil))
	_, err := os.ReadFile(m.path("epoch-0000"))
	require.Error(t, err)
	assert.ErrorIs(t, err, syscall.EMFILE)
	waitLog(t, m, "out of file descriptors")
	assert.Contains(t, m.stderr.String(), "out of file descriptors (raise the daemon's limit: ulimit -n)")
	assert.Contains(t, m.stderr.String(), "too many open files")
	assert.NotContains(t, m.stderr.String(), "corrupt")

	require.NoError(t, unix.Prlimit(pid, unix.RLIMIT_NOFILE, &old, nil))
	got, err := os.ReadFile(m.path("epoch-0000"))
	require.NoError(t, err)
	d := dstest.FromDir(t, p.dir, p.records)
	want, _, _ := d.Epoch(shuffle.Options{Mode: shuffle.Full}, 0, 256)
	assert.Equal(t, sum(want), sum(got))
}

// waitLog waits up to 5 s for every one of words to appear in m's log: a line the daemon wrote
// before answering a read reaches m.stderr through a pipe, copied on a goroutine of this
// process, so it may come a moment after the read's answer.
func waitLog(t *testing.T, m *mounted, words ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		all := true
		for _, w := range words {
			all = all && strings.Contains(m.stderr.String(), w)
		}
		if all {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
