package test

import (
	"bytes"
	"encoding/binary"
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

	"github.com/blockfs/blockfs/internal/dstest"
	"github.com/blockfs/blockfs/shuffle"
)

// These are the hostile-environment cases of docs/RELIABILITY.md: the dataset changed under a
// live mount, signals, and limits. A mount serves the dataset it opened, or EIO; never a mix.

// readChunks reads path in chunks of n bytes with pread and returns, per chunk, its bytes or
// nil where the read failed with EIO (any other error fails the test).
func readChunks(t *testing.T, path string, n int) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	st, err := f.Stat()
	require.NoError(t, err)
	var out [][]byte
	for off := int64(0); off < st.Size(); off += int64(n) {
		buf := make([]byte, min(int64(n), st.Size()-off))
		_, err := f.ReadAt(buf, off)
		if err != nil {
			require.ErrorIs(t, err, syscall.EIO, "read at %d", off)
			buf = nil
		}
		out = append(out, buf)
	}
	return out
}

// TestRepackUnderMount: blockfs pack --force over a mounted dataset. The mount goes on serving
// the version it opened, from its cache, or EIO with a log line naming the file: a record never
// comes with the id of another version (before, every record of a new epoch disagreed with its
// own .ids).
func TestRepackUnderMount(t *testing.T) {
	const n = 4096               // 16 MiB
	p := packRaw(t, n, "256KiB") // 64 records a block, 64 blocks
	m := mount(t, p.dir, "--cache-size", "4MiB", "--readahead", "0", "--direct", "on")
	d := dstest.FromDir(t, p.dir, p.records)
	opt := shuffle.Options{Mode: shuffle.Full, Epoch: 1}
	wantData, wantIDs, _ := d.Epoch(opt, 0, n)
	// The start of epoch 1 is in the caches before the re-pack.
	f, err := os.Open(m.path("epoch-0001"))
	require.NoError(t, err)
	_, err = f.ReadAt(make([]byte, 64*recordSize), 0)
	require.NoError(t, err)
	f.Close()

	// New content, same shape: every record differs.
	alt := make([]byte, n*recordSize)
	for i := range alt {
		alt[i] = byte(i*31 + 7)
	}
	require.NoError(t, os.WriteFile(p.raw, alt, 0o644))
	mustRun(t, "pack", "--format", "raw", "--record-size", "4096", "--block-size", "256KiB", "--force", p.raw, p.dir)

	served, failed := 0, 0
	for i, c := range readChunks(t, m.path("epoch-0001"), recordSize) {
		if c == nil {
			failed++
			continue
		}
		served++
		require.Equal(t, wantData[i*recordSize:(i+1)*recordSize], c, "record %d is the opened version's", i)
	}
	idsFailed := 0
	for i, c := range readChunks(t, m.path("epoch-0001.ids"), 8*64) {
		if c == nil {
			idsFailed++
			continue
		}
		assert.Equal(t, wantIDs[8*64*i:8*64*i+len(c)], c, "ids %d", i)
	}
	t.Logf("after the re-pack: %d records served from the caches, %d EIO; %d of 64 chunks of ids EIO", served, failed, idsFailed)
	assert.Positive(t, failed, "the new files are refused")
	assert.Positive(t, idsFailed, "the new ids files are refused")
	assert.Contains(t, m.stderr.String(), "a dataset file changed under the mount")
	assert.Contains(t, m.stderr.String(), "another file is in its place")
	assert.Nil(t, m.cmd.ProcessState, "the daemon keeps running")
}

// TestSymlinkUnderMount: a block file replaced by a symlink to a file outside the dataset reads
// as EIO; no byte of the outside file is served.
func TestSymlinkUnderMount(t *testing.T) {
	p := packRaw(t, 64, "64KiB", "--no-shuffle") // 16 records a block, 4 blocks
	m := mount(t, p.dir, "--shuffle", "none", "--cache-size", "4MiB", "--readahead", "0")
	secret := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(secret, bytes.Repeat([]byte("S"), 64<<10), 0o600))
	blk := filepath.Join(p.dir, "blocks", "000002.bin")
	require.NoError(t, os.Remove(blk))
	require.NoError(t, os.Symlink(secret, blk))
	chunks := readChunks(t, m.path("epoch-0000"), 64<<10)
	require.Len(t, chunks, 4)
	assert.Nil(t, chunks[2], "EIO for the replaced block")
	for _, b := range []int{0, 1, 3} {
		assert.Equal(t, bytes.Join(p.records[16*b:16*(b+1)], nil), chunks[b], "block %d", b)
	}
	assert.Contains(t, m.stderr.String(), "it is now a symbolic link")
}

// TestFIFOUnderMount: a block file replaced by a FIFO reads as EIO at once (the daemon never
// waits for a writer), and SIGTERM then unmounts and exits cleanly.
func TestFIFOUnderMount(t *testing.T) {
	p := packRaw(t, 64, "64KiB", "--no-shuffle")
	m := mount(t, p.dir, "--shuffle", "none", "--cache-size", "4MiB", "--readahead", "0")
	blk := filepath.Join(p.dir, "blocks", "000001.bin")
	require.NoError(t, os.Remove(blk))
	require.NoError(t, syscall.Mkfifo(blk, 0o644))
	done := make(chan [][]byte, 1)
	go func() { done <- readChunks(t, m.path("epoch-0000"), 64<<10) }()
	select {
	case chunks := <-done:
		assert.Nil(t, chunks[1], "EIO for the FIFO")
		assert.NotNil(t, chunks[0])
	case <-time.After(20 * time.Second):
		t.Fatal("a read of a block replaced by a FIFO hangs")
	}
	assert.Contains(t, m.stderr.String(), "it is no longer a regular file")
	m.stop() // requires exit 0 within 20 s and nothing left mounted
}

// TestSIGHUP: SIGHUP (a closed terminal, a log rotation), SIGUSR1, SIGUSR2 and SIGPIPE leave the
// mount serving (the first three logged); a later SIGTERM unmounts cleanly.
func TestSIGHUP(t *testing.T) {
	p := packRaw(t, 64, "64KiB")
	m := mount(t, p.dir, "--cache-size", "4MiB", "--readahead", "0")
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE} {
		require.NoError(t, m.cmd.Process.Signal(sig))
	}
	time.Sleep(200 * time.Millisecond)
	b, err := os.ReadFile(m.path("epoch-0000"))
	require.NoError(t, err, "still mounted and serving")
	assert.Len(t, b, 64*recordSize)
	assert.Nil(t, m.cmd.ProcessState)
	assert.Contains(t, m.stderr.String(), "hangup: ignored; "+m.dir+" stays mounted")
	assert.Contains(t, m.stderr.String(), "user defined signal 1: ignored")
}

// TestSIGQUIT: SIGQUIT unmounts and exits like SIGTERM instead of dumping goroutines and leaving
// a dead mount.
func TestSIGQUIT(t *testing.T) {
	p := packRaw(t, 16, "64KiB")
	m := mount(t, p.dir, "--cache-size", "4MiB", "--readahead", "0")
	require.NoError(t, m.cmd.Process.Signal(syscall.SIGQUIT))
	select {
	case err := <-m.exited:
		require.NoError(t, err, m.stderr.String())
	case <-time.After(20 * time.Second):
		t.Fatal("no exit after SIGQUIT")
	}
	assert.False(t, isMounted(m.dir), "nothing left mounted")
	assert.Contains(t, m.stderr.String(), "quit: unmounting")
}

// TestSigtermBesideAHungMount: another blockfs mount on the machine whose daemon has stopped
// answering (SIGSTOP here; a deadlock or a frozen container alike) must not make a new mount
// deaf to SIGTERM. Planning memory once read every blockfs mount's info.json (now the
// registry the daemons keep, TestHungMountCommands); the read from the hung one waited
// uninterruptibly, and before its thread blocked signals, the kernel could hand it the SIGTERM,
// which then waited for the other daemon (the mount outlived a 20 s stop in one run of five).
func TestSigtermBesideAHungMount(t *testing.T) {
	p := packRaw(t, 16, "64KiB")
	hung := mount(t, p.dir, "--cache-size", "4MiB", "--readahead", "0")
	require.NoError(t, hung.cmd.Process.Signal(syscall.SIGSTOP))
	t.Cleanup(func() { _ = hung.cmd.Process.Signal(syscall.SIGCONT) }) // before its stop (cleanups run last first)
	for i := 0; i < 8; i++ {
		m := mount(t, p.dir, "--cache-size", "4MiB", "--readahead", "0")
		_, err := os.ReadFile(m.path("epoch-0000"))
		require.NoError(t, err)
		require.NoError(t, m.cmd.Process.Signal(syscall.SIGTERM))
		select {
		case err := <-m.exited:
			require.NoError(t, err, m.stderr.String())
		case <-time.After(5 * time.Second):
			t.Fatalf("mount %d: no exit 5 s after SIGTERM, beside a hung mount", i)
		}
		assert.False(t, isMounted(m.dir), "nothing left mounted")
	}
}

// TestFDLimitAtStart: with a file-descriptor limit too low to run, every command says so in
// one line and exits 1; no panic trace.
func TestFDLimitAtStart(t *testing.T) {
	p := packRaw(t, 16, "64KiB")
	mnt := t.TempDir()
	for _, args := range []string{"mount " + p.dir + " " + mnt, "info " + p.dir} {
		cmd := exec.Command("sh", "-c", "ulimit -n 8 && exec "+bin+" "+args)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "%s: %v", args, err)
		assert.Equal(t, 1, ee.ExitCode(), args)
		assert.Equal(t, "blockfs: the open-file limit is 8 (ulimit -n); blockfs needs at least 64: raise it (ulimit -n 1024) and run again\n", stderr.String(), args)
	}
	assert.False(t, isMounted(mnt))
}

// TestManyEpochsListing: --epochs is how many epochs ls lists; the most (10000) lists with
// ls -l within the memory bound, any epoch beyond can still be opened by name, and more is
// refused with a clear line.
func TestManyEpochsListing(t *testing.T) {
	p := packRaw(t, 64, "64KiB")
	_, errs, code := run(t, "mount", "--epochs", "10001", p.dir, t.TempDir())
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "--epochs 10001 is out of range (1 to 10000; it is how many epochs ls lists, and any epoch can be opened by name)")

	m := mount(t, p.dir, "--epochs", "10000", "--cache-size", "16MiB", "--readahead", "0")
	out := sh(t, "ls -l "+m.dir+" | wc -l")
	assert.Equal(t, "20001", strings.TrimSpace(out), "the total line and 20000 files")
	st, err := os.Stat(m.path("epoch-123456"))
	require.NoError(t, err)
	assert.EqualValues(t, 64*recordSize, st.Size())
	peak := peakRSS(t, m.cmd.Process.Pid) << 10
	t.Logf("daemon peak RSS after ls -l of 20000 files: %d MiB", peak>>20)
	assert.Less(t, peak, int64(16+64)<<20, "within --cache-size + 64 MiB")
}

// TestPackLongLineMemory: pack's memory does not grow with the longest record. One line of
// 128 MiB among short ones packs within 64 MiB of peak RSS, pre-shuffled and in order (it
// peaked at 6x the line before records were streamed), and comes back byte for byte.
func TestPackLongLineMemory(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "lines.txt")
	f, err := os.Create(in)
	require.NoError(t, err)
	long := bytes.Repeat([]byte("0123456789abcdef"), 8<<20) // 128 MiB
	for i := 0; i < 500; i++ {
		fmt.Fprintf(f, "short line %d\n", i)
	}
	_, err = f.Write(append(long, '\n'))
	require.NoError(t, err)
	for i := 0; i < 500; i++ {
		fmt.Fprintf(f, "after %d\n", i)
	}
	require.NoError(t, f.Close())
	for _, extra := range [][]string{nil, {"--no-shuffle"}} {
		out := filepath.Join(dir, "ds")
		peak := runPeakRSS(t, bin, append(append([]string{"pack", "--quiet", "--force", "--format", "lines"}, extra...), in, out)...)
		t.Logf("pack %v: peak RSS %d MiB for a 128 MiB line", extra, peak>>10)
		assert.Less(t, peak, int64(64<<10), "peak RSS within 64 MiB")
		m := mount(t, out, "--shuffle", "none", "--cache-size", "160MiB", "--readahead", "0")
		offs, err := os.ReadFile(m.path("epoch-0000.offsets"))
		require.NoError(t, err)
		ids, err := os.ReadFile(m.path("epoch-0000.ids"))
		require.NoError(t, err)
		ep, err := os.Open(m.path("epoch-0000"))
		require.NoError(t, err)
		found := false
		for k := 0; k < len(ids)/8; k++ {
			if binary.LittleEndian.Uint64(ids[8*k:]) != 500 {
				continue
			}
			lo, hi := binary.LittleEndian.Uint64(offs[8*k:]), binary.LittleEndian.Uint64(offs[8*k+8:])
			require.EqualValues(t, len(long), hi-lo)
			got := make([]byte, hi-lo)
			_, err := ep.ReadAt(got, int64(lo))
			require.NoError(t, err)
			found = bytes.Equal(long, got)
		}
		ep.Close()
		assert.True(t, found, "the long line comes back byte for byte")
		m.stop()
	}
}

// runPeakRSS runs a command to completion and returns its peak RSS in KiB, read from
// /proc/PID/status (VmHWM) while it runs: the rusage of a child forked from this process would
// count this process's own pages, which the child shares until it execs.
func runPeakRSS(t *testing.T, name string, args ...string) int64 {
	t.Helper()
	cmd := exec.Command(name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var peak int64
	for {
		select {
		case err := <-done:
			require.NoError(t, err, out.String())
			return peak
		default:
		}
		if kb, err := statusKiB(cmd.Process.Pid, "VmHWM"); err == nil { // gone once it exits
			peak = max(peak, kb)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
