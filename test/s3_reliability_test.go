package test

import (
	"bufio"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// recordBytes is record i of the large-block dataset: i, then bytes drawn from i (xorshift),
// so a reader can tell any record's bytes without a second copy of the data.
func recordBytes(i uint64, rec []byte) {
	binary.LittleEndian.PutUint64(rec, i)
	x := (i + 1) * 0x9e3779b97f4a7c15
	for k := 8; k+8 <= len(rec); k += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(rec[k:], x)
	}
}

// writeRecords writes n records of size bytes (recordBytes) to path.
func writeRecords(t *testing.T, path string, n, size int) {
	f, err := os.Create(path)
	require.NoError(t, err)
	w := bufio.NewWriterSize(f, 1<<20)
	rec := make([]byte, size)
	for i := range n {
		recordBytes(uint64(i), rec)
		_, err := w.Write(rec)
		require.NoError(t, err)
	}
	require.NoError(t, w.Flush())
	require.NoError(t, f.Close())
}

// TestS3LargeBlockChecked serves a dataset of a 300 MiB block and a 100 MiB one (over and
// under the 256 MiB that objects were once staged up to, and both over the cache's 64 MiB
// runs) through a proxy that damages bodies: every read is the right bytes or EIO, never
// other bytes, when each body has a bit flipped or is shifted by 4 KiB (right length and
// headers); a single damaged body is fetched again; and the daemon's peak RSS stays within
// --cache-size plus 64 MiB (the 100 MiB object was once staged whole beside the cache).
func TestS3LargeBlockChecked(t *testing.T) {
	requireFUSE(t)
	srv := startMinio(t)
	srv.bucket("data")
	proxy := startProxy(t, srv.addr)
	dir := t.TempDir()
	const recSize, records = 4096, 100 << 10 // 400 MiB
	raw := filepath.Join(dir, "records.bin")
	writeRecords(t, raw, records, recSize)
	url := "s3://data/big"
	start := time.Now()
	mustRun(t, "pack", "--quiet", "--endpoint", srv.endpoint(), "--format", "raw", "--record-size", "4096",
		"--block-size", "300MiB", "--no-shuffle", raw, url)
	require.NoError(t, os.Remove(raw))
	t.Logf("packed 400 MiB to MinIO in %v", time.Since(start))
	flags := []string{"--seed", "1", "--mix", "1", "--cache-size", "450MiB"}

	// The order, from a mount straight to MinIO: epoch-0000.ids says which record is where.
	ref := mount(t, url, append([]string{"--endpoint", srv.endpoint()}, flags...)...)
	idsRaw, err := os.ReadFile(ref.path("epoch-0000.ids"))
	require.NoError(t, err)
	require.Len(t, idsRaw, 8*records)
	ref.stop()

	logPath := filepath.Join(dir, "s3.log")
	m := mount(t, url, append([]string{"--endpoint", proxy.endpoint(), "--log", logPath}, flags...)...)
	f, err := os.Open(m.path("epoch-0000"))
	require.NoError(t, err)
	defer f.Close()
	const chunk = 4 << 20
	want := make([]byte, recSize)
	buf := make([]byte, chunk)
	// read reads the chunk at off: nil with every byte right, or EIO; never other bytes.
	read := func(off int64) error {
		n, err := f.ReadAt(buf, off)
		if err != nil {
			require.ErrorIs(t, err, syscall.EIO, "read at %d", off)
			return err
		}
		require.Equal(t, chunk, n)
		for k := 0; k < n; k += recSize {
			pos := (off + int64(k)) / recSize
			recordBytes(binary.LittleEndian.Uint64(idsRaw[8*pos:]), want)
			if string(buf[k:k+recSize]) != string(want) {
				t.Fatalf("wrong bytes at offset %d of epoch-0000 (record %d): never other bytes", off+int64(k), pos)
			}
		}
		return nil
	}
	// Offsets in both blocks, whichever the epoch visits first.
	offs := []int64{0, 150 << 20, 310 << 20, 390 << 20}
	for _, fault := range []struct {
		name string
		set  func()
	}{
		{"every body with a bit flipped", func() { proxy.flip.Store(-1) }},
		{"every body shifted by 4 KiB", func() { proxy.shift.Store(-1) }},
	} {
		fault.set()
		for _, off := range offs {
			start := time.Now()
			require.Error(t, read(off), "%s: a read at %d cannot be right", fault.name, off)
			t.Logf("%s: EIO at %d MiB in %v", fault.name, off>>20, time.Since(start))
		}
		proxy.clear()
	}
	log, _ := os.ReadFile(logPath)
	require.Contains(t, string(log), "corrupt dataset")
	require.Contains(t, string(log), "CRC32C")

	// One damaged body: fetched again, the right bytes.
	proxy.flip.Store(1)
	require.NoError(t, read(offs[1]))
	proxy.clear()

	// The whole epoch, right, within the memory bound.
	start = time.Now()
	for off := int64(0); off < records*recSize; off += chunk {
		require.NoError(t, read(off))
	}
	t.Logf("read the 400 MiB epoch in %v", time.Since(start))
	hwm := peakRSS(t, m.cmd.Process.Pid) << 10
	t.Logf("daemon peak RSS %d MiB (--cache-size 450 MiB)", hwm>>20)
	require.LessOrEqual(t, hwm, int64(450+64)<<20, "peak RSS over --cache-size + 64 MiB")
}

// signal sends sig to the MinIO server (SIGSTOP: a store that accepts connections and
// answers nothing; SIGCONT: back).
func (s *minioServer) signal(t *testing.T, sig syscall.Signal) {
	require.NotNil(t, s.cmd)
	require.NoError(t, s.cmd.Process.Signal(sig))
}

// TestS3StoppedStore: with default flags (but the endpoint), a store that stops answering
// (SIGSTOP) gives EIO within the documented bound, first for a dd of an epoch (the reader, the
// readahead and the kernel's second try of a failed page all waiting) and then, the store
// known silent, for a single read; a reader killed while it waits (timeout) is released at
// once, buffered or O_DIRECT; refused connections (MinIO killed) give EIO in seconds; the
// mounts serve every byte once the store is back.
func TestS3StoppedStore(t *testing.T) {
	t.Parallel() // it mostly waits for the store's timeouts: beside the other tests that do (make test's -parallel)
	requireFUSE(t)
	srv := startMinio(t)
	srv.bucket("data")
	dir := t.TempDir()
	raw, _ := s3Sources(t, dir, 40000, 0)
	flags := []string{"--format", "raw", "--record-size", "1000", "--block-size", "1MiB", "--seed", "2"}
	local := filepath.Join(dir, "local")
	url := "s3://data/stopped"
	mustRun(t, append(append([]string{"pack", "--quiet"}, flags...), raw, local)...)
	mustRun(t, append(append([]string{"pack", "--quiet", "--endpoint", srv.endpoint()}, flags...), raw, url)...)
	ml := mount(t, local, "--seed", "1")
	logPath := filepath.Join(dir, "s3.log")
	mr := mount(t, url, "--endpoint", srv.endpoint(), "--seed", "1", "--log", logPath)
	// Two more mounts, each meeting a fault fresh: readers killed while they wait (without
	// readahead, so that each read loads its pages itself rather than wait for the
	// readahead's loads), and refused connections.
	mr2 := mount(t, url, "--endpoint", srv.endpoint(), "--seed", "1", "--readahead", "0")
	log3 := filepath.Join(dir, "s3-3.log")
	mr3 := mount(t, url, "--endpoint", srv.endpoint(), "--seed", "1", "--log", log3)
	stopped := false
	t.Cleanup(func() {
		if stopped && srv.cmd != nil {
			srv.signal(t, syscall.SIGCONT) // before the mount's cleanup unmounts
		}
	})
	same := func(m *mounted, name string) {
		t.Helper()
		want, err := os.ReadFile(ml.path(name))
		require.NoError(t, err)
		got, err := os.ReadFile(m.path(name))
		require.NoError(t, err, name)
		require.True(t, string(want) == string(got), "%s differs from the local mount", name)
	}
	// timed runs a command and returns its exit code and how long it took.
	timed := func(name string, args ...string) (int, time.Duration) {
		t.Helper()
		cmd := exec.Command(name, args...)
		start := time.Now()
		err := cmd.Run()
		took := time.Since(start)
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), took
		}
		require.NoError(t, err)
		return 0, took
	}
	// The documented bound (docs/USAGE.md): (retries + 2) x stall timeout plus the backoff
	// (at most 3 s) = 33 s, and a stall more where every slot is busy (the readahead's tries
	// hold them: 38 s; measured 30.4-37.6 s), and slack for the timers of a busy machine; 60 s
	// is what issue 26 asks for.
	const bound, stall, slack, limit = 33 * time.Second, 5 * time.Second, 2 * time.Second, 60 * time.Second

	srv.signal(t, syscall.SIGSTOP)
	stopped = true
	// Readers killed while they wait for a store that does not answer: released at once (the
	// FUSE request is interrupted), with O_DIRECT (a FUSE read of its own) and buffered (the
	// kernel's readahead).
	for i, direct := range []bool{true, false} {
		args := []string{"-s", "TERM", "2", "dd", "if=" + mr2.path("epoch-000"+string(rune('3'+i))), "of=/dev/null", "bs=1M"}
		if direct {
			args = append(args, "iflag=direct")
		}
		code, took := timed("timeout", args...)
		t.Logf("store stopped: timeout 2 dd (O_DIRECT %v): exit %d after %v", direct, code, took)
		require.Equal(t, 124, code, "dd was not waiting for the store when timeout killed it")
		require.Less(t, took, 3500*time.Millisecond, "a reader killed while it waits must be released at once")
	}

	code, took := timed("dd", "if="+mr.path("epoch-0000"), "of=/dev/null", "bs=4M")
	t.Logf("store stopped: dd of an epoch exited %d after %v", code, took)
	require.NotZero(t, code, "dd of an epoch from a stopped store succeeded")
	require.Less(t, took, limit)
	require.Less(t, took, bound+stall+slack, "over the documented bound")

	// One try for each of the kernel's two (a stall each), each after at most a stall's wait
	// for a slot.
	took = readEIO(t, mr.path("epoch-0001"), 21*time.Second, "a read once the store is known silent")
	t.Logf("store known silent: a 1 MiB read got EIO after %v", took)
	log, _ := os.ReadFile(logPath)
	require.Contains(t, string(log), "object store unavailable")
	require.Contains(t, string(log), "no progress for 5s")

	// Refused connections (MinIO killed), to a mount that has not met the silence: the
	// retries' backoff, seconds (5.3-5.8 s alone), and up to twice that: a read that joined a
	// load begun before it (readahead's) tries once more itself when that load fails (cache's
	// retryJoined). 11.3 s was seen once, in a make test running four such tests at a time.
	srv.kill()
	stopped = false
	took = readEIO(t, mr3.path("epoch-0005"), 15*time.Second, "store killed")
	t.Logf("store killed: a 1 MiB read got EIO after %v", took)
	log, _ = os.ReadFile(log3)
	require.True(t, strings.Contains(string(log), "connection refused"), "the log says why")

	srv.start()
	for _, m := range []*mounted{mr, mr2, mr3} {
		same(m, "epoch-0005")
		same(m, "epoch-0000")
	}
}
