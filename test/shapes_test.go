package test

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMillionShortSegments: 10^6 entities of two rows each (--window 2 over 4-byte rows) used
// to make 10^6 blocks of one window: the first 1 MiB read went unanswered for minutes
// (135,000 block loads), the daemon's peak RSS reached 189 MiB with --cache-size 80MiB, and it
// ran on at 90% CPU after blockfs unmount. Short segments now share blocks: the first 1 MiB
// read answers within 30 s with every window right, the peak RSS stays within the cache plus
// 64 MiB, and blockfs unmount ends the daemon.
func TestMillionShortSegments(t *testing.T) {
	requireFUSE(t)
	const n = 1_000_000
	dir := t.TempDir()
	rows := make([]byte, 2*n*4)
	for i := 0; i < 2*n; i++ {
		binary.LittleEndian.PutUint32(rows[4*i:], uint32(i))
	}
	data := filepath.Join(dir, "rows.bin")
	require.NoError(t, os.WriteFile(data, rows, 0o644))
	segs := filepath.Join(dir, "segments.json")
	f, err := os.Create(segs)
	require.NoError(t, err)
	w := bufio.NewWriter(f)
	w.WriteString(`{"index_map": [`)
	for i := 0; i < n; i++ {
		if i > 0 {
			w.WriteByte(',')
		}
		fmt.Fprintf(w, `{"start_row": %d, "end_row": %d}`, 2*i, 2*i+1)
	}
	w.WriteString("]}")
	require.NoError(t, w.Flush())
	require.NoError(t, f.Close())

	m := mount(t, data, "--record-size", "4", "--window", "2", "--segments", segs, "--cache-size", "80MiB")
	start := time.Now()
	ep, err := os.Open(m.path("epoch-0000"))
	require.NoError(t, err)
	buf := make([]byte, 1<<20)
	k, err := ep.ReadAt(buf, 0)
	took := time.Since(start)
	require.NoError(t, err)
	require.Equal(t, len(buf), k)
	ep.Close()
	for i := 0; i < len(buf); i += 8 {
		a, b := binary.LittleEndian.Uint32(buf[i:]), binary.LittleEndian.Uint32(buf[i+4:])
		require.True(t, a%2 == 0 && b == a+1, "window %d is rows %d, %d: a segment's two rows", i/8, a, b)
	}
	info := mountInfo(t, m)
	cacheSize := int64(info["cache_size"].(float64))
	hwm := peakRSS(t, m.cmd.Process.Pid) << 10
	t.Logf("first 1 MiB read in %v; %v blocks; daemon peak RSS %d MiB with a %d MiB cache", took.Round(time.Millisecond), info["blocks"], hwm>>20, cacheSize>>20)
	assert.Less(t, took, 30*time.Second, "the first 1 MiB read answers")
	assert.LessOrEqual(t, hwm, cacheSize+64<<20, "peak RSS within the cache + 64 MiB")

	// A reader in the middle of an epoch, then blockfs unmount: the daemon ends.
	reading := exec.Command("dd", "if="+m.path("epoch-0001"), "of=/dev/null", "bs=1M", "status=none")
	require.NoError(t, reading.Start())
	time.Sleep(50 * time.Millisecond)
	_ = reading.Process.Kill()
	_ = reading.Wait()
	mustRun(t, "unmount", m.dir)
	select {
	case err := <-m.exited:
		assert.NoError(t, err, "the daemon exits cleanly after blockfs unmount")
	case <-time.After(10 * time.Second):
		t.Errorf("the daemon still runs 10 s after blockfs unmount")
	}
}

// TestTinyBlocks: --block-size has a floor of 4 KiB (--block-size 1 over a 20 MB file took
// 700 MiB), and logical blocks a budget of 2^19 (about 40 bytes of state each): beyond it the
// mount, order and info refuse at once, saying what to raise. Small blocks within both answer
// the first read quickly, within the memory bound.
func TestTinyBlocks(t *testing.T) {
	small := sparseFile(t, "small.bin", 20_000_000)
	for _, cmd := range [][]string{{"mount", small, t.TempDir()}, {"order", "--ids", small}, {"info", small}} {
		args := append([]string{cmd[0], "--record-size", "1", "--block-size", "1"}, cmd[1:]...)
		_, errs, code, _ := runWithin(t, 5*time.Second, args...)
		assert.Equal(t, 2, code, args)
		oneLine(t, errs, "--block-size 1 B is below the least of 4.0 KiB", args)
	}
	big := sparseFile(t, "big.bin", 4<<30)
	_, errs, code, took := runWithin(t, 5*time.Second, "info", "--record-size", "1", "--block-size", "4KiB", big)
	assert.Equal(t, 1, code)
	oneLine(t, errs, "--block-size 4096 cuts the file into 1048576 blocks; blockfs keeps about 40 bytes of state for each block and allows at most 524288: raise --block-size to at least 8192")
	t.Logf("refused in %v", took)

	m := mount(t, small, "--record-size", "1", "--block-size", "4KiB", "--cache-size", "80MiB")
	start := time.Now()
	f, err := os.Open(m.path("epoch-0000"))
	require.NoError(t, err)
	defer f.Close()
	buf := make([]byte, 1<<20)
	_, err = f.ReadAt(buf, 0)
	require.NoError(t, err)
	took = time.Since(start)
	info := mountInfo(t, m)
	cacheSize := int64(info["cache_size"].(float64))
	hwm := peakRSS(t, m.cmd.Process.Pid) << 10
	t.Logf("4883 blocks of 4 KiB: first 1 MiB read in %v, mix %v; peak RSS %d MiB with a %d MiB cache", took.Round(time.Millisecond), info["order"].(map[string]any)["mix"], hwm>>20, cacheSize>>20)
	assert.Less(t, took, 30*time.Second)
	assert.LessOrEqual(t, hwm, cacheSize+64<<20, "peak RSS within the cache + 64 MiB")
}
