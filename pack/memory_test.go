package pack

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/layout"
)

// TestLargeRecordsStream packs a 64 MiB line and a 64 MiB file among short records, pre-shuffled
// and in input order, and checks that pack allocates less than half the large record (it used
// to copy it five to seven times: growing the line, into a bucket buffer, into a block buffer)
// and that its peak RSS grows by less than the record, and that every record comes back
// byte for byte.
func TestLargeRecordsStream(t *testing.T) {
	const big = 64 << 20
	large := bytes.Repeat([]byte("abcdefghijklmnopqrstuvwxyz0123456789,"), big/37+1)[:big]
	var short [][]byte
	for i := 0; i < 200; i++ {
		short = append(short, []byte(fmt.Sprintf(`{"short": %d}`, i)))
	}
	want := append(append(append([][]byte{}, short[:100]...), large), short[100:]...)

	dir := t.TempDir()
	lines := filepath.Join(dir, "big.jsonl")
	f, err := os.Create(lines)
	require.NoError(t, err)
	for _, rec := range want {
		_, err = f.Write(rec)
		require.NoError(t, err)
		_, err = f.Write([]byte("\n"))
		require.NoError(t, err)
	}
	require.NoError(t, f.Close())
	tree := filepath.Join(dir, "tree")
	require.NoError(t, os.Mkdir(tree, 0o755))
	for i, rec := range want {
		require.NoError(t, os.WriteFile(filepath.Join(tree, fmt.Sprintf("%03d", i)), rec, 0o644))
	}

	for _, c := range []struct {
		src    string
		format Format
	}{{lines, Lines}, {tree, Files}} {
		for _, noShuffle := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/noshuffle=%v", c.format, noShuffle), func(t *testing.T) {
				dst := filepath.Join(t.TempDir(), "ds")
				opt := Options{Format: c.format, NoShuffle: noShuffle, BlockSize: 1 << 20,
					ScatterMemory: 4 << 20, BucketBytes: 1 << 20}
				var before, after runtime.MemStats
				debug.FreeOSMemory() // so that RSS shows any heap growth
				rss, resetOK := resetPeakRSS()
				runtime.ReadMemStats(&before)
				_, err := Pack(context.Background(), c.src, dst, opt)
				runtime.ReadMemStats(&after)
				require.NoError(t, err)
				alloc := after.TotalAlloc - before.TotalAlloc
				t.Logf("allocated %d MiB packing a %d MiB record", alloc>>20, big>>20)
				assert.Less(t, alloc, uint64(big/2), "the large record is streamed, not held in memory")
				if !resetOK {
					t.Log("cannot reset the peak RSS: not checked")
				} else {
					// Signed: the kernel's RSS counters are approximate, by a few pages.
					grew := int64(statusKiB(t, "VmHWM")<<10) - int64(rss)
					t.Logf("peak RSS grew by %d MiB", grew>>20)
					assert.Less(t, grew, int64(big), "peak RSS grows by less than the large record")
				}

				recs, _ := readBack(t, dst)
				require.Len(t, recs, len(want))
				for i, rec := range want {
					require.True(t, bytes.Equal(rec, recs[uint64(i)]), "record %d comes back byte for byte", i)
				}
			})
		}
	}
}

// resetPeakRSS resets the process's peak RSS (VmHWM) to its current RSS and returns that, in
// bytes; false if the kernel would not reset it.
func resetPeakRSS() (uint64, bool) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return 0, false
	}
	kib, err := readStatus("VmRSS")
	return kib << 10, err == nil
}

// statusKiB returns a field of /proc/self/status, in KiB.
func statusKiB(t *testing.T, field string) uint64 {
	t.Helper()
	kib, err := readStatus(field)
	require.NoError(t, err)
	return kib
}

func readStatus(field string) (uint64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			return strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/self/status", field)
}

// TestRecordLimit checks that a record over the limit is refused at once, in one line that
// names it, before any of it is read: a sparse file one byte larger than a block may be.
func TestRecordLimit(t *testing.T) {
	tree := filepath.Join(t.TempDir(), "tree")
	require.NoError(t, os.Mkdir(tree, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(tree, "a"), []byte("small"), 0o644))
	huge := filepath.Join(tree, "b")
	f, err := os.Create(huge)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(layout.MaxBlockBytes+1))
	require.NoError(t, f.Close())
	for _, noShuffle := range []bool{false, true} {
		out := t.TempDir()
		_, err := Pack(context.Background(), tree, filepath.Join(out, "ds"), Options{NoShuffle: noShuffle})
		require.Error(t, err)
		assert.Equal(t, huge+" is 16 GiB (17179869185 bytes); a record may be at most 16 GiB (17179869184 bytes)", err.Error())
		ents, _ := os.ReadDir(out)
		assert.Empty(t, ents, "nothing left behind")
	}
}
